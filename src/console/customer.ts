import { html } from 'htm/preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import {
  accountProperties,
  accountUsers,
  type CustomerDetail,
  customerEvents,
  type Driver,
  getCustomer,
  labelOf,
  ownerName,
  setChurned,
} from './api.ts'
import { Contacts } from './contacts.ts'
import {
  Empty,
  errorLine,
  Failed,
  Loading,
  percent,
  Score,
  type ScoreKind,
  signed,
  When,
} from './format.ts'
import { useAllows } from './grants.ts'
import { useData } from './load.ts'
import { Scroller } from './scroller.ts'

const W = 560
const H = 200
const [LEFT, RIGHT, TOP, BOTTOM] = [44, 16, 12, 28]

// A handful of monthly points (at most 15, docs/api.md) on the score's whole range, so that two
// customers' charts read alike; a charting library would cost more than the chart.
const Trend = ({ trend }: { trend: Record<string, number> | null }) => {
  const points = Object.entries(trend ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))
  if (!points.length) return html`<${Empty}>No engagement score yet.</${Empty}>`
  const times = points.map(([day]) => Date.parse(day))
  const span = times[times.length - 1] - times[0]
  const x = (t: number) =>
    span ? LEFT + ((t - times[0]) / span) * (W - LEFT - RIGHT) : (LEFT + W - RIGHT) / 2
  const y = (s: number) => TOP + ((100 - s) / 200) * (H - TOP - BOTTOM)
  const line = points.map(([, s], i) => `${x(times[i]).toFixed(1)},${y(s).toFixed(1)}`).join(' ')
  const said = points.map(([day, s]) => `${day}: ${s}`).join(', ')
  return html`<svg class="trend" viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${`Engagement by date: ${said}`}
    data-points=${points.length}>
    ${[100, 0, -100].map(
      (s) => html`<g>
        <line x1=${LEFT} x2=${W - RIGHT} y1=${y(s)} y2=${y(s)} class=${s ? 'grid' : 'axis'} />
        <text x=${LEFT - 6} y=${y(s) + 4} text-anchor="end">${s}</text>
      </g>`,
    )}
    <polyline points=${line} class="line" />
    ${points.map(
      ([day, s], i) =>
        html`<circle cx=${x(times[i])} cy=${y(s)} r="4" class="dot"><title>${day}: ${s}</title></circle>`,
    )}
    <text x=${LEFT} y=${H - 6}>${points[0][0]}</text>
    <text x=${W - RIGHT} y=${H - 6} text-anchor="end">${points[points.length - 1][0]}</text>
  </svg>`
}

const EVENTS_SHOWN = 20

// The latest events the tracker received for the customer, newest first, with what became of each.
const Events = ({ apiKey, customerId }: { apiKey: string; customerId: string }) => {
  const tracked = useData(
    () => customerEvents(apiKey, customerId, EVENTS_SHOWN),
    [apiKey, customerId],
  )
  if (tracked.error) return html`<${Failed} error=${tracked.error} />`
  if (!tracked.data) return html`<${Loading} what="events" />`
  if (tracked.data.count === 0) return html`<${Empty}>No events tracked.</${Empty}>`
  return html`<p class="muted">${tracked.data.count} in all; the latest ${tracked.data.events.length}:</p>
    <${Scroller} label="Last events tracked"><table class="events" id="events">
      <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">State</th></tr></thead>
      <tbody>
        ${tracked.data.events.map(
          (e) => html`<tr key=${e.id} data-event=${e.name}>
            <td><${When} at=${new Date(e.timestamp).toISOString()} /></td><td>${e.name}</td><td>${e.status}</td>
          </tr>`,
        )}
      </tbody>
    </table></${Scroller}>`
}

const Drivers = ({ title, drivers }: { title: string; drivers: Driver[] }) => html`<div>
  <h3>${title}</h3>
  ${
    drivers.length
      ? html`<ul class="drivers">
          ${drivers.map(
            (d) =>
              html`<li>
                <strong>${d.label}</strong> (${d.score}) ${signed(Math.round(d.contribution * 10) / 10)}
              </li>`,
          )}
        </ul>`
      : html`<${Empty}>None.</${Empty}>`
  }
</div>`

type ChurnDriver = NonNullable<CustomerDetail['churn_drivers']>['up'][number]

// The learned model's probability, as a percentage, and the properties that move it most: each with
// the customer's value and its share of the log-odds, so "raises" and "lowers" read from the sign.
const ChurnDrivers = ({
  title,
  id,
  drivers,
}: {
  title: string
  id: string
  drivers: ChurnDriver[]
}) => html`<div>
  <h3>${title}</h3>
  ${
    drivers.length
      ? html`<ul class="drivers" id=${id}>
          ${drivers.map(
            (d) => html`<li data-codename=${d.codename}>
              <strong>${d.label}</strong> (${d.value === null ? 'missing' : String(d.value)})${' '}
              ${signed(Math.round(d.contribution * 100) / 100)}
            </li>`,
          )}
        </ul>`
      : html`<${Empty}>None.</${Empty}>`
  }
</div>`

const ChurnModel = ({ customer: c }: { customer: CustomerDetail }) =>
  c.churn_probability === null
    ? html`<div id="churn-probability"><${Empty}>No model trained.</${Empty}></div>`
    : html`<p id="churn-probability">
          Probability of churn: <strong>${percent(c.churn_probability)}</strong>
          <span class="muted">(the account's learned model; drivers in log-odds)</span>
        </p>
        ${
          c.churn_drivers &&
          html`<div class="columns">
            <${ChurnDrivers} title="Raise it" id="churn-up" drivers=${c.churn_drivers.up} />
            <${ChurnDrivers} title="Lower it" id="churn-down" drivers=${c.churn_drivers.down} />
          </div>`
        }`

