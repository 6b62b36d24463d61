import type { Entity } from '../catalog.ts'

// Where each entity lives: its records, dated snapshots, scores and tag links, and the column that
// names the record in the tables beside its own. Uploads say `customers` / `contacts` (`kind`).
export const TABLES = {
  customer: {
    kind: 'customers',
    records: 'customers',
    snapshots: 'customer_snapshots',
    scores: 'customer_scores',
    tags: 'customer_tags',
    fk: 'customer_id',
  },
  contact: {
    kind: 'contacts',
    records: 'contacts',
    snapshots: 'contact_snapshots',
    scores: 'contact_scores',
    tags: 'contact_tags',
    fk: 'contact_id',
  },
} as const

export type UploadKind = (typeof TABLES)[Entity]['kind']
export const entityOf = (kind: UploadKind): Entity => (kind === 'customers' ? 'customer' : 'contact')
