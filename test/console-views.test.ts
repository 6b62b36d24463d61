// Every view of the console in real Chromium at a phone's, a tablet's and a laptop's width, as
// a key holder and as the operator: the page never scrolls sideways, axe-core finds nothing,
// the console logs no error, and a screenshot of each is kept in test/artifacts/ for people
// reviewing a change. One service, one browser and one tab per role and width; views are
// reached by their fragment.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { gzipSync } from 'node:zlib'
import type { Page } from 'playwright-core'
import { type Browser, launchBrowser } from './helpers/browser.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
const ARTIFACTS = 'test/artifacts'
const DAY = 86_400_000
const day = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY).toISOString().slice(0, 10)

const WIDTHS = [
  { width: 390, height: 844 },
  { width: 768, height: 1024 },
  { width: 1280, height: 800 },
]

let s: TestService
let browser: Browser
let account: Awaited<ReturnType<typeof scoredAccount>>

// Long names and ids, as real accounts have them, so that a view that does not wrap shows it; their
// engagement holds still, so that the home view's movements are the fixtures' below alone.
const CUSTOMERS = Array.from({ length: 40 }, (_, i) => ({
  external_id: `customer-with-a-long-external-id-${String(i).padStart(3, '0')}`,
  name: `Customer ${i} of a Rather Long Company Name GmbH`,
  owner_email: i % 4 === 0 ? 'owner@acme.test' : undefined,
  attributes: { country: ['US', 'DE', 'FR'][i % 3], has_sso: i % 2 === 0 },
  metrics: [
    { date: day(20), logins: i % 40 },
    { date: day(0), logins: i % 40 },
  ],
}))
const FIRST = CUSTOMERS[0].external_id
// Known movements over the last 7 days (the model scores 20 logins 0, 5 logins -75, 30 logins 50):
// two enter churn risk, one drops within health, one is churned, one comes back, one
// renews in 30 days.
const us = { country: 'US', has_sso: true }
const logins = (...pairs: [daysAgo: number, logins: number][]) =>
  pairs.map(([n, l]) => ({ date: day(n), logins: l }))
const MOVERS = [
  { external_id: 'entered', name: 'Entered', attributes: us, metrics: logins([20, 30], [2, 5]) },
  { external_id: 'dropped', name: 'Dropped', attributes: us, metrics: logins([20, 40], [1, 25]) },
  { external_id: 'churned', name: 'Churned', attributes: us, metrics: logins([20, 30], [1, 30]) },
  { external_id: 'back', name: 'Back', attributes: us, metrics: logins([20, 30], [1, 30]) },
  {
    external_id: 'renews',
    name: 'Renews',
    attributes: { ...us, renewal_date: day(-30) },
    metrics: logins([20, 30]),
  },
  // From 50 to -10: into churn risk by a little, where a "fair" badge would contradict the list.
  { external_id: 'slipped', name: 'Slipped', attributes: us, metrics: logins([20, 30], [2, 18]) },
]
const LOGINS = 'Logins per month'

before(async () => {
  // Many views within a minute, each of several requests: the per-key rate limit is
  // not tested here.
  s = await startTestService({ apiRateLimit: 100_000 })
  account = await scoredAccount(s)
  // A label, which drivers are to show instead of the codename.
  const labelled = await s.admin('PATCH', `/accounts/${account.id}/properties/customer/logins`, {
    label: LOGINS,
  })
  assert.equal(labelled.status, 200, JSON.stringify(labelled.body))
  await uploadAndWait(account.api, 'customers', [...CUSTOMERS, ...MOVERS], { scored: true })
  const put = async (id: string, body: object) =>
    assert.equal((await account.api(`/api/v1/customer/${id}`, body, 'PUT')).status, 200)
  await put('churned', { is_churned: true, churned_date: day(2) })
  await put('back', { is_churned: true, churned_date: day(40) })
  await put('back', { is_churned: false })
  await uploadAndWait(
    account.api,
    'contacts',
    [{ contact_external_id: 'pat', contact_name: 'Pat Doe', customer_external_id: FIRST }],
    { scored: true },
  )
  const hook = await s.admin('POST', `/accounts/${account.id}/webhooks`, {
    url: 'https://receiver.example/hooks/a-long-path-for-the-customer-success-team',
    events: ['customer.created'],
    name: 'CRM',
  })
  assert.equal(hook.status, 201, JSON.stringify(hook.body))
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await s?.stop()
})

