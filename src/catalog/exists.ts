import { refuse } from '../errors.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'

// A unique key of the catalog taken already: 409, naming what exists.
export const alreadyExists = (what: string) => (err: unknown) => {
  if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION)
    refuse(409, `${what} already exists in this account.`)
  throw err
}
