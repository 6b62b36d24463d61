// People in the console, in real Chromium against a real service: sign-in with a password (its
// refusals and the lockout's wait), the role's views (a viewer's and an admin's differ), an invite
// link that sets the password, Settings' users, invites and audit log, and sign-out ending the
// session on the service, at a laptop's and a phone's width with nothing wider than the window.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import type { Page } from 'playwright-core'
import { type Browser, launchBrowser } from './helpers/browser.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const PASSWORD = 'a long enough passphrase'
const WIDTHS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
]

let s: TestService
let browser: Browser
let account: Awaited<ReturnType<typeof scoredAccount>>

const invite = async (email: string, role: string, name?: string) => {
  const res = await s.admin('POST', `/accounts/${account.id}/users`, {
    email,
    role,
    ...(name && { name }),
  })
  assert.equal(res.status, 201, JSON.stringify(res.body))
  return res.body as { id: number; invite_token: string; invite_url: string }
}
const person = async (email: string, role: string, name?: string) => {
  const { invite_token } = await invite(email, role, name)
  const res = await fetch(`${s.base}/auth/v1/password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: invite_token, password: PASSWORD }),
  })
  assert.equal(res.status, 200)
  return email
}
const me = (cookie: string) =>
  fetch(`${s.base}/auth/v1/me`, { headers: { cookie: `service_session=${cookie}` } }).then(
    (r) => r.status,
  )

before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
  account = await scoredAccount(s)
  const customers = ['north', 'south'].map((id, i) => ({
    external_id: id,
    name: `Customer ${id} of a Rather Long Company Name GmbH`,
    attributes: { country: 'US', has_sso: i === 0 },
    metrics: [{ date: new Date().toISOString().slice(0, 10), logins: 10 + 20 * i }],
  }))
  await uploadAndWait(account.api, 'customers', customers, { scored: true })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await s?.stop()
})

// A tab on the console that keeps every script error and console error (a 4xx the
// browser logs too).
const open = async (size = WIDTHS[0], path = '/console') => {
  const page = await browser.context.newPage()
  await page.setViewportSize(size)
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  page.on('console', (msg) => msg.type() === 'error' && problems.push(`console: ${msg.text()}`))
  await page.goto(s.base + path)
  return { page, problems }
}

const signIn = async (page: Page, email: string, password = PASSWORD) => {
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password', { exact: true }).fill(password)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
}

// The page never scrolls sideways: wide tables scroll inside their frames.
const wide = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)

const view = async (page: Page, fragment: string, heading: string | RegExp) => {
  await page.evaluate((f) => {
    location.hash = f
  }, fragment)
  await page.getByRole('heading', { level: 1, name: heading }).waitFor()
}

const navLinks = (page: Page) =>
  page.getByRole('navigation', { name: 'Views' }).getByRole('link').allTextContents()

const sessionCookie = async () =>
  (await browser.context.cookies(s.base)).find((c) => c.name === 'service_session')?.value ?? ''

test('a wrong password has one message; past ten failures the form says how long to wait', async () => {
  const email = await person('locked@acme.test', 'viewer')
  const { page, problems } = await open()
  await signIn(page, email, 'not the password at all')
  await page.getByRole('alert').getByText('The email or the password is wrong.').waitFor()
  await signIn(page, 'nobody@acme.test', 'not the password at all')
  await page.getByRole('alert').getByText('The email or the password is wrong.').waitFor()
  for (let i = 1; i < 10; i++) {
    const res = await fetch(`${s.base}/auth/v1/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: `wrong ${i}` }),
    })
    assert.equal(res.status, 401)
  }
  // The right password too, once locked.
  await signIn(page, email)
  await page
    .getByRole('alert')
    .getByText(/^Too many failed sign-ins for this email: try again in \d+ (minutes|seconds)\.$/)
    .waitFor()
  assert.equal(await page.getByRole('navigation', { name: 'Views' }).count(), 0)
  // The refusals are the browser's own lines (401, 429), nothing else.
  assert.deepEqual(
    problems.filter((p) => !/status of (401|429)/.test(p)),
    [],
  )
  await page.close()
})

