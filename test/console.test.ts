// The web console in a real browser (Debian's Chromium through playwright-core) against a real
// service: sign-in with a key, the score matrix, the customers table with its filters and
// export, the customer page, an accessibility check, and the same console served from the
// single-file bundle.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'
import { runBackup } from '../src/backups/task.ts'
import { fileSize } from '../src/console/format.ts'
import { type Browser, launchBrowser } from './helpers/browser.ts'
import { serveBundle } from './helpers/bundle.ts'
import { scoredAccount, uploadAndWait, waitForUpload } from './helpers/fixtures.ts'
import { eventually, startReceiver } from './helpers/receiver.ts'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
const DAY = 86_400_000
const day = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY).toISOString().slice(0, 10)

let s: TestService
// The settings page's backups are written here.
const backups = mkdtempSync(join(tmpdir(), 'service-console-backups-'))
let browser: Browser
let account: Awaited<ReturnType<typeof scoredAccount>>

// 150 customers spread over the matrix, and one alone in its top-right corner (the highest
// engagement, a perfect fit) with a month-by-month trend, an owner and a tag.
const CUSTOMERS = [
  ...Array.from({ length: 150 }, (_, i) => ({
    external_id: `c${String(i).padStart(3, '0')}`,
    name: `Customer ${i}`,
    attributes: { country: ['US', 'DE', 'FR'][i % 3], has_sso: i % 2 === 0 },
    metrics: [
      { date: day(60), logins: (i * 7) % 40 },
      { date: day(0), logins: i % 40 },
    ],
  })),
  {
    external_id: 'zeta',
    name: 'Zeta Star',
    owner_email: 'owner@acme.test',
    attributes: { country: 'US', has_sso: true },
    metrics: [
      { date: day(60), logins: 10 },
      { date: day(30), logins: 20 },
      { date: day(0), logins: 40 },
    ],
  },
]

before(async () => {
  // The console makes several requests a view, and the file opens many views within a minute: the
  // per-key rate limit (500 a minute) is not what these tests are about.
  s = await startTestService({ backupDir: backups, apiRateLimit: 100_000 })
  account = await scoredAccount(s)
  await uploadAndWait(account.api, 'customers', CUSTOMERS, { scored: true })
  await uploadAndWait(
    account.api,
    'contacts',
    [
      { contact_external_id: 'pat', contact_name: 'Pat Doe', customer_external_id: 'zeta' },
      { contact_external_id: 'sam', contact_name: 'Sam Roe', customer_external_id: 'zeta' },
    ].map((c, i) => ({ ...c, metrics: [{ date: day(0), sessions: 5 + 10 * i }] })),
    { scored: true },
  )
  assert.equal(
    (await s.admin('POST', `/accounts/${account.id}/tags`, { title: 'Champion' })).status,
    201,
  )
  const tagged = await s.admin('PUT', `/accounts/${account.id}/customers/zeta/tags`, {
    titles: ['Champion'],
  })
  assert.equal(tagged.status, 200)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await s?.stop()
  rmSync(backups, { recursive: true, force: true })
})

// A tab on the console that fails the test on a script error, a refused policy or a request to any
// other host.
const open = async (base = s.base) => {
  const page = await browser.context.newPage()
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  page.on('console', (msg) => msg.type() === 'error' && problems.push(`console: ${msg.text()}`))
  page.on('request', (req) => {
    if (!/^(blob:|data:)/.test(req.url()) && !req.url().startsWith(`${base}/`))
      problems.push(`request ${req.url()}`)
  })
  await page.goto(`${base}/console`)
  return { page, problems }
}

// The key and the admin token wait under "Sign in with a key" (people sign in with a password).
const keyForms = (page: Page) =>
  page.locator('details.with-key').evaluate((d) => {
    ;(d as HTMLDetailsElement).open = true
  })

const signIn = async (page: Page, token = account.token) => {
  await keyForms(page)
  await page.getByLabel('Service key').fill(token)
  await page.getByRole('button', { name: 'Sign in with the key' }).click()
  await page.getByRole('navigation', { name: 'Views' }).waitFor()
}

// The matrix, reached from the home view where the console opens.
const toMatrix = (page: Page) =>
  page.evaluate(() => {
    if (!location.hash.startsWith('#/matrix')) location.hash = '#/matrix'
  })

const matrixReady = async (page: Page) => {
  await toMatrix(page)
  const canvas = page.locator('#matrix[data-state="ready"]')
  await canvas.waitFor()
  return canvas
}

// Screenshots of each view for people reviewing a change (gitignored).
const ARTIFACTS = 'test/artifacts'
const screenshot = async (page: Page, name: string) => {
  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: `${ARTIFACTS}/console-${name}.png`, fullPage: true })
}

const signInAsOperator = async (page: Page, accountId?: number) => {
  await keyForms(page)
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN)
  await page.getByRole('button', { name: 'Enter as operator' }).click()
  await page.getByRole('navigation', { name: 'Views' }).waitFor()
  if (accountId === undefined) return
  await page.getByRole('button', { name: new RegExp(`^Choose .* \\(${accountId}\\)$`) }).click()
  await page.locator(`#chosen-account[data-account="${accountId}"]`).waitFor()
}

// The scoring jobs of an account all done, so that its scores stop moving.
const quiet = (accountId: number) =>
  eventually(
    async () =>
      (
        await s.sql`
          select count(*)::int as n from graphile_worker._private_jobs
          where payload->>'account_id' = ${String(accountId)}`
      )[0].n === 0,
    `jobs of ${accountId}`,
    60_000,
  )

// axe-core's serious and critical findings on the page as it stands.
const accessibility = async (page: Page) => {
  await page.evaluate(AXE)
  const violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] =
    await page.evaluate(
      'axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations)',
    )
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
    )
}

