import { lookup } from 'node:dns/promises'
import { isIP, isIPv4, isIPv6 } from 'node:net'
import ipaddr from 'ipaddr.js'

// A subscriber URL may reach only globally reachable unicast addresses unless
// SERVICE_WEBHOOK_ALLOW_PRIVATE=1. IPv4 has no prefix that holds exactly those, so its rule is
// the whole space minus the special-purpose ranges of the IANA registry that are not globally
// reachable, and minus multicast and the reserved block. ipaddr.js parses and matches; the policy
// (which ranges, which embedded forms) is ours.
type Range<A> = [A, number]
const NOT_GLOBAL_IPV4: Range<ipaddr.IPv4>[] = (
  [
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
  ] as const
).map(([network, prefix]) => [ipaddr.IPv4.parse(network), prefix])

// IPv6 is an allow-list: only global unicast (2000::/3), minus its special-purpose blocks.
// Everything else (loopback, unique-local, link-local, site-local, multicast, unassigned space
// such as 4000::/3) is refused by not being in it. The forms that embed an IPv4 address are decoded
// before this rule (embeddedIPv4).
const GLOBAL_UNICAST: Range<ipaddr.IPv6> = [ipaddr.IPv6.parse('2000::'), 3]
const NOT_GLOBAL_IPV6: Range<ipaddr.IPv6>[] = (
  [
    // IETF protocol assignments: benchmarking, ORCHID, AMT, anycast services (Teredo is decoded)
    ['2001::', 23],
    ['2001:db8::', 32], // documentation
    ['3fff::', 20], // documentation
  ] as const
).map(([network, prefix]) => [ipaddr.IPv6.parse(network), prefix])

const ipv4Of = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 255, lo >> 8, lo & 255])
const zero = (g: number[], from: number, to: number) => g.slice(from, to).every((x) => x === 0)

// The IPv4 addresses an IPv6 address (its eight 16-bit groups) stands for, or null when it
// embeds none. Each form reaches (or is translated to) an IPv4 host, so each passes the IPv4 rule
// instead of the IPv6 one:
// - IPv4-compatible ::a.b.c.d (::/96, deprecated; :: and ::1 decode into 0.0.0.0/8),
// - IPv4-mapped ::ffff:a.b.c.d (::ffff:0:0/96),
// - SIIT IPv4-translated ::ffff:0:a.b.c.d (::ffff:0:0:0/96),
// - NAT64 64:ff9b::a.b.c.d (64:ff9b::/96; the local-use 64:ff9b:1::/48 is outside 2000::/3
//   and refused),
// - 6to4 2002:aabb:ccdd::/48,
// - Teredo 2001:0:ssss:ssss::/32: both the server's address and the client's (inverted in
//   the last 32 bits).
const embeddedIPv4 = (g: number[]): ipaddr.IPv4[] | null => {
  if (zero(g, 0, 6)) return [ipv4Of(g[6], g[7])]
  if (zero(g, 0, 5) && g[5] === 0xffff) return [ipv4Of(g[6], g[7])]
  if (zero(g, 0, 4) && g[4] === 0xffff && g[5] === 0) return [ipv4Of(g[6], g[7])]
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(g, 2, 6)) return [ipv4Of(g[6], g[7])]
  if (g[0] === 0x2002) return [ipv4Of(g[1], g[2])]
  if (g[0] === 0x2001 && g[1] === 0)
    return [ipv4Of(g[2], g[3]), ipv4Of(g[6] ^ 0xffff, g[7] ^ 0xffff)]
  return null
}

const isGlobalIPv4 = (ip: ipaddr.IPv4) => !NOT_GLOBAL_IPV4.some((range) => ip.match(range))

const isGlobalIPv6 = (ip: ipaddr.IPv6) => {
  const v4 = embeddedIPv4(ip.parts)
  if (v4) return v4.every(isGlobalIPv4)
  return ip.match(GLOBAL_UNICAST) && !NOT_GLOBAL_IPV6.some((range) => ip.match(range))
}

// Anything that is not an IP address counts as private so that callers fail closed; so does an
// IPv6 zone id (fe80::1%eth0), which only a link-local or site-scoped address needs. node:net
// decides what is an address: ipaddr.js also reads legacy IPv4 forms (0x7f.1, 127.1), which are no
// address in a URL's host here.
export const isPrivateAddress = (ip: string): boolean => {
  if (isIPv4(ip)) return !isGlobalIPv4(ipaddr.IPv4.parse(ip))
  if (isIPv6(ip) && !ip.includes('%')) return !isGlobalIPv6(ipaddr.IPv6.parse(ip))
  return true
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
export const checkWebhookTarget = async (
  url: string,
  allowPrivate: boolean,
  resolve: Resolve = resolveAll,
) => {
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
