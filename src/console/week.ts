import { html } from 'htm/preact'
import {
  type Counted,
  type Mover,
  type Movements,
  type QuadrantName,
  type Week,
  weekReport,
} from './api.ts'
import { WeeksChart, type WeekSeries } from './chart.ts'
import {
  CHURN_RISK_BELOW,
  customerHref,
  customersHref,
  Day,
  Empty,
  Failed,
  focusOn,
  type ListOptions,
  Loading,
  percent,
  Score,
  signed,
  When,
} from './format.ts'
import { useData } from './load.ts'
import { Scroller } from './scroller.ts'

// The landing view of a key holder: what changed over the last 7 or 30 days, the renewals ahead and
// 12 weeks of the account's health, all from one API call (GET /api/v1/insights/week) that any
// client can make. Every number links to the customers list it counts, where the API gives its
// search (not earlier weeks' quadrants, nor the movements of a report kept from an earlier day).

const QUADRANTS: [QuadrantName, string, string, number[] | undefined][] = [
  ['churn_risk', 'Churn risk', '#b3261e', undefined],
  ['engaged_poor_fit', 'Engaged, poor fit', '#8a5a00', [6, 3]],
  ['upsell', 'Upsell', '#1e7b34', [2, 3]],
  ['not_scored', 'Not scored yet', '#5f5f5f', [8, 3, 2, 3]],
]
const QUADRANT_NAMES = Object.fromEntries(QUADRANTS.map(([q, name]) => [q, name]))

// A number as a link to its customers when the API gives their search, else as it is; the list it
// opens may have a title and an order.
const Count = ({ counted, id, list }: { counted: Counted; id?: string; list?: ListOptions }) =>
  counted.search
    ? html`<a id=${id} href=${customersHref(counted.search, list)}>${counted.count}</a>`
    : html`<span id=${id}>${counted.count}</span>`

type Movement = keyof Week['movements']
// Each movement's name, what it means, and how its customers list is ordered as the report orders
// them (by the change over the period, or by the date of the churn or reactivation); a movement of
// engagement lists each customer's engagement then and now.
const MOVEMENTS: [Movement, string, string, string][] = [
  ['entered_risk', 'Entered churn risk', `engagement fell below ${CHURN_RISK_BELOW}`, 'change:asc'],
  ['left_risk', 'Left churn risk', `engagement rose to ${CHURN_RISK_BELOW} or more`, 'change:desc'],
  ['churned', 'Churned', 'marked churned in the period', 'churned_date:desc'],
  ['reactivated', 'Reactivated', 'active again in the period', 'reactivated_date:desc'],
  ['drops', 'Largest drops', 'engagement fell most', 'change:asc'],
  ['gains', 'Largest gains', 'engagement rose most', 'change:desc'],
]
const listOf = (title: string, order: string, days: 7 | 30): ListOptions => {
  const change = order.startsWith('change:')
  return {
    title: `${title} ${days === 7 ? 'this week' : 'in the last 30 days'}`,
    order: change ? order.replace('change', `engagementscore_change_${days}d`) : order,
    compare: change ? days : undefined,
  }
}

const Drivers = ({ drivers }: { drivers: string[] }) =>
  drivers.length
    ? html`<span class="drivers-words">${drivers.join(', ')}</span>`
    : html`<span class="muted">–</span>`

const Change = ({ m }: { m: Mover }) => {
  if (m.date) return html`<${When} at=${m.date} />`
  if (m.engagementscore_before === null || m.engagementscore === null)
    return html`<${Score} kind="engagement" value=${m.engagementscore} />`
  return html`<${Score} kind="engagement" value=${m.engagementscore_before} /> →${' '}
    <${Score} kind="engagement" value=${m.engagementscore} /><span class="diff">
    (${signed(m.engagementscore - m.engagementscore_before)})</span>`
}