// The table's ID column once it holds exactly these ids (the view rerenders after the click).
const tableShows = async (page: Page, expected: string[]) => {
  const ids = () => page.locator('tbody tr td:nth-child(2)').allTextContents()
  await page
    .waitForFunction(
      (want) =>
        [...document.querySelectorAll('tbody tr td:nth-child(2)')]
          .map((td) => td.textContent)
          .join() === want,
      expected.join(),
      { timeout: 20_000 },
    )
    .catch(async () => assert.deepEqual(await ids(), expected))
}

const searchIds = async (filters: unknown[] | { where: unknown }) => {
  const selection = Array.isArray(filters) ? { filters } : filters
  const res = await account.api('/api/v1/customers/search', { ...selection, limit: 1000 })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return (res.body.results as { id: string }[]).map((c) => c.id)
}

test('the console page loads only from this service, under a policy that allows nothing else', async () => {
  const res = await s.call('GET', '/console')
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8')
  const policy = res.headers.get('content-security-policy') ?? ''
  assert.match(policy, /default-src 'none'/)
  assert.match(policy, /connect-src 'self'/)
  assert.match(policy, /frame-ancestors 'none'/)
  const html: string = res.body
  assert.match(html, /<script src="\/console\/console\.js" defer><\/script>/)
  assert.match(html, /<link rel="stylesheet" href="\/console\/console\.css">/)
  assert.doesNotMatch(html, /(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i)
  const script = await s.call('GET', '/console/console.js')
  assert.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8')
  const style = await s.call('GET', '/console/console.css')
  assert.equal(style.headers.get('content-type'), 'text/css; charset=utf-8')
  for (const text of [script.body, style.body])
    assert.doesNotMatch(text, /https?:\/\/(?!www\.w3\.org\/)/)
})

test('sign-in refuses a wrong key, keeps the right one in session storage only, and signs out', async () => {
  const { page, problems } = await open()
  assert.deepEqual(await accessibility(page), [])
  await keyForms(page)
  await page.getByLabel('Service key').fill('sk_1_wrong')
  await page.getByRole('button', { name: 'Sign in with the key' }).click()
  await page
    .getByRole('alert')
    .getByText(/The key was refused/)
    .waitFor()
  // The failed sign-in's 401 is the browser's own console line, not the console's error.
  problems.length = 0
  await signIn(page)
  assert.equal(await page.evaluate(() => Object.values(sessionStorage).join()), account.token)
  assert.equal(await page.evaluate(() => localStorage.length), 0)
  await page.reload()
  await page.getByRole('navigation', { name: 'Views' }).waitFor()
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByRole('heading', { name: 'Sign in to the console' }).waitFor()
  assert.equal(await page.evaluate(() => sessionStorage.length), 0)
  assert.deepEqual(problems, [])
  await page.close()
})

test('the matrix plots every customer; hovering names one and a click opens its page', async () => {
  const { page, problems } = await open()
  await signIn(page)
  const canvas = await matrixReady(page)
  assert.equal(Number(await canvas.getAttribute('data-points')), CUSTOMERS.length)
  assert.deepEqual(await accessibility(page), [])

  const zeta = (await account.api('/api/v1/customer/zeta', undefined, 'GET')).body
  assert.deepEqual([zeta.engagementscore, zeta.fitscore], [100, 100])
  // Where the console puts engagement 100 and fit 100: the plot's top-right corner.
  const box = (await canvas.boundingBox())!
  const [size, margin] = [
    Number(await canvas.getAttribute('data-size')),
    Number(await canvas.getAttribute('data-margin')),
  ]
  const scale = box.width / size
  const [x, y] = [box.x + (size - margin) * scale, box.y + margin * scale]
  await page.mouse.move(x, y)
  const tip = page.locator('#matrix-tip')
  await tip.waitFor()
  assert.match((await tip.textContent())!, /Zeta Star\s*engagement 100 · fit 100 · churn risk \d+/)
  await page.mouse.click(x, y)
  await page.waitForURL(/#\/customer\/zeta$/)
  await page.getByRole('heading', { level: 1, name: 'Zeta Star' }).waitFor()
  assert.deepEqual(problems, [])
  await page.close()
})

test('the matrix by keyboard: arrows move from customer to customer, Enter opens one', async () => {
  const { page, problems } = await open()
  await signIn(page)
  const canvas = await matrixReady(page)
  await canvas.focus()
  const tip = page.locator('#matrix-tip')
  const engagement = async () => Number(/engagement (-?\d+)/.exec((await tip.textContent())!)![1])
  // The first arrow picks the first customer of the aggregate's sample order.
  const sample = await account.api('/api/v1/customers/aggregate', { matrix: 'points' })
  await page.keyboard.press('ArrowUp')
  assert.equal(await tip.locator('strong').textContent(), sample.body.points.items[0].name)
  const before = await engagement()
  await page.keyboard.press('ArrowUp')
  assert.ok((await engagement()) > before, (await tip.textContent())!)
  const name = (await tip.locator('strong').textContent())!
  await page.keyboard.press('Enter')
  await page.getByRole('heading', { level: 1, name }).waitFor()
  assert.deepEqual(problems, [])
  await page.close()
})

test('past 10,000 scored customers the matrix is the aggregate grid; at 10,000 it draws each', async () => {
  const big = await scoredAccount(s, 'Big')
  const uploads = []
  for (let from = 0; from <= 10_000; from += 1000) {
    const customers = Array.from({ length: Math.min(1000, 10_001 - from) }, (_, i) => ({
      external_id: `b${String(from + i).padStart(5, '0')}`,
      name: `Big ${from + i}`,
      attributes: { country: ['US', 'DE', 'FR'][i % 3], has_sso: i % 2 === 0 },
      metrics: [{ date: day(0), logins: (from + i) % 41 }],
    }))
    const res = await big.api('/api/v1/customers', { customers })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    uploads.push(res.body.upload_id as number)
  }
  for (const id of uploads) await waitForUpload(big.api, id, 120_000, true)
  await quiet(big.id)

  const { page, problems } = await open()
  const asked: unknown[] = []
  page.on('request', (req) => {
    if (req.url().endsWith('/api/v1/customers/aggregate'))
      asked.push(JSON.parse(req.postData()!).matrix)
  })
  await signIn(page, big.token)
  await toMatrix(page)
  let canvas = page.locator('#matrix[data-state="ready"][data-mode="grid"]')
  await canvas.waitFor()
  assert.equal(await canvas.getAttribute('data-scored'), '10001')
  assert.equal(await canvas.getAttribute('data-points'), '0')
  await page.getByText(/Aggregated: 10001 customers counted in a 10 × 10 grid/).waitFor()
  // The grid alone: no customer is sent one by one.
  assert.deepEqual(asked, ['grid'])
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'matrix-grid')

  // One customer fewer is 10,000 scored: every one of them drawn, from one request of points.
  asked.length = 0
  await page.getByRole('button', { name: 'Add filter' }).click()
  await page.getByLabel('Property').fill('name')
  await page.getByLabel('Operator').selectOption('NEQ')
  await page.getByLabel('Value').fill('Big 10000')
  await page.getByRole('button', { name: 'Apply' }).click()
  canvas = page.locator('#matrix[data-state="ready"][data-mode="points"]')
  await canvas.waitFor()
  assert.equal(await canvas.getAttribute('data-points'), '10000')
  assert.deepEqual(asked, ['grid', 'points'])
  await page.getByText(/10000 customers plotted\./).waitFor()

  // Hover over a customer the API places there names one with those scores; a click opens it.
  const sample = await big.api('/api/v1/customers/aggregate', {
    filters: [{ propertyName: 'name', operator: 'NEQ', value: 'Big 10000' }],
    matrix: 'points',
  })
  assert.equal(sample.body.points.sampled, false)
  const one = sample.body.points.items[0]
  await canvas.scrollIntoViewIfNeeded()
  const box = (await canvas.boundingBox())!
  const [size, margin] = [
    Number(await canvas.getAttribute('data-size')),
    Number(await canvas.getAttribute('data-margin')),
  ]
  const plot = size - 2 * margin
  const scale = box.width / size
  const x = box.x + (margin + ((one.fitscore + 100) / 200) * plot) * scale
  const y = box.y + (margin + ((100 - one.engagementscore) / 200) * plot) * scale
  await page.mouse.move(x, y)
  const tip = page.locator('#matrix-tip')
  await tip.waitFor()
  assert.match(
    (await tip.textContent())!,
    new RegExp(`engagement ${one.engagementscore} · fit ${one.fitscore}`),
  )
  const name = (await tip.locator('strong').textContent())!
  await page.mouse.click(x, y)
  await page.getByRole('heading', { level: 1, name }).waitFor()
  assert.deepEqual(problems, [])
  await page.close()
})

test('the matrix filter narrows the points to what the API finds', async () => {
  const { page, problems } = await open()
  await signIn(page)
  await matrixReady(page)
  await page.getByRole('button', { name: 'Add filter' }).click()
  await page.getByLabel('Property').fill('country')
  await page.getByLabel('Value').fill('DE')
  await page.getByRole('button', { name: 'Apply' }).click()
  const expected = await searchIds([{ propertyName: 'country', operator: 'EQ', value: 'DE' }])
  assert.equal(expected.length, 50)
  await page.locator(`#matrix[data-state="ready"][data-points="${expected.length}"]`).waitFor()
  assert.deepEqual(problems, [])
  await page.close()
})

test('the customers table: rows open the customer, filters narrow it as the API does, load more, CSV', async () => {
  const { page, problems } = await open()
  await signIn(page)
  await page.getByRole('link', { name: 'Customers' }).click()
  const rows = page.locator('tbody tr')
  await page.locator('#customers-count[data-count="100"]').waitFor()
  assert.equal(await rows.count(), 100)
  assert.deepEqual(await accessibility(page), [])

  await page.getByRole('button', { name: 'Load more' }).click()
  await page.locator(`#customers-count[data-count="${CUSTOMERS.length}"]`).waitFor()
  assert.equal(await page.getByRole('button', { name: 'Load more' }).count(), 0)
  const zetaRow = rows.filter({ hasText: 'Zeta Star' })
  assert.match((await zetaRow.textContent())!, /Owner.*Champion/)

  await page.getByRole('button', { name: 'Add filter' }).click()
  await page.getByLabel('Property').fill('engagementscore')
  await page.getByLabel('Operator').selectOption('GT')
  await page.getByLabel('Value').fill('50')
  await page.getByRole('button', { name: 'Apply' }).click()
  const expected = await searchIds([
    { propertyName: 'engagementscore', operator: 'GT', value: '50' },
  ])
  assert.ok(expected.length > 0 && expected.length < CUSTOMERS.length, String(expected.length))
  await page.locator(`#customers-count[data-count="${expected.length}"]`).waitFor()
  assert.deepEqual(await page.locator('tbody tr td:nth-child(2)').allTextContents(), expected)

  // Any of two filters, the second negated: the `where` tree the API is given answers the same.
  await page.getByRole('button', { name: 'Add filter' }).click()
  await page.locator('#filter-1-property').fill('country')
  await page.locator('#filter-1-value').fill('US')
  await page.getByLabel('Not').nth(1).check()
  await page.getByLabel('Match').selectOption('any')
  await page.getByRole('button', { name: 'Apply' }).click()
  const either = await searchIds({
    where: {
      or: [
        { propertyName: 'engagementscore', operator: 'GT', value: '50' },
        { not: { propertyName: 'country', operator: 'EQ', value: 'US' } },
      ],
    },
  })
  assert.ok(
    either.length > expected.length && either.length < CUSTOMERS.length,
    String(either.length),
  )
  await page.locator(`#customers-count[data-count="${Math.min(either.length, 100)}"]`).waitFor()
  assert.deepEqual(
    await page.locator('tbody tr td:nth-child(2)').allTextContents(),
    either.slice(0, 100),
  )
  assert.deepEqual(await accessibility(page), [])
  // Back to the one filter, for the export.
  await page.getByRole('button', { name: 'Remove filter 2' }).click()
  await page.getByLabel('Match').selectOption('all')
  await page.getByRole('button', { name: 'Apply' }).click()
  await page.locator(`#customers-count[data-count="${expected.length}"]`).waitFor()

  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Export CSV' }).click(),
  ])
  const csv = readFileSync((await download.path())!, 'utf8')
    .trimEnd()
    .split('\r\n')
  assert.equal(csv[0], 'Name,ID,Engagement,Fit,Churn risk,Upsell,Last seen,Owner,Tags')
  assert.deepEqual(
    csv.slice(1).map((line) => line.split(',')[1]),
    expected,
  )

  await page.getByRole('link', { name: 'Zeta Star' }).click()
  await page.getByRole('heading', { level: 1, name: 'Zeta Star' }).waitFor()
  assert.deepEqual(problems, [])
  await page.close()
})