// A tab signed in by session storage, as the sign-in form leaves it, with every console error kept.
const tab = async (storage: Record<string, string>, size: { width: number; height: number }) => {
  const page = await browser.context.newPage()
  await page.setViewportSize(size)
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  page.on('console', (msg) => msg.type() === 'error' && problems.push(`console: ${msg.text()}`))
  await page.addInitScript((entries) => {
    for (const [k, v] of Object.entries(entries)) sessionStorage.setItem(k, v)
  }, storage)
  await page.goto(`${s.base}/console`)
  return { page, problems }
}

// A view is shown once its heading is there and nothing in it is still loading, and two frames have
// passed: a frame's ResizeObserver callbacks (the scroll cues) run after its layout,
// before the next.
const settled = async (page: Page) => {
  await page.waitForFunction(
    () => {
      const main = document.querySelector('main')
      return (
        main?.querySelector('h1') &&
        !main.querySelector('.state-loading, [data-state="loading"]') &&
        !main.textContent?.includes('Loading')
      )
    },
    undefined,
    { timeout: 20_000 },
  )
  await page.evaluate(
    () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))),
  )
}

const violations = async (page: Page) => {
  if (!(await page.evaluate('typeof axe !== "undefined"'))) await page.evaluate(AXE)
  const found: { id: string; impact: string; nodes: { target: string[] }[] }[] =
    await page.evaluate(
      'axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations)',
    )
  return found.map(
    (v) => `${v.impact} ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
  )
}

// What the page hides without saying so: a control, a cell or a badge past the window's edge, or
// past the edge of the frame it scrolls in while that frame shows no cue that more is to the side
// (overflow clips it, so the page itself never grows wider). A string, as above.
const cutOff = (page: Page): Promise<string[]> =>
  page.evaluate(`(() => {
    const width = document.documentElement.clientWidth
    const name = (e) =>
      e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "' + e.textContent.trim().slice(0, 30) + '"'
    const found = []
    for (const cue of document.querySelectorAll('main .scroll-cue')) {
      const r = cue.getBoundingClientRect()
      if (r.left < -0.5 || r.right > width + 0.5) found.push('the cue ' + name(cue) + ' is past the edge')
    }
    const shown =
      'main a, main button, main input, main select, main summary, main td, main th, main .badge, main .score'
    for (const e of document.querySelectorAll(shown)) {
      const r = e.getBoundingClientRect()
      if (r.width <= 1 || r.height <= 1 || !e.checkVisibility()) continue
      const frame = e.closest('.table-wrap')
      const box = frame ? frame.getBoundingClientRect() : { left: 0, right: width }
      const past = r.left < box.left - 0.5 || r.right > box.right + 0.5
      if (!frame && past) found.push(name(e) + ' is past the edge (' + Math.round(r.right) + ' of ' + width + ' px)')
      else if (past && !frame.parentElement.querySelector(':scope > .scroll-cue')) {
        found.push(name(e) + ' is hidden in its frame with no cue')
      }
      if (frame && (box.left < -0.5 || box.right > width + 0.5)) {
        found.push('the frame of ' + name(e) + ' is past the edge')
      }
    }
    return [...new Set(found)]
  })()`)

// Each view by its fragment, checked and photographed.
const check = async (
  { page, problems }: Awaited<ReturnType<typeof tab>>,
  role: string,
  width: number,
  views: [name: string, fragment: string][],
) => {
  mkdirSync(ARTIFACTS, { recursive: true })
  const failures: string[] = []
  for (const [name, fragment] of views) {
    await page.evaluate((f) => {
      location.hash = f
    }, fragment)
    await settled(page)
    // The first element past the right edge whose parent is not, to name the culprit (a string: tsx
    // would wrap a named function in a helper the page does not have).
    const { scroll, client, culprit }: { scroll: number; client: number; culprit?: string } =
      await page.evaluate(`(() => {
      const client = document.documentElement.clientWidth
      const past = (e) => e.getBoundingClientRect().right > client + 0.5
      const over = [...document.querySelectorAll('body *')].find((e) => past(e) && !past(e.parentElement))
      const culprit = over && over.tagName.toLowerCase() + (over.id ? '#' + over.id : '') + '.' + over.className
      return { scroll: document.documentElement.scrollWidth, client, culprit }
    })()`)
    if (scroll > client)
      failures.push(`${name} at ${width}: the page is ${scroll} px wide in ${client} (${culprit})`)
    // A cue follows a resize by a frame or more on a loaded machine; one that never comes fails.
    let cut = await cutOff(page)
    for (let i = 0; cut.length && i < 20; i++) {
      await page.waitForTimeout(100)
      cut = await cutOff(page)
    }
    for (const f of cut) failures.push(`${name} at ${width}: ${f}`)
    for (const v of await violations(page)) failures.push(`${name} at ${width}: ${v}`)
    await page.screenshot({
      path: `${ARTIFACTS}/views-${role}-${name}-${width}.png`,
      fullPage: true,
    })
    // What one sees on opening it, small enough for docs/console.md (docs/img holds
    // the chosen ones).
    await page.screenshot({
      path: `${ARTIFACTS}/views-${role}-${name}-${width}.jpg`,
      type: 'jpeg',
      quality: 70,
    })
  }
  failures.push(...problems)
  assert.deepEqual(failures, [])
}

const KEY_VIEWS: [string, string][] = [
  ['home', '#/week'],
  ['home-30', '#/week?days=30'],
  ['matrix', '#/matrix'],
  ['customers', '#/customers'],
  [
    'customers-narrowed',
    `#/customers?where=${encodeURIComponent('{"propertyName":"country","operator":"EQ","value":"US"}')}`,
  ],
  ['customer', `#/customer/${FIRST}`],
  ['uploads', '#/uploads'],
  ['not-found', '#/customer/%E0%A4%A'],
]
const OPERATOR_VIEWS: [string, string][] = [
  ['accounts', '#/accounts'],
  ['uploads', '#/uploads'],
  ['webhooks', '#/webhooks'],
  ['settings', '#/settings'],
  ['not-found', '#/nowhere'],
]