const MoveList = ({
  name,
  title,
  what,
  list,
  opens,
}: {
  name: string
  title: string
  what: string
  list: Movements
  opens: ListOptions
}) =>
  html`<section class="movement" aria-labelledby=${`move-${name}`} data-movement=${name}>
    <h3 id=${`move-${name}`}>${title} <span class="tally"><${Count} counted=${list} list=${opens} /></span></h3>
    <p class="muted">${what}</p>
    ${
      list.customers.length
        ? html`<ul class="movers">
            ${list.customers.map(
              (m) => html`<li data-customer=${m.external_id}>
                <a href=${customerHref(m.external_id)}>${m.name ?? m.external_id}</a>
                <span class="change"><${Change} m=${m} /></span>
                <span class="why">Drivers: <${Drivers} drivers=${m.drivers} /></span>
              </li>`,
            )}
          </ul>
          ${
            list.count > list.customers.length &&
            html`<p class="muted">
              and ${list.count - list.customers.length} more (the count's link lists them all).
            </p>`
          }`
        : html`<${Empty}>None.</${Empty}>`
    }
  </section>`

// The learned churn probability's largest rises, then and now and by how many points; no number
// here links to a list (no search field holds a past probability). A probability's change in
// percentage points, to one decimal.
const points = (change: number) => Math.round(change * 1000) / 10

const Rises = ({ rises }: { rises: Week['churn_probability_rises'] }) =>
  html`<section class="movement" aria-labelledby="move-churn-probability" data-movement="churn_probability_rises">
    <h3 id="move-churn-probability">Churn probability rose most <span class="tally">${rises.count}</span></h3>
    <p class="muted">the learned churn probability (a model trained in Settings) rose by a point or more</p>
    ${
      rises.customers.length
        ? html`<ul class="movers">
            ${rises.customers.map(
              (r) => html`<li data-customer=${r.external_id}>
                <a href=${customerHref(r.external_id)}>${r.name ?? r.external_id}</a>
                <span class="change">${percent(r.churn_probability_before)} → ${percent(r.churn_probability)}
                  <span class="diff">(${signed(points(r.churn_probability - r.churn_probability_before))}
                  points)</span></span>
                <span class="why">Drivers: <${Drivers} drivers=${r.drivers} /></span>
              </li>`,
            )}
          </ul>
          ${
            rises.count > rises.customers.length &&
            html`<p class="muted">and ${rises.count - rises.customers.length} more.</p>`
          }`
        : html`<${Empty}>None.</${Empty}>`
    }
  </section>`

const Renewals = ({ renewals }: { renewals: Week['renewals'] }) =>
  html`<section aria-labelledby="renewals-title">
    <h2 id="renewals-title" tabindex="-1">Renewals in the next 90 days</h2>
    <p>
      <${Count} counted=${renewals} id="renewals-count" /> ${renewals.count === 1 ? 'renewal' : 'renewals'} due by${' '}
      <${Day} at=${renewals.to} />, of which${' '}
      <${Count} counted=${renewals.at_risk} id="renewals-at-risk" /> in churn risk. Unhealthy first.
    </p>
    ${
      renewals.customers.length
        ? html`<${Scroller} label="Renewals"><table class="cards" id="renewals">
            <thead><tr>
              <th scope="col">Customer</th><th scope="col">Renews</th><th scope="col">Health</th>
              <th scope="col">Engagement</th><th scope="col">Fit</th><th scope="col">Drivers</th>
            </tr></thead>
            <tbody>
              ${renewals.customers.map(
                (r) => html`<tr data-customer=${r.external_id}>
                  <td data-label="Customer"><a href=${customerHref(r.external_id)}>${r.name ?? r.external_id}</a></td>
                  <td data-label="Renews"><${When} at=${r.renewal_date} /></td>
                  <td data-label="Health">${QUADRANT_NAMES[r.quadrant]}</td>
                  <td data-label="Engagement" class="num"><${Score} kind="engagement" value=${r.engagementscore} /></td>
                  <td data-label="Fit" class="num"><${Score} kind="fit" value=${r.fitscore} /></td>
                  <td data-label="Drivers" class="wrap"><${Drivers} drivers=${r.drivers} /></td>
                </tr>`,
              )}
            </tbody>
          </table></${Scroller}>`
        : html`<${Empty}>No renewal in the next 90 days.</${Empty}>`
    }
  </section>`

