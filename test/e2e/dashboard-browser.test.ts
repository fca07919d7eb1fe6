/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core): sign in, add two
 * provider keys and an inference key (shown once, copied), send a request through the router that
 * fails over, find it in the request explorer with its attempt path and in the usage chart, and
 * rows the cache, continuation and guardrails wrote with their badges, details and summary cards; a
 * read-only key sees no write control; no page logs an error or loads anything from another host.
 * Screenshots of every page at desktop and phone width go to test/artifacts/ (dashboard-*.png).
 * Skipped, with one printed line, where there is no Chromium.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { launchBrowser, openPage, requireBrowser, saveScreenshot, type OpenedPage, type ViewportName } from '../harness/browser'
import { startTestServer, type TestServer } from '../harness/server'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { createManagementKey } from '../../src/management/workspaces'

const chromiumPath = requireBrowser('the dashboard browser tests')

describe.skipIf(!chromiumPath)('the dashboard in a browser', () => {
  let browser: Browser
  let server: TestServer
  let openai: MockGateway
  let groq: MockGateway
  const pages: OpenedPage[] = []

  beforeAll(async () => {
    openai = await startMockGateway()
    // The first target fails: the request fails over, and its attempt path says so.
    groq = await startMockGateway({ handler: () => ({ status: 500, json: { error: { message: 'boom', type: 'server_error' } } }) })
    server = await startTestServer({ RT_GATEWAY_URL_OPENAI: openai.url, RT_GATEWAY_URL_GROQ: groq.url })
    browser = await launchBrowser(chromiumPath)
    // Starting Chromium on a loaded 2-core machine (the whole suite running) can take longer than the default 5 s.
  }, 30_000)

  afterAll(async () => {
    for (const opened of pages) await opened.close().catch(() => {})
    await browser?.close()
    await server?.[Symbol.asyncDispose]()
    await openai?.close()
    await groq?.close()
  }, 30_000)

  const open = async (size: ViewportName = 'desktop') => {
    const opened = await openPage(browser, `${server.rootUrl}/`, size)
    await opened.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.rootUrl })
    // Confirmations (revoke, delete) are accepted.
    opened.page.on('dialog', (dialog) => void dialog.accept())
    pages.push(opened)
    return opened
  }
  const signIn = async (page: Page, key: string) => {
    await page.getByLabel('Management key').fill(key)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('navigation', { name: 'Pages' }).waitFor()
  }
  const go = async (page: Page, name: string) => {
    await page.getByRole('link', { name }).click()
    await page.getByRole('heading', { level: 2, name }).waitFor()
  }

  test('sign in, add provider keys and a key, send a request, find it in the explorer and the chart; screenshots of every page', async () => {
    const { page, errors, blocked, notFound } = await open()
    await page.getByLabel('Management key').waitFor()
    // The icon the page names, and the one a browser asks for on its own, are there (no 404).
    const icon = await page.evaluate(() => (document.querySelector('link[rel=icon]') as HTMLLinkElement | null)?.href ?? 'no icon link')
    for (const address of [icon, `${server.rootUrl}/favicon.ico`]) {
      const response = await fetch(address)
      expect([address, response.status, response.headers.get('content-type') ?? '']).toEqual([address, 200, expect.stringContaining('image/svg+xml')])
    }
    // The page loads in under 300 ms (issue: "pages load in under 300 ms on this machine"), again on a reload.
    const loadMs = () => page.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd)
    expect(await loadMs()).toBeLessThan(300)
    await page.reload()
    await page.getByLabel('Management key').waitFor()
    expect(await loadMs()).toBeLessThan(300)
    await saveScreenshot(page, 'dashboard-signin-desktop')
    await signIn(page, server.managementKey)

    // Provider keys: two added through the form; the secret is never shown again.
    await go(page, 'Provider keys')
    const addProvider = async (gateway: string, label: string, secret: string) => {
      const form = page.getByRole('form', { name: 'Add a provider key' })
      await form.getByLabel('Gateway').selectOption(gateway)
      await form.getByLabel('Name').fill(label)
      await form.getByLabel('Secret').fill(secret)
      await form.getByRole('button', { name: 'Add provider key' }).click()
      await page.getByRole('cell', { name: label, exact: true }).waitFor()
    }
    await addProvider('groq', 'groq main', 'gsk-browser-test-secret-1234')
    await addProvider('openai', 'openai main', 'sk-browser-test-secret-5678')
    expect(await page.content()).not.toContain('sk-browser-test-secret-5678')
    await page.getByRole('cell', { name: '…5678' }).waitFor()

    // An inference key routed groq first, then openai: created, shown once, copied.
    await go(page, 'Inference keys')
    const create = page.getByRole('form', { name: 'Create an inference key' })
    await create.getByLabel('Name').fill('browser app')
    await create.getByRole('checkbox', { name: /groq main/ }).check()
    await create.getByRole('checkbox', { name: /openai main/ }).check()
    await create.getByRole('button', { name: 'Create key' }).click()
    const secret = (await page.getByTestId('secret').textContent())!
    expect(secret).toMatch(/^rt_live_/)
    await page.getByRole('button', { name: 'Copy' }).click()
    await page.getByRole('button', { name: 'Copied' }).waitFor()
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret)
    await page.getByRole('cell', { name: 'priority: groq > openai' }).waitFor()
    await saveScreenshot(page, 'dashboard-keys-desktop')
    await page.getByRole('button', { name: 'Done' }).click()
    expect(await page.getByTestId('secret').count()).toBe(0)

    // The key's page: its settings and its routing rule edited (a per-target ttfb_ms, a remap).
    await page.getByRole('link', { name: 'browser app' }).click()
    await page.getByRole('heading', { level: 2, name: 'browser app' }).waitFor()
    const settings = page.getByRole('form', { name: 'Key settings' })
    await settings.getByLabel('Steering message').fill('Answer briefly.')
    await settings.getByRole('button', { name: 'Save settings' }).click()
    await settings.getByRole('status').waitFor()
    const routing = page.getByRole('form', { name: 'Routing rule' })
    await routing.getByLabel('Target 1 ttfb_ms').fill('2000')
    await routing.getByRole('button', { name: 'Add remap' }).click()
    await routing.getByLabel('Remap 1 match').fill('browser/alias')
    await routing.getByLabel('Remap 1 provider key').selectOption({ label: 'openai main (openai)' })
    await routing.getByLabel('Remap 1 upstream model').fill('gpt-4o')
    await routing.getByRole('button', { name: 'Save routing' }).click()
    await routing.getByRole('status').waitFor()
    // Saved as the API stores it.
    const stored = await server.call('GET', `/api/v1/keys/${(await page.evaluate(() => location.hash)).split('/')[2]}`)
    expect(stored.body.data.steering_message).toBe('Answer briefly.')
    expect(stored.body.data.routing).toMatchObject({
      strategy: 'priority',
      targets: [{ gateway: 'groq', ttfb_ms: 2000 }, { gateway: 'openai', ttfb_ms: null }],
      model_remaps: [{ match: 'browser/alias', percent: 100, upstream_model: 'gpt-4o', enabled: true }],
    })
    // A rule the API refuses says why and changes nothing.
    await routing.getByLabel('Remap 1 upstream model').fill('')
    await routing.getByRole('button', { name: 'Save routing' }).click()
    await routing.getByRole('alert').waitFor()
    // A number field that is not a whole number is refused here, naming it, before anything is sent.
    await routing.getByLabel('Remap 1 upstream model').fill('gpt-4o')
    await routing.getByLabel('Target 2 ttfb_ms').fill('soon')
    await routing.getByRole('button', { name: 'Save routing' }).click()
    await expect(routing.getByRole('alert').textContent()).resolves.toBe("Target 2 ttfb_ms: expected a whole number, got 'soon'.")
    await saveScreenshot(page, 'dashboard-key-desktop')

    // The workspace captures bodies from now on: the request below shows its body in the explorer.
    await go(page, 'Workspace')
    await page.getByLabel(/Capture request bodies/).check()
    await page.getByRole('form', { name: 'Workspace settings' }).getByRole('button', { name: 'Save settings' }).click()
    await page.getByRole('form', { name: 'Workspace settings' }).getByRole('status').waitFor()
    await saveScreenshot(page, 'dashboard-workspace-desktop')

    // A request through the router with the new key: groq fails, openai answers.
    const answer = await fetch(`${server.rootUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello from the browser test' }] }),
    })
    expect(answer.status).toBe(200)
    server.runtime.logQueue.flush()
    // Two rows of the same key written as the cache, continuation and guardrails record them (CONTRACT
    // §15–17), a minute and two before it: a cache hit with its saving, and a stream continued once
    // with guardrail findings.
    const earlier = Date.now() - 60_000
    const logged = { workspaceId: server.workspaceId, keyId: stored.body.data.id as string, endpoint: 'chat', model: 'openai/gpt-4o-mini', status: 200, latencyMs: 1.25 }
    server.runtime.repositories.requestLogs.insertMany([
      { ...logged, id: 'cached-request', createdAt: earlier, stream: false, attempts: 0, cache: 'hit', savedNanoUsd: 83_700, costNanoUsd: 0 },
      {
        ...logged,
        id: 'continued-request',
        createdAt: earlier - 60_000,
        gateway: 'openai',
        stream: true,
        latencyMs: 950,
        attempts: 2,
        attemptPath: 'groq:mid_stream_cut>openai:ok',
        costNanoUsd: 41_000,
        continued: 1,
        guardrails: JSON.stringify([
          { rule: 'email', where: 'input', action: 'mask', count: 2 },
          { rule: 'secret', where: 'output', action: 'mask', count: 1 },
        ]),
      },
    ])

    // The explorer: the request with its attempt path; its detail with stage timings.
    await go(page, 'Requests')
    await page.getByRole('button', { name: 'Refresh' }).click()
    const row = page.getByRole('row', { name: /^Request / })
    await row.first().waitFor()
    expect(await row.count()).toBe(3)
    expect(await row.first().textContent()).toContain('groq:server-error > openai:ok')
    // The cache answer and the continued stream say so in the table: a badge each, none on the plain request.
    expect(await page.getByTestId('cache-badge').count()).toBe(1)
    expect(await row.nth(1).textContent()).toContain('cache hit')
    expect(await row.nth(2).textContent()).toContain('continued ×1')
    expect(await row.nth(2).textContent()).toContain('guardrails: mask ×3')
    expect(await row.first().textContent()).not.toMatch(/cache hit|continued|guardrails/)
    // Their details: the saving, the continuations, each finding (never the matched text, which the row does not have).
    await row.nth(1).press('Enter')
    await expect(page.getByRole('region', { name: 'Request detail' }).textContent()).resolves.toContain('cachecache hit, saved $0.000084')
    await row.nth(2).press('Enter')
    await expect(page.getByRole('region', { name: 'Request detail' }).textContent()).resolves.toMatch(/continued1 time after the stream broke.*guardrailsemail in the input: mask ×2secret in the output: mask ×1/)
    await saveScreenshot(page, 'dashboard-requests-outcomes-desktop')
    await row.first().press('Enter')
    await row.first().press('Enter')
    const detail = page.getByRole('region', { name: 'Request detail' })
    await detail.waitFor()
    expect(await detail.textContent()).toMatch(/stage timings.*auth [\d.]+ ms/)
    expect(await detail.textContent()).toContain('2 attempts')
    expect(await detail.textContent()).toContain('hello from the browser test')
    await saveScreenshot(page, 'dashboard-requests-desktop')

    // Usage: the request counted, and drawn in the chart. Should the summary not come, the page's own
    // words and the browser's errors say why (rather than a bare timeout).
    await go(page, 'Usage')
    await page
      .getByTestId('summary')
      .waitFor({ timeout: 15_000 })
      .catch(async (error) => {
        throw new Error(`the usage summary did not render: ${String(error)}\npage: ${await page.locator('main').textContent()}\nbrowser errors: ${JSON.stringify(errors)}`)
      })
    await expect(page.getByTestId('summary').textContent()).resolves.toMatch(/^3requests/)
    // The cache's answers and what they saved (CONTRACT §15): the one hit, its original's cost.
    await expect(page.getByTestId('summary').textContent()).resolves.toContain('1cache hits$0.000084saved by the cache')
    await page.locator('.chart canvas').waitFor()
    await saveScreenshot(page, 'dashboard-usage-desktop')
    await go(page, 'Provider keys')
    await saveScreenshot(page, 'dashboard-providers-desktop')

    // The audit log: what was done above, through this dashboard and the API it calls, newest first.
    await go(page, 'Audit log')
    await page.getByRole('cell', { name: 'keys.create' }).first().waitFor()
    const auditRows = page.locator('tbody tr')
    expect(await auditRows.count()).toBeGreaterThanOrEqual(3)
    const operationsShown = await page.locator('tbody tr td:nth-child(4)').allTextContents()
    expect(operationsShown).toContain('providers.create')
    expect(operationsShown).toContain('routing.set')
    // No secret is shown: the provider key's secret is "[redacted]".
    expect(await page.locator('main').textContent()).toContain('[redacted]')
    await page.getByLabel('Operation').selectOption('providers.create')
    // The filtered page replaces the list once its answer is in.
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll('tbody tr td:nth-child(4)')]
      return cells.length > 0 && cells.every((cell) => cell.textContent === 'providers.create')
    })
    expect(new Set(await page.locator('tbody tr td:nth-child(4)').allTextContents())).toEqual(new Set(['providers.create']))
    await saveScreenshot(page, 'dashboard-audit-desktop')

    // The one console line is the browser's own report of the refused rule's 400.
    expect(errors).toEqual([expect.stringMatching(/status of 400 .*\/api\/v1\/keys\/[0-9a-f-]+\/routing/)])
    expect(blocked).toEqual([])
    // Nothing the page or the browser asked for on its own is missing (the favicon included).
    expect(notFound).toEqual([])
  }, 30_000)

  test('a wrong key is refused with the API\'s message and nothing is kept', async () => {
    const { page, errors } = await open()
    await page.getByLabel('Management key').fill('rt_mgmt_notARealKeyAtAll000000000000000000')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Missing or invalid management key. Send it as Authorization: Bearer rt_mgmt_… (401)')
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
    // The one console line is the browser's own report of that 401.
    expect(errors).toEqual([expect.stringMatching(/status of 401 .*\/dashboard\/api\/session/)])
  }, 30_000)

  test('every page at phone width, usable from the keyboard', async () => {
    const { page, errors, blocked, notFound } = await open('phone')
    await page.getByLabel('Management key').waitFor()
    await saveScreenshot(page, 'dashboard-signin-phone')
    // Keyboard only: the key field has the focus; Enter signs in.
    await page.keyboard.type(server.managementKey)
    await page.keyboard.press('Enter')
    await page.getByRole('navigation', { name: 'Pages' }).waitFor()
    for (const [name, file] of [
      ['Usage', 'usage'],
      ['Inference keys', 'keys'],
      ['Provider keys', 'providers'],
      ['Requests', 'requests'],
      ['Workspace', 'workspace'],
      ['Audit log', 'audit'],
    ] as const) {
      await go(page, name)
      await page.waitForLoadState('networkidle')
      // Nothing wider than the screen but the tables, which scroll in their own box.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
      await saveScreenshot(page, `dashboard-${file}-phone`)
    }
    // One key's page too.
    await go(page, 'Inference keys')
    await page.getByRole('link', { name: 'browser app' }).click()
    await page.getByRole('heading', { level: 2, name: 'browser app' }).waitFor()
    await page.waitForLoadState('networkidle')
    // Its routing table scrolls in its own box too.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    await saveScreenshot(page, 'dashboard-key-phone')
    expect(errors).toEqual([])
    expect(blocked).toEqual([])
    // Nothing the page or the browser asked for on its own is missing (the favicon included).
    expect(notFound).toEqual([])
  }, 30_000)

  test("a key's limits: set, kept over a reload, stored as the API holds them; a refused value says why and changes nothing; a cleared one is null", async () => {
    const { page, errors, blocked } = await open()
    await signIn(page, server.managementKey)
    await go(page, 'Inference keys')
    await page.getByRole('link', { name: 'browser app' }).click()
    await page.getByRole('heading', { level: 2, name: 'browser app' }).waitFor()
    const id = (await page.evaluate(() => location.hash)).split('/')[2]
    const storedLimits = async () => (await server.call('GET', `/api/v1/keys/${id}`)).body.data.limits
    let limits = page.getByRole('form', { name: 'Limits' })
    // No limit yet: every field empty, what counts now beside it.
    for (const label of ['Requests per minute', 'Tokens per minute', 'USD per day', 'USD per month']) expect(await limits.getByLabel(label).inputValue()).toBe('')
    await limits.getByText(/^\d+ requests? in the last minute \(no limit\)$/).waitFor()

    await limits.getByLabel('Requests per minute').fill('2')
    await limits.getByLabel('USD per day').fill('5')
    await limits.getByRole('button', { name: 'Save limits' }).click()
    await expect(limits.getByRole('status').textContent()).resolves.toBe('Saved.')
    await limits.getByText(/^\d+ of 2 requests in the last minute$/).waitFor()
    await limits.getByText(/^\$[\d.]+ of \$5\.00 today, UTC$/).waitFor()
    // Kept over a reload, and stored as the API holds them.
    await page.reload()
    limits = page.getByRole('form', { name: 'Limits' })
    await limits.waitFor()
    expect(await limits.getByLabel('Requests per minute').inputValue()).toBe('2')
    expect(await limits.getByLabel('Tokens per minute').inputValue()).toBe('')
    expect(await limits.getByLabel('USD per day').inputValue()).toBe('5')
    expect(await limits.getByLabel('USD per month').inputValue()).toBe('')
    const expected = { requests_per_minute: 2, tokens_per_minute: null, usd_per_day: 5, usd_per_month: null }
    expect(await storedLimits()).toEqual(expected)
    // The input's description is what counts now.
    expect(await limits.getByLabel('Requests per minute').getAttribute('aria-describedby')).toBe('limit-now-requests_per_minute')

    // A value the API refuses: its message, and nothing written.
    await limits.getByLabel('Tokens per minute').fill('1.5')
    await limits.getByLabel('USD per month').fill('30')
    await limits.getByRole('button', { name: 'Save limits' }).click()
    await expect(limits.getByRole('alert').textContent()).resolves.toBe('Invalid limits.tokens_per_minute: expected a whole number of at least 1, or null for no limit. (400)')
    expect(await limits.getByRole('status').count()).toBe(0)
    expect(await storedLimits()).toEqual(expected)
    await saveScreenshot(page, 'dashboard-key-limits-refused-desktop')

    // Put right, and one limit cleared: only what changed is sent; the emptied field is null.
    const sent: unknown[] = []
    page.on('request', (request) => request.method() === 'PATCH' && sent.push(request.postDataJSON()))
    await limits.getByLabel('Tokens per minute').fill('')
    await limits.getByLabel('USD per month').fill('')
    await limits.getByLabel('Requests per minute').fill('')
    await limits.getByRole('button', { name: 'Save limits' }).click()
    await expect(limits.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect(await limits.getByRole('alert').count()).toBe(0)
    expect(sent).toEqual([{ limits: { requests_per_minute: null } }])
    expect(await storedLimits()).toEqual({ ...expected, requests_per_minute: null })
    await limits.getByText(/^\d+ requests? in the last minute \(no limit\)$/).waitFor()
    await saveScreenshot(page, 'dashboard-key-limits-desktop')

    // The one console line is the browser's own report of the refused value's 400.
    expect(errors).toEqual([expect.stringMatching(/status of 400 .*\/api\/v1\/keys\/[0-9a-f-]+\)$/)])
    expect(blocked).toEqual([])
  }, 30_000)

  test('a read-only key sees every page and no write control', async () => {
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const { page, errors } = await open()
    await signIn(page, readOnly.key)
    await page.getByText('read-only').waitFor()
    await go(page, 'Inference keys')
    await page.getByRole('cell', { name: 'browser app' }).waitFor()
    await go(page, 'Provider keys')
    await page.getByRole('cell', { name: 'openai main' }).waitFor()
    const writeControls = ['Create key', 'Add provider key', 'Revoke', 'Rotate', 'Restore', 'Rename', 'Notes', 'Disable', 'Enable', 'Delete', 'Save settings', 'Save limits', 'Save routing', 'Add target', 'Add remap', 'Save webhook', 'Attach', 'Add member', 'Create management key', 'Make read-only', 'Allow writes']
    const noWriteControl = async (name: string) => {
      await page.waitForLoadState('networkidle')
      for (const control of writeControls) expect([name, control, await page.getByRole('button', { name: control }).count()]).toEqual([name, control, 0])
      // What is shown in a form cannot be changed.
      for (const field of await page.locator('main input, main select, main textarea').all()) expect([name, await field.isEnabled()]).toEqual([name, false])
    }
    for (const name of ['Inference keys', 'Provider keys', 'Workspace']) {
      await go(page, name)
      await noWriteControl(name)
    }
    await go(page, 'Inference keys')
    await page.getByRole('link', { name: 'browser app' }).click()
    await page.getByRole('heading', { level: 2, name: 'browser app' }).waitFor()
    await noWriteControl('key page')
    // The key's limits (set by the test before) are shown, not editable.
    const limits = page.getByRole('region', { name: 'Limits' })
    await expect(limits.locator('.limit-value').allTextContents()).resolves.toEqual(['no limit', 'no limit', '$5.00', 'no limit'])
    await saveScreenshot(page, 'dashboard-keys-readonly-desktop')
    expect(errors).toEqual([])
  }, 30_000)
})
