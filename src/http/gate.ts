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
