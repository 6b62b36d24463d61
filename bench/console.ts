// The console's first render of the score matrix, measured in the browser (Debian's Chromium
// through playwright-core) from the navigation to the matrix drawn: the page, its script, the
// sign-in check and the aggregate requests. With 10,000 scored customers that is every point (the
// grid, which says how many are scored, then the points); with 100,000 the aggregate grid alone.
// Baseline, in the same run: the same aggregate requests fetched by Node, the API's share of that
// time. Customers are seeded with COPY (bench/scoring.ts) and scored in one batch. A third account
// of 10,000 is seeded after the others' VACUUM ANALYZE, as right after an account's first upload
// (no statistics of its own). The home view ("This week", GET /api/v1/insights/week) is measured
// at 100,000 from the navigation to its chart drawn, against the same report fetched by Node. The
// assets' gzipped size closes the run.
import { gzipSync } from 'node:zlib'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { launchBrowser } from '../test/helpers/browser.ts'
import { median, type BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const RUNS = 5

// Each size: the matrix it draws, the aggregate requests the console makes for it, and the bar.
const SIZES = [
  {
    customers: 10_000,
    mode: 'points',
    points: 10_000,
    matrix: ['grid', 'points'],
    target: '< 1 s (issue 23)',
  },
  {
    customers: 100_000,
    mode: 'grid',
    points: 0,
    matrix: ['grid'],
    target: '< 1.5 s (issue 23)',
    home: true,
  },
  {
    customers: 10_000,
    mode: 'points',
    points: 10_000,
    matrix: ['grid', 'points'],
    target: '< 1 s (issue 34)',
    fresh: true,
  },
]

// The median of RUNS renders (seconds from the navigation, as the page measures them) and of RUNS
// fetches of the same requests by Node (the baseline), interleaved after one warm-up of each.
const timed = async (render: () => Promise<number>, fetched: () => Promise<void>) => {
  await render()
  await fetched()
  const rendered: number[] = []
  const baselines: number[] = []
  for (let run = 0; run < RUNS; run++) {
    rendered.push(await render())
    const started = performance.now()
    await fetched()
    baselines.push((performance.now() - started) / 1000)
  }
  return [median(rendered), median(baselines)]
}

const scoredAccount = async (sql: Sql, customers: number, name: string) => {
  const accountId = await seed(sql, customers, name)
  await sql`insert into scoring_models (account_id, model)
    values (${accountId}, ${sql.json(model(40))})`
  await scoreRecords(sql, { account_id: accountId, entity: 'customer' })
  return accountId
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url)
  await migrate(sql, url)
  const server = await startServer(url)
  const browser = await launchBrowser()
  // The home view: navigation to its 12-week chart drawn and nothing left loading.
  const home = async (customers: number, token: string) => {
    const render = async () => {
      const page = await browser.context.newPage()
      try {
        await page.addInitScript((key) => sessionStorage.setItem('console.service-key', key), token)
        await page.goto(`${server.base}/console#/week`, { waitUntil: 'commit' })
        await page.waitForFunction(
          () =>
            document.querySelector('.state-error') ||
            (document.querySelector('.weeks-chart canvas') &&
              !document.querySelector('.state-loading')),
          undefined,
          { polling: 'raf', timeout: 120_000 },
        )
        const refused = await page.locator('.state-error').allTextContents()
        if (refused.length) throw new Error(`the home view failed: ${refused.join(' ')}`)
        return (await page.evaluate(() => performance.now())) / 1000
      } finally {
        await page.close()
      }
    }
    const fetched = async () => {
      const res = await fetch(`${server.base}/api/v1/insights/week?days=7`, {
        headers: { 'service-key': token },
      })
      if (!res.ok) throw new Error(`week: ${res.status} ${await res.text()}`)
      await res.json()
    }
    const [value, baseline] = await timed(render, fetched)
    ctx.report({
      bench: 'console',
      metric: `home view of ${customers} customers: navigation to the report drawn`,
      value,
      unit: 's',
      baseline,
      ratio: value / baseline,
      target: '< 1 s (issue 34)',
    })
  }
  try {
    const accounts = []
    for (const [i, size] of SIZES.entries()) {
      if (size.fresh) continue
      accounts[i] = await scoredAccount(sql, size.customers, `Console${size.customers}`)
    }
    await sql`vacuum analyze`
    for (const [i, size] of SIZES.entries()) {
      if (size.fresh)
        accounts[i] = await scoredAccount(sql, size.customers, `Fresh${size.customers}`)
    }
    for (const [i, size] of SIZES.entries()) {
      const { token } = await server.admin('POST', `/accounts/${accounts[i]}/keys`, {
        scopes: ['search'],
      })
      const fetched = async () => {
        for (const matrix of size.matrix) {
          const res = await fetch(`${server.base}/api/v1/customers/aggregate`, {
            method: 'POST',
            headers: { 'service-key': token, 'content-type': 'application/json' },
            body: JSON.stringify(
              matrix === 'points' ? { matrix, points: size.points } : { matrix },
            ),
          })
          if (!res.ok) throw new Error(`aggregate: ${res.status} ${await res.text()}`)
          await res.json()
        }
      }
      const render = async () => {
        const page = await browser.context.newPage()
        try {
          // The key is put in the tab's session storage before the page's script runs,
          // as after a sign-in.
          await page.addInitScript(
            (key) => sessionStorage.setItem('console.service-key', key),
            token,
          )
          await page.goto(`${server.base}/console#/matrix`, { waitUntil: 'commit' })
          await page.waitForFunction(
            ({ mode, points }) =>
              document.querySelector(
                `#matrix[data-state="ready"][data-mode="${mode}"][data-points="${points}"]`,
              ),
            size,
            { polling: 'raf', timeout: 60_000 },
          )
          // performance.now() counts from the navigation's start.
          return (await page.evaluate(() => performance.now())) / 1000
        } finally {
          await page.close()
        }
      }
      const [value, baseline] = await timed(render, fetched)
      const drawn = size.mode === 'points' ? `${size.points} points` : 'the aggregate grid'
      const fresh = size.fresh ? ' right after its first upload' : ''
      ctx.report({
        bench: 'console',
        metric: `matrix of ${size.customers} customers${fresh}: navigation to ${drawn} drawn`,
        value,
        unit: 's',
        baseline,
        ratio: value / baseline,
        target: size.target,
      })
      ctx.report({
        bench: 'console',
        metric: `the same aggregate requests (${size.matrix.join(', ')}) fetched by Node`,
        value: baseline,
        unit: 's',
      })
      if (size.home) await home(size.customers, token)
    }
    // The bytes the service sends, as a browser gets them on a first visit.
    let gzipped = 0
    for (const file of ['console.js', 'console.css']) {
      gzipped += gzipSync(await (await fetch(`${server.base}/console/${file}`)).arrayBuffer(), {
        level: 9,
      }).length
    }
    ctx.report({
      bench: 'console',
      metric: 'assets (script and stylesheet), gzipped',
      value: gzipped / 1024,
      unit: 'KB',
      target: '< 250 KB',
    })
  } finally {
    await browser.close()
    await server.stop()
    await sql.end()
  }
}
