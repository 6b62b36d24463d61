// Bodies from this size on (an upload of some hundred records) are read into one buffer as they
// arrive (src/http/adapter.ts), then parsed, checked and handled one at a time per process
// (src/http/router.ts); smaller ones, most requests, pass straight through.
export const LARGE_BODY_BYTES = 64 * 1024

// At most `permits` runs of `work` at once; the rest wait in arrival order. Parsing and validating
// a large body allocates several times its size in short-lived objects, and uploads that arrive
// together would otherwise hold all of theirs at once: a few permits bound the process's memory by
// the permits, not by the clients, at no cost in throughput while the CPU is the limit anyway.
export const createGate = (permits: number) => {
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

// At most `limit` runs at once per owner (an account), refused rather than queued: a client that
// sends more in parallel is told to come back, so that it holds no more than its share of the
// database while it waits. Returns the release of the place taken (to call once or more), or
// undefined when the owner holds all its places.
export const createShares = (limit: number) => {
  const running = new Map<number, number>()
  return (owner: number): (() => void) | undefined => {
    const held = running.get(owner) ?? 0
    if (held >= limit) return undefined
    running.set(owner, held + 1)
    let taken = true
    return () => {
      if (!taken) return
      taken = false
      const left = running.get(owner)! - 1
      if (left) running.set(owner, left)
      else running.delete(owner)
    }
  }
}
