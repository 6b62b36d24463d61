import { startEmbedded, type Embedded } from '../db/embedded.ts'
import type { Config } from '../config.ts'

// DATABASE_URL when given; otherwise the embedded PostgreSQL with its data under ./.data/.
export const resolveDatabase = async (config: Config): Promise<Embedded & { embedded: boolean }> => {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {}, embedded: false }
  const port = Number(process.env.EMBEDDED_PG_PORT) || 54329
  return { ...(await startEmbedded(process.env.SERVICE_DATA_DIR || '.data/pg', port)), embedded: true }
}
