import { listUploads } from '../admin/uploads.ts'
import { UploadQuery } from './schemas.ts'
import { refuse } from '../errors.ts'
import { idParam } from '../route.ts'
import type { Handler, QueryOf } from '../route.ts'
import { receiveUpload } from '../uploads/receive.ts'

export const uploadCustomers: Handler = async (req, app) => ({
  status: 200,
  body: await receiveUpload(app, req.auth!.accountId, 'customers', (req.input as { customers: [] }).customers),
})

export const uploadContacts: Handler = async (req, app) => ({
  status: 200,
  body: await receiveUpload(app, req.auth!.accountId, 'contacts', (req.input as { contacts: [] }).contacts),
})

export const getUpload: Handler = async (req, app) => {
  const id = idParam(req, 'upload_id')
  const [upload] = await app.sql`
    select id as upload_id, kind, status, item_count as items, created, updated, ignored, dropped_keys,
      warnings, error, received_at, processed_at, scored_at
    from uploads where account_id = ${req.auth!.accountId} and id = ${id}`
  return upload ? { status: 200, body: upload } : refuse(404, `Upload ${id} does not exist.`)
}

// The key's own uploads, newest first: what the admin list shows, for the account of the key.
export const listOwnUploads: Handler = async (req, app) => ({
  status: 200,
  body: await listUploads(
    app.sql,
    req.auth!.accountId,
    req.queryInput as QueryOf<typeof UploadQuery>,
    app.config.stuckUploadSeconds,
  ),
})