test('a segment narrows the matrix and the table to the customers its member search finds', async () => {
  const created = await account.api('/api/v1/segments', {
    name: 'SSO or engaged',
    where: {
      or: [
        { propertyName: 'has_sso', operator: 'EQ', value: 'true' },
        { propertyName: 'engagementscore', operator: 'GTE', value: '0' },
      ],
    },
  })
  assert.equal(created.status, 201, JSON.stringify(created.body))
  const members = await account.api(`/api/v1/segments/${created.body.id}/search`, { limit: 1000 })
  assert.equal(members.status, 200, JSON.stringify(members.body))
  const ids = (members.body.results as { id: string }[]).map((c) => c.id)
  assert.ok(ids.length > 100 && ids.length < CUSTOMERS.length, String(ids.length))

  const { page, problems } = await open()
  await signIn(page)
  await matrixReady(page)
  await page.getByLabel('Segment').selectOption({ label: 'SSO or engaged' })
  await page.locator(`#matrix[data-state="ready"][data-points="${ids.length}"]`).waitFor()
  assert.deepEqual(await accessibility(page), [])

  await page.getByRole('link', { name: 'Customers' }).click()
  await page.locator('#customers-count[data-count="100"]').waitFor()
  await page.getByLabel('Segment').selectOption({ label: 'SSO or engaged' })
  await tableShows(page, ids.slice(0, 100))
  await page.getByRole('button', { name: 'Load more' }).click()
  await tableShows(page, ids)
  assert.deepEqual(problems, [])
  await page.close()
})

