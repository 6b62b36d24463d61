import type { Config } from '../config.ts'
import { startEmbedded } from '../db/embedded.ts'
import type { Log } from '../log.ts'

export interface Database {
  url: string
  stop: () => Promise<void>
  // The embedded cluster's data folder and password file; none for a DATABASE_URL.
  dataDir?: string
  passwordFile?: string
}

// DATABASE_URL when given; otherwise the embedded PostgreSQL with its data under ./.data/.
export const resolveDatabase = async (config: Config, log: Log): Promise<Database> => {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {} }
  return startEmbedded(config.dataDir, config.embeddedPort, [], undefined, log)
}
