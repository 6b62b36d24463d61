import * as v from 'valibot'
import { ScoringModelSchema } from '../scoring/rules/model.ts'
import { anyAccount, createAccount } from '../accounts/accounts.ts'
import { createKey } from '../accounts/keys.ts'
import { defineProperty } from '../catalog/properties.ts'
import { putScoringModel } from '../scoring/store.ts'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Sql } from '../db/client.ts'
import type { Log } from '../log.ts'

// On an empty embedded database: an account ready to take uploads, and a curl line to try it. The
// key goes to the terminal when there is one, and never into the log stream, which is often
// collected and kept: without a terminal it is written to a file only this user can read, and the
// log names the file.
export const createDemoIfEmpty = async (sql: Sql, port: number, dataDir: string, log: Log) => {
  if (await anyAccount(sql)) return
  const account = await createAccount(sql, { name: 'Demo', source_of_truth: 'API' })
  const key = await createKey(sql, account.id, { scopes: ['search', 'upload', 'track'] })
  await defineProperty(sql, account.id, {
    entity: 'customer',
    kind: 'metric',
    codename: 'logins',
    type: 'number',
  })
  const model = {
    customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] },
  }
  await putScoringModel(sql, account.id, v.parse(ScoringModelSchema, model))
  const base = `http://localhost:${port}`
  const text =
    [
      '',
      `Demo account ${account.id} created. API key (shown once): ${key.token}`,
      'Try:',
      `  curl -s ${base}/api/v1/customers -H 'service-key: ${key.token}' -H 'content-type: application/json' \\`,
      `    -d '{"customers":[{"external_id":"acme","name":"Acme","metrics":[{"date":"2026-11-01","logins":30}]}]}'`,
      `  curl -s ${base}/api/v1/customers/search -H 'service-key: ${key.token}'` +
        ` -H 'content-type: application/json' -d '{}'`,
      '',
    ].join('\n') + '\n'
  const terminal = [process.stdout, process.stderr].find((stream) => stream.isTTY)
  if (terminal) return void terminal.write(text)
  const file = join(dataDir, 'service-demo-key')
  writeFileSync(file, text, { mode: 0o600 })
  log('info', 'demo account created', { account: account.id, key_file: file })
}