const go = async (page: Page, fragment: string) => {
  await page.evaluate((f) => {
    location.hash = f
  }, fragment)
  await settled(page)
}

// The boxes of what the selector finds that are not wholly inside the window, or that sit in a
// scrolling frame; and how many it found.
const outside = (page: Page, selector: string) =>
  page.locator(selector).evaluateAll((els) => ({
    found: els.length,
    out: els
      .filter((e) => {
        const r = e.getBoundingClientRect()
        const width = document.documentElement.clientWidth
        return r.left < 0 || r.right > width || r.width === 0 || e.closest('.table-wrap') !== null
      })
      .map((e) => e.textContent),
  }))

for (const size of WIDTHS) {
  test(`every view fits ${size.width} px, passes axe-core and logs no error, as key holder and operator`, async () => {
    const key = await tab({ 'console.service-key': account.token }, size)
    await check(key, 'key', size.width, KEY_VIEWS)
    // The header names the key's account.
    assert.match(
      (await key.page.locator('#chosen-account').textContent()) ?? '',
      /Acme \(account \d+\)/,
    )
    // The customers' order has a control of its own wherever the headers are hidden (cards).
    await go(key.page, '#/customers')
    const cards = size.width <= 1000
    assert.equal(
      await key.page.locator('#customers-sort').isVisible(),
      cards,
      `sort control at ${size.width}`,
    )
    const headers = await key.page
      .locator('#customers thead')
      .evaluate((e) => e.getBoundingClientRect().width)
    assert.equal(headers > 1, !cards, `headers at ${size.width}`)
    if (cards) assert.deepEqual((await outside(key.page, '#customers-sort')).out, [])
    await key.page.close()
    const operator = await tab(
      { 'console.admin-token': ADMIN_TOKEN, 'console.account': String(account.id) },
      size,
    )
    await check(operator, 'operator', size.width, OPERATOR_VIEWS)
    assert.match(
      (await operator.page.locator('#chosen-account').textContent()) ?? '',
      /Acme \(account \d+\)/,
    )
    // Each webhook's state and every action wholly in sight, in no frame that scrolls.
    await go(operator.page, '#/webhooks')
    const shown = await outside(operator.page, '[data-webhook] button, [data-webhook] .badge')
    assert.deepEqual(shown, { found: 4, out: [] }, `webhooks at ${size.width}`)
    await operator.page.close()
  })
}

