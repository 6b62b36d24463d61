// Every view of the console in real Chromium at a phone's, a tablet's and a laptop's width, as a key
// holder and as the operator: the page never scrolls sideways, axe-core finds nothing, the console
// logs no error, and a screenshot of each is kept in test/artifacts/ for people reviewing a change.
// One service, one browser and one tab per role and width; views are reached by their fragment.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
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
// one enters churn risk, one drops within health, one is churned, one comes back, one renews in 30 days.
const us = { country: 'US', has_sso: true }
const logins = (...pairs: [daysAgo: number, logins: number][]) => pairs.map(([n, l]) => ({ date: day(n), logins: l }))
const MOVERS = [
  { external_id: 'entered', name: 'Entered', attributes: us, metrics: logins([20, 30], [2, 5]) },
  { external_id: 'dropped', name: 'Dropped', attributes: us, metrics: logins([20, 40], [1, 25]) },
  { external_id: 'churned', name: 'Churned', attributes: us, metrics: logins([20, 30], [1, 30]) },
  { external_id: 'back', name: 'Back', attributes: us, metrics: logins([20, 30], [1, 30]) },
  { external_id: 'renews', name: 'Renews', attributes: { ...us, renewal_date: day(-30) }, metrics: logins([20, 30]) },
]

before(async () => {
  s = await startTestService()
  account = await scoredAccount(s)
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

// A view is shown once its heading is there and nothing in it is still loading.
const settled = (page: Page) =>
  page.waitForFunction(
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

const violations = async (page: Page) => {
  if (!(await page.evaluate('typeof axe !== "undefined"'))) await page.evaluate(AXE)
  const found: { id: string; impact: string; nodes: { target: string[] }[] }[] = await page.evaluate(
    'axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations)',
  )
  return found.map((v) => `${v.impact} ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
}

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
    if (scroll > client) failures.push(`${name} at ${width}: the page is ${scroll} px wide in ${client} (${culprit})`)
    for (const v of await violations(page)) failures.push(`${name} at ${width}: ${v}`)
    await page.screenshot({ path: `${ARTIFACTS}/views-${role}-${name}-${width}.png`, fullPage: true })
    // What one sees on opening it, small enough for docs/console.md (docs/img holds the chosen ones).
    await page.screenshot({ path: `${ARTIFACTS}/views-${role}-${name}-${width}.jpg`, type: 'jpeg', quality: 70 })
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

for (const size of WIDTHS) {
  test(`every view fits ${size.width} px, passes axe-core and logs no error, as key holder and operator`, async () => {
    const key = await tab({ 'console.service-key': account.token }, size)
    await check(key, 'key', size.width, KEY_VIEWS)
    await key.page.close()
    const operator = await tab({ 'console.admin-token': ADMIN_TOKEN, 'console.account': String(account.id) }, size)
    await check(operator, 'operator', size.width, OPERATOR_VIEWS)
    await operator.page.close()
  })
}

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
  assert.match((await page.locator('#service-key-hint').textContent()) ?? '', /uploads\. It is kept/)
  await page.evaluate((token) => sessionStorage.setItem('console.service-key', token), account.token)
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
    { entered_risk: ['entered'], churned: ['churned'], reactivated: ['back'], drops: ['entered', 'dropped'] },
  )
  assert.match((await page.locator('[data-movement="entered_risk"] .why').textContent()) ?? '', /logins/)
  assert.match((await page.locator('#week-freshness').textContent()) ?? '', /computed/)
  // Each movement's count opens the customers list showing exactly the customers it lists.
  for (const movement of ['entered_risk', 'churned', 'reactivated', 'drops']) {
    const names = (await listed(movement)).sort()
    await page.locator(`[data-movement="${movement}"] .tally a`).click()
    await page.locator('#customers-where').waitFor()
    await settled(page)
    assert.deepEqual((await page.locator('#customers td:nth-child(2)').allTextContents()).sort(), names, movement)
    await page.goBack()
    await settled(page)
  }
  // Nobody left churn risk: a zero, with nothing to open.
  assert.equal(await page.locator('[data-movement="left_risk"] .tally a').count(), 0)
  const renewals = await page
    .locator('#renewals [data-customer]')
    .evaluateAll((els) => els.map((e) => e.getAttribute('data-customer')))
  assert.deepEqual(renewals, ['renews'])
  await page.locator('#renewals-count').click()
  await page.locator('#customers-where').waitFor()
  await settled(page)
  assert.deepEqual(await page.locator('#customers td:nth-child(2)').allTextContents(), ['renews'])
  // The total the API counts, shown with the page.
  assert.equal(await page.locator('#customers-count').getAttribute('data-total'), '1')
  // The chart draws the 12 weeks.
  await page.goBack()
  await settled(page)
  assert.equal(await page.locator('.weeks-chart canvas').count(), 1)
  assert.equal(await page.locator('#weeks tbody tr').count(), 12)
  assert.deepEqual(problems, [])
  await page.close()
})
