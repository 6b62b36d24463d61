import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import { accountProperties, type Condition, type Filter } from './api.ts'
import { useData } from './load.ts'

// The search API's fields that every account has (docs/api.md), each with its type, which decides
// the operators offered; the account's own attributes and metrics come typed and labelled from
// GET /api/v1/properties. A codename typed in that neither knows is offered every operator (the
// service names a wrong one).
type Operator = Filter['operator']
type Kind = 'number' | 'date' | 'string' | 'boolean' | 'set' | 'id' | 'any'
const FIELDS: Record<string, Kind> = {
  external_id: 'id',
  name: 'string',
  engagementscore: 'number',
  engagementscore_difference: 'number',
  fitscore: 'number',
  churn_risk: 'number',
  upsell_score: 'number',
  last_seen: 'date',
  engagementscore_7d_ago: 'number',
  engagementscore_30d_ago: 'number',
  engagementscore_change_7d: 'number',
  engagementscore_change_30d: 'number',
  churned_date: 'date',
  reactivated_date: 'date',
  is_churned: 'boolean',
  owner: 'set',
  tags: 'set',
}
const OPERATORS: [Operator, string][] = [
  ['EQ', 'equals'],
  ['NEQ', 'does not equal'],
  ['LT', 'less than'],
  ['LTE', 'at most'],
  ['GT', 'greater than'],
  ['GTE', 'at least'],
  ['LIKE', 'contains'],
  ['NLIKE', 'does not contain'],
  ['IN', 'one of (comma-separated)'],
  ['NIN', 'none of (comma-separated)'],
  ['GTD', 'more than N days ago'],
  ['LTD', 'within the last N days'],
  ['KNOWN', 'has a value'],
  ['UNKNOWN', 'has no value'],
]
const MEANING = Object.fromEntries(OPERATORS)
// docs/api.md, "Operators by type".
const NUMBER: Operator[] = ['EQ', 'NEQ', 'LT', 'LTE', 'GT', 'GTE', 'IN', 'NIN', 'KNOWN', 'UNKNOWN']
const BY_KIND: Record<Kind, Operator[]> = {
  number: NUMBER,
  date: [...NUMBER, 'GTD', 'LTD'],
  string: ['EQ', 'NEQ', 'LIKE', 'NLIKE', 'IN', 'NIN', 'KNOWN', 'UNKNOWN'],
  boolean: ['EQ', 'NEQ', 'KNOWN', 'UNKNOWN'],
  set: ['EQ', 'NEQ', 'IN', 'NIN', 'KNOWN', 'UNKNOWN'],
  id: ['EQ', 'NEQ', 'IN', 'NIN'],
  any: OPERATORS.map(([op]) => op),
}
type Kinds = Record<string, Kind>
const operatorsFor = (kinds: Kinds, property: string) => BY_KIND[kinds[property.trim()] ?? 'any']
const NO_VALUE = new Set<Operator>(['KNOWN', 'UNKNOWN'])
const LISTS = new Set<Operator>(['IN', 'NIN'])

// A condition in words, for the customers list narrowed by a link.
export const describeCondition = (c: Condition): string => {
  if ('and' in c) return c.and.map(describeCondition).join(' and ')
  if ('or' in c) return `(${c.or.map(describeCondition).join(' or ')})`
  if ('not' in c) return `not (${describeCondition(c.not)})`
  const value = 'values' in c && c.values ? c.values.join(', ') : 'value' in c ? c.value : ''
  return `${c.propertyName} ${MEANING[c.operator] ?? c.operator}${value === '' ? '' : ` ${value}`}`
}

interface Row {
  property: string
  operator: Operator
  value: string
  negate: boolean
}
const EMPTY: Row = { property: '', operator: 'EQ', value: '', negate: false }

const toFilter = ({ property, operator, value }: Row): Filter => {
  const propertyName = property.trim()
  if (NO_VALUE.has(operator)) return { propertyName, operator }
  if (LISTS.has(operator))
    return { propertyName, operator, values: value.split(',').map((v) => v.trim()) }
  return { propertyName, operator, value }
}

