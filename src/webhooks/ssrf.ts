import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'

// Everything a subscriber URL must not reach unless SERVICE_WEBHOOK_ALLOW_PRIVATE=1.
// BlockList also matches IPv4-mapped IPv6 (::ffff:a.b.c.d in any spelling) against the IPv4 rules.
const privateRanges = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, including cloud metadata endpoints
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved and broadcast
] as const)
  privateRanges.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  privateRanges.addSubnet(network, prefix, 'ipv6')

// Anything that is not an IP address counts as private so that callers fail closed.
export const isPrivateAddress = (ip: string): boolean => {
  const family = isIP(ip)
  if (family === 0) return true
  return privateRanges.check(ip, family === 4 ? 'ipv4' : 'ipv6')
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

export const PRIVATE_ADDRESS_ERROR = 'ERR_WEBHOOK_PRIVATE_ADDRESS'

// Every resolved address is checked, not just the one used, because the OS may order them
// differently for the connection; the caller then pins the returned address so a second,
// rebound DNS answer can never be what the socket connects to.
export const resolvePublic = async (
  hostname: string,
  allowPrivate: boolean,
): Promise<{ address: string; family: number }> => {
  const addresses = await lookup(bareHost(hostname), { all: true })
  if (addresses.length === 0) throw new Error(`${hostname} did not resolve to any address`)
  const refused = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address))
  if (refused) {
    throw Object.assign(new Error(`${hostname} resolves to private address ${refused.address}`), {
      code: PRIVATE_ADDRESS_ERROR,
    })
  }
  return addresses[0]
}
