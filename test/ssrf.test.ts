// The SSRF guard: IPv4 outside the IANA special-purpose ranges, IPv6 only in global unicast
// (2000::/3) outside its special-purpose blocks, IPv4 addresses embedded in IPv6 decoded and
// checked by the IPv4 rule, and host names resolved with that rule both when a subscription is
// created and at every delivery.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { addWebhook } from '../src/webhooks/endpoints.ts'
import { sendWebhook } from '../src/webhooks/send.ts'
import { checkWebhookTarget, checkWebhookUrl, isPrivateAddress } from '../src/webhooks/ssrf.ts'
import { startReceiver } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

// [address, refused]
const ADDRESSES: [string, boolean][] = [
  ['0.0.0.0', true],
  ['0.255.255.255', true],
  ['10.1.2.3', true],
  ['100.64.0.1', true],
  ['100.127.255.254', true],
  ['127.0.0.1', true],
  ['169.254.169.254', true],
  ['172.16.0.1', true],
  ['172.31.255.254', true],
  ['192.0.0.8', true],
  ['192.0.0.170', true],
  ['192.0.2.10', true],
  ['192.88.99.1', true],
  ['192.168.0.1', true],
  ['198.18.0.1', true],
  ['198.19.255.254', true],
  ['198.51.100.7', true],
  ['203.0.113.9', true],
  ['224.0.0.251', true],
  ['239.255.255.250', true],
  ['240.0.0.1', true],
  ['255.255.255.255', true],
  ['8.8.8.8', false],
  ['1.1.1.1', false],
  ['100.128.0.1', false],
  ['172.32.0.1', false],
  ['198.20.0.1', false],
  ['192.0.3.1', false],
  ['93.184.216.34', false],
  ['::', true],
  ['::1', true],
  ['0:0:0:0:0:0:0:1', true],
  // IPv4-mapped, IPv4-compatible and SIIT (::ffff:0:0/96) forms carry an IPv4 address: the
  // IPv4 rule decides.
  ['::ffff:127.0.0.1', true],
  ['::ffff:7f00:1', true],
  ['::FFFF:7F00:0001', true],
  ['::ffff:10.0.0.1', true],
  ['::127.0.0.1', true],
  ['::10.0.0.1', true],
  ['::a9fe:a9fe', true],
  ['::ffff:0:7f00:1', true],
  ['::ffff:0:a00:1', true],
  ['::ffff:0:a9fe:a9fe', true],
  ['::ffff:0:127.0.0.1', true],
  ['::ffff:8.8.8.8', false],
  ['::ffff:0:808:808', false],
  // NAT64: the well-known prefix is decoded, the local-use one is outside 2000::/3.
  ['64:ff9b::127.0.0.1', true],
  ['64:ff9b::a00:1', true],
  ['64:ff9b::c0a8:101', true],
  ['64:ff9b:1::808:808', true],
  ['64:ff9b::808:808', false],
  // 6to4 (2002::/16) and Teredo (2001::/32: the server's address, then the client's inverted).
  ['2002:7f00:1::1', true],
  ['2002:a00:1::', true],
  ['2002:c0a8:101::1', true],
  ['2002:a9fe:a9fe::1', true],
  ['2002:808:808::1', false],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', true],
  ['2001:0:4136:e378:8000:63bf:f5ff:fffe', true],
  ['2001:0:a00:1:8000:63bf:f7f7:f7f7', true],
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', false],
  // Outside 2000::/3: refused whatever the range is for.
  ['::2:7f00:1', true],
  ['::1:0:0:1', true],
  ['100::1', true],
  ['1fff:ffff::1', true],
  ['4000::1', true],
  ['5f00::1', true],
  ['fc00::1', true],
  ['fd00:ec2::254', true],
  ['fe80::1', true],
  ['fe80::1%eth0', true],
  ['febf:ffff::1', true],
  ['fec0::1', true],
  ['feff::1', true],
  ['ff02::1', true],
  // Special-purpose blocks inside 2000::/3.
  ['2001::1', true],
  ['2001:2::1', true],
  ['2001:10::1', true],
  ['2001:20::1', true],
  ['2001:1ff:ffff::1', true],
  ['2001:db8::1', true],
  ['3fff::1', true],
  ['3fff:fff:ffff::1', true],
  // Global unicast.
  ['2001:200::1', false],
  ['2001:4860:4860::8888', false],
  ['2606:4700:4700::1111', false],
  ['2606:4700::1111', false],
  ['2a00:1450::1', false],
  ['2620:4f:8000::1', false],
  ['3000::1', false],
  ['3fff:1000::1', false],
  // Not an address at all.
  ['', true],
  ['example.com', true],
  ['[::1]', true],
]

