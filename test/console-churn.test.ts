// The learned churn model in the console, in real Chromium against a real service: after a
// training, the customer page shows the probability and its drivers, and the operator's Settings
// shows the evaluation and queues a training with Train now, at a laptop's and a phone's width.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import type { Page } from 'playwright-core'
import { type Browser, launchBrowser } from './helpers/browser.ts'
import { CHURN_DEFS, generate } from './helpers/churn-data.ts'
import { uploadAndWait } from './helpers/fixtures.ts'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'

const TODAY = new Date().toISOString().slice(0, 10)
const WIDTHS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
]
let s: TestService
let browser: Browser
let account: Awaited<ReturnType<TestService['account']>>
let customerId = ''

const churnModel = async () => (await account.api('/api/v1/churn-model', undefined, 'GET')).body

// A trainable account: the churn data's properties, 400 customers with a linear signal, the
// churned ones marked in one statement (the API sets the label one customer at a time), trained.
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
  account = await s.account()
  for (const d of CHURN_DEFS)
    assert.equal(
      (await s.admin('POST', `/accounts/${account.id}/properties`, { entity: 'customer', ...d })).status,
      201,
    )
  const rules = { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] } }
  assert.equal((await s.admin('PUT', `/accounts/${account.id}/scoring`, rules)).status, 200)
  const customers = generate(400, 'linear', 5, TODAY)
  const items = customers.map((c) => ({
    external_id: `p${c.id}`,
    name: c.id,
    attributes: c.attributes,
    metrics: c.snapshots.map((x) => ({ date: x.date, ...x.values })),
  }))
  await uploadAndWait(account.api, 'customers', items, { scored: true })
  const churned = customers.filter((c) => c.churned)
  await s.sql`
    update customers c set is_churned = true, churned_date = u.d, churn_reason = 'manual'
    from unnest(${churned.map((c) => `p${c.id}`)}::text[], ${churned.map((c) => c.churnedDate!)}::date[]) u(id, d)
    where c.account_id = ${account.id} and c.external_id = u.id`
  customerId = `p${customers.find((c) => !c.churned)!.id}`
  assert.equal((await account.api('/api/v1/churn-model/train', {})).status, 202)
  const deadline = Date.now() + 120_000
  while ((await churnModel()).status !== 'ready') {
    if (Date.now() > deadline) throw new Error('the training did not end')
    await new Promise((r) => setTimeout(r, 300))
  }
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await s?.stop()
})

const open = async (size: { width: number; height: number }) => {
  const page = await browser.context.newPage()
  await page.setViewportSize(size)
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  await page.goto(`${s.base}/console`)
  await page.locator('details.with-key').evaluate((d) => {
    ;(d as HTMLDetailsElement).open = true
  })
  return { page, problems }
}
const wide = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)

for (const size of WIDTHS)
  test(`the customer page shows the churn probability and its drivers (${size.width} px)`, async () => {
    const { page, problems } = await open(size)
    await page.getByLabel('Service key').fill(account.token)
    await page.getByRole('button', { name: 'Sign in with the key' }).click()
    await page.getByRole('navigation', { name: 'Views' }).waitFor()
    await page.evaluate((id) => {
      location.hash = `#/customer/${encodeURIComponent(id)}`
    }, customerId)
    const said = await page.locator('#churn-probability').textContent()
    const read = (await account.api(`/api/v1/customer/${customerId}`, undefined, 'GET')).body
    assert.ok(read.churn_probability !== null)
    assert.match(said!, new RegExp(`${Math.round(read.churn_probability * 1000) / 10}%`))
    const shown = await page.locator('#churn-up li, #churn-down li').count()
    assert.equal(shown, read.churn_drivers.up.length + read.churn_drivers.down.length)
    assert.ok(shown > 0)
    const first = read.churn_drivers.up[0] ?? read.churn_drivers.down[0]
    assert.match(
      (await page.locator(`li[data-codename="${first.codename}"]`).first().textContent()) ?? '',
      new RegExp(first.label),
    )
    assert.equal(await wide(page), 0)
    assert.deepEqual(problems, [])
    await page.close()
  })

test('Settings shows the evaluation, and Train now queues a training that ends in a new one', async () => {
  for (const size of WIDTHS) {
    const { page, problems } = await open(size)
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN)
    await page.getByRole('button', { name: 'Enter as operator' }).click()
    await page.getByRole('button', { name: new RegExp(`^Choose .* \\(${account.id}\\)$`) }).click()
    await page.locator(`#chosen-account[data-account="${account.id}"]`).waitFor()
    await page.getByRole('link', { name: 'Settings' }).click()
    const model = await churnModel()
    const auc = page.locator('#churn-auc')
    await auc.waitFor()
    assert.match((await auc.textContent())!, new RegExp(`^${model.evaluation.auc.toFixed(3)} \\(95% interval`))
    assert.equal(await page.locator('svg.calibration circle').count(), model.evaluation.calibration.length)
    assert.ok((await page.locator('#churn-features li').count()) > 0)
    assert.equal(await wide(page), 0)
    if (size.width === 1280) {
      const before = model.trained_at
      await page.getByRole('button', { name: 'Train now' }).click()
      await page.locator('#churn-status', { hasText: 'Training queued' }).waitFor()
      await page.locator('#churn-status', { hasText: 'Ready' }).waitFor({ timeout: 60_000 })
      assert.notEqual((await churnModel()).trained_at, before)
    }
    assert.deepEqual(problems, [])
    await page.close()
  }
})
