/**
 * The response cache's key setting and purge (CONTRACT §15): `cache` set whole through PATCH, MCP
 * set_key_cache, the CLI's `key cache` and the dashboard's call, every bad value refused naming the
 * field with nothing changed, the key object and the key's read-model entry showing it; the purge
 * (DELETE /api/v1/keys/{id}/cache, MCP purge_cache, CLI `cache purge`) answering how many entries
 * the node's store deleted; the audit events keys.set_cache and cache.purge; RT_CACHE_PATH and
 * RT_CACHE_MAX_MB.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { ConfigError, loadConfig } from '../../src/config/env'
import type { ManagementDeps } from '../../src/management/context'
import { createManagementKey, createWorkspace } from '../../src/management/workspaces'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { startGateways } from '../harness/gateways'
import { chatCompletion } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { baseEnvironment, repoRoot } from '../harness/service-process'
import { runCli } from '../harness/cli'
import { withMcp, type ToolResult } from '../harness/mcp-client'

const offView = null
const defaults = { ttl_seconds: 3600, scope: 'key', semantic: null }

/** What management sees of the node's cache (the runtime's NodeCache, or a stand-in). */
const managementCache = (server: TestServer) => server.runtime as ManagementDeps

/** The node's cache with its purge standing in for the file's: it records each purge and answers `purged`. */
function fakeStore(server: TestServer, purged = 3) {
  const calls: { workspaceId: string; keyId: string | undefined }[] = []
  server.runtime.cache.purge = (target) => (calls.push(target), purged)
  return calls
}

/** An entry as the cache stage stores it. */
const entry = (key: string, workspaceId: string, keyId: string | undefined) => ({
  key,
  workspaceId,
  keyId,
  model: 'openai/gpt-4o-mini',
  createdAt: Date.now(),
  expiresAt: Date.now() + 60_000,
  gateway: 'openai',
  costNanoUsd: 1000,
  value: '{"answer":"cached"}',
})

