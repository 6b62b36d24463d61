import { html } from 'htm/preact'
import { type Condition, type Filter, listSegments, type Segment, type Selection } from './api.ts'
import { errorLine } from './format.ts'
import { useData, value } from './load.ts'

// The customers a view shows: the segment's saved condition ANDed with the filter builder's
// conditions, as plain `filters` where they are no more, else one `where` tree that search and
// aggregates both take. The segment's tree decides the churn default as it does in member search,
// since its leaves are the combined tree's.
export const narrow = (segment: Segment | undefined, conditions: Condition[]): Selection => {
  const saved =
    segment && (segment.where ?? (segment.filters?.length ? { and: segment.filters } : undefined))
  const all = saved ? [saved, ...conditions] : conditions
  if (all.length === 0) return {}
  if (!saved && all.every((c) => 'propertyName' in c)) return { filters: all as Filter[] }
  return { where: all.length === 1 ? all[0] : { and: all } }
}

// Those of a selection with either score unknown: the matrix's "not scored yet", which
// it cannot draw.
export const unscoredOf = (selection: Selection): Condition => {
  const unscored: Condition = {
    or: [
      { propertyName: 'engagementscore', operator: 'UNKNOWN' },
      { propertyName: 'fitscore', operator: 'UNKNOWN' },
    ],
  }
  const within =
    selection.where ?? (selection.filters?.length ? { and: selection.filters } : undefined)
  return within ? { and: [within, unscored] } : unscored
}

// The account's saved segments; choosing one narrows the view to its members.
export const SegmentPicker = ({
  apiKey,
  onPick,
}: {
  apiKey: string
  onPick: (s: Segment | undefined) => void
}) => {
  const segments = useData(() => listSegments(apiKey), [apiKey])
  const pick = (e: Event) => onPick(segments.data?.find((s) => String(s.id) === value(e)))
  return html`<div class="field segment-picker">
    <label for="segment">Segment</label>
    <select id="segment" onChange=${pick} disabled=${!segments.data}>
      <option value="">All customers</option>
      ${(segments.data ?? []).map((s) => html`<option value=${s.id}>${s.name}</option>`)}
    </select>
    ${errorLine(segments.error)}
  </div>`
}
