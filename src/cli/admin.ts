import { routes } from '../api/routes.ts'
import type { App } from '../context.ts'
import { Refusal } from '../errors.ts'
import { refusalReply } from '../http/problem.ts'
import { invoke } from '../http/router.ts'
import { OPERATOR, type Req, type Route } from '../route.ts'

// Audience is a property of a row: the admin operations are the rows that take the admin token.
const adminRoutes = routes.filter((r) => r.auth === 'admin')

// An admin operation run directly: the same validation and handler as over HTTP, with path
// parameters and query parameters from flags and the JSON body as text.
export const invokeAdmin = async (
  route: Route,
  params: Record<string, string>,
  body: string,
  app: App,
) => {
  const req: Req = {
    id: 'cli',
    method: route.method,
    url: 'http://cli/',
    headers: {},
    body: Buffer.from(body),
    params,
    query: { ...params },
    actor: OPERATOR,
  }
  try {
    return { ok: true, body: (await invoke(route, req, app)).body }
  } catch (err) {
    if (!(err instanceof Refusal)) throw err
    return { ok: false, body: refusalReply(err).body }
  }
}

const paramsOf = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1])

export const adminUsage = () =>
  [
    'service admin <operation> ' +
      [...new Set(adminRoutes.flatMap((r) => paramsOf(r.path)))]
        .map((p) => `[--${p} VALUE]`)
        .join(' ') +
      ' [--<query parameter> VALUE] [JSON body]',
    '(--id is the account id)',
    '',
    'Runs the admin API operations directly against the database. Operations:',
    ...adminRoutes.map(
      (r) =>
        `  ${r.name!.padEnd(18)} ${r.method.padEnd(6)} ${r.path.replace(/:(\w+)/g, '{$1}')}  ${r.summary}`,
    ),
    '',
    'Example: service admin create-account \'{"name":"Acme"}\'',
  ].join('\n')

// The CLI calls the very handlers the HTTP admin API uses, so validation and answers are the same.
export const runAdmin = async (app: App, args: string[]): Promise<number> => {
  const [name, ...rest] = args
  const route = adminRoutes.find((r) => r.name === name)
  if (!route) {
    process.stderr.write((name ? `Unknown operation '${name}'.\n\n` : '') + adminUsage() + '\n')
    return 2
  }
  const params: Record<string, string> = {}
  let body = ''
  for (let i = 0; i < rest.length; i++) {
    const flag = /^--(\w+)$/.exec(rest[i])
    if (flag) params[flag[1]] = rest[++i] ?? ''
    else body = rest[i]
  }
  const missing = paramsOf(route.path).filter((p) => !params[p])
  if (missing.length) {
    process.stderr.write(`Missing ${missing.map((p) => `--${p}`).join(', ')}.\n`)
    return 2
  }
  const reply = await invokeAdmin(route, params, body, app)
  ;(reply.ok ? process.stdout : process.stderr).write(
    reply.body === undefined ? '' : JSON.stringify(reply.body, null, 2) + '\n',
  )
  return reply.ok ? 0 : 1
}
