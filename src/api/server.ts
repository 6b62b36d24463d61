import type { App } from '../context.ts'
import { createHttpServer, drain, listen } from '../http/adapter.ts'
import { buildRouter } from '../http/router.ts'
import { routes } from './routes.ts'

// The HTTP API of one process: the routing table behind the node:http adapter. The probes are
// answered even on connections past the caps.
export const startHttp = async (app: App) => {
  const probes = new Set(routes.filter((r) => r.probe).map((r) => r.path))
  const server = createHttpServer(buildRouter(routes, app), app.log, app.config, probes)
  const port = await listen(server, app.config.port, app.config.host)
  return { port, stop: () => drain(server) }
}
