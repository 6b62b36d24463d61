import type { Entity } from '../property.ts'

// Where each entity lives: its records, dated snapshots, scores and tag links, and the column that
// names the record in the tables beside its own. An upload holds a collection, `customers` or
// `contacts` (the uploads table's column `kind`).
export const TABLES = {
  customer: {
    collection: 'customers',
    records: 'customers',
    snapshots: 'customer_snapshots',
    scores: 'customer_scores',
    tags: 'customer_tags',
    fk: 'customer_id',
  },
  contact: {
    collection: 'contacts',
    records: 'contacts',
    snapshots: 'contact_snapshots',
    scores: 'contact_scores',
    tags: 'contact_tags',
    fk: 'contact_id',
  },
} as const

export type Collection = (typeof TABLES)[Entity]['collection']
export const entityOf = (collection: Collection): Entity =>
  collection === 'customers' ? 'customer' : 'contact'
