import { renderMetrics } from '../metrics.ts'
import { route } from '../route.ts'

// Open like /healthz: the series carry route patterns, task names and counts, never account data.
// On the admin pool: its counts read every account (on Citus, every shard).
// Keep the port internal (or filter /metrics at the proxy) where that matters.
export const metricsRoute = route({
  method: 'GET',
  path: '/metrics',
  auth: 'none',
  name: 'get-metrics',
  tag: 'operations',
  reply: { status: 200, media: 'text/plain; version=0.0.4' },
  summary: 'Prometheus metrics of this process and queue, upload and webhook counts',
  handler: async (_req, app) => {
    const { contentType, text } = await renderMetrics(app.admin, app.config.stuckUploadSeconds)
    return { status: 200, headers: { 'content-type': contentType }, body: text }
  },
})
