/**
 * Mid-stream continuation's key setting (CONTRACT §16): `continuation` set whole through PATCH, MCP
 * set_key_continuation, the CLI's `key continuation` and the dashboard's call, every bad value
 * refused naming the field with nothing changed (the same 400 envelope as a bad `cache`), the key
 * object, the stored column and the key's read-model entry showing it; the audit event
 * keys.set_continuation. The streaming behaviour itself is not tested here.
 */
import { describe, expect, test } from 'bun:test'
import { createManagementKey } from '../../src/management/workspaces'
import { createInferenceKey } from '../harness/api'
import { startTestServer, type TestServer } from '../harness/server'
import { baseEnvironment, repoRoot } from '../harness/service-process'
import { runCli } from '../harness/cli'
import { withMcp, type ToolResult } from '../harness/mcp-client'

const hopsMessage = 'Invalid continuation.max_hops: expected a whole number from 1 to 3.'

describe('the key setting `continuation`', () => {
  test('PATCH sets the whole setting (max_hops 1 by default), null turns it off; GET, the list, the stored column and the read-model entry show it', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server, { name: 'continued' })
    expect(key.continuation).toBeNull()
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toBeNull()
    expect((await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!.continuation).toBeUndefined()

    const on = await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: {} })
    expect(on.status).toBe(200)
    expect(on.body.data.continuation).toEqual({ max_hops: 1 })

    const three = await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: { max_hops: 3 } })
    expect(three.body.data.continuation).toEqual({ max_hops: 3 })
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toEqual({ max_hops: 3 })
    expect((await server.call('GET', '/api/v1/keys')).body.data.find((listed: { id: string }) => listed.id === key.id).continuation).toEqual({ max_hops: 3 })
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.continuation).toBe('{"max_hops":3}')
    // The key's entry carries it for the pipeline (camelCase, frozen).
    const entry = (await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!
    expect(entry.continuation).toEqual({ maxHops: 3 })
    expect(Object.isFrozen(entry.continuation)).toBe(true)

    // A change replaces the whole setting: max_hops not named is the default again.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: {} })).body.data.continuation).toEqual({ max_hops: 1 })
    expect((await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!.continuation).toEqual({ maxHops: 1 })

    const off = await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: null })
    expect(off.body.data.continuation).toBeNull()
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.continuation).toBeNull()
    expect((await server.runtime.snapshots.fresh()).keysByPrefix.get(key.key_prefix)![0]!.continuation).toBeUndefined()

    // POST /keys takes it too, as it takes the cache.
    const created = await createInferenceKey(server, { continuation: { max_hops: 2 } })
    expect(created.continuation).toEqual({ max_hops: 2 })
  })

  test('every bad value is refused with 400 naming the field, in the envelope a bad cache gets, and nothing of the request is kept', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: { max_hops: 2 } })).status).toBe(200)

    const cases: [unknown, string][] = [
      [{ max_hops: 0 }, hopsMessage],
      [{ max_hops: 4 }, hopsMessage],
      [{ max_hops: -1 }, hopsMessage],
      [{ max_hops: 1.5 }, hopsMessage],
      [{ max_hops: '2' }, 'Invalid continuation.max_hops: expected number.'],
      [{ max_hops: null }, 'Invalid continuation.max_hops: expected number.'],
      [{ hops: 2 }, 'Invalid continuation.hops: unknown field; expected max_hops.'],
      [{ max_hops: 2, colour: 'blue' }, 'Invalid continuation.colour: unknown field; expected max_hops.'],
      ['yes', 'Invalid continuation: must be an object or null.'],
      [true, 'Invalid continuation: must be an object or null.'],
      [[1], 'Invalid continuation: must be an object or null.'],
    ]
    for (const [continuation, message] of cases) {
      const refused = await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation, label: 'not kept' })
      expect([JSON.stringify(continuation), refused.status, refused.body.error]).toEqual([JSON.stringify(continuation), 400, message])
    }
    // The same envelope (fields, no code) as a bad value of the other key settings.
    const badCache = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 0 } })
    const badContinuation = await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: { max_hops: 0 } })
    expect(badContinuation.status).toBe(badCache.status)
    expect(Object.keys(badContinuation.body).sort()).toEqual(Object.keys(badCache.body).sort())
    expect(badContinuation.body.code).toBe(badCache.body.code)

    const unchanged = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data
    expect(unchanged.continuation).toEqual({ max_hops: 2 })
    expect(unchanged.label).toBeNull()
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.continuation).toBe('{"max_hops":2}')

    // Refused writes leave no audit event; the one accepted PATCH set only continuation: keys.set_continuation (CONTRACT §16).
    const events = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(events.map((event: { action: string }) => event.action)).toEqual(['keys.set_continuation', 'keys.create'])
    expect(events[0].changes).toEqual({ continuation: { max_hops: 2 } })
    // `{}` is audited as it now stands, the default filled in; null as null.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: {} })).status).toBe(200)
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: null })).status).toBe(200)
    const narrow = (await server.call('GET', `/api/v1/audit?action=keys.set_continuation&target_id=${key.id}`)).body.data
    expect(narrow.map((event: { via: string; changes: unknown }) => [event.via, event.changes])).toEqual([
      ['rest', { continuation: null }],
      ['rest', { continuation: { max_hops: 1 } }],
      ['rest', { continuation: { max_hops: 2 } }],
    ])
    // A PATCH of continuation beside other fields is a key update that names them all.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: { max_hops: 3 }, label: 'both' })).status).toBe(200)
    const both = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data[0]
    expect([both.action, both.changes]).toEqual(['keys.update', { continuation: { max_hops: 3 }, label: 'both' }])
    // A read-only management key changes nothing.
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true).key
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { continuation: null }, readOnly)).status).toBe(403)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toEqual({ max_hops: 3 })
  })

  test('MCP set_key_continuation replaces the setting and is audited as keys.set_continuation; a bad value is an error naming the field', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)
    await withMcp(server, async (client) => {
      const tool = (await client.listTools()).tools.find((candidate) => candidate.name === 'set_key_continuation')
      expect(tool?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true })
      expect(tool?.inputSchema.required).toEqual(['key_id', 'continuation'])
      const set = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id, continuation: { max_hops: 2 } } })) as ToolResult
      expect(set.isError).toBeFalsy()
      expect(JSON.parse(set.content[0]!.text).continuation).toEqual({ max_hops: 2 })
      for (const continuation of [{ max_hops: 4 }, { max_hops: 0 }, { max_hops: 1.5 }]) {
        const bad = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id, continuation } })) as ToolResult
        expect(bad.isError).toBe(true)
        expect(bad.content[0]!.text).toContain(hopsMessage)
      }
      const unknown = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id, continuation: { hops: 2 } } })) as ToolResult
      expect(unknown.isError).toBe(true)
      expect(unknown.content[0]!.text).toContain('Invalid continuation.hops: unknown field; expected max_hops.')
      const missing = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id } })) as ToolResult
      expect(missing.isError).toBe(true)
      expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toEqual({ max_hops: 2 })
      const defaults = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id, continuation: {} } })) as ToolResult
      expect(JSON.parse(defaults.content[0]!.text).continuation).toEqual({ max_hops: 1 })
      const off = (await client.callTool({ name: 'set_key_continuation', arguments: { key_id: key.id, continuation: null } })) as ToolResult
      expect(JSON.parse(off.content[0]!.text).continuation).toBeNull()
    })
    const audit = (await server.call('GET', `/api/v1/audit?action=keys.set_continuation&target_id=${key.id}`)).body.data
    expect(audit).toHaveLength(3)
    expect(audit[0]).toMatchObject({ via: 'mcp', action: 'keys.set_continuation', target: { type: 'inference_key', id: key.id }, changes: { continuation: null } })
    expect(audit.map((event: { changes: unknown }) => event.changes)).toEqual([{ continuation: null }, { continuation: { max_hops: 1 } }, { continuation: { max_hops: 2 } }])
  })

  test("the dashboard's call sets it as keys.set_continuation (via dashboard); a bad value is refused naming the field", async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)
    const set = await server.call('PUT', `/dashboard/api/keys/${key.id}/continuation`, { continuation: { max_hops: 3 } })
    expect(set.status).toBe(200)
    expect(set.body.data.continuation).toEqual({ max_hops: 3 })
    const refused = await server.call('PUT', `/dashboard/api/keys/${key.id}/continuation`, { continuation: { max_hops: 4 } })
    expect([refused.status, refused.body.error]).toEqual([400, hopsMessage])
    const off = await server.call('PUT', `/dashboard/api/keys/${key.id}/continuation`, { continuation: null })
    expect(off.body.data.continuation).toBeNull()
    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(audit.map((event: { action: string; via: string; changes: unknown }) => [event.action, event.via, event.changes])).toEqual([
      ['keys.set_continuation', 'dashboard', { continuation: null }],
      ['keys.set_continuation', 'dashboard', { continuation: { max_hops: 3 } }],
      ['keys.create', 'rest', expect.anything()],
    ])
  })
})

