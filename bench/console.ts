// The console's first render of the score matrix with 10,000 scored customers, measured in the
// browser (Debian's Chromium through playwright-core) from the navigation to all points drawn: the
// page, its script, the sign-in check and the ten search pages of 1000 that the public API's keyset
// paging needs, one after another. Baseline, in the same run: the same ten pages fetched by Node
// alone, the API's share of that time. 100,000 customers need the aggregate endpoint (another
// change): not measured here.
import { connect } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { launchBrowser } from '../test/helpers/browser.ts'
import type { BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const CUSTOMERS = 10_000
const RUNS = 5
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url)
  await migrate(sql, url)
  const server = await startServer(url)
  const browser = await launchBrowser()
  try {
    const accountId = await seed(sql, CUSTOMERS, 'Console')
    await sql`insert into scoring_models (account_id, model) values (${accountId}, ${sql.json(model(40))})`
    await scoreRecords(sql, { account_id: accountId, entity: 'customer' })
    await sql`vacuum analyze`
    const { token } = await server.admin('POST', `/accounts/${accountId}/keys`, { scopes: ['search'] })

    const pages = async () => {
      let after: number | undefined
      do {
        const res = await fetch(`${server.base}/api/v1/customers/search`, {
          method: 'POST',
          headers: { 'service-key': token, 'content-type': 'application/json' },
          body: JSON.stringify({ limit: 1000, after }),
        })
        after = ((await res.json()) as { paging?: { next: { after: number } } }).paging?.next.after
      } while (after !== undefined)
    }
    // The key is put in the tab's session storage before the page's script runs, as after a sign-in.
    await browser.context.addInitScript((key) => sessionStorage.setItem('console.service-key', key), token)
    const render = async () => {
      const page = await browser.context.newPage()
      try {
        await page.goto(`${server.base}/console#/matrix`, { waitUntil: 'commit' })
        await page.waitForFunction(
          (n) => document.querySelector(`#matrix[data-state="ready"][data-points="${n}"]`) !== null,
          CUSTOMERS,
          { polling: 'raf', timeout: 60_000 },
        )
        // performance.now() counts from the navigation's start.
        return (await page.evaluate(() => performance.now())) / 1000
      } finally {
        await page.close()
      }
    }
    await render()
    await pages()
    const rendered: number[] = []
    const fetched: number[] = []
    for (let i = 0; i < RUNS; i++) {
      rendered.push(await render())
      const started = performance.now()
      await pages()
      fetched.push((performance.now() - started) / 1000)
    }
    const [value, baseline] = [median(rendered), median(fetched)]
    ctx.report({
      bench: 'console',
      metric: `matrix of ${CUSTOMERS} customers: navigation to drawn`,
      value,
      unit: 's',
      baseline,
      ratio: value / baseline,
      target: '< 1 s (issue 23)',
    })
    ctx.report({
      bench: 'console',
      metric: `the same ${CUSTOMERS / 1000} search pages fetched by Node`,
      value: baseline,
      unit: 's',
    })
  } finally {
    await browser.close()
    await server.stop()
    await sql.end()
  }
}
