// One JSON object per line on stderr, so that stdout carries only a command's answer; levels below
// LOG_LEVEL are dropped.
const levels = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }
export type Level = keyof typeof levels
export type Log = (
  level: Exclude<Level, 'silent'>,
  msg: string,
  fields?: Record<string, unknown>,
) => void

export const createLog =
  (min: Level): Log =>
  (level, msg, fields) => {
    if (levels[level] < levels[min]) return
    process.stderr.write(
      JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + '\n',
    )
  }
