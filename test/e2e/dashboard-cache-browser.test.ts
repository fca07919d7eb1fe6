/**
 * The response cache section of a key's page in a real browser (CONTRACT §15): turned on with a TTL
 * and a scope, kept over a reload and stored as the API holds it; a refused TTL says why and changes
 * nothing; a semantic lookup set through the API is shown and kept by a save; the purge button says
 * how many answers it deleted; turned off again; a read-only key sees the setting and no control.
 * The mid-stream continuation section beside it (CONTRACT §16): on with its hops, kept over a
 * reload, off again; read-only, shown without a control.
 * Skipped, with one printed line, where there is no Chromium.
 */
import { describe, expect, test } from 'bun:test'
import { requireBrowser, saveScreenshot, useKeyPages } from '../harness/browser'
import type { TestServer } from '../harness/server'
import { createInferenceKey, storeProvider } from '../harness/api'
import { createManagementKey } from '../../src/management/workspaces'

const chromiumPath = requireBrowser('the dashboard cache browser tests')

describe.skipIf(!chromiumPath)("a key's response cache in the dashboard", () => {
  let server: TestServer
  const keyPage = useKeyPages(chromiumPath, (started) => void (server = started))
  const storedCache = async (id: string) => (await server.call('GET', `/api/v1/keys/${id}`)).body.data.cache

  test('on with a TTL and a scope, kept over a reload; a refused TTL changes nothing; the semantic lookup is shown and kept; purge; off', async () => {
    const openai = await storeProvider(server, { gateway: 'openai', label: 'embedder', key: 'sk-cache-browser-0123456789' })
    const key = await createInferenceKey(server, { name: 'cached app' })
    const { page, errors, blocked } = await keyPage(server.managementKey, key.id, 'cached app')
    let cache = page.getByRole('form', { name: 'Response cache' })
    await cache.getByText('Now: off.', { exact: false }).waitFor()
    expect(await cache.getByLabel('Cache answers').isChecked()).toBe(false)
    expect(await cache.getByLabel('Keep answers for (seconds)').isEnabled()).toBe(false)

    await cache.getByLabel('Cache answers').check()
    await cache.getByLabel('Keep answers for (seconds)').fill('600')
    await cache.getByLabel('Shared by').selectOption('workspace')
    await cache.getByRole('button', { name: 'Save cache' }).click()
    await expect(cache.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect(await storedCache(key.id)).toEqual({ ttl_seconds: 600, scope: 'workspace', semantic: null })
    await page.reload()
    cache = page.getByRole('form', { name: 'Response cache' })
    await cache.getByText('answers kept 10 min', { exact: false }).waitFor()
    expect(await cache.getByLabel('Cache answers').isChecked()).toBe(true)
    expect(await cache.getByLabel('Keep answers for (seconds)').inputValue()).toBe('600')
    expect(await cache.getByLabel('Shared by').inputValue()).toBe('workspace')

    // A TTL the API refuses: its message, and nothing written.
    await cache.getByLabel('Keep answers for (seconds)').fill('0')
    await cache.getByRole('button', { name: 'Save cache' }).click()
    await expect(cache.getByRole('alert').textContent()).resolves.toBe('Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to 2592000 (30 days). (400)')
    expect(await storedCache(key.id)).toEqual({ ttl_seconds: 600, scope: 'workspace', semantic: null })

    // A semantic lookup set through the API is shown, and a save here keeps it.
    const semantic = { threshold: 0.9, provider_key_id: openai.id, model: 'text-embedding-3-small' }
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 600, scope: 'workspace', semantic } })).status).toBe(200)
    await page.reload()
    cache = page.getByRole('form', { name: 'Response cache' })
    await cache.getByLabel('Semantic lookup').getByText('embedder (openai)', { exact: false }).waitFor()
    await cache.getByLabel('Keep answers for (seconds)').fill('3600')
    await cache.getByRole('button', { name: 'Save cache' }).click()
    await expect(cache.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect(await storedCache(key.id)).toEqual({ ttl_seconds: 3600, scope: 'workspace', semantic })
    await saveScreenshot(page, 'dashboard-key-cache-desktop')

    await cache.getByRole('button', { name: 'Purge cached answers' }).click()
    await expect(cache.getByRole('status').textContent()).resolves.toBe('Purged 0 cached answers.')

    await cache.getByLabel('Cache answers').uncheck()
    await cache.getByRole('button', { name: 'Save cache' }).click()
    await expect(cache.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect(await storedCache(key.id)).toBeNull()
    const actions = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data.map((event: { action: string; via: string }) => `${event.action} ${event.via}`)
    expect(actions).toEqual(['keys.set_cache dashboard', 'cache.purge dashboard', 'keys.set_cache dashboard', 'keys.set_cache rest', 'keys.set_cache dashboard', 'keys.create rest'])

    // The one console line is the browser's own report of the refused value's 400.
    expect(errors).toEqual([expect.stringMatching(/status of 400 .*\/dashboard\/api\/keys\/[0-9a-f-]+\/cache\)$/)])
    expect(blocked).toEqual([])
  }, 60_000)

  test('mid-stream continuation: on with 2 hops, kept over a reload, off again; a read-only key sees it and no control', async () => {
    const key = await createInferenceKey(server, { name: 'continued app' })
    const { page, errors, blocked } = await keyPage(server.managementKey, key.id, 'continued app')
    let section = page.getByRole('form', { name: 'Mid-stream continuation' })
    await section.getByText('Now: off.', { exact: false }).waitFor()
    expect(await section.getByLabel('At most').isEnabled()).toBe(false)
    await section.getByLabel('Continue broken streams').check()
    await section.getByLabel('At most').selectOption('2')
    await section.getByRole('button', { name: 'Save continuation' }).click()
    await expect(section.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toEqual({ max_hops: 2 })
    await page.reload()
    section = page.getByRole('form', { name: 'Mid-stream continuation' })
    await section.getByText('Now: on, at most 2 continuations per answer.', { exact: false }).waitFor()
    expect(await section.getByLabel('At most').inputValue()).toBe('2')
    await section.getByLabel('Continue broken streams').uncheck()
    await section.getByRole('button', { name: 'Save continuation' }).click()
    await expect(section.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toBeNull()
    const actions = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data.map((event: { action: string; via: string }) => `${event.action} ${event.via}`)
    expect(actions).toEqual(['keys.set_continuation dashboard', 'keys.set_continuation dashboard', 'keys.create rest'])
    expect([errors, blocked]).toEqual([[], []])

    const shown = await createInferenceKey(server, { name: 'read continuation', continuation: { max_hops: 3 } })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const opened = await keyPage(readOnly.key, shown.id, 'read continuation')
    const region = opened.page.getByRole('region', { name: 'Mid-stream continuation' })
    await region.getByText('Now: on, at most 3 continuations per answer.', { exact: false }).waitFor()
    expect(await region.locator('button, input, select').count()).toBe(0)
    expect(opened.errors).toEqual([])
  }, 60_000)

  test('a read-only key sees the setting and no control', async () => {
    const key = await createInferenceKey(server, { name: 'read cache', cache: { ttl_seconds: 86_400 } })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const { page, errors } = await keyPage(readOnly.key, key.id, 'read cache')
    const cache = page.getByRole('region', { name: 'Response cache' })
    await cache.getByText("Now: on, answers kept 1 d, this key's own.", { exact: false }).waitFor()
    await cache.getByText('Semantic lookup: off', { exact: false }).waitFor()
    expect(await cache.getByRole('button').count()).toBe(0)
    expect(await cache.locator('input, select').count()).toBe(0)
    expect(errors).toEqual([])
  }, 30_000)
})
