// The SSRF guard by the IANA special-purpose registries: every range that is not globally
// reachable is refused, IPv4 addresses embedded in IPv6 are decoded and checked, and host names are
// resolved when a subscription is created.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { addWebhook } from '../src/admin/webhooks.ts'
import { checkWebhookTarget, isPrivateAddress } from '../src/webhooks/ssrf.ts'
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
  ['::ffff:127.0.0.1', true],
  ['::ffff:7f00:1', true],
  ['::ffff:10.0.0.1', true],
  ['::127.0.0.1', true],
  ['::10.0.0.1', true],
  ['::a9fe:a9fe', true],
  ['64:ff9b::127.0.0.1', true],
  ['64:ff9b::a00:1', true],
  ['64:ff9b::c0a8:101', true],
  ['64:ff9b:1::808:808', true],
  ['2002:7f00:1::1', true],
  ['2002:a00:1::', true],
  ['2002:c0a8:101::1', true],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', true],
  ['2001:0:4136:e378:8000:63bf:f5ff:fffe', true],
  ['100::1', true],
  ['2001:db8::1', true],
  ['2001:2::1', true],
  ['3fff::1', true],
  ['5f00::1', true],
  ['fc00::1', true],
  ['fd00:ec2::254', true],
  ['fe80::1', true],
  ['ff02::1', true],
  ['::ffff:8.8.8.8', false],
  ['64:ff9b::808:808', false],
  ['2002:808:808::1', false],
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', false],
  ['2001:4860:4860::8888', false],
  ['2606:4700:4700::1111', false],
]

describe('the special-purpose registries', () => {
  test(`${ADDRESSES.length} addresses`, () => {
    assert.ok(ADDRESSES.length >= 40)
    const wrong = ADDRESSES.filter(([ip, refused]) => isPrivateAddress(ip) !== refused).map(([ip]) => ip)
    assert.deepEqual(wrong, [])
  })
})

describe('at subscription, host names are resolved with the same rule', () => {
  const resolvingTo =
    (...addresses: string[]) =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))

  test('a name resolving to loopback, a private or an embedded private address is refused', async () => {
    for (const address of ['127.0.0.1', '10.0.0.5', '64:ff9b::a00:5', '::ffff:192.168.1.1']) {
      const problem = await checkWebhookTarget(
        'https://hooks.example.com/x',
        false,
        resolvingTo('93.184.216.34', address),
      )
      assert.match(String(problem), /private address/, address)
    }
  })

  test('a name resolving to public addresses only is accepted, and so is one that does not resolve yet', async () => {
    assert.equal(await checkWebhookTarget('https://hooks.example.com/x', false, resolvingTo('93.184.216.34')), null)
    const fails = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' })
    }
    assert.equal(await checkWebhookTarget('https://nowhere.invalid/x', false, fails), null)
  })

  let s: TestService
  before(async () => {
    s = await startTestService()
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
    assert.equal((await s.sql`select count(*)::int as n from webhooks where account_id = ${account.id}`)[0].n, 0)
  })
})