for (const size of WIDTHS) {
  const viewerTitle = `a viewer sees the customers without write buttons or Settings; sign-out ends the session`
  test(`${viewerTitle} (${size.width} px)`, async () => {
    const email = await person(`viewer-${size.width}@acme.test`, 'viewer', 'Vera Viewer')
    const { page, problems } = await open(size)
    await signIn(page, email)
    await page.locator('#signed-in[data-role="viewer"]').getByText('Vera Viewer').waitFor()
    await page.locator('#chosen-account').getByText(`Acme (account ${account.id})`).waitFor()
    await page.getByRole('navigation', { name: 'Views' }).waitFor()
    assert.deepEqual(await navLinks(page), ['This week', 'Score matrix', 'Customers'])
    await view(page, '#/customers', 'Customers')
    await page.getByRole('link', { name: /Customer north/ }).waitFor()
    assert.equal(await wide(page), 0)
    await view(page, '#/customer/north', /Customer north/)
    await page.locator('#churn-state').getByText('Active.').waitFor()
    assert.equal(await page.getByRole('button', { name: 'Mark as churned' }).count(), 0)
    assert.equal(await wide(page), 0)
    await view(page, '#/settings', 'Not found')
    await page.getByText('Your role does not cover this view.').waitFor()
    // Signed in on the service, then not: the cookie that was the session is refused everywhere.
    const cookie = await sessionCookie()
    assert.equal(await me(cookie), 200)
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('heading', { name: 'Sign in to the console' }).waitFor()
    assert.equal(await me(cookie), 401)
    await page.reload()
    await page.getByLabel('Email').waitFor()
    assert.equal(await page.getByRole('navigation', { name: 'Views' }).count(), 0)
    assert.equal(await wide(page), 0)
    assert.deepEqual(problems, [])
    await page.close()
  })

  const adminTitle = `an admin sees Settings: users, an invite's one-time link, SSO and the audit log`
  test(`${adminTitle} (${size.width} px)`, async () => {
    const email = await person(`admin-${size.width}@acme.test`, 'admin', `Ada Admin ${size.width}`)
    const { page, problems } = await open(size)
    // Every request of the session that changes anything carries its CSRF token.
    const changes: [string, string | undefined][] = []
    page.on('request', (r) => {
      if (r.method() !== 'GET' && !r.url().endsWith('/auth/v1/sign-in'))
        changes.push([`${r.method()} ${new URL(r.url()).pathname}`, r.headers()['x-csrf-token']])
    })
    await signIn(page, email)
    await page.locator('#signed-in[data-role="admin"]').waitFor()
    assert.deepEqual(await navLinks(page), [
      'This week',
      'Score matrix',
      'Customers',
      'Uploads',
      'Settings',
    ])
    // An admin's role writes what an upload key writes.
    await view(page, '#/customer/south', /Customer south/)
    await page.getByRole('button', { name: 'Mark as churned' }).click()
    await page
      .locator('#churn-state')
      .getByText(/^Churned/)
      .waitFor()
    await page.getByRole('button', { name: 'Mark as active' }).click()
    await page.locator('#churn-state').getByText('Active.').waitFor()

    await view(page, '#/settings', `Settings of account ${account.id}`)
    const users = page.locator('#users')
    await users.getByRole('cell', { name: email, exact: true }).waitFor()
    // Their own role is text (the service keeps one admin); another user's is a choice.
    assert.equal(
      await users.locator('tr', { hasText: email }).locator('td[data-role]').textContent(),
      'admin',
    )
    assert.equal(await users.getByLabel(`Role of ${email}`).count(), 0)
    assert.equal(await users.getByRole('button', { name: `Remove ${email}` }).count(), 0)
    const invited = `new-${size.width}@acme.test`
    await page.getByLabel('Email', { exact: true }).fill(invited)
    await page.getByLabel('Role', { exact: true }).selectOption('manager')
    await page.getByRole('button', { name: 'Invite', exact: true }).click()
    const link = await page.locator('#invite-link').textContent()
    assert.match(link ?? '', new RegExp(`^${s.base}/console#password=\\S+$`))
    await users.locator('tr', { hasText: invited }).locator('td[data-role="manager"]').waitFor()
    await page.getByRole('button', { name: 'I have kept it' }).click()
    await users.getByLabel(`Role of ${invited}`).selectOption('viewer')
    await users.locator('tr', { hasText: invited }).locator('td[data-role="viewer"]').waitFor()
    // An account admin sets SSO too; an issuer that is no address is refused, naming the field.
    await page.getByLabel('Issuer URL').fill('not an address')
    await page.getByLabel('Client ID').fill('console')
    await page.getByLabel('Client secret').fill('a secret of the console')
    await page.getByLabel('Email domains, one a line').fill('acme.test')
    await page.getByRole('button', { name: 'Save single sign-on' }).click()
    await page.locator('[role="alert"]', { hasText: 'issuer' }).waitFor()
    await page.getByText(`${s.base}/console#sso=${account.id}`).waitFor()

    // The audit log has the churn marks and the invite, by this person, newest first.
    const audit = page.locator('#audit tbody tr')
    await page.reload()
    await page.locator('#audit tbody tr').first().waitFor()
    const mine = audit.filter({ hasText: `Ada Admin ${size.width}` })
    // The refused SSO is the newest entry (a refusal is recorded with its status), then the role.
    assert.equal(await mine.first().getAttribute('data-action'), 'setAccountSso')
    assert.equal(await mine.nth(1).getAttribute('data-action'), 'setAccountUserRole')
    assert.ok((await mine.filter({ hasText: 'customer/south' }).count()) >= 2)
    await page.getByLabel('Actor').fill(`Ada Admin ${size.width}`)
    await page.getByLabel('Operation').selectOption('inviteAccountUser')
    assert.equal(await audit.count(), 1)
    await page.getByLabel('Status').selectOption('refused')
    assert.equal(await audit.count(), 0)
    await page.getByRole('button', { name: 'Clear filters' }).click()
    assert.ok((await audit.count()) >= 3)
    assert.equal(await wide(page), 0)

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('heading', { name: 'Sign in to the console' }).waitFor()
    assert.ok(changes.length >= 4, JSON.stringify(changes))
    assert.deepEqual(
      changes.filter(([, csrf]) => !csrf),
      [],
    )
    // The only failed loads are the ones asked for: no SSO yet (404, on each Settings load) and the
    // refused issuer (400).
    const failed = (status: number) =>
      `console: Failed to load resource: the server responded with a status of ${status}`
    assert.deepEqual(
      problems,
      [404, 400, 404].map((st) => `${failed(st)} (${st === 404 ? 'Not Found' : 'Bad Request'})`),
    )
    await page.close()
  })
}