describe('the special-purpose registries', () => {
  test(`${ADDRESSES.length} addresses`, () => {
    const wrong = ADDRESSES.filter(([ip, refused]) => isPrivateAddress(ip) !== refused).map(
      ([ip]) => ip,
    )
    assert.deepEqual(wrong, [])
  })

  test('a URL naming an address is refused by the same rule, in brackets and whatever its spelling', () => {
    for (const [ip, refused] of ADDRESSES.filter(([ip]) => ip.includes(':') && !/[%[]/.test(ip))) {
      const url = `https://[${ip}]:8443/hook`
      assert.equal(checkWebhookUrl(url, false) !== null, refused, url)
      assert.equal(checkWebhookUrl(url, true), null, url)
    }
    // The URL parser refuses zone ids itself; the rule is there for DNS answers.
    assert.match(
      String(checkWebhookUrl('https://[fe80::1%25eth0]/hook', false)),
      /valid absolute URL/,
    )
  })
})

// What a DNS server could answer for any name.
const resolvingTo =
  (...addresses: string[]) =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))

// The forms the last probe got accepted (SIIT, site-local, unassigned and outside 2000::/3).
const PROBED = [
  '::ffff:0:7f00:1',
  '::ffff:0:a00:1',
  '::ffff:0:a9fe:a9fe',
  'fec0::1',
  'feff::1',
  '::2:7f00:1',
]
const PROBED_TOO = ['::1:0:0:1', '4000::1']

describe('at subscription, host names are resolved with the same rule', () => {
  test('a name resolving to loopback, a private or an embedded private address is refused', async () => {
    for (const address of [
      '127.0.0.1',
      '10.0.0.5',
      '64:ff9b::a00:5',
      '::ffff:192.168.1.1',
      ...PROBED,
    ]) {
      const problem = await checkWebhookTarget(
        'https://hooks.example.com/x',
        false,
        resolvingTo('93.184.216.34', address),
      )
      assert.match(String(problem), /private address/, address)
    }
  })

  test('a name resolving to public addresses only is accepted, and so is one that does not resolve yet', async () => {
    const resolve = resolvingTo('93.184.216.34', '2606:4700::1111', '2a00:1450::1')
    assert.equal(await checkWebhookTarget('https://hooks.example.com/x', false, resolve), null)
    const fails = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' })
    }
    assert.equal(await checkWebhookTarget('https://nowhere.invalid/x', false, fails), null)
  })

  let s: TestService
  before(async () => {
    s = await startTestService({ webhookAllowPrivate: false }, { http: true, worker: false })
  })
  after(() => s.stop())

  test('the admin API answers 400 naming /url, and stores nothing', async () => {
    const account = await s.account('Ssrf')
    const body = { url: 'https://internal.example.com/hook', events: ['customer.created' as const] }
    await assert.rejects(
      addWebhook(s.sql, account.id, body, false, resolvingTo('10.1.2.3')),
      (err: { status?: number; errors?: { path: string }[] }) => {
        assert.equal(err.status, 400)
        assert.equal(err.errors?.[0].path, '/url')
        return true
      },
    )
    assert.equal(
      (await s.sql`select count(*)::int as n from webhooks where account_id = ${account.id}`)[0].n,
      0,
    )
  })

  test('over HTTP, an IPv6 literal outside global unicast is refused and a global one is subscribed', async () => {
    const account = await s.account('Ssrf literals')
    const subscribe = (host: string) =>
      s.admin('POST', `/accounts/${account.id}/webhooks`, {
        url: `https://[${host}]/hook`,
        events: ['customer.created'],
      })
    for (const host of [
      ...PROBED,
      ...PROBED_TOO,
      '2002:a00:1::1',
      '2001:0:4136:e378:8000:63bf:80ff:fffe',
    ]) {
      const res = await subscribe(host)
      assert.equal(res.status, 400, host)
      assert.equal(res.body.errors[0].path, '/url', host)
    }
    assert.equal(
      (await s.sql`select count(*)::int as n from webhooks where account_id = ${account.id}`)[0].n,
      0,
    )
    for (const host of ['2606:4700::1111', '2a00:1450::1', '2002:808:808::1'])
      assert.equal((await subscribe(host)).status, 201, host)
  })
})

describe('at delivery, the name is resolved and checked again', () => {
  const body = '{"event":"customer.created"}'

  test('a name that now resolves to a refused IPv6 address fails the delivery without connecting', async () => {
    const receiver = await startReceiver()
    try {
      // ::ffff:127.0.0.1 and ::1 would reach this receiver (or one on ::1) if the guard
      // let them through.
      for (const address of ['::ffff:127.0.0.1', '::1', ...PROBED, ...PROBED_TOO]) {
        const url = `https://hooks.example.com:${receiver.port}/hooks`
        const result = await sendWebhook({
          url,
          body,
          headers: {},
          allowPrivate: false,
          resolve: resolvingTo(address),
        })
        assert.equal(result.outcome, 'failed', address)
        assert.equal(result.status_code, null, address)
        assert.match(
          String(result.error),
          new RegExp(`private address ${address.replaceAll('.', '\\.')}$`),
          address,
        )
      }
      assert.equal(receiver.requests.length, 0)
      // The same resolved address does reach the receiver when private targets are allowed: the
      // check, not the network, is what stopped the deliveries above.
      const allowed = await sendWebhook({
        url: `http://hooks.example.com:${receiver.port}/hooks`,
        body,
        headers: {},
        allowPrivate: true,
        resolve: resolvingTo('::ffff:127.0.0.1'),
      })
      assert.equal(allowed.outcome, 'delivered', String(allowed.error))
      assert.equal(receiver.requests.length, 1)
    } finally {
      await receiver.close()
    }
  })
})