test('a click on a column header sorts the table as the API sorts, both ways, with load more', async () => {
  const sorted = async (direction: string) => {
    const res = await account.api('/api/v1/customers/search', {
      sort: [{ propertyName: 'engagementscore', direction }],
      limit: 1000,
    })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    return (res.body.results as { id: string }[]).map((c) => c.id)
  }
  const { page, problems } = await open()
  await signIn(page)
  await page.getByRole('link', { name: 'Customers' }).click()
  await page.locator('#customers-count[data-count="100"]').waitFor()
  const header = page.getByRole('columnheader', { name: 'Engagement' })

  await header.getByRole('button').click()
  await page.locator('th[aria-sort="ascending"]').waitFor()
  const ascending = await sorted('asc')
  await tableShows(page, ascending.slice(0, 100))
  await page.getByRole('button', { name: 'Load more' }).click()
  await tableShows(page, ascending)

  await header.getByRole('button').click()
  await page.locator('th[aria-sort="descending"]').waitFor()
  await tableShows(page, (await sorted('desc')).slice(0, 100))
  assert.deepEqual(await accessibility(page), [])
  assert.deepEqual(problems, [])
  await page.close()
})

test('a refused filter shows the API’s own words', async () => {
  const { page } = await open()
  await signIn(page)
  await page.getByRole('link', { name: 'Customers' }).click()
  await page.getByRole('button', { name: 'Add filter' }).click()
  await page.getByLabel('Property').fill('no_such_field')
  await page.getByLabel('Value').fill('1')
  await page.getByRole('button', { name: 'Apply' }).click()
  assert.match((await page.getByRole('alert').textContent())!, /no_such_field/)
  await page.close()
})