test('an invite link sets the password, then the person signs in with it', async () => {
  const { invite_url } = await invite('invited@acme.test', 'viewer')
  const { page, problems } = await open(
    WIDTHS[1],
    new URL(invite_url).pathname + new URL(invite_url).hash,
  )
  await page.getByLabel('New password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Set password' }).click()
  await page.getByRole('status').getByText('Your password is set').waitFor()
  assert.equal(await page.getByLabel('Email').inputValue(), 'invited@acme.test')
  assert.equal(await page.evaluate(() => location.hash), '')
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  await page.locator('#signed-in[data-role="viewer"]').waitFor()
  assert.equal(await wide(page), 0)
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByRole('heading', { name: 'Sign in to the console' }).waitFor()
  // The link works once.
  await page.goto(invite_url)
  await page.reload()
  await page.getByLabel('New password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Set password' }).click()
  await page
    .getByRole('alert')
    .getByText(/This link is not valid/)
    .waitFor()
  assert.deepEqual(
    problems.filter((p) => !/status of 400/.test(p)),
    [],
  )
  await page.close()
})

test("the account's sign-in address offers its SSO; the keys stay under their own heading", async () => {
  const { page, problems } = await open(WIDTHS[1], `/console#sso=${account.id}`)
  await page.getByRole('button', { name: 'Sign in with SSO' }).waitFor()
  assert.equal(await page.getByLabel('Service key').isVisible(), false)
  await page.getByText('Sign in with a key').click()
  await page.getByLabel('Service key').fill(account.token)
  await page.getByRole('button', { name: 'Sign in with the key' }).click()
  await page.getByRole('navigation', { name: 'Views' }).waitFor()
  assert.deepEqual(await navLinks(page), ['This week', 'Score matrix', 'Customers', 'Uploads'])
  assert.equal(await wide(page), 0)
  await page.getByRole('button', { name: 'Sign out' }).click()
  assert.deepEqual(problems, [])
  await page.close()
})