describe('the key setting `cache`', () => {
  test('PATCH sets the whole setting (defaults filled in), replaces it on each change, null turns it off; GET, the list and the read-model entry show it', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-settings-0123456789' })
    const key = await createInferenceKey(server, { name: 'cached' })
    expect(key.cache).toBe(offView)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.cache).toBe(offView)

    const on = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: {} })
    expect(on.status).toBe(200)
    expect(on.body.data.cache).toEqual(defaults)

    const shared = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 600, scope: 'workspace' } })
    expect(shared.body.data.cache).toEqual({ ttl_seconds: 600, scope: 'workspace', semantic: null })
    // A change replaces the whole setting: the scope not named is the default again.
    const replaced = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 120 } })
    expect(replaced.body.data.cache).toEqual({ ttl_seconds: 120, scope: 'key', semantic: null })

    const semantic = { threshold: 0.92, provider_key_id: openai.id, model: 'text-embedding-3-small' }
    const withSemantic = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 2_592_000, scope: 'workspace', semantic } })
    expect(withSemantic.status).toBe(200)
    const expected = { ttl_seconds: 2_592_000, scope: 'workspace', semantic }
    expect(withSemantic.body.data.cache).toEqual(expected)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.cache).toEqual(expected)
    expect((await server.call('GET', '/api/v1/keys')).body.data.find((listed: { id: string }) => listed.id === key.id).cache).toEqual(expected)
    // The key's entry carries it for the pipeline (camelCase, frozen).
    const entry = (await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!
    expect(entry.cache).toEqual({ ttlSeconds: 2_592_000, scope: 'workspace', semantic: { threshold: 0.92, providerKeyId: openai.id, model: 'text-embedding-3-small' }, purgedAt: 0 })
    expect(Object.isFrozen(entry.cache)).toBe(true)

    const off = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: null })
    expect(off.body.data.cache).toBe(offView)
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.cache).toBeNull()
    expect((await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!.cache).toBeUndefined()

    // POST /keys takes it too, as it takes limits.
    const created = await createInferenceKey(server, { cache: { scope: 'workspace' } })
    expect(created.cache).toEqual({ ...defaults, scope: 'workspace' })
  })

  test('every bad value is refused with 400 naming the field, and nothing of the request is kept', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-settings-0123456789' })
    const groq = await storeProvider(server, { gateway: 'groq', key: 'gsk-cache-settings-0123456789' })
    const disabled = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-disabled-0123456789' })
    expect((await server.call('PATCH', `/api/v1/providers/${disabled.id}`, { disabled: true })).status).toBe(200)
    const other = createWorkspace(server.runtime, 'other')
    const othersProvider = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-other-0123456789' }, other.management_key)
    const key = await createInferenceKey(server)
    const stored = { ttl_seconds: 60, scope: 'key', semantic: null }
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: stored })).status).toBe(200)

    const semantic = (fields: Record<string, unknown>) => ({ semantic: { threshold: 0.9, provider_key_id: openai.id, model: 'text-embedding-3-small', ...fields } })
    const cases: [unknown, string][] = [
      ['yes', 'Invalid cache: must be an object or null.'],
      [[1, 2], 'Invalid cache: must be an object or null.'],
      [{ ttl_seconds: 0 }, 'Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to 2592000 (30 days).'],
      [{ ttl_seconds: 2_592_001 }, 'Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to 2592000 (30 days).'],
      [{ ttl_seconds: 1.5 }, 'Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to 2592000 (30 days).'],
      [{ ttl_seconds: '60' }, 'Invalid cache.ttl_seconds: expected number.'],
      [{ scope: 'global' }, "Invalid cache.scope: expected 'key' or 'workspace'."],
      [{ colour: 'blue' }, 'Invalid cache.colour: unknown field; expected ttl_seconds, scope or semantic.'],
      [{ semantic: 'on' }, 'Invalid cache.semantic: must be an object or null.'],
      [semantic({ threshold: 0.5 }), 'Invalid cache.semantic.threshold: required, a number from 0.8 to 1.0.'],
      [semantic({ threshold: 1.01 }), 'Invalid cache.semantic.threshold: required, a number from 0.8 to 1.0.'],
      [semantic({ model: '' }), 'Invalid cache.semantic.model: required, a non-empty string of at most 200 characters.'],
      [semantic({ model: 'm'.repeat(201) }), 'Invalid cache.semantic.model: required, a non-empty string of at most 200 characters.'],
      [semantic({ extra: 1 }), 'Invalid cache.semantic.extra: unknown field; expected threshold, provider_key_id or model.'],
      [{ semantic: { threshold: 0.9, provider_key_id: openai.id } }, 'Invalid cache.semantic.model: expected required property.'],
      [semantic({ provider_key_id: groq.id }), "Invalid cache.semantic.provider_key_id: gateway 'groq' does not serve embeddings."],
      [semantic({ provider_key_id: disabled.id }), `Invalid cache.semantic.provider_key_id: provider key ${disabled.id} is disabled.`],
      [semantic({ provider_key_id: othersProvider.id }), `Invalid cache.semantic.provider_key_id: provider key ${othersProvider.id} does not exist in this workspace.`],
      [semantic({ provider_key_id: 'not-a-uuid' }), 'Invalid cache.semantic.provider_key_id: provider key not-a-uuid does not exist in this workspace.'],
    ]
    for (const [cache, message] of cases) {
      const refused = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache, label: 'not kept' })
      expect([JSON.stringify(cache), refused.status, refused.body.error]).toEqual([JSON.stringify(cache), 400, message])
    }
    const unchanged = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data
    expect(unchanged.cache).toEqual(stored)
    expect(unchanged.label).toBeNull()
    // Refused writes leave no audit event; the one accepted PATCH set only the cache: keys.set_cache (CONTRACT §15).
    const events = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(events.map((event: { action: string }) => event.action)).toEqual(['keys.set_cache', 'keys.create'])
    expect(events[0].changes).toEqual({ cache: stored })
    // A PATCH of the cache beside other fields is a key update that names them all.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: null, label: 'both' })).status).toBe(200)
    const both = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data[0]
    expect([both.action, both.changes]).toEqual(['keys.update', { cache: null, label: 'both' }])
  })

  test('MCP set_key_cache replaces the setting and is audited as keys.set_cache; a bad value is an error naming the field', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-settings-0123456789' })
    const key = await createInferenceKey(server)
    await withMcp(server, async (client) => {
      const tool = (await client.listTools()).tools.find((candidate) => candidate.name === 'set_key_cache')
      expect(tool?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true })
      expect(tool?.inputSchema.required).toEqual(['key_id', 'cache'])
      const set = (await client.callTool({ name: 'set_key_cache', arguments: { key_id: key.id, cache: { ttl_seconds: 300, semantic: { threshold: 0.95, provider_key_id: openai.id, model: 'text-embedding-3-small' } } } })) as ToolResult
      expect(set.isError).toBeFalsy()
      expect(JSON.parse(set.content[0]!.text).cache).toEqual({ ttl_seconds: 300, scope: 'key', semantic: { threshold: 0.95, provider_key_id: openai.id, model: 'text-embedding-3-small' } })
      const bad = (await client.callTool({ name: 'set_key_cache', arguments: { key_id: key.id, cache: { ttl_seconds: 300, scope: 'everyone' } } })) as ToolResult
      expect(bad.isError).toBe(true)
      expect(bad.content[0]!.text).toContain("Invalid cache.scope: expected 'key' or 'workspace'.")
      const missing = (await client.callTool({ name: 'set_key_cache', arguments: { key_id: key.id } })) as ToolResult
      expect(missing.isError).toBe(true)
      const off = (await client.callTool({ name: 'set_key_cache', arguments: { key_id: key.id, cache: null } })) as ToolResult
      expect(JSON.parse(off.content[0]!.text).cache).toBeNull()
    })
    const audit = (await server.call('GET', `/api/v1/audit?action=keys.set_cache&target_id=${key.id}`)).body.data
    expect(audit).toHaveLength(2)
    expect(audit[0]).toMatchObject({ via: 'mcp', action: 'keys.set_cache', target: { type: 'inference_key', id: key.id }, changes: { cache: null } })
    expect(audit[1]).toMatchObject({ via: 'mcp', changes: { cache: { ttl_seconds: 300, scope: 'key', semantic: { threshold: 0.95, provider_key_id: openai.id, model: 'text-embedding-3-small' } } } })
  })

  test("the dashboard's call sets it as keys.set_cache (via dashboard) and purges as cache.purge", async () => {
    await using server = await startTestServer()
    const calls = fakeStore(server, 2)
    const key = await createInferenceKey(server)
    const set = await server.call('PUT', `/dashboard/api/keys/${key.id}/cache`, { cache: { ttl_seconds: 90, scope: 'workspace' } })
    expect(set.status).toBe(200)
    expect(set.body.data.cache).toEqual({ ttl_seconds: 90, scope: 'workspace', semantic: null })
    const refused = await server.call('PUT', `/dashboard/api/keys/${key.id}/cache`, { cache: { ttl_seconds: -1 } })
    expect(refused.status).toBe(400)
    expect(refused.body.error).toContain('cache.ttl_seconds')
    const purged = await server.call('DELETE', `/dashboard/api/keys/${key.id}/cache`)
    expect(purged.body).toEqual({ data: { purged: 2 } })
    expect(calls).toEqual([{ workspaceId: server.workspaceId, keyId: undefined }])
    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(audit.map((event: { action: string; via: string }) => [event.action, event.via])).toEqual([
      ['cache.purge', 'dashboard'],
      ['keys.set_cache', 'dashboard'],
      ['keys.create', 'rest'],
    ])
  })
})

