/**
 * The browser harness itself (test/harness/browser.ts): a page served on loopback is opened at the
 * desktop and phone sizes, clicked, checked for console errors, and its request to another host is
 * blocked and recorded; full-page screenshots land in test/artifacts/. Skipped, with one printed
 * line, when there is no Chromium.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import type { Browser } from 'playwright-core'
import { launchBrowser, openPage, requireBrowser, saveScreenshot, type ViewportName } from '../harness/browser'

const chromiumPath = requireBrowser('the browser-harness tests')

const html = `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>harness</title>
<style>body { font: 16px sans-serif; margin: 24px; background: #f4f6fa } button { font-size: 20px; padding: 12px 20px }</style></head>
<body>
  <h1>Browser harness</h1>
  <button id="toggle" type="button">Not clicked</button>
  <img id="remote" alt="remote image" src="http://example.com/x.png" width="40" height="40">
  <script>
    document.getElementById('toggle').addEventListener('click', (event) => { event.target.textContent = 'Clicked' })
  </script>
</body></html>`

describe.skipIf(!chromiumPath)('browser harness', () => {
  let server: ReturnType<typeof Bun.serve>
  let browser: Browser

  beforeAll(async () => {
    server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response(html, { headers: { 'content-type': 'text/html; charset=utf-8' } }) })
    browser = await launchBrowser(chromiumPath)
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop(true)
  })

  for (const size of ['desktop', 'phone'] satisfies ViewportName[]) {
    test(`${size}: the button works, no console errors, the request to example.com is blocked, a screenshot is saved`, async () => {
      const opened = await openPage(browser, `http://127.0.0.1:${server.port}/`, size)
      try {
        const { page } = opened
        expect(page.viewportSize()).toEqual(size === 'desktop' ? { width: 1280, height: 800 } : { width: 390, height: 844 })
        await page.click('#toggle')
        expect(await page.textContent('#toggle')).toBe('Clicked')
        // The image failed (it was aborted), so the page is done with it.
        await page.waitForFunction(() => (document.getElementById('remote') as HTMLImageElement).complete)
        expect(opened.blocked).toEqual(['http://example.com/x.png'])
        expect(opened.errors).toEqual([])
        const path = await saveScreenshot(page, `harness-${size}.png`)
        expect(existsSync(path)).toBe(true)
        expect(readFileSync(path).subarray(1, 4).toString()).toBe('PNG')
      } finally {
        await opened.close()
      }
    })
  }

  test('an error on the page is recorded', async () => {
    const opened = await openPage(browser, `http://127.0.0.1:${server.port}/`)
    try {
      const thrown = opened.page.waitForEvent('pageerror')
      await opened.page.evaluate(() => {
        console.error('something broke')
        setTimeout(() => { throw new Error('uncaught') })
      })
      await thrown
      expect(opened.errors).toEqual([expect.stringContaining('console.error: something broke'), 'pageerror: uncaught'])
    } finally {
      await opened.close()
    }
  })
})
