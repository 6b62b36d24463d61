// The learned churn model in the console, in real Chromium against a real service: after a
// training, the customer page shows the probability and its drivers, the matrix can colour its
// customers by it, and the operator's Settings shows the evaluation and queues a training with
// Train now, at a laptop's and a phone's width.
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
      (await s.admin('POST', `/accounts/${account.id}/properties`, { entity: 'customer', ...d }))
        .status,
      201,
    )
  // A fit too, so that the customers stand on the matrix.
  const rules = {
    customer: {
      engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
      fit: [{ codename: 'seats', weight: 100, bad: 1, good: 100 }],
    },
  }
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
    from unnest(${churned.map((c) => `p${c.id}`)}::text[],
      ${churned.map((c) => c.churnedDate!)}::date[]) u(id, d)
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

// The hue of a probability on the risk scale (green 0% to red 100%), as HSL's red, green and blue.
const hue = (risk: number) => Math.round(130 - 1.3 * risk)
const rgb = (h: number, s = 0.75, l = 0.33) => {
  const a = s * Math.min(l, 1 - l)
  const f = (n: number) => {
    const k = (n + h / 30) % 12
    return Math.round((l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))) * 255)
  }
  return [f(0), f(8), f(4)]
}

test('the matrix colours its customers by the churn probability once a model is trained', async () => {
  const { page, problems } = await open(WIDTHS[0])
  await page.getByLabel('Service key').fill(account.token)
  await page.getByRole('button', { name: 'Sign in with the key' }).click()
  await page.getByRole('navigation', { name: 'Views' }).waitFor()
  await page.evaluate(() => {
    location.hash = '#/matrix'
  })
  const canvas = page.locator('#matrix[data-state="ready"][data-mode="points"]')
  await canvas.waitFor()
  assert.equal(await canvas.getAttribute('data-colour'), 'risk')
  const { items } = (await account.api('/api/v1/customers/aggregate', { matrix: 'points' })).body
    .points
  assert.equal(Number(await canvas.getAttribute('data-points')), items.length)
  // Where the console draws a customer, in the canvas's units, as the canvas says them.
  const [size, margin] = [
    Number(await canvas.getAttribute('data-size')),
    Number(await canvas.getAttribute('data-margin')),
  ]
  const plot = size - 2 * margin
  type Item = {
    engagementscore: number
    fitscore: number
    churn_risk: number
    churn_probability: number
  }
  const at = (c: Item) => [
    margin + ((c.fitscore + 100) / 200) * plot,
    margin + ((100 - c.engagementscore) / 200) * plot,
  ]
  // A customer drawn alone, off the quadrants' lines, whose probability and risk differ
  // most in colour.
  const alone = items
    .filter((c: Item) => {
      const [x, y] = at(c)
      const apart = items.every((o: Item) => o === c || Math.hypot(at(o)[0] - x, at(o)[1] - y) > 14)
      const off = (v: number) =>
        Math.abs(v - size / 2) > 10 && v - margin > 10 && margin + plot - v > 10
      return apart && off(x) && off(y)
    })
    .sort(
      (a: Item, b: Item) =>
        Math.abs(b.churn_risk - 100 * b.churn_probability) -
        Math.abs(a.churn_risk - 100 * a.churn_probability),
    )[0] as Item
  assert.ok(
    alone && Math.abs(alone.churn_risk - 100 * alone.churn_probability) >= 15,
    JSON.stringify(alone),
  )
  const [x, y] = at(alone)
  const pixel = (dx: number) =>
    canvas.evaluate(
      (c, [px, py]) => {
        const el = c as HTMLCanvasElement
        const ratio = el.width / Number(el.dataset.size)
        return [
          ...el.getContext('2d')!.getImageData(Math.round(px * ratio), Math.round(py * ratio), 1, 1)
            .data,
        ]
      },
      [x + dx, y],
    )
  // The point is drawn at 80% over the plot, which its right side shows; the canvas is drawn just
  // after the view says what it shows, so for up to 2 s.
  const drawn = async (risk: number) => {
    const fill = rgb(hue(risk))
    for (const started = Date.now(); ; await new Promise((r) => setTimeout(r, 50))) {
      const [point, plotted] = [await pixel(0), await pixel(8)]
      const expected = plotted[3] === 255 ? fill.map((v, i) => 0.8 * v + 0.2 * plotted[i]) : fill
      if (expected.every((v, i) => Math.abs(v - point[i]) <= 4)) return
      assert.ok(Date.now() - started < 2000, `${point} drawn, ${expected} expected`)
    }
  }
  await drawn(alone.churn_risk)
  await page.getByLabel('Colour by').selectOption('probability')
  await page.locator('#matrix[data-state="ready"][data-colour="probability"]').waitFor()
  await drawn(100 * alone.churn_probability)
  await page.getByText(/coloured by churn probability/).waitFor()
  assert.match((await page.locator('.legend').textContent()) ?? '', /Churn probability 0%.*100%/)
  // Hover says the probability, as the customer page does.
  await canvas.scrollIntoViewIfNeeded()
  const box = (await canvas.boundingBox())!
  await page.mouse.move(box.x + (x * box.width) / size, box.y + (y * box.width) / size)
  const percent = `${Math.round(alone.churn_probability * 1000) / 10}%`
  await page.locator('#matrix-tip', { hasText: `churn probability ${percent}` }).waitFor()

  // Past 10,000 customers the grid's cells wear the mean probability of their customers, which the
  // aggregate computes as the points give it.
  const { grid } = (await account.api('/api/v1/customers/aggregate', { matrix: 'grid' })).body
  const cell = (score: number) => Math.min(Math.max(Math.floor((score + 100) / 20), 0), 9)
  const sums = new Map<string, number[]>()
  for (const c of items as Item[]) {
    const k = `${cell(c.engagementscore)},${cell(c.fitscore)}`
    sums.set(k, [(sums.get(k)?.[0] ?? 0) + c.churn_probability, (sums.get(k)?.[1] ?? 0) + 1])
  }
  grid.churn_probability.forEach((row: (number | null)[], i: number) =>
    row.forEach((p, j) => {
      const [sum, n] = sums.get(`${i},${j}`) ?? [0, 0]
      if (n === 0) assert.equal(p, null)
      else assert.ok(Math.abs(p! - sum / n) < 1e-9, `cell ${i},${j}`)
    }),
  )
  assert.deepEqual(problems, [])
  await page.close()

  // An account without a model has no choice to make.
  const untrained = await s.account()
  const other = await open(WIDTHS[0])
  await other.page.getByLabel('Service key').fill(untrained.token)
  await other.page.getByRole('button', { name: 'Sign in with the key' }).click()
  await other.page.getByRole('navigation', { name: 'Views' }).waitFor()
  await other.page.evaluate(() => {
    location.hash = '#/matrix'
  })
  await other.page.locator('#matrix[data-state="ready"]').waitFor()
  assert.equal(await other.page.locator('#matrix-colour').count(), 0)
  assert.equal(await other.page.locator('#matrix').getAttribute('data-colour'), 'risk')
  assert.deepEqual(other.problems, [])
  await other.page.close()
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
    assert.match(
      (await auc.textContent())!,
      new RegExp(`^${model.evaluation.auc.toFixed(3)} \\(95% interval`),
    )
    assert.equal(
      await page.locator('svg.calibration circle').count(),
      model.evaluation.calibration.length,
    )
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