const Card = ({
  name,
  kind,
  value,
  extra,
}: {
  name: string
  kind: ScoreKind
  value: number | null
  extra?: string
}) =>
  html`<div>
    <dt>${name}</dt>
    <dd><${Score} kind=${kind} value=${value} />${extra && html` <span class="diff">${extra}</span>`}</dd>
  </div>`

// Churned customers leave the matrix and the table: the search API shows only active ones unless a
// filter names is_churned.
const ChurnState = ({
  apiKey,
  customer,
  onChange,
}: {
  apiKey: string
  customer: CustomerDetail
  onChange: () => void
}) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const writes = useAllows('upload')
  const toggle = async () => {
    setBusy(true)
    setError('')
    try {
      await setChurned(apiKey, customer.id, !customer.is_churned)
      onChange()
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return html`<p id="churn-state">
      <span>${customer.is_churned ? 'Churned: left out of the matrix and the customers table.' : 'Active.'}</span>${' '}
      ${
        writes &&
        html`<button type="button" disabled=${busy} onClick=${toggle}>
          ${customer.is_churned ? 'Mark as active' : 'Mark as churned'}
        </button>`
      }
    </p>
    ${errorLine(error)}`
}

export const CustomerPage = ({ apiKey, id }: { apiKey: string; id: string }) => {
  const [customer, setCustomer] = useState<CustomerDetail | undefined>()
  const [error, setError] = useState('')
  // A late answer for the customer shown before is dropped.
  const shown = useRef(id)
  shown.current = id
  // Labels for the properties table (the drivers come labelled from the API).
  const defined = useData(() => accountProperties(apiKey), [apiKey])
  // The owner by name, with the email the API answers beside it.
  const users = useData(() => accountUsers(apiKey), [apiKey])
  const reload = () =>
    getCustomer(apiKey, id).then(
      (c) => shown.current === id && setCustomer(c),
      (err: Error) => shown.current === id && setError(err.message),
    )
  useEffect(() => {
    setCustomer(undefined)
    setError('')
    reload()
  }, [apiKey, id])

  if (error) return html`<section><h1>Customer ${id}</h1><${Failed} error=${error} /></section>`
  if (!customer) return html`<${Loading} what="the customer" />`
  const c = customer
  const difference = c.engagementscore_difference
  const properties = Object.entries(c.properties).sort(([a], [b]) => (a < b ? -1 : 1))
  return html`<article aria-labelledby="customer-title" class="customer">
    <p><a href="#/customers">← All customers</a></p>
    <h1 id="customer-title">${c.name}</h1>
    <p class="muted">
      ID ${c.id} · owner${' '}
      ${
        c.owner === null
          ? 'none'
          : ownerName(users.data, c.owner) === c.owner
            ? c.owner
            : html`${ownerName(users.data, c.owner)} <span class="codename">(${c.owner})</span>`
      }${' '}
      · last seen <${When} at=${c.last_seen} none="never" />
    </p>
    <dl class="scores">
      <${Card} name="Engagement" kind="engagement" value=${c.engagementscore}
        extra=${difference === null ? undefined : `${signed(difference)} in 30 days`} />
      <${Card} name="Fit" kind="fit" value=${c.fitscore} />
      <${Card} name="Churn risk" kind="risk" value=${c.churn_risk} />
      <${Card} name="Upsell" kind="upsell" value=${c.upsell_score} />
    </dl>
    <${ChurnState} apiKey=${apiKey} customer=${c} onChange=${reload} />
    <section aria-labelledby="trend-title">
      <h2 id="trend-title">Engagement trend</h2>
      <${Trend} trend=${c.engagementscore_trend} />
    </section>
    <section aria-labelledby="drivers-title">
      <h2 id="drivers-title">What drives the scores</h2>
      ${
        c.score_explanation
          ? html`<div class="columns">
              <${Drivers} title="Risk drivers" drivers=${c.score_explanation.risk_drivers} />
              <${Drivers} title="Health drivers" drivers=${c.score_explanation.health_drivers} />
            </div>`
          : html`<${Empty}>Not scored yet.</${Empty}>`
      }
    </section>
    <section aria-labelledby="model-title">
      <h2 id="model-title">Learned churn probability</h2>
      <${ChurnModel} customer=${c} />
    </section>
    <section aria-labelledby="contacts-title">
      <h2 id="contacts-title">Contacts</h2>
      <${Contacts} apiKey=${apiKey} customerId=${c.id} />
    </section>
    <section aria-labelledby="properties-title">
      <h2 id="properties-title">Properties</h2>
      ${
        properties.length
          ? html`<${Scroller} label="Properties"><table class="properties">
              <tbody>
                ${properties.map(
                  ([name, value]) => html`<tr>
                    <th scope="row">${labelOf(defined.data, name)}${
                      labelOf(defined.data, name) !== name &&
                      html` <span class="muted codename">${name}</span>`
                    }</th>
                    <td>${String(value)}</td>
                  </tr>`,
                )}
              </tbody>
            </table></${Scroller}>`
          : html`<${Empty}>None.</${Empty}>`
      }
    </section>
    <section aria-labelledby="events-title">
      <h2 id="events-title">Last events tracked</h2>
      <${Events} apiKey=${apiKey} customerId=${c.id} />
    </section>
    <section aria-labelledby="tags-title">
      <h2 id="tags-title">Tags</h2>
      ${
        c.tags.length
          ? html`<ul class="tags">${c.tags.map((t) => html`<li>${t}</li>`)}</ul>`
          : html`<${Empty}>None.</${Empty}>`
      }
    </section>
  </article>`
}
