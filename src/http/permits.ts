// Bodies from this size on (an upload of some hundred records) are read into one buffer as they
// arrive (src/http/adapter.ts), then parsed, checked and handled one at a time per process
// (src/http/router.ts); smaller ones, most requests, pass straight through.
export const LARGE_BODY_BYTES = 64 * 1024

// At most `permits` runs of `work` at once; the rest wait in arrival order. Parsing and validating
// a large body allocates several times its size in short-lived objects, and uploads that arrive
// together would otherwise hold all of theirs at once: a few permits bound the process's memory by
// the permits, not by the clients, at no cost in throughput while the CPU is the limit anyway.
export const createPermits = (permits: number) => {
  let free = permits
  const waiting: (() => void)[] = []
  const release = () => {
    const next = waiting.shift()
    if (next) next()
    else free++
  }
  return async <T>(work: () => T | Promise<T>): Promise<T> => {
    if (free > 0) free--
    else await new Promise<void>((resolve) => waiting.push(resolve))
    try {
      return await work()
    } finally {
      release()
    }
  }
}

// At most `limit` runs at once per owner (an account); up to `waiting` more wait their turn, each
// at most `waitMs` (or until its client goes), and any more are refused: a client that sends more
// in parallel is told to come back, so that it holds no more than its share of the database, while
// two clients of one account that happen to search at the same moment are both served. Returns the
// release of the place taken (to call once or more), or undefined when none came.
type Release = () => void
interface Share {
  held: number
  queue: ((release: Release) => void)[]
}
export const createShares = (limit: number, waiting: number, waitMs: number) => {
  const owners = new Map<number, Share>()
  // A place given back goes to the first waiting, if any.
  const place = (owner: number, share: Share): Release => {
    let taken = true
    return () => {
      if (!taken) return
      taken = false
      const next = share.queue.shift()
      if (next) next(place(owner, share))
      else if (--share.held === 0) owners.delete(owner)
    }
  }
  return (
    owner: number,
    signal?: AbortSignal,
  ): Release | Promise<Release | undefined> | undefined => {
    const share = owners.get(owner) ?? owners.set(owner, { held: 0, queue: [] }).get(owner)!
    if (share.held < limit) {
      share.held++
      return place(owner, share)
    }
    if (share.queue.length >= waiting || signal?.aborted) return undefined
    return new Promise((resolve) => {
      const leave = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', leave)
        const at = share.queue.indexOf(handOver)
        if (at >= 0) share.queue.splice(at, 1)
        resolve(undefined)
      }
      const handOver = (release: Release) => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', leave)
        resolve(release)
      }
      const timer = setTimeout(leave, waitMs)
      signal?.addEventListener('abort', leave, { once: true })
      share.queue.push(handOver)
    })
  }
}