test('the customer page: scores, trend, drivers, contacts, properties, tags, owner; churn toggles', async () => {
  const { page, problems } = await open()
  await page.goto(`${s.base}/console#/customer/zeta`)
  await signIn(page)
  await page.getByRole('heading', { level: 1, name: 'Zeta Star' }).waitFor()
  const zeta = (await account.api('/api/v1/customer/zeta', undefined, 'GET')).body
  const scores = await page.locator('.scores').innerText()
  for (const [name, value] of [
    ['Engagement', zeta.engagementscore],
    ['Fit', zeta.fitscore],
    ['Churn risk', zeta.churn_risk],
    ['Upsell', zeta.upsell_score],
  ]) {
    // The score after its band's shape (● good, ◆ fair, ▲ poor, ○ not scored).
    assert.match(scores, new RegExp(`${name}\\s+[●◆▲○]\\s+${value}\\b`))
  }
  assert.ok(zeta.engagementscore_difference > 0, JSON.stringify(zeta))
  assert.match(scores, new RegExp(`\\+${zeta.engagementscore_difference} in 30 days`))
  const trend = page.getByRole('img', { name: /^Engagement by date/ })
  assert.equal(
    Number(await trend.getAttribute('data-points')),
    Object.keys(zeta.engagementscore_trend).length,
  )
  assert.ok(
    Object.keys(zeta.engagementscore_trend).length >= 2,
    JSON.stringify(zeta.engagementscore_trend),
  )
  const drivers = await page.locator('.columns').innerText()
  for (const d of [
    ...zeta.score_explanation.risk_drivers,
    ...zeta.score_explanation.health_drivers,
  ]) {
    // Each driver by the label the API sends (the codename when the property has none).
    assert.match(drivers, new RegExp(`${d.label} \\(${d.score}\\)`))
  }
  assert.ok(zeta.score_explanation.health_drivers.length > 0)
  // The contacts and the owner's name come in requests of their own, which may answer after the
  // customer's.
  await page.locator('table.contacts').waitFor()
  await page.getByText('Owner (owner@acme.test)').waitFor()
  const page_ = await page.locator('article').innerText()
  // The owner by the user's name, with the email the API answers.
  assert.match(page_, /owner Owner \(owner@acme\.test\)/)
  assert.match(page_, /country\s+US/)
  assert.match(page_, /Champion/)
  const contacts = (
    await account.api('/api/v1/contacts/search', {
      filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'zeta' }],
    })
  ).body.results
  assert.equal(contacts.length, 2)
  for (const contact of contacts) {
    const badge = `[●◆▲○]\\s+${contact.engagementscore}\\b`
    assert.match(page_, new RegExp(`${contact.name}\\s+${contact.id}\\s+${badge}`))
  }
  // The events tracked for it, newest first, as the API lists them.
  await s.admin('PUT', `/accounts/${account.id}/tracking`, { domains: ['acme.test'] })
  const tracked = await account.api('/api/tracker/track', {
    trackerKey: account.trackerKey,
    events: ['report.exported', 'login'].map((name, i) => ({
      name,
      timestamp: Date.now() - i * 1000,
      identification: { customer: 'zeta' },
    })),
  })
  assert.equal(tracked.status, 200, JSON.stringify(tracked.body))
  await page.reload()
  await page.locator('#events tr[data-event="login"]').waitFor()
  assert.deepEqual(
    await page.locator('#events tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.event)),
    ['report.exported', 'login'],
  )
  assert.deepEqual(await accessibility(page), [])

  // The churn toggle writes through the API, and back.
  const churn = page.locator('#churn-state')
  await page.getByRole('button', { name: 'Mark as churned' }).click()
  await churn.getByText(/^Churned/).waitFor()
  assert.equal((await account.api('/api/v1/customer/zeta', undefined, 'GET')).body.is_churned, true)
  await page.getByRole('button', { name: 'Mark as active' }).click()
  await churn.getByText(/^Active/).waitFor()
  assert.equal(
    (await account.api('/api/v1/customer/zeta', undefined, 'GET')).body.is_churned,
    false,
  )

  await page.goto(`${s.base}/console#/customer/nobody`)
  assert.match((await page.getByRole('alert').textContent())!, /not|no such/i)
  assert.deepEqual(
    problems.filter((p) => !/404/.test(p)),
    [],
  )
  await page.close()
})

test('the single-file bundle carries the console and serves the same bytes without node_modules', async () => {
  // npm test builds dist/service.mjs first, as test/build.test.ts assumes.
  assert.ok(existsSync('dist/service.mjs'), 'dist/service.mjs is missing: run npm run build')
  const fromSource = {
    script: Buffer.from(await (await fetch(`${s.base}/console/console.js`)).arrayBuffer()),
    style: Buffer.from(await (await fetch(`${s.base}/console/console.css`)).arrayBuffer()),
  }
  assert.ok(
    readFileSync('dist/service.mjs', 'utf8').includes('Sign in to the console'),
    'the bundle does not contain the console',
  )

  const served = await serveBundle({ SERVICE_ADMIN_TOKEN: 'bundle-admin' })
  try {
    const { base } = served
    for (const [path, bytes] of [
      ['/console/console.js', fromSource.script],
      ['/console/console.css', fromSource.style],
    ] as const) {
      const res = await fetch(base + path)
      assert.equal(res.status, 200)
      assert.ok(
        Buffer.from(await res.arrayBuffer()).equals(bytes),
        `the bundle serves another ${path}: rebuild`,
      )
    }
    const admin = { authorization: 'Bearer bundle-admin', 'content-type': 'application/json' }
    const created = await fetch(`${base}/admin/v1/accounts`, {
      method: 'POST',
      headers: admin,
      body: '{"name":"B"}',
    })
    const { id } = await created.json()
    const key = await fetch(`${base}/admin/v1/accounts/${id}/keys`, {
      method: 'POST',
      headers: admin,
      body: '{}',
    })
    const { page, problems } = await open(base)
    await signIn(page, (await key.json()).token)
    const canvas = await matrixReady(page)
    assert.equal(await canvas.getAttribute('data-points'), '0')
    assert.deepEqual(problems, [])
    await page.close()
  } finally {
    await served.stop()
  }
})

