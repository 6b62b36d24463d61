import { createContext } from 'preact'
import { useContext } from 'preact/hooks'

// What the signed-in person's role holds (GET /auth/v1/me's `grants`), for views to leave out the
// buttons it does not cover. null for a key or the admin token: the console shows what the view has
// and the service answers 403 to what the credential may not do. Either way the API decides.
export const Grants = createContext<readonly string[] | null>(null)

// The service's rule (src/route.ts, allows): what is held covers the need.
export const useAllows = (need: string) => {
  const held = useContext(Grants)
  return held === null || held.includes(need)
}
