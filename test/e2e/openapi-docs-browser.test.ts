/**
 * The API docs page in a real browser (Debian's Chromium through playwright-core): Swagger UI renders
 * the whole document from this server alone, the inference tags and every /v1 operation among them,
 * with an operation's key schemes, body and error answers shown when it is opened. No console
 * errors, nothing loaded from another host. Screenshots go to test/artifacts/ (openapi-docs-*.png).
 * Skipped, with one printed line, where there is no Chromium.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { launchBrowser, openPage, requireBrowser, saveScreenshot } from '../harness/browser'
import { startTestServer, type TestServer } from '../harness/server'
import { inferenceOperations, inferenceTags } from '../../src/api/inference-document'

const chromiumPath = requireBrowser('the API docs browser tests')

describe.skipIf(!chromiumPath)('the API docs page in a browser', () => {
  let browser: Browser
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
    browser = await launchBrowser(chromiumPath)
    // Starting Chromium on a loaded 2-core machine can take longer than the default 5 s.
  }, 30_000)

  afterAll(async () => {
    await browser?.close()
    await server?.[Symbol.asyncDispose]()
  }, 30_000)

  test('shows every inference tag and operation; an opened operation shows its key schemes, body and error envelopes', async () => {
    const opened = await openPage(browser, `${server.rootUrl}/api/v1/docs`)
    try {
      const { page } = opened
      await page.waitForSelector('.opblock-tag', { timeout: 15_000 })
      const tags = await page.$$eval('.opblock-tag', (elements) => elements.map((element) => element.getAttribute('data-tag')))
      expect(tags).toEqual(expect.arrayContaining(inferenceTags.map((tag) => tag.name)))
      // The management API is still there.
      expect(tags).toEqual(expect.arrayContaining(['keys', 'routing']))
      expect(await page.textContent('.info .title')).toContain('Router API')

      // Every documented /v1 operation is on the page, by method and path.
      const shown = await page.$$eval('.opblock', (blocks) =>
        blocks.map((block) => `${block.querySelector('.opblock-summary-method')?.textContent?.trim().toLowerCase()} ${block.querySelector('.opblock-summary-path')?.getAttribute('data-path')}`),
      )
      expect(shown).toEqual(expect.arrayContaining(inferenceOperations.map((operation) => `${operation.method} ${operation.path}`)))

      // Open POST /v1/messages: its lock, its body schema and its error answers render.
      const messages = page.locator('.opblock-post', { has: page.locator('.opblock-summary-path[data-path="/v1/messages"]') })
      await messages.locator('.opblock-summary').click()
      await messages.locator('.responses-table').first().waitFor({ timeout: 10_000 })
      const text = (await messages.textContent()) ?? ''
      expect(text).toContain('wrong_api_shape')
      // The documented example body, and the messages envelope of its errors.
      expect(text).toContain('"max_tokens": 1024')
      expect(text).toContain('"type": "error"')
      expect(text).toContain('text/event-stream')
      for (const status of ['200', '400', '401', '404', '429', '502']) expect([status, text.includes(status)]).toEqual([status, true])
      expect(await messages.locator('.authorization__btn').count()).toBeGreaterThan(0)
      await saveScreenshot(page, 'openapi-docs-desktop.png')

      expect(opened.errors).toEqual([])
      expect(opened.blocked).toEqual([])
    } finally {
      await opened.close()
    }
  }, 60_000)
})