test('the operator signs in with the admin token, sees every account and chooses one', async () => {
  const { page, problems } = await open()
  await keyForms(page)
  await page.getByLabel('Admin token').fill('wrong-token')
  await page.getByRole('button', { name: 'Enter as operator' }).click()
  await page
    .getByRole('alert')
    .getByText(/The admin token was refused/)
    .waitFor()
  problems.length = 0
  await signInAsOperator(page)
  // The list loads after the navigation shows: read it once its last row is there.
  const all = (await s.sql`select id from accounts order by id`).map((r) => String(r.id))
  await page
    .locator('#accounts tbody tr')
    .nth(all.length - 1)
    .waitFor()
  const listed = await page.locator('#accounts tbody tr td:first-child').allTextContents()
  assert.deepEqual(listed, all)
  assert.equal(await page.evaluate(() => Object.values(sessionStorage).join()), ADMIN_TOKEN)
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'accounts')
  // Without a chosen account the other views send the operator back to the list.
  await page.getByRole('link', { name: 'Settings' }).click()
  await page.getByText('Choose an account first').waitFor()
  await page.getByRole('link', { name: 'Accounts' }).first().click()
  await page.getByRole('button', { name: `Choose Acme (${account.id})` }).click()
  // The header names the chosen account.
  await page.locator('#chosen-account').getByText(`Acme (account ${account.id})`).waitFor()
  assert.equal(
    await page.evaluate(() => sessionStorage.getItem('console.account')),
    String(account.id),
  )
  // Signing in with a key forgets the admin token.
  await page.getByRole('button', { name: 'Sign out' }).click()
  assert.equal(await page.evaluate(() => sessionStorage.length), 0)
  await signIn(page)
  assert.equal(await page.evaluate(() => Object.values(sessionStorage).join()), account.token)
  assert.equal(await page.getByRole('link', { name: 'Settings' }).count(), 0)
  assert.deepEqual(problems, [])
  await page.close()
})

test('an upload appears in the uploads view, followed until processed, with its counts and warnings', async () => {
  const ops = await scoredAccount(s, 'Ops')
  const { page, problems } = await open()
  await signInAsOperator(page, ops.id)
  await page.getByRole('link', { name: 'Uploads' }).click()
  await page.locator('#uploads-state').getByText('0 uploads').waitFor()
  const sent = await ops.api('/api/v1/customers', {
    customers: [
      {
        external_id: 'u1',
        name: 'One',
        owner_email: 'nobody@ops.test',
        attributes: { country: 'US', mystery: 1 },
      },
      { external_id: 'u2', name: 'Two', metrics: [{ date: day(0), logins: 4 }] },
    ],
  })
  assert.equal(sent.status, 200, JSON.stringify(sent.body))
  const id = sent.body.upload_id
  await page.getByRole('button', { name: 'Refresh uploads' }).click()
  const row = page.locator(`tr[data-upload="${id}"][data-status="processed"]`)
  await row.waitFor({ timeout: 60_000 })
  const upload = (await ops.api(`/api/v1/uploads/${id}`, undefined, 'GET')).body
  assert.deepEqual([upload.created, upload.dropped_keys, upload.warnings.length], [2, 1, 1])
  const cells = await row.locator('td').allTextContents()
  const count = (n: number | null) => (n === null ? '–' : String(n))
  assert.deepEqual(cells.slice(0, 8), [
    String(id),
    'customers',
    'processed',
    '2',
    ...[upload.created, upload.updated, upload.ignored].map(count),
    // The count, then the keys named (in a closed details).
    '1mystery ×1',
  ])
  await row.locator('details summary').first().click()
  await row.locator('details summary').nth(1).click()
  assert.match((await row.innerText())!, /mystery ×1/)
  assert.match((await row.innerText())!, /u1: No user has the email nobody@ops\.test/)
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'uploads')
  await page.close()

  // A service key lists its own account's uploads (GET /api/v1/uploads).
  const keyed = await open()
  await signIn(keyed.page, ops.token)
  await keyed.page.getByRole('link', { name: 'Uploads' }).click()
  await keyed.page.locator(`tr[data-upload="${id}"][data-status="processed"]`).waitFor()
  const listed = (await ops.api('/api/v1/uploads', undefined, 'GET')).body.map((u: any) =>
    String(u.upload_id),
  )
  assert.deepEqual(
    await keyed.page
      .locator('#uploads tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.dataset.upload)),
    listed,
  )
  assert.deepEqual(await accessibility(keyed.page), [])
  assert.deepEqual([...problems, ...keyed.problems], [])
  await keyed.page.close()
})