test("the customers list sorts by its control where its headers are hidden, in the API's order", async () => {
  const { page, problems } = await tab({ 'console.service-key': account.token }, WIDTHS[0])
  await go(page, '#/customers')
  await page.locator('#customers tbody tr:first-child td[data-label="ID"]').waitFor()
  const api = await account.api('/api/v1/customers/search', {
    sort: [{ propertyName: 'engagementscore', direction: 'desc' }],
    limit: 100,
  })
  const first: string = api.body.results[0].id
  await page.locator('#customers-sort').selectOption({ label: 'Engagement, descending' })
  // The list first shows the default order, which may already be loaded when the sort is chosen:
  // the sorted page is the one whose first row is the API's (CI read the unsorted one).
  await page.waitForFunction(
    (id) =>
      document
        .querySelector('#customers tbody tr:first-child td[data-label="ID"]')
        ?.textContent?.trim() === id &&
      !document.querySelector('#customers-count')?.textContent?.includes('Loading'),
    first,
  )
  const ids = await page.locator('#customers td[data-label="ID"]').allTextContents()
  assert.deepEqual(
    ids.map((t) => t.trim()),
    api.body.results.map((c: { id: string }) => c.id),
  )
  assert.deepEqual(problems, [])
  await page.close()
})

test('a malformed or unknown fragment shows "not found", never a blank page', async () => {
  const { page, problems } = await tab({ 'console.service-key': account.token }, WIDTHS[2])
  for (const [fragment, why] of [
    ['#/customer/%E0%A4%A', /malformed/],
    ['#/nowhere', /no such view/],
    ['#/customers?where=%7Bnot-json', /malformed/],
    ['#/settings', /for the operator/],
  ] as const) {
    await page.evaluate((f) => {
      location.hash = f
    }, fragment)
    await page.getByRole('heading', { name: 'Not found' }).waitFor()
    assert.match((await page.locator('main').textContent()) ?? '', why)
  }
  assert.deepEqual(problems, [])
  await page.close()
})

test('the texts read as sentences: no words run together', async () => {
  const page = await browser.context.newPage()
  await page.goto(`${s.base}/console`)
  assert.match(
    (await page.locator('#service-key-hint').textContent()) ?? '',
    /uploads\. It is kept/,
  )
  await page.evaluate(
    (token) => sessionStorage.setItem('console.service-key', token),
    account.token,
  )
  await page.goto(`${s.base}/console#/customer/${FIRST}`)
  await page.reload()
  assert.match((await page.locator('#churn-state').textContent()) ?? '', /Active\. Mark as churned/)
  await page.close()
})

