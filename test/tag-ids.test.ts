// The tag ids on each record (sql/021) that search's tag filters test: they follow every change of
// the record's tag links, whatever makes it, and the filters answer as the links do.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { search, upload } from './helpers/search.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account
const TITLES = ['Red', 'Green', 'Blue']

const setTags = async (
  account: Account,
  entity: 'customers' | 'contacts',
  externalId: string,
  titles: string[],
) => {
  const res = await s.admin('PUT', `/accounts/${account.id}/${entity}/${externalId}/tags`, {
    titles,
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
}

// Each record's tag titles as its tag_ids name them, and as its links do, both sorted.
const tagsOf = async (account: Account, records: 'customers' | 'contacts') => {
  const [links, key] =
    records === 'customers' ? ['customer_tags', 'customer_id'] : ['contact_tags', 'contact_id']
  const rows = await s.sql`
    select r.external_id,
      array(select t.title from tags t where t.id = any(r.tag_ids) order by t.title) as ids,
      array(select t.title from ${s.sql(links)} x join tags t on t.id = x.tag_id
        where x.account_id = r.account_id and x.${s.sql(key)} = r.service_id
          order by t.title) as links,
      r.tag_ids = array(select unnest(r.tag_ids) order by 1) as sorted
    from ${s.sql(records)} r where r.account_id = ${account.id} order by r.external_id`
  for (const row of rows) {
    assert.deepEqual(row.ids, row.links, `${records} ${row.external_id}: tag_ids and links differ`)
    assert.ok(row.sorted, `${records} ${row.external_id}: tag_ids not sorted`)
  }
  return Object.fromEntries(rows.map((r) => [r.external_id, r.ids.join(',')]))
}

before(async () => {
  s = await startTestService()
  acme = await scoredAccount(s)
  other = await scoredAccount(s, 'Other')
  for (const account of [acme, other]) {
    for (const title of TITLES) await s.admin('POST', `/accounts/${account.id}/tags`, { title })
    await upload(
      account,
      'customers',
      ['c-1', 'c-2', 'c-3', 'c-4'].map((external_id) => ({ external_id, name: external_id })),
    )
    await upload(account, 'contacts', [
      { customer_external_id: 'c-1', contact_external_id: 'k-1', contact_name: 'Ann' },
      { customer_external_id: 'c-2', contact_external_id: 'k-2', contact_name: 'Bob' },
    ])
  }
  await setTags(other, 'customers', 'c-1', ['Red', 'Green', 'Blue'])
  await setTags(other, 'contacts', 'k-1', ['Blue'])
})
after(() => s.stop())

describe('tag ids on the record', () => {
  test('follow the tagging API: added, replaced, removed, for customers and contacts', async () => {
    await setTags(acme, 'customers', 'c-1', ['red', 'Green'])
    await setTags(acme, 'customers', 'c-2', ['Blue'])
    await setTags(acme, 'contacts', 'k-1', ['Green', 'green'])
    assert.deepEqual(await tagsOf(acme, 'customers'), {
      'c-1': 'Green,Red',
      'c-2': 'Blue',
      'c-3': '',
      'c-4': '',
    })
    assert.deepEqual(await tagsOf(acme, 'contacts'), { 'k-1': 'Green', 'k-2': '' })
    await setTags(acme, 'customers', 'c-1', ['Blue', 'green'])
    await setTags(acme, 'customers', 'c-2', [])
    await setTags(acme, 'contacts', 'k-1', ['Red'])
    assert.deepEqual(await tagsOf(acme, 'customers'), {
      'c-1': 'Blue,Green',
      'c-2': '',
      'c-3': '',
      'c-4': '',
    })
    assert.deepEqual(await tagsOf(acme, 'contacts'), { 'k-1': 'Red', 'k-2': '' })
    // A refused replacement (an unknown title) changes nothing.
    const refused = await s.admin('PUT', `/accounts/${acme.id}/customers/c-1/tags`, {
      titles: ['Red', 'Nope'],
    })
    assert.equal(refused.status, 400)
    assert.equal((await tagsOf(acme, 'customers'))['c-1'], 'Blue,Green')
    // The other account's records keep theirs.
    assert.equal((await tagsOf(other, 'customers'))['c-1'], 'Blue,Green,Red')
    assert.equal((await tagsOf(other, 'contacts'))['k-1'], 'Blue')
  })

  test('concurrent replacements of one record leave the ids of the last one applied', async () => {
    const sets = [['Red'], ['Green', 'Blue'], ['Blue'], ['Red', 'Green', 'Blue'], [], ['Green']]
    await Promise.all(sets.map((titles) => setTags(acme, 'customers', 'c-3', titles)))
    // tagsOf fails when a record's ids and links differ.
    assert.ok(
      sets.map((t) => [...t].sort().join(',')).includes((await tagsOf(acme, 'customers'))['c-3']),
    )
  })

  test('follow links written directly, a renamed tag, a deleted tag and deleted records', async () => {
    // c-3 holds whichever replacement of the test before was applied last, which may name Red.
    await setTags(acme, 'customers', 'c-3', [])
    const [red] = await s.sql`select id from tags where account_id = ${acme.id} and title = 'Red'`
    await s.sql`
      insert into customer_tags (account_id, customer_id, tag_id, external_id)
      select account_id, service_id, ${red.id}, external_id from customers
      where account_id = ${acme.id} and external_id in ('c-2', 'c-4')`
    assert.equal((await tagsOf(acme, 'customers'))['c-4'], 'Red')
    // A rename keeps the id: the filters find the records under the new title.
    await s.sql`update tags set title = 'Crimson' where id = ${red.id}`
    const found = await search(acme, 'customers', {
      filters: [{ propertyName: 'tags', operator: 'EQ', value: 'crimson' }],
    })
    assert.deepEqual(
      found.body.results.map((r: { id: string }) => r.id),
      ['c-2', 'c-4'],
    )
    await s.sql`delete from tags where id = ${red.id}`
    const left = await tagsOf(acme, 'customers')
    assert.deepEqual([left['c-1'], left['c-2'], left['c-4']], ['Blue,Green', '', ''])
    assert.equal((await tagsOf(acme, 'contacts'))['k-1'], '')
    await s.admin('POST', `/accounts/${acme.id}/tags`, { title: 'Red' })
    await setTags(acme, 'contacts', 'k-2', ['Red'])
    assert.equal(
      (await acme.api('/api/v1/customer/c-2/contact/k-2', undefined, 'DELETE')).status,
      204,
    )
    assert.equal((await acme.api('/api/v1/customer/c-2', undefined, 'DELETE')).status, 204)
    assert.deepEqual(Object.keys(await tagsOf(acme, 'customers')), ['c-1', 'c-3', 'c-4'])
    assert.equal((await tagsOf(other, 'customers'))['c-1'], 'Blue,Green,Red')
  })
})

describe('tag filters', () => {
  // Every tag operator, alone and in trees, against the same condition evaluated on the links.
  test('answer as the links do', async () => {
    await setTags(acme, 'customers', 'c-1', ['Blue', 'Green'])
    await setTags(acme, 'customers', 'c-3', ['Green'])
    await setTags(acme, 'customers', 'c-4', ['Red', 'Blue'])
    const links = await s.sql`
      select r.external_id, array(select lower(t.title) from customer_tags x join tags t
        on t.id = x.tag_id
        where x.account_id = r.account_id and x.customer_id = r.service_id) as titles
      from customers r where r.account_id = ${acme.id} and not r.is_churned order by r.external_id`
    const has = (id: string, titles: string[]) =>
      links
        .find((l) => l.external_id === id)!
        .titles.some((t: string) => titles.includes(t.toLowerCase()))
    const all = links.map((l) => l.external_id as string)
    const expect = (test: (id: string) => boolean) => all.filter(test)
    const f = (operator: string, value?: string | string[]) =>
      Array.isArray(value)
        ? { propertyName: 'tags', operator, values: value }
        : { propertyName: 'tags', operator, ...(value !== undefined && { value }) }
    const cases: [unknown, string[]][] = [
      [{ filters: [f('EQ', 'green')] }, expect((id) => has(id, ['green']))],
      [{ filters: [f('NEQ', 'GREEN')] }, expect((id) => !has(id, ['green']))],
      [{ filters: [f('IN', ['blue', 'red', 'nope'])] }, expect((id) => has(id, ['blue', 'red']))],
      [{ filters: [f('NIN', ['blue', 'red'])] }, expect((id) => !has(id, ['blue', 'red']))],
      [{ filters: [f('NIN', ['nope'])] }, all],
      [{ filters: [f('IN', ['nope'])] }, []],
      [
        { filters: [f('KNOWN')] },
        expect((id) => links.find((l) => l.external_id === id)!.titles.length > 0),
      ],
      [
        { filters: [f('UNKNOWN')] },
        expect((id) => links.find((l) => l.external_id === id)!.titles.length === 0),
      ],
      [{ where: { not: f('EQ', 'blue') } }, expect((id) => !has(id, ['blue']))],
      [
        { where: { not: { or: [f('EQ', 'blue'), f('NEQ', 'green')] } } },
        expect((id) => !has(id, ['blue']) && has(id, ['green'])),
      ],
      [
        { where: { and: [f('IN', ['blue', 'green']), { not: f('IN', ['red']) }] } },
        expect((id) => has(id, ['blue', 'green']) && !has(id, ['red'])),
      ],
    ]
    for (const [body, expected] of cases) {
      const res = await search(acme, 'customers', body)
      assert.equal(res.status, 200, JSON.stringify(res.body))
      assert.deepEqual(
        res.body.results.map((r: { id: string }) => r.id),
        expected,
        JSON.stringify(body),
      )
    }
  })
})
