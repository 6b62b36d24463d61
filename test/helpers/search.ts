import assert from 'node:assert/strict'
import { uploadAndWait } from './fixtures.ts'
import type { TestService } from './service.ts'

type Account = Awaited<ReturnType<TestService['account']>>

export const dayAgo = (n: number) =>
  new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10)

// Uploads through the API and waits until the records are processed and scored, so that stored
// scores set afterwards with SQL are not overwritten by the scoring job.
export const upload = (account: Account, kind: 'customers' | 'contacts', items: unknown[]) =>
  uploadAndWait(account.api, kind, items, { scored: true })

export const search = (account: Account, entity: 'customers' | 'contacts', body?: unknown) =>
  account.api(`/api/v1/${entity}/search`, body)

// Every page in turn, failing on anything but 200.
export const allPages = async (
  account: Account,
  entity: 'customers' | 'contacts',
  body: Record<string, unknown>,
) => {
  const pages: any[] = []
  for (let after: number | undefined; ; ) {
    const res = await search(account, entity, { ...body, ...(after !== undefined && { after }) })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    pages.push(res.body)
    if (!res.body.paging) return pages
    after = res.body.paging.next.after
  }
}

export const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))
