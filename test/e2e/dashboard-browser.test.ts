/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core): sign in, add two
 * provider keys and an inference key (shown once, copied), send a request through the router that
 * fails over, find it in the request explorer with its attempt path and in the usage chart; a
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
  })

  afterAll(async () => {
    for (const opened of pages) await opened.close().catch(() => {})
    await browser?.close()
    await server?.[Symbol.asyncDispose]()
    await openai?.close()
    await groq?.close()
  })

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
    const { page, errors, blocked } = await open()
    await page.getByLabel('Management key').waitFor()
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

    // A request through the router with the new key: groq fails, openai answers.
    const answer = await fetch(`${server.rootUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello from the browser test' }] }),
    })
    expect(answer.status).toBe(200)
    server.runtime.logQueue.flush()

    // The explorer: the request with its attempt path; its detail with stage timings.
    await go(page, 'Requests')
    await page.getByRole('button', { name: 'Refresh' }).click()
    const row = page.getByRole('row', { name: /^Request / })
    await row.first().waitFor()
    expect(await row.count()).toBe(1)
    expect(await row.first().textContent()).toContain('groq:server-error > openai:ok')
    await row.first().press('Enter')
    const detail = page.getByRole('region', { name: 'Request detail' })
    await detail.waitFor()
    expect(await detail.textContent()).toMatch(/stage timings.*auth [\d.]+ ms/)
    expect(await detail.textContent()).toContain('2 attempts')
    await saveScreenshot(page, 'dashboard-requests-desktop')

    // Usage: the request counted, and drawn in the chart.
    await go(page, 'Usage')
    await expect(page.getByTestId('summary').textContent()).resolves.toMatch(/^1requests/)
    await page.locator('.chart canvas').waitFor()
    await saveScreenshot(page, 'dashboard-usage-desktop')
    await go(page, 'Provider keys')
    await saveScreenshot(page, 'dashboard-providers-desktop')

    expect(errors).toEqual([])
    expect(blocked).toEqual([])
  })

  test('a wrong key is refused with the API\'s message and nothing is kept', async () => {
    const { page, errors } = await open()
    await page.getByLabel('Management key').fill('rt_mgmt_notARealKeyAtAll000000000000000000')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Missing or invalid management key. Send it as Authorization: Bearer rt_mgmt_… (401)')
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
    // The one console line is the browser's own report of that 401.
    expect(errors).toEqual([expect.stringMatching(/status of 401 .*\/dashboard\/api\/session/)])
  })

  test('every page at phone width, usable from the keyboard', async () => {
    const { page, errors, blocked } = await open('phone')
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
    ] as const) {
      await go(page, name)
      await page.waitForLoadState('networkidle')
      // Nothing wider than the screen but the tables, which scroll in their own box.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
      await saveScreenshot(page, `dashboard-${file}-phone`)
    }
    expect(errors).toEqual([])
    expect(blocked).toEqual([])
  })

  test('a read-only key sees every page and no write control', async () => {
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const { page, errors } = await open()
    await signIn(page, readOnly.key)
    await page.getByText('read-only').waitFor()
    await go(page, 'Inference keys')
    await page.getByRole('cell', { name: 'browser app' }).waitFor()
    await go(page, 'Provider keys')
    await page.getByRole('cell', { name: 'openai main' }).waitFor()
    for (const name of ['Inference keys', 'Provider keys']) {
      await go(page, name)
      await page.waitForLoadState('networkidle')
      expect(await page.locator('main form').count()).toBe(0)
      for (const control of ['Create key', 'Add provider key', 'Revoke', 'Rotate', 'Restore', 'Rename', 'Disable', 'Enable', 'Delete']) {
        expect([name, control, await page.getByRole('button', { name: control }).count()]).toEqual([name, control, 0])
      }
    }
    await saveScreenshot(page, 'dashboard-keys-readonly-desktop')
    expect(errors).toEqual([])
  })
})
