// A throwaway Citus cluster for the test run's Citus pass and the Citus-only tests: a coordinator
// and workers on loopback, each a PostgreSQL 15 with Citus preloaded (../shared/citus/README.md).
// A test database lives on every node; it is copied from a template database that already holds the
// extension and the node list, which takes a fraction of the time `citus_add_node` takes.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { alive, startEmbedded } from '../../src/db/embedded.ts'
import { startThrowawayCluster } from './cluster.ts'

export const CITUS_HOME = '/usr/lib/postgresql/15'
const TEMPLATE = 'citus_template'

// Durability off as test/run.ts's SETTINGS; few shards, so that distributing the schema in each
// test's database stays quick (both workers still hold shards of every table).
const SETTINGS = [
  ...[
    '-c',
    'max_connections=400',
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
  ],
  ...[
    '-c',
    'shared_preload_libraries=citus',
    '-c',
    'wal_level=logical',
    '-c',
    'max_prepared_transactions=400',
  ],
  ...['-c', 'citus.node_conninfo=sslmode=disable', '-c', 'citus.shard_count=4'],
]

// The build in ../shared/citus links have_createdb_privilege, which PostgreSQL 15 exports
// from 15.20 on: an older server refuses to load it ("undefined symbol"), so the pass is
// skipped, saying why.
export const CITUS_MIN_MINOR = 20
export const serverMinor = () => {
  const version = execFileSync(`${CITUS_HOME}/bin/postgres`, ['--version'], { encoding: 'utf8' })
  return Number(/PostgreSQL\) 15\.(\d+)/.exec(version)?.[1] ?? 0)
}

// Why the Citus pass cannot run on this machine, or undefined when it can.
export const citusMissing = () => {
  if (!existsSync(`${CITUS_HOME}/bin/postgres`)) return `no PostgreSQL in ${CITUS_HOME}`
  if (!existsSync(`${CITUS_HOME}/lib/citus.so`))
    return `no Citus in ${CITUS_HOME}/lib (../shared/citus/install.sh installs it, as root)`
  const minor = serverMinor()
  if (minor < CITUS_MIN_MINOR)
    return (
      `PostgreSQL 15.${minor} cannot load this Citus build, which needs 15.${CITUS_MIN_MINOR} or later ` +
      '(apt-get install postgresql-15 upgrades it)'
    )
  return undefined
}

interface Node {
  port: number
  // A URL of the node's `postgres` database, with the password every node of the cluster shares.
  url: string
  dataDir: string
}

const urlOf = (base: string, password: string, database: string) => {
  const url = new URL(base)
  url.password = password
  url.pathname = `/${database}`
  return url.toString()
}

const run = async (url: string, ...statements: string[]) => {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const results = []
    for (const s of statements) results.push(await sql.unsafe(s))
    return results
  } finally {
    await sql.end()
  }
}

const dataDirOf = async (url: string) =>
  (await run(url, 'show data_directory'))[0][0].data_directory as string

// Every node needs the password of the others: a shard move's subscription on the target node
// reaches the source with the target's own pg_dist_authinfo (`citus_use_authinfo`), which
// `citus_add_node` does not copy there.
const authinfo = (password: string) =>
  `insert into pg_dist_authinfo (nodeid, rolename, authinfo) values (0, 'postgres', 'password=${password}')`

// Starts one node; it shares the cluster's password, so that nodes reach each other
// (pg_dist_authinfo).
const startNode = async (password: string, settings: string[]) => {
  const pg = await startThrowawayCluster('service-citus-', settings, CITUS_HOME)
  const port = Number(new URL(pg.url).port)
  await run(pg.url, `alter role postgres password '${password}'`)
  const url = urlOf(pg.url, password, 'postgres')
  await run(url, 'create extension if not exists citus')
  return { node: { port, url, dataDir: await dataDirOf(url) }, stop: pg.stop }
}

// Connections to a database are refused while it is a template, so the Citus maintenance daemon
// leaves it; on a worker Citus refuses ALTER DATABASE unless its propagation is off.
const freeze = (node: Node) =>
  run(
    node.url,
    'set citus.enable_ddl_propagation = off',
    `alter database ${TEMPLATE} with is_template true allow_connections false`,
    `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${TEMPLATE}'`,
  )

// The names of the nodes the test processes reach (TEST_CITUS_NODES): the coordinator first.
export const clusterFromEnv = (): Node[] | undefined => {
  const text = process.env.TEST_CITUS_NODES
  return text ? (JSON.parse(text) as Node[]) : undefined
}

