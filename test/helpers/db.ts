import { randomBytes } from 'node:crypto'
import postgres from 'postgres'

// A new empty database in the run's cluster (see test/run.ts).
export const freshDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) throw new Error('TEST_DATABASE_URL is not set: run the tests with `npm test`.')
  const name = `t_${randomBytes(6).toString('hex')}`
  const admin = postgres(base, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      const a = postgres(base, { max: 1, onnotice: () => {} })
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.end()
    },
  }
}
