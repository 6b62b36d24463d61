// What a property definition is (the property catalog's shape), wherever it is read (uploads,
// scoring, search, CSV import). The definitions themselves are read and written by
// catalog/properties.ts.
export type Entity = 'customer' | 'contact'
export type PropertyKind = 'attribute' | 'metric'
export type PropertyType = 'string' | 'number' | 'boolean' | 'date'

export interface PropertyDef {
  codename: string
  kind: PropertyKind
  type: PropertyType
}

export type Catalog = ReadonlyMap<string, PropertyDef>
export const catalogOf = (defs: readonly PropertyDef[]): Catalog =>
  new Map(defs.map((d) => [d.codename, d]))

// Customer system attributes exist in every account.
export const SYSTEM_ATTRIBUTES: readonly { codename: string; type: PropertyType }[] = [
  { codename: 'crm_link', type: 'string' },
  { codename: 'contact_email', type: 'string' },
  { codename: 'renewal_date', type: 'date' },
]
