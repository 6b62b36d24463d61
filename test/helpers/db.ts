import { createDatabase } from './cluster.ts'

// A new empty database in the run's cluster (see test/run.ts).
export const freshDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) throw new Error('TEST_DATABASE_URL is not set: run the tests with `npm test`.')
  return createDatabase(base, 't')
}