test('webhooks: subscribe with the secret shown once, a delivery in the log, redelivered, then removed', async () => {
  const receiver = await startReceiver(() => ({ status: 200, body: 'thanks, got it' }))
  const hooked = await scoredAccount(s, 'Hooked')
  const { page, problems } = await open()
  try {
    await signInAsOperator(page, hooked.id)
    await page.getByRole('link', { name: 'Webhooks' }).click()
    await page.getByText('No subscriptions yet.').waitFor()
    await page.getByLabel('Receiver URL').fill(receiver.url)
    await page.getByLabel('Name (optional)').fill('CRM')
    // customer.created is chosen at first; contact.created is added.
    assert.equal(await page.getByRole('checkbox', { name: 'customer.created' }).isChecked(), true)
    await page.getByRole('checkbox', { name: 'contact.created' }).check()
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click()
    assert.match((await page.locator('#webhook-secret').textContent())!, /^whsec_/)
    const [hook] = (await s.admin('GET', `/accounts/${hooked.id}/webhooks`)).body
    assert.deepEqual([hook.url, hook.name, hook.active], [receiver.url, 'CRM', true])
    assert.deepEqual(hook.events.sort(), ['contact.created', 'customer.created'])
    await page.getByRole('button', { name: 'I have kept it' }).click()
    assert.equal(await page.locator('#webhook-secret').count(), 0)

    await uploadAndWait(hooked.api, 'customers', [{ external_id: 'h1', name: 'Hooked One' }])
    await receiver.waitFor(1)
    const deliveries = () => s.admin('GET', `/accounts/${hooked.id}/webhooks/${hook.id}/deliveries`)
    await eventually(async () => (await deliveries()).body[0]?.status === 'delivered', 'delivered')
    await page.getByRole('button', { name: `Deliveries of webhook ${hook.id}` }).click()
    const [delivery] = (await deliveries()).body
    const row = page.locator(`tr[data-delivery="${delivery.id}"]`)
    await row.and(page.locator('[data-status="delivered"][data-attempts="1"]')).waitFor()
    const attempt = delivery.attempts[0]
    assert.match(
      await row.innerText(),
      new RegExp(`${delivery.message_id}[\\s\\S]*200 in ${attempt.duration_ms} ms`),
    )
    // The start of the receiver's answer, as the delivery log keeps it.
    assert.equal(attempt.response_excerpt, 'thanks, got it')
    assert.match(await row.locator('q.excerpt').innerText(), /thanks, got it/)
    assert.deepEqual(await accessibility(page), [])
    await screenshot(page, 'webhooks')

    await page.getByRole('button', { name: `Redeliver ${delivery.id}` }).click()
    await receiver.waitFor(2)
    assert.equal(
      receiver.requests[1].headers['webhook-id'],
      receiver.requests[0].headers['webhook-id'],
    )
    await eventually(
      async () => (await deliveries()).body[0].attempts.length === 2,
      'second attempt recorded',
    )
    await page.getByRole('button', { name: 'Refresh deliveries' }).click()
    await row.and(page.locator('[data-status="delivered"][data-attempts="2"]')).waitFor()

    // Disabled, its deliveries wait; enabled again, the held one goes out.
    await page.getByRole('button', { name: `Disable webhook ${hook.id}` }).click()
    await page.locator(`[data-webhook="${hook.id}"]`).getByText('disabled').waitFor()
    assert.equal((await s.admin('GET', `/accounts/${hooked.id}/webhooks`)).body[0].active, false)
    await uploadAndWait(hooked.api, 'customers', [{ external_id: 'h2', name: 'Held' }])
    await eventually(
      async () => (await deliveries()).body.length === 2,
      'the held delivery recorded',
    )
    assert.equal((await deliveries()).body[0].status, 'pending')
    await page.getByRole('button', { name: `Enable webhook ${hook.id}` }).click()
    await page.locator(`[data-webhook="${hook.id}"]`).getByText('enabled').waitFor()
    await receiver.waitFor(3)
    assert.deepEqual(
      receiver.requests[2].json.data.customers.map((c: { external_id: string }) => c.external_id),
      ['h2'],
    )

    await page.getByRole('button', { name: `Remove webhook ${hook.id}` }).click()
    await page.getByText('No subscriptions yet.').waitFor()
    assert.deepEqual((await s.admin('GET', `/accounts/${hooked.id}/webhooks`)).body, [])
    assert.deepEqual(problems, [])
  } finally {
    await page.close()
    await receiver.close()
  }
})

test('settings: a key created and revoked, a property defined, tracking domains saved', async () => {
  const set = await scoredAccount(s, 'Settings')
  const { page, problems } = await open()
  await signInAsOperator(page, set.id)
  await page.getByRole('link', { name: 'Settings' }).click()
  await page.locator('#keys tbody tr').first().waitFor()

  await page.getByLabel('Key name (optional)').fill('from the console')
  await page.getByLabel('upload').check()
  await page.getByRole('button', { name: 'Create key' }).click()
  const token = (await page.locator('#new-key').textContent())!
  const key = (await s.admin('GET', `/accounts/${set.id}/keys`)).body.find(
    (k: { name: string | null }) => k.name === 'from the console',
  )
  assert.deepEqual(key.scopes.sort(), ['search', 'upload'])
  const search = (secret: string) =>
    s.call('POST', '/api/v1/customers/search', { limit: 1 }, { 'service-key': secret })
  assert.equal((await search(token)).status, 200)
  await page.getByRole('button', { name: `Revoke key ${key.id}` }).click()
  await page.locator(`tr[data-key="${key.id}"][data-revoked="yes"]`).waitFor()
  assert.equal((await search(token)).status, 403)

  await page.getByLabel('Codename').fill('region')
  await page.getByLabel('Type').selectOption('string')
  await page.getByRole('button', { name: 'Define property' }).click()
  await page.locator('#properties td', { hasText: /^region$/ }).waitFor()
  const defined = (await s.admin('GET', `/accounts/${set.id}/properties`)).body.find(
    (p: { codename: string }) => p.codename === 'region',
  )
  assert.deepEqual(
    [defined.entity, defined.kind, defined.type],
    ['customer', 'attribute', 'string'],
  )

  await page.getByLabel('Tracking domains, one a line').fill('Example.com\nshop.example.com')
  await page.getByRole('button', { name: 'Save domains' }).click()
  await page.getByText('Saved: 2 domains.').waitFor()
  assert.deepEqual((await s.admin('GET', `/accounts/${set.id}`)).body.tracking_domains, [
    'example.com',
    'shop.example.com',
  ])
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'settings')
  assert.deepEqual(problems, [])
  await page.close()
})

test('the operator’s settings list the backups, and one started there is made by the worker and listed', async () => {
  // One made before, as the schedule makes them.
  const first = await runBackup(s.app, { origin: 'schedule' })
  const { page, problems } = await open()
  await signInAsOperator(page, account.id)
  await page.getByRole('link', { name: 'Settings' }).click()
  const rows = page.locator('#backups tbody tr')
  await rows.first().waitFor()
  assert.deepEqual(
    await rows
      .first()
      .locator('td')
      .allTextContents()
      .then((cells) => cells.slice(0, 2)),
    [first.file, fileSize(first.bytes)],
  )
  await page.getByRole('button', { name: 'Start a backup' }).click()
  await page.getByText('Backup started').waitFor()
  await page.waitForFunction(
    () => document.querySelectorAll('#backups tbody tr').length === 2,
    null,
    {
      timeout: 60_000,
    },
  )
  const listed = (await s.admin('GET', '/backups')).body.backups.map(
    (b: { file: string }) => b.file,
  )
  assert.deepEqual(await rows.locator('td:first-child').allTextContents(), listed)
  assert.equal(listed[1], first.file)
  assert.deepEqual(problems, [])
  await page.close()
})

