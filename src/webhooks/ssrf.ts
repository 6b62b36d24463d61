import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'

// Everything a subscriber URL must not reach unless SERVICE_WEBHOOK_ALLOW_PRIVATE=1: every range of
// the IANA special-purpose address registries that is not globally reachable. BlockList also
// matches IPv4-mapped IPv6 (::ffff:a.b.c.d in any spelling) against the IPv4 rules; the other
// forms that embed an IPv4 address are decoded below.
const privateRanges = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, including cloud metadata endpoints
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address
] as const)
  privateRanges.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128],
  ['64:ff9b:1::', 48], // NAT64 for local use
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (Teredo is decoded before this applies)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
  ['5f00::', 16], // segment routing SIDs
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  privateRanges.addSubnet(network, prefix, 'ipv6')

// The eight 16-bit groups of an IPv6 address (a trailing dotted quad included).
const groups = (ip: string): number[] => {
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip)
  const text = quad
    ? ip.slice(0, quad.index) +
      ((+quad[1] << 8) | +quad[2]).toString(16) +
      ':' +
      ((+quad[3] << 8) | +quad[4]).toString(16)
    : ip
  const [head, tail] = text.split('::')
  const part = (s?: string) => (s ? s.split(':').map((g) => parseInt(g, 16)) : [])
  const [h, t] = [part(head), part(tail)]
  return tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill(0), ...t]
}
const dotted = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.')

// The IPv4 address an IPv6 address carries: IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96),
// 6to4 (2002:aabb:ccdd::/48) and Teredo (2001:0::/32, the client address inverted in the last 32
// bits). IPv4-mapped addresses are left to BlockList.
const embeddedIPv4 = (ip: string): string | null => {
  const g = groups(ip)
  if (g.slice(0, 6).every((x) => x === 0) && (g[6] !== 0 || g[7] > 1)) return dotted(g[6], g[7])
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return dotted(g[6], g[7])
  if (g[0] === 0x2002) return dotted(g[1], g[2])
  if (g[0] === 0x2001 && g[1] === 0) return dotted(g[6] ^ 0xffff, g[7] ^ 0xffff)
  return null
}

// Anything that is not an IP address counts as private so that callers fail closed.
export const isPrivateAddress = (ip: string): boolean => {
  const family = isIP(ip)
  if (family === 0) return true
  if (family === 4) return privateRanges.check(ip, 'ipv4')
  const v4 = embeddedIPv4(ip)
  if (v4 !== null) return privateRanges.check(v4, 'ipv4')
  return privateRanges.check(ip, 'ipv6')
}

// URL.hostname keeps IPv6 brackets and a trailing root dot, both of which would hide the real host.
const bareHost = (hostname: string) =>
  hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase()

const isLocalhostName = (host: string) => host === 'localhost' || host.endsWith('.localhost')

export const checkWebhookUrl = (url: string, allowPrivate: boolean): string | null => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'url must be a valid absolute URL'
  }
  const allowedProtocols = allowPrivate ? ['https:', 'http:'] : ['https:']
  if (!allowedProtocols.includes(parsed.protocol))
    return allowPrivate ? 'url must use http or https' : 'url must use https'
  if (allowPrivate) return null
  const host = bareHost(parsed.hostname)
  if (isLocalhostName(host)) return 'url must not point to localhost'
  if (isIP(host) && isPrivateAddress(host)) return 'url must not point to a private address'
  return null
}

// At subscription: the URL's rule, then (unless private targets are allowed) its host resolved with
// the same rule, so a name pointing at a private address is refused now, not at every delivery.
// A name that does not resolve (yet) is accepted: its records may still be on their way, and
// delivery checks again anyway (DNS can change) and pins the address it checked.
export const checkWebhookTarget = async (url: string, allowPrivate: boolean, resolve: Resolve = resolveAll) => {
  const problem = checkWebhookUrl(url, allowPrivate)
  if (problem || allowPrivate || isIP(bareHost(new URL(url).hostname))) return problem
  try {
    await resolvePublic(new URL(url).hostname, false, resolve)
    return null
  } catch (err) {
    if ((err as { code?: string }).code !== PRIVATE_ADDRESS_ERROR) return null
    return `url must not point to a private address (${(err as Error).message})`
  }
}

export const PRIVATE_ADDRESS_ERROR = 'ERR_WEBHOOK_PRIVATE_ADDRESS'

// Every resolved address is checked, not just the one used, because the OS may order them
// differently for the connection; the caller then pins the returned address so a second,
// rebound DNS answer can never be what the socket connects to.
export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>
const resolveAll: Resolve = (host) => lookup(host, { all: true })

export const resolvePublic = async (
  hostname: string,
  allowPrivate: boolean,
  resolve: Resolve = resolveAll,
): Promise<{ address: string; family: number }> => {
  const addresses = await resolve(bareHost(hostname))
  if (addresses.length === 0) throw new Error(`${hostname} did not resolve to any address`)
  const refused = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address))
  if (refused) {
    throw Object.assign(new Error(`${hostname} resolves to private address ${refused.address}`), {
      code: PRIVATE_ADDRESS_ERROR,
    })
  }
  return addresses[0]
}