test('the home view lists exactly the customers that moved; a number opens the customers it counts', async () => {
  const { page, problems } = await tab({ 'console.service-key': account.token }, WIDTHS[2])
  await settled(page)
  assert.equal(await page.locator('h1').textContent(), 'This week')
  const listed = (movement: string) =>
    page
      .locator(`[data-movement="${movement}"] [data-customer]`)
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-customer')))
  assert.deepEqual(
    {
      entered_risk: await listed('entered_risk'),
      churned: await listed('churned'),
      reactivated: await listed('reactivated'),
      drops: await listed('drops'),
    },
    {
      entered_risk: ['entered', 'slipped'],
      churned: ['churned'],
      reactivated: ['back'],
      drops: ['entered', 'dropped', 'slipped'],
    },
  )
  // Drivers by their label; a customer in churn risk wears the poor badge, as the list says.
  assert.match(
    (await page.locator('[data-movement="entered_risk"] .why').first().textContent()) ?? '',
    /Logins per/,
  )
  const slipped = page.locator('[data-movement="entered_risk"] [data-customer="slipped"] .score')
  assert.deepEqual(
    await slipped.evaluateAll((els) =>
      els.map((e) => [e.className, e.textContent?.replace(/\s+/g, ' ').trim()]),
    ),
    [
      ['score score-good', '● 50 (good)'],
      ['score score-poor', '▲ -10 (poor)'],
    ],
  )
  assert.match((await page.locator('#week-freshness').textContent()) ?? '', /computed/)
  // Each movement's count opens the customers list showing exactly the customers it lists.
  // Each list has a title in words and the report's order: by the change (then -> now shown), or
  // the latest churn or reactivation first.
  const LISTS: Record<string, [title: string, sort?: string]> = {
    entered_risk: ['Entered churn risk this week', 'engagementscore_change_7d'],
    churned: ['Churned this week'],
    reactivated: ['Reactivated this week'],
    drops: ['Largest drops this week', 'engagementscore_change_7d'],
  }
  for (const [movement, [title, change]] of Object.entries(LISTS)) {
    const names = await listed(movement)
    await page.locator(`[data-movement="${movement}"] .tally a`).click()
    await page.locator('#customers-where').waitFor()
    await settled(page)
    assert.equal(await page.locator('h1').textContent(), title)
    const ids = await page.locator('#customers td[data-label="ID"]').allTextContents()
    assert.deepEqual(ids, change ? names : names.sort(), movement)
    if (change) {
      // Largest fall first, as the API sorts by the change, with each one's engagement
      // then and now.
      const api = await account.api('/api/v1/customers/search', {
        where: JSON.parse(
          new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('where')!,
        ),
        sort: [{ propertyName: change, direction: 'asc' }],
      })
      assert.deepEqual(
        ids,
        api.body.results.map((c: { id: string }) => c.id),
      )
      const then = await page
        .locator('#customers tr', { hasText: 'Slipped' })
        .locator('.then-now')
        .textContent()
      assert.match(then ?? '', /50.*→.*-10.*\(−60\)/s)
    }
    await page.goBack()
    await settled(page)
  }
  // Nobody left churn risk: a zero, with nothing to open.
  assert.equal(await page.locator('[data-movement="left_risk"] .tally a').count(), 0)
  const renewals = await page
    .locator('#renewals [data-customer]')
    .evaluateAll((els) => els.map((e) => e.getAttribute('data-customer')))
  assert.deepEqual(renewals, ['renews'])
  // "1 renewal due by 31 Dec 2026, of which 0 in churn risk": a date, not "up to in 3 months".
  assert.match(
    (await page.locator('#renewals-title + p').textContent()) ?? '',
    /^\s*1 renewal due by \d{1,2} \w{3} \d{4}, of which 0 in churn risk\./,
  )
  await page.locator('#renewals-count').click()
  await page.locator('#customers-where').waitFor()
  await settled(page)
  assert.deepEqual(await page.locator('#customers td[data-label="ID"]').allTextContents(), [
    'renews',
  ])
  // The total the API counts, shown with the page.
  assert.equal(await page.locator('#customers-count').getAttribute('data-total'), '1')
  // The chart draws the 12 weeks.
  await page.goBack()
  await settled(page)
  assert.equal(await page.locator('.weeks-chart canvas').count(), 1)
  // Both y axes drawn with their scales (uPlot draws them on its canvas, over its axis boxes):
  // customers on the left, median engagement on the right; ink in each box is its ticks and label.
  const inked = await page.locator('.weeks-chart').evaluate((chart) => {
    const canvas = chart.querySelector('canvas')!
    const c = canvas.getBoundingClientRect()
    const scale = canvas.width / c.width
    const g = canvas.getContext('2d')!
    return [...chart.querySelectorAll('.u-axis')].map((axis) => {
      const r = axis.getBoundingClientRect()
      if (r.width < 1 || r.height < 1) return { side: 'none', ink: 0 }
      const x = Math.max(0, (r.left - c.left) * scale)
      const y = Math.max(0, (r.top - c.top) * scale)
      const { data } = g.getImageData(
        x,
        y,
        Math.max(1, r.width * scale),
        Math.max(1, r.height * scale),
      )
      let ink = 0
      for (let i = 3; i < data.length; i += 4) if (data[i] > 128) ink++
      const side =
        r.height > r.width ? (r.left - c.left < c.width / 2 ? 'left' : 'right') : 'bottom'
      return { side, ink }
    })
  })
  assert.deepEqual(
    inked.filter((a) => a.ink > 100).map((a) => a.side),
    ['bottom', 'left', 'right'],
    JSON.stringify(inked),
  )
  assert.equal(await page.locator('#weeks tbody tr').count(), 12)
  assert.deepEqual(problems, [])
  await page.close()
})