test('the scoring model as a form: the preview gives what the scoring job then stores', async () => {
  const scored = await scoredAccount(s, 'Model')
  await uploadAndWait(
    scored.api,
    'customers',
    [
      {
        external_id: 'm1',
        name: 'Model One',
        attributes: { country: 'DE', has_sso: false },
        metrics: [
          { date: day(40), logins: 30 },
          { date: day(5), logins: 12 },
        ],
      },
    ],
    { scored: true },
  )
  const before = (await scored.api('/api/v1/customer/m1', undefined, 'GET')).body

  const { page, problems } = await open()
  await signInAsOperator(page, scored.id)
  await page.getByRole('link', { name: 'Settings' }).click()
  // The stored model fills the form: each rule's share of its section's weights.
  await page.locator('#rule-engagement-0-good').waitFor()
  assert.equal(await page.locator('#rule-engagement-0-good').inputValue(), '40')
  assert.deepEqual(await page.locator('[data-section="fit"] .share').allTextContents(), [
    '50%',
    '50%',
  ])
  await page.locator('#rule-engagement-0-good').fill('20')
  await page.locator('#rule-fit-0-weight').fill('150')
  assert.deepEqual(await page.locator('[data-section="fit"] .share').allTextContents(), [
    '75%',
    '25%',
  ])
  await page.locator('#rule-fit-0-values').fill('US=100, DE=80')
  // A weight of 0 is not a model: preview and save wait for a valid one.
  await page.locator('#rule-fit-1-weight').fill('0')
  await page.getByText('Every weight must be a number above 0.').waitFor()
  assert.equal(await page.getByRole('button', { name: 'Save model' }).isDisabled(), true)
  await page.locator('#rule-fit-1-weight').fill('50')

  await page.getByLabel('Customer to preview (external id)').fill('m1')
  await page.getByRole('button', { name: 'Preview', exact: true }).click()
  const previewed = async (score: string) => {
    const cells = await page.locator(`#preview tr[data-score="${score}"] td`).allTextContents()
    return cells.map((c) => (c === '–' ? null : /^-?\d+$/.test(c) ? Number(c) : c))
  }
  await page.locator('#preview').waitFor()
  const scores = [
    'engagementscore',
    'engagementscore_difference',
    'fitscore',
    'churn_risk',
    'upsell_score',
  ]
  const preview: Record<string, unknown> = {}
  for (const score of scores) {
    const [now, next] = await previewed(score)
    assert.equal(now, before[score], score)
    preview[score] = next
  }
  // Nothing is written by a preview.
  assert.deepEqual((await scored.api('/api/v1/customer/m1', undefined, 'GET')).body, before)
  // logins 12 of good 20; fit (150 × 80 + 50 × −100) / 200 for DE without SSO.
  assert.deepEqual([preview.engagementscore, preview.fitscore], [20, 35])
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'scoring-model')

  await page.getByRole('button', { name: 'Save model' }).click()
  await page.getByText(/^Saved: the account is being scored again/).waitFor()
  const model = (await s.admin('GET', `/accounts/${scored.id}/scoring`)).body
  assert.deepEqual(model.customer.engagement, [
    { codename: 'logins', weight: 100, bad: 0, good: 20 },
  ])
  assert.deepEqual(model.customer.fit[0], {
    codename: 'country',
    weight: 150,
    values: { US: 100, DE: 80 },
    default: -100,
  })
  await quiet(scored.id)
  const after = (await scored.api('/api/v1/customer/m1', undefined, 'GET')).body
  for (const score of scores) assert.equal(after[score], preview[score], score)

  // A customer that does not exist: the service's own words.
  await page.getByLabel('Customer to preview (external id)').fill('nobody')
  await page.getByRole('button', { name: 'Preview', exact: true }).click()
  await page
    .getByRole('alert')
    .getByText(/Customer nobody does not exist/)
    .waitFor()
  assert.deepEqual(
    problems.filter((p) => !/404/.test(p)),
    [],
  )
  await page.close()
})

test('the table shows the columns chosen, and CSV exports exactly those of the rows loaded', async () => {
  const { page, problems } = await open()
  await signIn(page)
  await page.getByRole('link', { name: 'Customers' }).click()
  await page.locator('#customers-count[data-count="100"]').waitFor()
  await page.getByRole('checkbox', { name: 'Owner' }).uncheck()
  await page.getByRole('checkbox', { name: 'Tags' }).uncheck()
  await page.getByRole('checkbox', { name: 'Upsell' }).uncheck()
  assert.deepEqual(await page.locator('thead th').allTextContents(), [
    'Name',
    'ID',
    'Engagement',
    'Fit',
    'Churn risk',
    'Last seen',
  ])
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Export CSV' }).click(),
  ])
  const csv = readFileSync((await download.path())!, 'utf8')
  const loaded = (await account.api('/api/v1/customers/search', { limit: 100 })).body.results
  const cell = (v: unknown) => (v === null ? '' : String(v))
  const expected = [
    'Name,ID,Engagement,Fit,Churn risk,Last seen',
    ...loaded.map((c: Record<string, unknown>) =>
      [c.name, c.id, c.engagementscore, c.fitscore, c.churn_risk, c.last_seen].map(cell).join(','),
    ),
  ]
  assert.equal(csv, `${expected.join('\r\n')}\r\n`)
  assert.deepEqual(await accessibility(page), [])
  await screenshot(page, 'customers')
  assert.deepEqual(problems, [])
  await page.close()
})