// `crashSafe`: commits are flushed before they are acknowledged (synchronous_commit on), for tests
// that kill a node; a killed server loses nothing it acknowledged, as fsync matters only when the
// machine itself fails. `settings` (-c pairs) come last on each node's command line, so they
// override the others (the bench turns durability back on).
export const startCitusCluster = async (
  workerCount = 2,
  { crashSafe = false, settings: extra = [] as string[] } = {},
) => {
  const password = randomBytes(18).toString('hex')
  const settings = [
    ...(crashSafe ? [...SETTINGS, '-c', 'synchronous_commit=on'] : SETTINGS),
    ...extra,
  ]
  const started = await Promise.all(
    Array.from({ length: workerCount + 1 }, () => startNode(password, settings)),
  )
  const nodes = started.map((s) => s.node)
  const stops = started.map((s) => s.stop)
  const [coordinator, ...workers] = nodes
  for (const w of workers)
    await run(urlOf(w.url, password, 'postgres'), `create database ${TEMPLATE}`)
  await run(coordinator.url, `create database ${TEMPLATE}`)
  for (const w of workers)
    await run(urlOf(w.url, password, TEMPLATE), 'create extension citus', authinfo(password))
  await run(
    urlOf(coordinator.url, password, TEMPLATE),
    'create extension citus',
    authinfo(password),
    `select citus_set_coordinator_host('127.0.0.1', ${coordinator.port})`,
    ...workers.map((w) => `select citus_add_node('127.0.0.1', ${w.port})`),
  )
  for (const n of nodes) await freeze(n)

  // A node killed by a test (SIGKILL of its postmaster) starts again on its folder and port, once
  // the backends it left have noticed and gone (until then its shared memory is in use).
  const kill = async (node: Node) => {
    const pid = Number(readFileSync(`${node.dataDir}/postmaster.pid`, 'utf8').split('\n')[0])
    process.kill(pid, 'SIGKILL')
    while (alive(pid)) await sleep(20)
  }
  const restart = async (node: Node) => {
    for (let i = 0; ; i++) {
      try {
        const pg = await startEmbedded(node.dataDir, node.port, settings, CITUS_HOME)
        stops.push(pg.stop)
        return
      } catch (err) {
        if (i === 100) throw err
        await sleep(200)
      }
    }
  }

  // A new worker for the cluster and the given database (the template predates it): its own copy of
  // the database with the extension, then known to the coordinator there. The copy's metadata
  // still names the template as the distributed database (pg_dist_object holds its oid), which
  // `citus_add_node` would sync to the new node ("database citus_template does not exist"): it
  // is pointed at the copy first.
  const addWorker = async (database: string) => {
    const { node, stop } = await startNode(password, settings)
    stops.push(stop)
    await run(node.url, `create database ${database}`)
    await run(urlOf(node.url, password, database), 'create extension citus', authinfo(password))
    await run(
      urlOf(coordinator.url, password, database),
      `update pg_dist_object set objid = (select oid from pg_database where datname = current_database())
        where classid = 'pg_database'::regclass`,
      `select citus_add_node('127.0.0.1', ${node.port})`,
    )
    return node
  }

  return {
    nodes,
    coordinator,
    addWorker,
    workers,
    // The environment that lets test processes create databases in this cluster.
    env: { TEST_DATABASE_URL: coordinator.url, TEST_CITUS_NODES: JSON.stringify(nodes) },
    createDatabase: (prefix: string) => createCitusDatabase(nodes, prefix),
    kill,
    restart,
    // A restarted node's server stops before the first one's folder is removed.
    stop: async () => {
      for (const stop of stops.slice(nodes.length).reverse()) await stop().catch(() => {})
      await Promise.all(stops.slice(0, nodes.length).map((stop) => stop().catch(() => {})))
    },
  }
}

// A database on every node, copied from the template: the extension is in place and the
// coordinator's copy knows the workers.
export const createCitusDatabase = async (nodes: Node[], prefix: string) => {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  const each = (statement: string) =>
    Promise.all(nodes.map((n) => run(n.url, 'set citus.enable_ddl_propagation = off', statement)))
  await each(`create database ${name} template ${TEMPLATE}`)
  const url = new URL(nodes[0].url)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => void (await each(`drop database if exists ${name} with (force)`)),
  }
}