describe('the CLI', () => {
  const cli = runCli

  test('key continuation turns it on (max hops 1, or kept), sets --max-hops, --off turns it off; bad values refused naming the field; audited via cli', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)

    const on = await cli(server, ['key', 'continuation', '--id', key.id])
    expect(on.exitCode).toBe(0)
    expect(on.out.id).toBe(key.id)
    expect(on.out.continuation).toEqual({ max_hops: 1 })
    const three = await cli(server, ['key', 'continuation', '--id', key.id, '--max-hops', '3'])
    expect(three.out.continuation).toEqual({ max_hops: 3 })
    // Without --max-hops, the hops already set stay.
    const kept = await cli(server, ['key', 'continuation', '--id', key.id])
    expect(kept.out.continuation).toEqual({ max_hops: 3 })

    for (const [args, message] of [
      [['--max-hops', '0'], hopsMessage],
      [['--max-hops', '4'], hopsMessage],
      [['--max-hops', '1.5'], hopsMessage],
      [['--max-hops', 'two'], 'Invalid continuation.max_hops: expected number.'],
      [['--off', '--max-hops', '2'], 'key continuation --off takes no --max-hops'],
    ] as const) {
      const refused = await cli(server, ['key', 'continuation', '--id', key.id, ...args])
      expect([args, refused.exitCode, refused.error]).toEqual([args, 1, message])
    }
    expect((await cli(server, ['key', 'continuation', '--id', crypto.randomUUID(), '--max-hops', '2'])).exitCode).toBe(1)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toEqual({ max_hops: 3 })

    const off = await cli(server, ['key', 'continuation', '--id', key.id, '--off'])
    expect([off.exitCode, off.out.continuation]).toEqual([0, null])
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.continuation).toBeNull()

    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    const byCli = audit.filter((event: { via: string }) => event.via === 'cli')
    expect(byCli.map((event: { action: string; changes: unknown }) => [event.action, event.changes])).toEqual([
      ['keys.set_continuation', { continuation: null }],
      ['keys.set_continuation', { continuation: { max_hops: 3 } }],
      ['keys.set_continuation', { continuation: { max_hops: 3 } }],
      ['keys.set_continuation', { continuation: { max_hops: 1 } }],
    ])
    for (const event of byCli) expect(event.workspace_id).toBe(server.workspaceId)

    const help = await new Response(Bun.spawn(['bun', 'run', 'src/cli/index.ts', 'key', 'continuation', '--help'], { cwd: repoRoot, env: baseEnvironment(), stdout: 'pipe' }).stdout).text()
    expect(help).toContain('key continuation --id KEY_ID [--max-hops N] [--off]')
  }, 60_000)
})