const Health = ({ weeks }: { weeks: Week['weeks'] }) => {
  const days = weeks.map((w) => w.week_ending)
  const series: WeekSeries[] = [
    ...QUADRANTS.map(([q, label, colour, dash]) => ({
      label,
      colour,
      dash,
      values: weeks.map((w) => w.quadrants[q].count),
    })),
    {
      label: 'Median engagement',
      colour: '#0b57d0',
      dash: [1, 2],
      values: weeks.map((w) => w.median_engagement),
      median: true,
    },
  ]
  const last = weeks[weeks.length - 1]
  const said = last
    ? `Customers per quadrant over 12 weeks; the week ending ${last.week_ending}: ` +
      QUADRANTS.map(([q, label]) => `${label} ${last.quadrants[q].count}`).join(', ') +
      `, median engagement ${last.median_engagement ?? 'none'}.`
    : 'No weeks.'
  return html`<section aria-labelledby="health-title">
    <h2 id="health-title" tabindex="-1">Health over 12 weeks</h2>
    <${WeeksChart} days=${days} series=${series} label=${said} />
    <details class="weeks-table">
      <summary>The numbers, week by week</summary>
      <${Scroller} label="The numbers, week by week"><table id="weeks">
        <thead><tr>
          <th scope="col">Week ending</th>
          ${QUADRANTS.map(([, label]) => html`<th scope="col">${label}</th>`)}
          <th scope="col">Median engagement</th>
        </tr></thead>
        <tbody>
          ${weeks.map(
            (w) => html`<tr>
              <th scope="row"><${When} at=${w.week_ending} /></th>
              ${QUADRANTS.map(([q]) => html`<td class="num"><${Count} counted=${w.quadrants[q]} /></td>`)}
              <td class="num">${w.median_engagement ?? '–'}</td>
            </tr>`,
          )}
        </tbody>
      </table></${Scroller}>
    </details>
  </section>`
}

// The report's parts, a Tab or two away rather than after every customer listed before them.
const JUMPS = [
  ['changed-title', 'What changed'],
  ['renewals-title', 'Renewals'],
  ['health-title', 'Health over 12 weeks'],
]

export const WeekView = ({ apiKey, days }: { apiKey: string; days: 7 | 30 }) => {
  const report = useData(() => weekReport(apiKey, days), [apiKey, days])
  const week = report.data
  const last = week?.weeks[week.weeks.length - 1]
  return html`<section aria-labelledby="week-title" class="week">
    <div class="toolbar">
      <h1 id="week-title">${days === 7 ? 'This week' : 'These 30 days'}</h1>
      <nav aria-label="Period" class="period">
        <a href="#/week" aria-current=${days === 7 ? 'page' : undefined}>7 days</a>
        <a href="#/week?days=30" aria-current=${days === 30 ? 'page' : undefined}>30 days</a>
      </nav>
    </div>
    ${report.error && html`<${Failed} error=${report.error} />`}
    ${!week && !report.error && html`<${Loading} what="the report" />`}
    ${
      week &&
      html`<p class="muted" id="week-freshness">
          From <${When} at=${week.since} /> to <${When} at=${week.today} />, computed${' '}
          <${When} at=${week.computed_at} />${week.refreshing ? '; changes since are being added' : ''}.
        </p>
        <nav aria-label="On this page" class="jump">
          ${JUMPS.map(([id, name]) => html`<a href=${`#${id}`} onClick=${focusOn(id)}>${name}</a>`)}
        </nav>
        ${
          last &&
          html`<ul class="tiles" aria-label="Customers now">
            ${QUADRANTS.map(
              ([q, label]) => html`<li data-quadrant=${q}>
                <span class="tile-label">${label}</span>
                <span class="tile-number"><${Count} counted=${last.quadrants[q]} /></span>
              </li>`,
            )}
          </ul>`
        }
        <section aria-labelledby="changed-title">
          <h2 id="changed-title" tabindex="-1">What changed</h2>
          <div class="movements">
            ${MOVEMENTS.map(
              ([name, title, what, order]) =>
                html`<${MoveList} key=${name} name=${name} title=${title} what=${what} list=${week.movements[name]}
                  opens=${listOf(title, order, days)} />`,
            )}
            <${Rises} rises=${week.churn_probability_rises} />
          </div>
        </section>
        <${Renewals} renewals=${week.renewals} />
        <${Health} weeks=${week.weeks} />`
    }
  </section>`
}
