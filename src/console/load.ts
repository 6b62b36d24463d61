import { useEffect, useRef, useState } from 'preact/hooks'

// Data a view reads from the service: what it has, the service's refusal if any, and a reload that
// views call after a write or on a timer. A late answer from an earlier load is dropped.
export const useData = <T>(load: () => Promise<T>, deps: unknown[]) => {
  const [data, setData] = useState<T | undefined>()
  const [error, setError] = useState('')
  const latest = useRef(0)
  const reload = async () => {
    const request = ++latest.current
    try {
      const value = await load()
      if (request !== latest.current) return
      setData(value)
      setError('')
    } catch (err) {
      if (request === latest.current) setError((err as Error).message)
    }
  }
  useEffect(() => {
    setData(undefined)
    reload()
  }, deps)
  return { data, error, reload }
}

// Runs a write, showing the service's refusal instead of throwing; resolves to its answer or
// undefined. `describe`: the words a refusal is shown in (the sign-in forms name what was refused).
export const useAction = (describe = (err: unknown) => (err as Error).message) => {
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const run = async <T>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true)
    setError('')
    try {
      return await action()
    } catch (err) {
      setError(describe(err))
      return undefined
    } finally {
      setBusy(false)
    }
  }
  return { error, busy, run }
}

export const value = (e: Event) => (e.currentTarget as HTMLInputElement).value