test("a skip link is the first stop of Tab, and the home view's parts are a few Tabs away", async () => {
  const { page, problems } = await tab({ 'console.service-key': account.token }, WIDTHS[2])
  await settled(page)
  const hash = new URL(page.url()).hash
  await page.keyboard.press('Tab')
  const focused = () =>
    page.evaluate(() => ({
      id: document.activeElement?.id,
      text: document.activeElement?.textContent,
    }))
  assert.deepEqual(await focused(), { id: '', text: 'Skip to content' })
  // In sight once it has the focus.
  assert.deepEqual((await outside(page, '.skip-link')).out, [])
  await page.keyboard.press('Enter')
  assert.equal((await focused()).id, 'main')
  assert.equal(new URL(page.url()).hash, hash)
  // From the view's start, the renewals are within 10 Tabs, then Enter.
  let tabs = 0
  while ((await focused()).text !== 'Renewals' && tabs < 10) {
    await page.keyboard.press('Tab')
    tabs++
  }
  assert.equal((await focused()).text, 'Renewals', `not reached in ${tabs} Tabs`)
  await page.keyboard.press('Enter')
  assert.equal((await focused()).id, 'renewals-title')
  await page.keyboard.press('Tab')
  assert.equal(
    await page.evaluate(() =>
      document.activeElement?.closest('section')?.getAttribute('aria-labelledby'),
    ),
    'renewals-title',
  )
  assert.equal(new URL(page.url()).hash, hash)
  // The parts are landmarks with names, and headings.
  for (const name of ['What changed', 'Renewals in the next 90 days', 'Health over 12 weeks']) {
    assert.equal(await page.getByRole('region', { name }).count(), 1, name)
  }
  assert.deepEqual(problems, [])
  await page.close()
})

test('the customer page shows drivers by label and the owner by name', async () => {
  const { page, problems } = await tab({ 'console.service-key': account.token }, WIDTHS[0])
  await go(page, `#/customer/${FIRST}`)
  const drivers = (await page.locator('.columns').innerText()).replace(/\s+/g, ' ')
  assert.match(drivers, new RegExp(`${LOGINS} \\(engagement\\)`))
  assert.doesNotMatch(drivers, /logins \(engagement\)/)
  assert.match(
    (await page.locator('article').innerText()) ?? '',
    /owner Owner \(owner@acme\.test\)/,
  )
  // And the customers list by the name too, the email kept on hover.
  await go(page, '#/customers')
  const owner = page
    .locator('#customers tr', { hasText: CUSTOMERS[0].name })
    .locator('td[data-label="Owner"] span')
  assert.equal(await owner.textContent(), 'Owner')
  assert.equal(await owner.getAttribute('title'), 'owner@acme.test')
  assert.deepEqual(problems, [])
  await page.close()
})

// The budget docs/console.md states, on the bytes the service sends.
test('the console is within its budget: page, script and stylesheet under 250 KB gzipped', async () => {
  const sizes = await Promise.all(
    ['/console', '/console/console.js', '/console/console.css'].map(async (path) => {
      const res = await fetch(`${s.base}${path}`)
      assert.equal(res.status, 200, path)
      return gzipSync(Buffer.from(await res.arrayBuffer()), { level: 9 }).length
    }),
  )
  const total = sizes.reduce((a, b) => a + b, 0)
  assert.ok(total < 250 * 1024, `${total} bytes gzipped`)
})
