import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import { admin, type Model, type Property, type ScoringPreview } from './api.ts'
import { useAction, useData, value } from './load.ts'
import { errorLine, Failed, Loading } from './format.ts'

// The scoring model of docs/scoring.md as a form: each section's rules, the form of each rule taken
// from its property's type, every weight shown as its share of the section's total (a score is the
// weighted mean of its rules, so only the shares matter); a preview scores one customer under the
// edited model before it is saved.
type Rule = NonNullable<NonNullable<Model['customer']>['engagement']>[number]
// A rule as typed: text until saved, so that a half-typed number is not lost.
interface Row {
  codename: string
  weight: string
  bad: string
  good: string
  values: string
  fallback: string
}
type SectionName = 'engagement' | 'fit' | 'contact'
const SECTIONS: [SectionName, string, 'customer' | 'contact'][] = [
  ['engagement', 'Customer engagement', 'customer'],
  ['fit', 'Customer fit', 'customer'],
  ['contact', 'Contact engagement', 'contact'],
]

const NEW_ROW: Row = { codename: '', weight: '1', bad: '', good: '', values: '', fallback: '' }
const toRow = (r: Rule): Row => ({
  codename: r.codename,
  weight: String(r.weight),
  bad: 'bad' in r ? String(r.bad) : '',
  good: 'good' in r ? String(r.good) : '',
  values:
    'values' in r
      ? Object.entries(r.values)
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')
      : '',
  fallback: 'default' in r && r.default !== undefined ? String(r.default) : '',
})

// Numbers as typed; what the service refuses (an empty or non-numeric field) it names by its path.
const num = (text: string) => (text.trim() === '' ? (text as unknown as number) : Number(text))
const toRule = (row: Row, type: string | undefined): Rule => {
  const base = { codename: row.codename, weight: num(row.weight) }
  if (type === 'boolean') return { ...base, good: row.good !== 'false' }
  if (type === 'string') {
    const values = Object.fromEntries(
      row.values
        .split(',')
        .map((pair) => pair.split('='))
        .filter(([k]) => k.trim())
        .map(([k, v]) => [k.trim(), num(v ?? '')]),
    )
    return { ...base, values, ...(row.fallback.trim() ? { default: num(row.fallback) } : {}) }
  }
  return { ...base, bad: num(row.bad), good: num(row.good) }
}

const share = (rows: Row[], i: number) => {
  const total = rows.reduce((sum, r) => sum + (Number(r.weight) > 0 ? Number(r.weight) : 0), 0)
  const w = Number(rows[i].weight)
  return total > 0 && w > 0 ? `${Math.round((1000 * w) / total) / 10}%` : '–'
}

const Section = ({
  name,
  title,
  rows,
  properties,
  onChange,
}: {
  name: SectionName
  title: string
  rows: Row[]
  properties: Property[]
  onChange: (rows: Row[]) => void
}) => {
  const set = (i: number, patch: Partial<Row>) =>
    onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)))
  const typeOf = (codename: string) => properties.find((p) => p.codename === codename)?.type
  const id = (i: number, field: string) => `rule-${name}-${i}-${field}`
  const input = (i: number, field: keyof Row, label: string, attrs: Record<string, unknown> = {}) =>
    html`<div class="field">
      <label for=${id(i, field)}>${label}</label>
      <input id=${id(i, field)} value=${rows[i][field]} ...${attrs}
        onInput=${(e: Event) => set(i, { [field]: value(e) })} />
    </div>`
  const weightsBad = rows.some((r) => !(Number(r.weight) > 0))
  return html`<fieldset class="rules" data-section=${name}>
    <legend>${title}</legend>
    ${rows.map((row, i) => {
      const type = typeOf(row.codename)
      return html`<div class="filter" key=${i}>
        <div class="field">
          <label for=${id(i, 'codename')}>Property</label>
          <select id=${id(i, 'codename')} value=${row.codename}
            onChange=${(e: Event) => set(i, { codename: value(e) })}>
            ${!type && html`<option value=${row.codename}>${row.codename || 'choose…'}</option>`}
            ${properties.map((p) => html`<option value=${p.codename}>${p.codename} (${p.kind}, ${p.type})</option>`)}
          </select>
        </div>
        ${input(i, 'weight', 'Weight', { type: 'number', min: '0.000001', step: 'any', required: true })}
        <span class="share" aria-label=${`Share of ${row.codename || 'rule'}`}>${share(rows, i)}</span>
        ${
          type === 'boolean'
            ? html`<div class="field">
                <label for=${id(i, 'good')}>Good value</label>
                <select id=${id(i, 'good')} value=${row.good === 'false' ? 'false' : 'true'}
                  onChange=${(e: Event) => set(i, { good: value(e) })}>
                  <option value="true">true</option><option value="false">false</option>
                </select>
              </div>`
            : type === 'string'
              ? html`${input(i, 'values', 'Scores by value (a=100, b=-50)', { size: 28 })}
                ${input(i, 'fallback', 'Other values', { type: 'number', step: 'any' })}`
              : html`${input(i, 'bad', type === 'date' ? 'Bad (days)' : 'Bad', { type: 'number', step: 'any' })}
                ${input(i, 'good', type === 'date' ? 'Good (days)' : 'Good', { type: 'number', step: 'any' })}`
        }
        <button type="button" aria-label=${`Remove ${title} rule ${i + 1}`}
          onClick=${() => onChange(rows.filter((_, j) => j !== i))}>Remove</button>
      </div>`
    })}
    ${weightsBad && html`<p class="error">Every weight must be a number above 0.</p>`}
    <button type="button" onClick=${() => onChange([...rows, NEW_ROW])}>
      Add ${title.toLowerCase()} rule
    </button>
  </fieldset>`
}