const text = (e: Event) => (e.currentTarget as HTMLInputElement | HTMLSelectElement).value
const checked = (e: Event) => (e.currentTarget as HTMLInputElement).checked

// The rows as the conditions the view ANDs: each row a filter, `not` around it when negated, and
// under "any" one `or` of them all: the search API's `where` tree (docs/api.md, "Trees").
const toConditions = (rows: Row[], any: boolean): Condition[] => {
  const each = rows.map((r): Condition => (r.negate ? { not: toFilter(r) } : toFilter(r)))
  return any && each.length > 1 ? [{ or: each }] : each
}

// Rows of property, operator and value, each negatable, matched all (AND) or any (OR); the service
// validates them and its refusal is shown as it words it. Labels point at their fields by id: a
// label wrapped around a select would take in every option's text as the field's name.
export const FilterBuilder = ({
  apiKey,
  onApply,
}: {
  apiKey: string
  onApply: (conditions: Condition[]) => void
}) => {
  const defined = useData(() => accountProperties(apiKey), [apiKey])
  const own = (defined.data ?? []).filter((p) => p.entity === 'customer')
  const kinds: Kinds = { ...Object.fromEntries(own.map((p) => [p.codename, p.type])), ...FIELDS }
  const [rows, setRows] = useState<Row[]>([])
  const [any, setAny] = useState(false)
  const change = (i: number, patch: Partial<Row>) =>
    setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)))
  const submit = (e: Event) => {
    e.preventDefault()
    onApply(
      toConditions(
        rows.filter((r) => r.property.trim()),
        any,
      ),
    )
  }
  return html`<form class="filters" onSubmit=${submit}>
    <fieldset>
      <legend>Filters</legend>
      <div class="field">
        <label for="filter-match">Match</label>
        <select id="filter-match" value=${any ? 'any' : 'all'} onChange=${(e: Event) => setAny(text(e) === 'any')}>
          <option value="all">all filters (and)</option>
          <option value="any">any filter (or)</option>
        </select>
      </div>
      ${rows.map(
        (row, i) => html`<div class="filter" key=${i}>
          <div class="field">
            <label for=${`filter-${i}-property`}>Property</label>
            <input id=${`filter-${i}-property`} list="console-fields" value=${row.property} required
              onInput=${(e: Event) => {
                const property = text(e)
                const offered = operatorsFor(kinds, property)
                change(i, {
                  property,
                  operator: offered.includes(row.operator) ? row.operator : offered[0],
                })
              }} />
          </div>
          <div class="field">
            <label for=${`filter-${i}-operator`}>Operator</label>
            <select id=${`filter-${i}-operator`} value=${row.operator}
              onChange=${(e: Event) => change(i, { operator: text(e) as Operator })}>
              ${operatorsFor(kinds, row.property).map(
                (op) => html`<option value=${op}>${op} · ${MEANING[op]}</option>`,
              )}
            </select>
          </div>
          <div class="field">
            <label for=${`filter-${i}-value`}>Value</label>
            <input id=${`filter-${i}-value`} value=${row.value} disabled=${NO_VALUE.has(row.operator)}
              onInput=${(e: Event) => change(i, { value: text(e) })} />
          </div>
          <div class="field">
            <label><input type="checkbox" checked=${row.negate}
              onChange=${(e: Event) => change(i, { negate: checked(e) })} /> Not</label>
          </div>
          <button type="button" aria-label=${`Remove filter ${i + 1}`}
            onClick=${() => setRows(rows.filter((_, j) => j !== i))}>Remove</button>
        </div>`,
      )}
      <div class="actions">
        <button type="button" onClick=${() => setRows([...rows, EMPTY])}>
          Add filter
        </button>
        <button type="submit" class="primary">Apply</button>
      </div>
    </fieldset>
    <datalist id="console-fields">
      ${Object.keys(FIELDS).map((f) => html`<option value=${f}></option>`)}
      ${own.map((p) => html`<option value=${p.codename}>${p.label ?? p.codename} (${p.type})</option>`)}
    </datalist>
  </form>`
}