describe('the purge', () => {
  test("DELETE /api/v1/keys/{id}/cache purges the key's entries, or its workspace's shared ones for scope workspace; audited as cache.purge", async () => {
    await using server = await startTestServer()
    const calls = fakeStore(server, 3)
    const key = await createInferenceKey(server, { cache: {} })
    const purged = await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)
    expect(purged.status).toBe(200)
    expect(purged.body).toEqual({ data: { purged: 3 } })
    expect(calls).toEqual([{ workspaceId: server.workspaceId, keyId: key.id }])

    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { scope: 'workspace' } })).status).toBe(200)
    await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)
    expect(calls[1]).toEqual({ workspaceId: server.workspaceId, keyId: undefined })

    // A key whose cache is off: its own entries.
    await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: null })
    await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)
    expect(calls[2]).toEqual({ workspaceId: server.workspaceId, keyId: key.id })

    const audit = (await server.call('GET', `/api/v1/audit?action=cache.purge&target_id=${key.id}`)).body.data
    expect(audit).toHaveLength(3)
    expect(audit[0]).toMatchObject({ via: 'rest', action: 'cache.purge', target: { type: 'inference_key', id: key.id }, changes: { purged: 3 }, workspace_id: server.workspaceId })
  })

  test('a read-only key, an unknown key and another workspace\'s key purge nothing and leave no event; with no store the purge answers 0', async () => {
    await using server = await startTestServer()
    const calls = fakeStore(server)
    const key = await createInferenceKey(server, { cache: {} })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true).key
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`, undefined, readOnly)).status).toBe(403)
    expect((await server.call('DELETE', `/api/v1/keys/${crypto.randomUUID()}/cache`)).status).toBe(404)
    const other = createWorkspace(server.runtime, 'other')
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`, undefined, other.management_key)).status).toBe(404)
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`, undefined, null)).status).toBe(401)
    expect(calls).toEqual([])
    expect((await server.call('GET', '/api/v1/audit?action=cache.purge')).body.data).toEqual([])

    managementCache(server).cache = undefined
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 0 } })
  })

  test("the node's cache file: the key's entries, or the workspace's shared ones, are deleted and counted; a file never made stays unmade", async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server, { cache: {} })
    const other = await createInferenceKey(server, { cache: {} })
    // No key has stored anything: the purge makes no file.
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 0 } })
    expect(existsSync(server.runtime.config.cachePath)).toBe(false)

    const store = server.runtime.cache.open()
    for (const written of [entry('a', server.workspaceId, key.id), entry('b', server.workspaceId, key.id), entry('c', server.workspaceId, other.id), entry('d', server.workspaceId, undefined), entry('e', server.workspaceId, undefined)]) store.put(written)
    await store.flush()
    expect(store.stats().entries).toBe(5)
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 2 } })
    expect(store.get('a')).toBeUndefined()
    expect(store.get('c')).toBeDefined()
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { scope: 'workspace' } })).status).toBe(200)
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 2 } })
    expect(store.get('d')).toBeUndefined()
    expect(store.get('c')).toBeDefined()
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 0 } })
    expect(store.stats().entries).toBe(1)
  })

  test("a purge holds where it deleted nothing (another node's file): the purge time is on the key, or on the workspace for shared entries, and no entry made before it is served", async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    env.mocks.openai!.handle((request) => ({ json: chatCompletion(String(request.body?.model), `answer ${env.mocks.openai!.calls('/chat/completions').length}`) }))
    const routing = { routing: { targets: [{ provider_key_id: env.providers.openai }] } }
    const own = await createInferenceKey(server, { ...routing, cache: { ttl_seconds: 600 } })
    const shared = await createInferenceKey(server, { ...routing, cache: { ttl_seconds: 600, scope: 'workspace' } })
    const ask = (secret: string) => httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }, bearerHeader(secret))
    const store = server.runtime.cache.open()
    for (const key of [own, shared]) {
      expect((await ask(key.key)).headers.get('x-router-cache')).toBe('miss')
      await store.flush()
      expect((await ask(key.key)).headers.get('x-router-cache')).toBe('hit')
    }
    // The rows as another node's file holds them: the purge below deletes this node's, these stay.
    const rows = store['database'].query('SELECT * FROM cache_entries').all() as Record<string, unknown>[]
    expect(rows).toHaveLength(2)
    const before = Date.now()
    for (const key of [own, shared]) expect((await server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 1 } })
    expect(server.runtime.repositories.inferenceKeys.getById(own.id)!.cachePurgedAt).toBeGreaterThan(before)
    expect(server.runtime.repositories.workspaces.get(server.workspaceId)!.cachePurgedAt).toBeGreaterThan(before)
    for (const row of rows) {
      store.put({ key: row.key as string, workspaceId: row.workspace_id as string, keyId: (row.key_id as string | null) ?? undefined, model: row.model as string, createdAt: row.created_at as number, expiresAt: row.expires_at as number, gateway: row.gateway as string, costNanoUsd: row.cost_nano_usd as number | null, value: row.value as string })
    }
    await store.flush()
    expect(store.stats().entries).toBe(2)
    for (const key of [own, shared]) {
      const after = await ask(key.key)
      expect([after.headers.get('x-router-cache'), after.headers.get('x-router-attempts')]).toEqual(['miss', '1'])
    }
    expect(env.mocks.openai!.calls('/chat/completions')).toHaveLength(4)
  })

  test('MCP purge_cache answers {purged} and is audited via mcp', async () => {
    await using server = await startTestServer()
    const calls = fakeStore(server, 7)
    const key = await createInferenceKey(server, { cache: {} })
    await withMcp(server, async (client) => {
      const tool = (await client.listTools()).tools.find((candidate) => candidate.name === 'purge_cache')
      expect(tool?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true })
      const result = (await client.callTool({ name: 'purge_cache', arguments: { key_id: key.id } })) as ToolResult
      expect(result.isError).toBeFalsy()
      expect(JSON.parse(result.content[0]!.text)).toEqual({ purged: 7 })
      const unknown = (await client.callTool({ name: 'purge_cache', arguments: { key_id: crypto.randomUUID() } })) as ToolResult
      expect(unknown.isError).toBe(true)
    })
    expect(calls).toEqual([{ workspaceId: server.workspaceId, keyId: key.id }])
    const audit = (await server.call('GET', `/api/v1/audit?action=cache.purge&target_id=${key.id}`)).body.data
    expect(audit).toHaveLength(1)
    expect(audit[0]).toMatchObject({ via: 'mcp', changes: { purged: 7 } })
  })
})

describe('the CLI', () => {
  const cli = runCli

  test('key cache sets TTL and scope (flags not given stay, a semantic lookup is kept), --off turns it off; cache purge prints {purged}; both audited via cli', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-cache-settings-0123456789' })
    const key = await createInferenceKey(server)

    const on = await cli(server, ['key', 'cache', '--id', key.id])
    expect(on.exitCode).toBe(0)
    expect(on.out.id).toBe(key.id)
    expect(on.out.cache).toEqual(defaults)
    const shared = await cli(server, ['key', 'cache', '--id', key.id, '--ttl', '600', '--scope', 'workspace'])
    expect(shared.out.cache).toEqual({ ttl_seconds: 600, scope: 'workspace', semantic: null })

    const semantic = { threshold: 0.9, provider_key_id: openai.id, model: 'text-embedding-3-small' }
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 600, scope: 'workspace', semantic } })).status).toBe(200)
    const kept = await cli(server, ['key', 'cache', '--id', key.id, '--ttl', '30'])
    expect(kept.out.cache).toEqual({ ttl_seconds: 30, scope: 'workspace', semantic })

    for (const [args, message] of [
      [['--ttl', '0'], 'Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to 2592000 (30 days).'],
      [['--ttl', 'long'], 'Invalid cache.ttl_seconds: expected number.'],
      [['--scope', 'global'], "Invalid cache.scope: expected 'key' or 'workspace'."],
      [['--off', '--ttl', '5'], 'key cache --off takes no --ttl or --scope'],
    ] as const) {
      const refused = await cli(server, ['key', 'cache', '--id', key.id, ...args])
      expect([args, refused.exitCode, refused.error]).toEqual([args, 1, message])
    }
    expect((await cli(server, ['key', 'cache', '--id', crypto.randomUUID(), '--ttl', '5'])).exitCode).toBe(1)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.cache).toEqual({ ttl_seconds: 30, scope: 'workspace', semantic })

    const off = await cli(server, ['key', 'cache', '--id', key.id, '--off'])
    expect(off.out.cache).toBeNull()

    // No file on this machine yet: nothing to purge, and none made.
    const purge = await cli(server, ['cache', 'purge', '--key', key.id])
    expect(purge.exitCode).toBe(0)
    expect(purge.out).toEqual({ purged: 0 })
    expect(existsSync(server.runtime.config.cachePath)).toBe(false)
    // The server's entries in the node's file: the CLI opens the same file and deletes the key's.
    const store = server.runtime.cache.open()
    store.put(entry('x', server.workspaceId, key.id))
    store.put(entry('y', server.workspaceId, key.id))
    await store.flush()
    expect((await cli(server, ['cache', 'purge', '--key', key.id])).out).toEqual({ purged: 2 })
    expect(store.get('x')).toBeUndefined()
    expect((await cli(server, ['cache', 'purge', '--key', crypto.randomUUID()])).exitCode).toBe(1)

    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(audit.filter((event: { via: string }) => event.via === 'cli').map((event: { action: string; changes: unknown }) => [event.action, event.changes])).toEqual([
      ['cache.purge', { purged: 2 }],
      ['cache.purge', { purged: 0 }],
      ['keys.set_cache', { cache: null }],
      ['keys.set_cache', { cache: { ttl_seconds: 30, scope: 'workspace', semantic } }],
      ['keys.set_cache', { cache: { ttl_seconds: 600, scope: 'workspace', semantic: null } }],
      ['keys.set_cache', { cache: defaults }],
    ])
    for (const event of audit.filter((event: { via: string }) => event.via === 'cli')) expect(event.workspace_id).toBe(server.workspaceId)
  }, 60_000)
})

describe('RT_CACHE_PATH and RT_CACHE_MAX_MB', () => {
  test('defaults: cache.db in the data dir, 256 MB; a relative path resolves from the current directory', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'router-cache-config-'))
    try {
      const config = loadConfig({ RT_DATA_DIR: dataDir })
      expect(config.cachePath).toBe(join(dataDir, 'cache.db'))
      expect(config.cacheMaxMb).toBe(256)
      expect(loadConfig({ RT_DATA_DIR: dataDir, RT_CACHE_PATH: 'elsewhere/cache.db', RT_CACHE_MAX_MB: '1' })).toMatchObject({ cachePath: resolve('elsewhere/cache.db'), cacheMaxMb: 1 })
      // Beside LiteFS's mount, not in it, is fine.
      expect(loadConfig({ RT_DATA_DIR: dataDir, RT_LITEFS_DIR: join(dataDir, 'litefs'), RT_CACHE_PATH: join(dataDir, 'litefs-cache.db') }).cachePath).toBe(join(dataDir, 'litefs-cache.db'))
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  test('a size that is not a whole number of at least 1, or a path inside RT_LITEFS_DIR, is refused naming the variable', () => {
    for (const value of ['0', '1.5', 'lots', '-3']) {
      expect(() => loadConfig({ RT_CACHE_MAX_MB: value })).toThrow(ConfigError)
      expect(() => loadConfig({ RT_CACHE_MAX_MB: value })).toThrow('RT_CACHE_MAX_MB')
    }
    expect(() => loadConfig({ RT_LITEFS_DIR: '/litefs', RT_CACHE_PATH: '/litefs/cache.db' })).toThrow('RT_CACHE_PATH')
    expect(() => loadConfig({ RT_LITEFS_DIR: '/litefs', RT_CACHE_PATH: '/litefs' })).toThrow('RT_CACHE_PATH')
    // The default follows the data dir: inside the mount too, it is refused.
    expect(() => loadConfig({ RT_LITEFS_DIR: '/litefs', RT_DATA_DIR: '/litefs/data' })).toThrow('RT_CACHE_PATH')
  })

  test('the start stops with startup_failed naming the variable', async () => {
    for (const [name, environment] of [
      ['RT_CACHE_MAX_MB', { RT_CACHE_MAX_MB: '0' }],
      ['RT_CACHE_PATH', { RT_LITEFS_DIR: '/litefs-not-here', RT_CACHE_PATH: '/litefs-not-here/cache.db' }],
    ] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), 'router-cache-config-'))
      try {
        const child = Bun.spawn(['bun', 'run', 'src/main.ts'], { cwd: repoRoot, env: { ...baseEnvironment(), RT_DATA_DIR: dataDir, PORT: '0', ...environment }, stdout: 'pipe', stderr: 'pipe' })
        const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
        expect([name, exitCode]).toEqual([name, 1])
        expect(stdout).not.toContain('listening on')
        const failure = JSON.parse(stderr.trim().split('\n').at(-1)!)
        expect(failure).toMatchObject({ level: 'error', event: 'startup_failed' })
        expect(failure.message).toContain(name)
      } finally {
        rmSync(dataDir, { recursive: true, force: true })
      }
    }
  }, 30_000)
})
