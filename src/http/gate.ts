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
