/**
 * Browser tests: Debian's Chromium driven by playwright-core (no browser download). Pages load only
 * from loopback: any other host is aborted and recorded, so a test can assert the page needs no
 * network. Console errors and uncaught page errors are recorded for the test to assert empty.
 *
 * Skipping when there is no Chromium (./scripts/test installs it with apt when it can):
 *
 *   const chromium = requireBrowser('the dashboard browser tests')   // prints one line when missing
 *   describe.skipIf(!chromium)('dashboard', () => { ... })
 */
import { existsSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll } from 'bun:test'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { startTestServer, type TestServer } from './server'

const repoRoot = resolve(import.meta.dir, '../..')

/** Where saveScreenshot() writes (git-ignored). */
export const artifactsDir = join(repoRoot, 'test/artifacts')

/** Flags for a headless Chromium that never reaches out to Google (the machine has loopback only). */
export const chromiumFlags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** The page sizes the tests use: a laptop screen and a phone (mobile viewport, touch). */
export const viewports = {
  desktop: { viewport: { width: 1280, height: 800 }, isMobile: false, hasTouch: false },
  phone: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 },
} as const
export type ViewportName = keyof typeof viewports

/** The Chromium to drive: RT_TEST_CHROMIUM when set (undefined when that file is missing), else Debian's. */
export function findChromium(): string | undefined {
  const chosen = process.env.RT_TEST_CHROMIUM
  if (chosen) return existsSync(chosen) ? chosen : undefined
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
}

/** Whether a Chromium was found when this module loaded. */
export const browserAvailable = findChromium() !== undefined

/**
 * The Chromium path, or undefined after printing one line that `tests` are skipped and how to get a
 * browser. For `describe.skipIf(!requireBrowser('…'))`.
 */
export function requireBrowser(tests: string): string | undefined {
  const path = findChromium()
  if (!path) {
    const where = process.env.RT_TEST_CHROMIUM ? `RT_TEST_CHROMIUM=${process.env.RT_TEST_CHROMIUM}` : '/usr/bin/chromium'
    console.log(`skipped: no Chromium at ${where} (apt install chromium) — ${tests} need one`)
  }
  return path
}

/**
 * A headless Chromium with chromiumFlags. Playwright adds its own switches and a fresh temp
 * --user-data-dir, removed again by browser.close(). Throws when no Chromium is found.
 */
export async function launchBrowser(executablePath = findChromium()): Promise<Browser> {
  if (!executablePath) throw new Error('no Chromium found (set RT_TEST_CHROMIUM or apt install chromium)')
  return chromium.launch({ executablePath, headless: true, args: chromiumFlags })
}

/** A page in its own context, with what went wrong on it so far. */
export interface OpenedPage {
  page: Page
  context: BrowserContext
  /** Console messages of type 'error' and uncaught page errors, as text. */
  errors: string[]
  /** URLs of requests to hosts other than loopback, which were aborted. */
  blocked: string[]
  /** `<status> <url>` of the page's own requests answered 404 (a missing asset, such as a favicon the browser asks for on its own). */
  notFound: string[]
  /** Closes the page's context. */
  close(): Promise<void>
}

const loopbackHosts = new Set(['127.0.0.1', 'localhost', '[::1]'])

/**
 * Opens `url` (when given; else about:blank) in a new context at the `size` preset. A blocked
 * request's own "Failed to load resource" console line is left out of `errors` (it is in `blocked`).
 */
export async function openPage(browser: Browser, url?: string, size: ViewportName = 'desktop'): Promise<OpenedPage> {
  const context = await browser.newContext({ ...viewports[size] })
  const errors: string[] = []
  const blocked: string[] = []
  const notFound: string[] = []
  // Only requests to other hosts are intercepted: the page's own go straight through (intercepting
  // every request made Playwright, under Bun, now and then lose track of a response object).
  await context.route(
    (address) => !loopbackHosts.has(address.hostname),
    (route) => {
      blocked.push(route.request().url())
      return route.abort('blockedbyclient')
    },
  )
  // WebSockets bypass route(): never connected to a non-loopback server, only recorded.
  await context.routeWebSocket((address) => !loopbackHosts.has(address.hostname), (socket) => {
    blocked.push(socket.url())
    return socket.close()
  })
  const page = await context.newPage()
  page.on('console', (message) => {
    if (message.type() !== 'error') return
    const { url: source } = message.location()
    if (blocked.includes(source) && message.text().startsWith('Failed to load resource')) return
    errors.push(`console.error: ${message.text()}${source ? ` (${source})` : ''}`)
  })
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('response', (response) => {
    if (response.status() === 404) notFound.push(`404 ${response.url()}`)
  })
  if (url) await page.goto(url)
  return { page, context, errors, blocked, notFound, close: () => context.close() }
}

/** A full-page PNG at test/artifacts/<name> (.png added when missing); returns its path. */
export async function saveScreenshot(page: Page, name: string): Promise<string> {
  mkdirSync(artifactsDir, { recursive: true })
  const path = join(artifactsDir, name.endsWith('.png') ? name : `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

/** Signs in to the dashboard at `rootUrl` with a management key and opens a key's page (its heading `name` shown). */
export async function openKeyPage(browser: Browser, rootUrl: string, managementKey: string, id: string, name: string): Promise<OpenedPage> {
  const opened = await openPage(browser, `${rootUrl}/`, 'desktop')
  const { page } = opened
  await page.getByLabel('Management key').fill(managementKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('navigation', { name: 'Pages' }).waitFor()
  await page.evaluate((hash) => (location.hash = hash), `#/keys/${id}`)
  await page.getByRole('heading', { level: 2, name }).waitFor()
  return opened
}

/**
 * A suite of tests of a key's page: a test server (handed to `use`) and Chromium started before
 * them; every page opened closed, and both stopped, after them. Returns the function that signs in
 * and opens a key's page.
 */
export function useKeyPages(chromiumPath: string | undefined, use: (server: TestServer) => void): (managementKey: string, id: string, name: string) => Promise<OpenedPage> {
  let browser: Browser | undefined
  let server: TestServer | undefined
  const pages: OpenedPage[] = []
  beforeAll(async () => {
    server = await startTestServer()
    use(server)
    browser = await launchBrowser(chromiumPath)
  }, 30_000)
  afterAll(async () => {
    for (const opened of pages) await opened.close().catch(() => {})
    await browser?.close()
    await server?.[Symbol.asyncDispose]()
  }, 30_000)
  return async (managementKey, id, name) => {
    const opened = await openKeyPage(browser!, server!.rootUrl, managementKey, id, name)
    pages.push(opened)
    return opened
  }
}