type Scores = ScoringPreview['current']
const SCORES: [keyof Scores, string][] = [
  ['engagementscore', 'Engagement'],
  ['engagementscore_difference', 'Engagement change'],
  ['fitscore', 'Fit'],
  ['churn_risk', 'Churn risk'],
  ['upsell_score', 'Upsell'],
  ['last_seen', 'Last seen'],
]

const Editor = ({
  token,
  account,
  model,
  properties,
}: {
  token: string
  account: number
  model: Model
  properties: Property[]
}) => {
  const [rows, setRows] = useState<Record<SectionName, Row[]>>({
    engagement: (model.customer?.engagement ?? []).map(toRow),
    fit: (model.customer?.fit ?? []).map(toRow),
    contact: (model.contact?.engagement ?? []).map(toRow),
  })
  const [inactive, setInactive] = useState(String(model.churn?.inactive_days ?? ''))
  const [customer, setCustomer] = useState('')
  const [preview, setPreview] = useState<ScoringPreview | null>(null)
  const [saved, setSaved] = useState('')
  const action = useAction()
  const typeIn = (entity: string) => (codename: string) =>
    properties.find((p) => p.entity === entity && p.codename === codename)?.type
  const edited = (): Model => {
    const rules = (section: SectionName, entity: string) =>
      rows[section].map((r) => toRule(r, typeIn(entity)(r.codename)))
    return {
      customer: { engagement: rules('engagement', 'customer'), fit: rules('fit', 'customer') },
      ...(rows.contact.length ? { contact: { engagement: rules('contact', 'contact') } } : {}),
      ...(inactive.trim() ? { churn: { inactive_days: num(inactive) } } : {}),
    }
  }
  const valid = Object.values(rows).every((section) => section.every((r) => Number(r.weight) > 0))
  const runPreview = async (e: Event) => {
    e.preventDefault()
    const body = { model: edited(), external_id: customer.trim() }
    const answer = await action.run(() =>
      admin<ScoringPreview>(token, 'POST', `/${account}/scoring/preview`, body),
    )
    setPreview(answer ?? null)
  }
  const save = async () => {
    setSaved('')
    if (await action.run(() => admin(token, 'PUT', `/${account}/scoring`, edited()))) {
      setSaved('Saved: the account is being scored again under this model.')
    }
  }
  return html`<div class="model">
    ${SECTIONS.map(
      ([
        name,
        title,
        entity,
      ]) => html`<${Section} key=${name} name=${name} title=${title} rows=${rows[name]}
        properties=${properties.filter((p) => p.entity === entity)}
        onChange=${(next: Row[]) => setRows({ ...rows, [name]: next })} />`,
    )}
    <div class="field">
      <label for="inactive-days">Churned after days without a snapshot (optional)</label>
      <input id="inactive-days" type="number" min="1" step="1" value=${inactive}
        onInput=${(e: Event) => setInactive(value(e))} />
    </div>
    <form class="actions" onSubmit=${runPreview} aria-label="Preview">
      <div class="field">
        <label for="preview-customer">Customer to preview (external id)</label>
        <input id="preview-customer" required value=${customer} onInput=${(e: Event) => setCustomer(value(e))} />
      </div>
      <button type="submit" disabled=${action.busy || !valid}>Preview</button>
      <button type="button" class="primary" disabled=${action.busy || !valid} onClick=${save}>Save model</button>
    </form>
    ${errorLine(action.error)}
    ${saved && html`<p role="status">${saved}</p>`}
    ${
      preview &&
      html`<table id="preview" class="properties">
        <caption>${customer} under the edited model</caption>
        <thead><tr><th scope="col">Score</th><th scope="col">Now</th><th scope="col">Edited model</th></tr></thead>
        <tbody>
          ${SCORES.map(
            ([key, label]) => html`<tr data-score=${key}>
              <th scope="row">${label}</th><td class="num">${preview.current[key] ?? '–'}</td>
              <td class="num">${preview.preview[key] ?? '–'}</td>
            </tr>`,
          )}
        </tbody>
      </table>`
    }
  </div>`
}

// An account without a model starts from an empty form.
export const ScoringModel = ({
  token,
  account,
  properties,
}: {
  token: string
  account: number
  properties: Property[]
}) => {
  const model = useData(
    () =>
      admin<Model>(token, 'GET', `/${account}/scoring`).catch((err) => {
        if (err.status === 404) return {}
        throw err
      }),
    [token, account],
  )
  if (model.error) return html`<${Failed} error=${model.error} />`
  if (!model.data) return html`<${Loading} what="the scoring model" />`
  return html`<${Editor} key=${account} token=${token} account=${account} model=${model.data}
    properties=${properties} />`
}
