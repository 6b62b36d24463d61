import type { Server } from 'node:http'
import type { Socket } from 'node:net'

// Connections past a cap that are still let in, each from another client: enough for liveness and
// readiness probes to be answered while the caps are reached.
export const RESERVED_CONNECTIONS = 16

// Whom a connection counts against: its remote address, or for IPv6 the address's /64, which one
// client commonly holds whole (a host picks any address in it). IPv4-mapped addresses stay IPv4.
export const clientOf = (address: string) => {
  if (!address.includes(':') || address.startsWith('::ffff:')) return address
  const [head, tail] = address.split('%')[0].split('::')
  const groups = (part: string | undefined) =>
    part ? part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])) : []
  const left = groups(head)
  const right = groups(tail)
  const whole =
    tail === undefined
      ? left
      : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
  const prefix = whole.slice(0, 4).map((g) => Number.parseInt(g, 16).toString(16))
  return `${prefix.join(':')}::/64`
}

// Counts connections by client itself instead of letting node:http drop those past its
// maxConnections unseen, so that a full server still answers its probes. A connection within both
// caps (perClient 0: none per client) is served as usual. One past a cap is held back: it takes
// one of RESERVED_CONNECTIONS places, at most one per client (a single client cannot fill them),
// its one request is answered only if it is a probe, anything else gets a 503, and it closes (the
// adapter's part). Past the reserve, or when its client already holds a place there, it is closed
// at once. Returns the held-back connections, each with the reason it is refused.
export const guardConnections = (server: Server, maxConnections: number, perClient: number) => {
  const byClient = new Map<string, number>()
  const reserveHolders = new Set<string>()
  const heldBack = new WeakMap<Socket, string>()
  let open = 0
  server.on('connection', (socket: Socket) => {
    const client = clientOf(socket.remoteAddress ?? '')
    const held = byClient.get(client) ?? 0
    const full =
      open >= maxConnections
        ? `The server holds its ${maxConnections} connections.`
        : perClient && held >= perClient
          ? `This client address holds its ${perClient} connections.`
          : undefined
    if (full === undefined) {
      open++
      byClient.set(client, held + 1)
      socket.once('close', () => {
        open--
        const left = byClient.get(client)! - 1
        if (left) byClient.set(client, left)
        else byClient.delete(client)
      })
    } else if (reserveHolders.size < RESERVED_CONNECTIONS && !reserveHolders.has(client)) {
      reserveHolders.add(client)
      heldBack.set(socket, full)
      socket.once('close', () => reserveHolders.delete(client))
    } else socket.destroy()
  })
  return heldBack
}
