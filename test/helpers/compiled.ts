import { connect } from '../../src/db/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { freshDatabase, storeScores } from './db.ts'

// A migrated database holding a few records of accounts 7 and 8, the accounts the compiler tests
// compile for: the tests run what the search compiler builds and assert rows and plans, not
// its text. Users 3 (Ann@x.io) and 4 (bob@x.io), tags 8 (red) and 9 (blue), as the tests'
// lookups name them.
const CUSTOMERS: {
  external_id: string
  name: string
  owner_user_id?: number
  is_churned?: boolean
  attributes: Record<string, string | number | boolean>
  metrics?: Record<string, number>
}[] = [
  {
    external_id: 'c1',
    name: 'Ann Co',
    owner_user_id: 3,
    attributes: { plan: 'pro', seats: 3, sso: true },
  },
  {
    external_id: 'c2',
    name: 'Bob Co',
    owner_user_id: 4,
    attributes: { plan: 'basic', seats: 1, renewal_date: '2026-01-05' },
    metrics: { logins: 2.5 },
  },
  {
    external_id: 'c3',
    name: 'Cid Co',
    is_churned: true,
    attributes: { plan: 'pro', seats: 1, sso: true },
    metrics: { logins: 1 },
  },
  {
    external_id: 'c4',
    name: 'Dee Co',
    attributes: { sso: false, renewal_date: '2026-02-01' },
    metrics: { logins: 2 },
  },
  {
    external_id: 'c5',
    name: 'Eve Co',
    owner_user_id: 3,
    attributes: { plan: 'pro', seats: 5, sso: false },
  },
  { external_id: 'c6', name: 'Fay Co', attributes: { plan: 'basic', seats: 2, sso: true } },
]
const TAGS: Record<string, number[]> = { c1: [8], c2: [9], c3: [8, 9] }
const ENGAGEMENT: Record<string, number | null> = { c1: 10, c2: 5, c4: 3, c5: null }
const CONTACTS = [
  { external_id: 'p1', customer: 'c1', name: 'Pat', attributes: { role: 'admin' } },
  { external_id: 'p2', customer: 'c2', name: 'Sam', attributes: { role: 'user' } },
  { external_id: 'p3', customer: 'c3', name: 'Lee', attributes: {} },
]

export const searchDatabase = async () => {
  const db = await freshDatabase()
  const sql = connect(db.url, { max: 2 })
  await migrate(sql, db.url)
  for (const id of [7, 8]) {
    await sql`insert into accounts (id, name, tracker_key) overriding system value
      values (${id}, ${`Account ${id}`}, ${`CS-TEST${id}`})`
  }
  await sql`insert into users (account_id, id, email) overriding system value
    values (7, 3, 'Ann@x.io'), (7, 4, 'bob@x.io')`
  await sql`insert into tags (account_id, id, title) overriding system value
    values (7, 8, 'red'), (7, 9, 'blue')`
  for (const c of CUSTOMERS) {
    const [row] = await sql`insert into customers
      (account_id, external_id, name, owner_user_id, is_churned, attributes, metrics)
      values (7, ${c.external_id}, ${c.name}, ${c.owner_user_id ?? null}, ${c.is_churned ?? false},
        ${sql.json(c.attributes)}, ${sql.json(c.metrics ?? {})})
      returning service_id`
    for (const tag of TAGS[c.external_id] ?? []) {
      await sql`insert into customer_tags (account_id, customer_id, tag_id, external_id)
        values (7, ${row.service_id}, ${tag}, ${c.external_id})`
    }
  }
  const scored = Object.entries(ENGAGEMENT).map(([external_id, engagementscore]) => ({
    external_id,
    engagementscore,
  }))
  await storeScores(sql, 'customers', 7, scored)
  // Account 8 shares external ids with account 7: a query that forgets the account finds them.
  const [other] = await sql`insert into customers (account_id, external_id, name, attributes)
    values (8, 'c1', 'Other', ${sql.json({ plan: 'pro' })}) returning service_id`
  await sql`insert into contacts (account_id, external_id, customer_id, name)
    values (8, 'p1', ${other.service_id}, 'Other contact')`
  for (const p of CONTACTS) {
    await sql`insert into contacts (account_id, external_id, customer_id, name, attributes)
      select 7, ${p.external_id}, service_id, ${p.name}, ${sql.json(p.attributes)}
      from customers where account_id = 7 and external_id = ${p.customer}`
  }
  await sql`analyze`

  type Query = { text: string; params: unknown[] }
  const rows = (query: Query) => sql.unsafe(query.text, query.params as string[])
  const plan = async (query: Query) => {
    const [row] = await sql.unsafe(`explain (format json) ${query.text}`, query.params as string[])
    return row['QUERY PLAN'][0].Plan as PlanNode
  }
  return {
    sql,
    rows,
    ids: async (query: Query) => (await rows(query)).map((r) => r.id as string),
    plan,
    serviceId: async (table: 'customers' | 'contacts', externalId: string, accountId = 7) =>
      (
        await sql`select service_id from ${sql(table)} where account_id = ${accountId}
          and external_id = ${externalId}`
      )[0].service_id as number,
    stop: async () => {
      await sql.end()
      await db.drop()
    },
  }
}

export interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  Plans?: PlanNode[]
  [key: string]: unknown
}

// On Citus a query is a Custom Scan whose tasks carry the plans their shards ran ("Remote Plan", an
// EXPLAIN's output); their relations and indexes are the shards', named after their own with a
// numeric suffix.
const remotePlans = (node: PlanNode): PlanNode[] => {
  const job = (
    node['Distributed Query'] as { Job?: { Tasks?: { 'Remote Plan'?: unknown }[] } } | undefined
  )?.Job
  const plans = (job?.Tasks ?? []).flatMap((task) => [task['Remote Plan']].flat(3)) as {
    Plan?: PlanNode
  }[]
  return plans.flatMap((p) => (p?.Plan ? [p.Plan] : []))
}

// Every node of the plan with the chain of node types above it, through Citus's tasks as well.
export const planNodes = (
  node: PlanNode,
  above: string[] = [],
  onShard = false,
): { node: PlanNode; above: string[] }[] => {
  const [shard, index] = [node['Relation Name'], node['Index Name']]
  const own = onShard
    ? {
        ...node,
        ...(shard && { 'Relation Name': shard.replace(/_\d+$/, '') }),
        ...(index && { 'Index Name': index.replace(/_\d+$/, '') }),
      }
    : node
  const below = [...above, node['Node Type']]
  return [
    { node: own, above },
    ...(node.Plans ?? []).flatMap((child) => planNodes(child, below, onShard)),
    ...remotePlans(node).flatMap((child) => planNodes(child, below, true)),
  ]
}
