/**
 * The dashboard's own routes (/dashboard/api): behind the management key like /api/v1, scoped to the
 * key's workspace, read-only keys refused on writes. Who signed in, the request explorer and key
 * rotation with a grace window.
 */
import { describe, expect, test } from 'bun:test'
import { startTestServer, type TestServer } from '../harness/server'
import { createInferenceKey } from '../harness/api'
import { createManagementKey, createWorkspace } from '../../src/management/workspaces'

const call = async (server: TestServer, method: string, path: string, key: string | null, body?: unknown) => {
  const response = await fetch(`${server.rootUrl}${path}`, {
    method,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: response.status, body: (await response.json().catch(() => undefined)) as any }
}

describe('dashboard api', () => {
  test('session: the workspace and whether the key may write; 401 without a valid key', async () => {
    await using server = await startTestServer()
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const full = await call(server, 'GET', '/dashboard/api/session', server.managementKey)
    expect(full.status).toBe(200)
    expect(full.body.data).toEqual({ workspace: expect.objectContaining({ id: server.workspaceId, name: 'default' }), read_only: false })
    expect((await call(server, 'GET', '/dashboard/api/session', readOnly.key)).body.data.read_only).toBe(true)
    expect((await call(server, 'GET', '/dashboard/api/session', null)).status).toBe(401)
    expect((await call(server, 'GET', '/dashboard/api/session', 'rt_mgmt_notARealKeyAtAll000000000000000000')).status).toBe(401)
  })

  test('requests: newest first, the workspace only, filtered by key, status and model; bad filters are 400, an unknown key 404', async () => {
    await using server = await startTestServer()
    const first = await createInferenceKey(server, { name: 'first' })
    const second = await createInferenceKey(server, { name: 'second' })
    const other = createWorkspace(server.runtime, 'other')
    const now = Date.now()
    const row = (index: number, keyId: string, status: number, model: string, workspaceId = server.workspaceId) => ({
      id: `req-${index}`,
      workspaceId,
      keyId,
      createdAt: now - index * 60_000,
      endpoint: 'chat',
      gateway: status === 200 ? 'openai' : 'groq',
      model,
      status,
      stream: false,
      latencyMs: 100 + index,
      overheadMs: 0.4,
      attempts: status === 200 ? 2 : 1,
      attemptPath: status === 200 ? 'groq:server-error > openai:ok' : 'groq:server-error',
      stageTimings: '{"auth":0.01,"body":0.02,"plan":0.01,"upstream":99}',
      requestBody: index === 0 ? '{"model":"openai/gpt-4o-mini"}' : null,
    })
    const findings = [
      { rule: 'email', where: 'input', action: 'mask', count: 2 },
      { rule: 'secret', where: 'output', action: 'block', count: 1 },
    ]
    server.runtime.repositories.requestLogs.insertMany([
      // A cache answer (CONTRACT §15), a continued stream with guardrail findings (§16, §17), and a plain one.
      { ...row(0, first.id, 200, 'openai/gpt-4o-mini'), cache: 'hit', savedNanoUsd: 83_700, costNanoUsd: 0 },
      { ...row(1, second.id, 502, 'openai/gpt-4o-mini'), continued: 2, guardrails: JSON.stringify(findings) },
      row(2, first.id, 200, 'anthropic/claude-sonnet'),
      { ...row(5, first.id, 200, 'anthropic/claude-sonnet'), createdAt: now - 150_000, cache: 'semantic-hit', savedNanoUsd: null, costNanoUsd: 0 },
      row(3, first.id, 200, 'openai/gpt-4o-mini', other.workspace.id),
      // Older than 24 hours: only in 7d.
      { ...row(4, first.id, 200, 'openai/gpt-4o-mini'), createdAt: now - 2 * 86_400_000 },
    ])
    const list = async (query: string) => {
      const answer = await call(server, 'GET', `/dashboard/api/requests${query}`, server.managementKey)
      expect(answer.status).toBe(200)
      return (answer.body.data as any[]).map((entry) => entry.id)
    }
    expect(await list('?range=24h')).toEqual(['req-0', 'req-1', 'req-2', 'req-5'])
    // No range: 7 days, as the usage API reads a missing range.
    expect(await list('')).toEqual(['req-0', 'req-1', 'req-2', 'req-5', 'req-4'])
    expect(await list(`?range=24h&api_key_id=${first.id}`)).toEqual(['req-0', 'req-2', 'req-5'])
    expect(await list('?range=24h&status=error')).toEqual(['req-1'])
    expect(await list('?range=24h&status=ok')).toEqual(['req-0', 'req-2', 'req-5'])
    expect(await list('?range=24h&status=502')).toEqual(['req-1'])
    expect(await list('?range=24h&model=anthropic/claude-sonnet')).toEqual(['req-2', 'req-5'])
    const rows = (await call(server, 'GET', '/dashboard/api/requests?range=24h', server.managementKey)).body.data as any[]
    expect(rows[0]).toMatchObject({
      id: 'req-0',
      api_key_id: first.id,
      status: 200,
      attempts: 2,
      attempt_path: 'groq:server-error > openai:ok',
      stage_timings: { auth: 0.01, body: 0.02, plan: 0.01, upstream: 99 },
      request_body: '{"model":"openai/gpt-4o-mini"}',
    })
    // The cache outcome with its saving in USD, the continuations and the findings (parsed), null where none.
    const outcome = (entry: any) => ({ id: entry.id, cache: entry.cache, saved_usd: entry.saved_usd, continued: entry.continued, guardrails: entry.guardrails })
    expect(rows.map(outcome)).toEqual([
      { id: 'req-0', cache: 'hit', saved_usd: 0.0000837, continued: null, guardrails: null },
      { id: 'req-1', cache: null, saved_usd: null, continued: 2, guardrails: findings },
      { id: 'req-2', cache: null, saved_usd: null, continued: null, guardrails: null },
      { id: 'req-5', cache: 'semantic-hit', saved_usd: null, continued: null, guardrails: null },
    ])
    expect((await call(server, 'GET', '/dashboard/api/requests?status=teapot', server.managementKey)).status).toBe(400)
    expect((await call(server, 'GET', '/dashboard/api/requests?api_key_id=nope', server.managementKey)).status).toBe(400)
    expect((await call(server, 'GET', `/dashboard/api/requests?api_key_id=${crypto.randomUUID()}`, server.managementKey)).status).toBe(404)
    // The other workspace sees its own row only.
    const theirs = await call(server, 'GET', '/dashboard/api/requests', other.management_key)
    expect((theirs.body.data as any[]).map((entry) => entry.id)).toEqual(['req-3'])
  })

  test('rotate: a new secret shown once, the old one working until grace_until; read-only 403, another workspace 404, revoked 409', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server, { name: 'rotated' })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const other = createWorkspace(server.runtime, 'other')
    expect((await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, readOnly.key, {})).status).toBe(403)
    expect((await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, other.management_key, {})).status).toBe(404)
    for (const grace of ['soon', -1, 1.5, 31 * 86_400, 1e17]) {
      expect([grace, (await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, server.managementKey, { grace_seconds: grace })).status]).toEqual([grace, 400])
    }
    const rotated = await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, server.managementKey, { grace_seconds: 600 })
    expect(rotated.status).toBe(200)
    expect(rotated.body.data.key).toMatch(/^rt_live_/)
    expect(rotated.body.data.key).not.toBe(key.key)
    const graceUntil = Date.parse(rotated.body.data.grace_until)
    expect(Math.abs(graceUntil - (Date.now() + 600_000))).toBeLessThan(5000)
    // Both secrets authenticate; the old one with the grace header (SPEC "Common response headers").
    const chat = (secret: string) =>
      fetch(`${server.rootUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: '{"model":"m","messages":[]}' })
    const old = await chat(key.key)
    expect(old.status).not.toBe(401)
    expect(old.headers.get('x-router-key-grace-until')).toBe(rotated.body.data.grace_until)
    expect((await chat(rotated.body.data.key)).status).not.toBe(401)
    // Without grace_seconds: the default grace of a day.
    const again = await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, server.managementKey, {})
    expect(Math.abs(Date.parse(again.body.data.grace_until) - (Date.now() + 86_400_000))).toBeLessThan(5000)
    await call(server, 'DELETE', `/api/v1/keys/${key.id}`, server.managementKey)
    expect((await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, server.managementKey, {})).status).toBe(409)
  })

  test('a key\'s notifications and MCP servers: the signing secret shown once, every call checked for the workspace and the key\'s flag', async () => {
    await using server = await startTestServer({ RT_WEBHOOK_ALLOW_PRIVATE: '1' })
    const key = await createInferenceKey(server, { name: 'notified' })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const other = createWorkspace(server.runtime, 'other')
    const extras = async () => (await call(server, 'GET', `/dashboard/api/keys/${key.id}/extras`, server.managementKey)).body.data
    expect(await extras()).toEqual({ webhook_url: null, notify_email: false, mcp_servers: [] })

    const saved = await call(server, 'PUT', `/dashboard/api/keys/${key.id}/webhook`, server.managementKey, { url: 'http://127.0.0.1:9/hook' })
    expect(saved.status).toBe(200)
    expect(saved.body.data.signing_secret).toMatch(/^whsec_/)
    // The secret is in that answer only.
    expect(JSON.stringify(await extras())).not.toContain('whsec_')
    expect((await extras()).webhook_url).toBe('http://127.0.0.1:9/hook')
    const rotated = await call(server, 'POST', `/dashboard/api/keys/${key.id}/webhook/rotate`, server.managementKey)
    expect(rotated.body.data.signing_secret).toMatch(/^whsec_/)
    expect(rotated.body.data.signing_secret).not.toBe(saved.body.data.signing_secret)
    expect((await call(server, 'PUT', `/dashboard/api/keys/${key.id}/webhook`, server.managementKey, { url: 'ftp://example.com/x' })).status).toBe(400)
    expect((await call(server, 'PUT', `/dashboard/api/keys/${key.id}/webhook`, server.managementKey, {})).status).toBe(400)

    expect((await call(server, 'PUT', `/dashboard/api/keys/${key.id}/notify-email`, server.managementKey, { on: true })).status).toBe(200)
    expect((await call(server, 'PUT', `/dashboard/api/keys/${key.id}/notify-email`, server.managementKey, { on: 'yes' })).status).toBe(400)

    const attached = await call(server, 'POST', `/dashboard/api/keys/${key.id}/mcp-servers`, server.managementKey, { url: 'http://127.0.0.1:9/mcp', name: 'tools' })
    expect(attached.status).toBe(200)
    expect(attached.body.data).toEqual([expect.objectContaining({ name: 'tools', url: 'http://127.0.0.1:9/mcp' })])
    expect(await extras()).toMatchObject({ webhook_url: 'http://127.0.0.1:9/hook', notify_email: true, mcp_servers: [expect.objectContaining({ name: 'tools' })] })

    // Read-only keys write nothing; another workspace's key finds no such key.
    for (const [method, path, body] of [
      ['PUT', `/dashboard/api/keys/${key.id}/webhook`, { url: 'http://127.0.0.1:9/other' }],
      ['DELETE', `/dashboard/api/keys/${key.id}/webhook`, undefined],
      ['PUT', `/dashboard/api/keys/${key.id}/notify-email`, { on: false }],
      ['POST', `/dashboard/api/keys/${key.id}/mcp-servers`, { url: 'http://127.0.0.1:9/x' }],
    ] as const) {
      expect([method, path, (await call(server, method, path, readOnly.key, body)).status]).toEqual([method, path, 403])
      expect([method, path, (await call(server, method, path, other.management_key, body)).status]).toEqual([method, path, 404])
    }
    expect((await call(server, 'GET', `/dashboard/api/keys/${key.id}/extras`, other.management_key)).status).toBe(404)

    const removed = await call(server, 'DELETE', `/dashboard/api/keys/${key.id}/mcp-servers/${attached.body.data[0].id}`, server.managementKey)
    expect(removed.body.data).toEqual([])
    expect((await call(server, 'DELETE', `/dashboard/api/keys/${key.id}/webhook`, server.managementKey)).body.data).toEqual({ url: null, signing_secret: null })
    expect(await extras()).toEqual({ webhook_url: null, notify_email: true, mcp_servers: [] })
  })

  test('the workspace: settings, members and management keys (created shown once, the read-only flag changed here only)', async () => {
    await using server = await startTestServer()
    const other = createWorkspace(server.runtime, 'other')
    const overview = async (key = server.managementKey) => (await call(server, 'GET', '/dashboard/api/workspace', key)).body.data
    const before = await overview()
    expect(before.settings).toMatchObject({ id: server.workspaceId, allowed_ips: [], steering_message: null, capture_bodies: false })
    expect(before.management_keys).toHaveLength(1)
    expect(JSON.stringify(before)).not.toContain(server.managementKey)

    const patched = await call(server, 'PATCH', '/dashboard/api/workspace', server.managementKey, { allowed_ips: '10.0.0.0/8\n192.168.1.7', steering_message: 'Be brief.', capture_bodies: true })
    expect(patched.status).toBe(200)
    expect(patched.body.data).toMatchObject({ allowed_ips: ['10.0.0.0/8', '192.168.1.7'], steering_message: 'Be brief.', capture_bodies: true })
    // Invalid input changes nothing.
    expect((await call(server, 'PATCH', '/dashboard/api/workspace', server.managementKey, { allowed_ips: 'not-an-ip', steering_message: 'changed' })).status).toBe(400)
    expect((await call(server, 'PATCH', '/dashboard/api/workspace', server.managementKey, { capture_bodies: 'yes' })).status).toBe(400)
    expect((await overview()).settings.steering_message).toBe('Be brief.')

    expect((await call(server, 'POST', '/dashboard/api/workspace/members', server.managementKey, { email: 'ops@example.com' })).status).toBe(200)
    expect((await call(server, 'POST', '/dashboard/api/workspace/members', server.managementKey, { email: 'nope' })).status).toBe(400)
    expect((await overview()).members.map((member: any) => member.email)).toEqual(['ops@example.com'])

    // The workspace's only key that can write cannot be made read-only here (nothing could undo it but the CLI).
    const only = before.management_keys[0].id
    const lockout = await call(server, 'PATCH', `/dashboard/api/workspace/management-keys/${only}`, server.managementKey, { read_only: true })
    expect(lockout.status).toBe(409)
    expect(lockout.body.error).toContain('last management key that can write')
    expect((await call(server, 'GET', '/dashboard/api/session', server.managementKey)).body.data.read_only).toBe(false)

    const created = await call(server, 'POST', '/dashboard/api/workspace/management-keys', server.managementKey, { read_only: true })
    expect(created.status).toBe(200)
    const { key: secret, read_only } = created.body.data
    expect([secret, read_only]).toEqual([expect.stringMatching(/^rt_mgmt_/), true])
    expect((await call(server, 'GET', '/dashboard/api/session', secret)).body.data.read_only).toBe(true)
    // The new read-only key can read here and write nothing.
    expect((await call(server, 'POST', '/dashboard/api/workspace/members', secret, { email: 'x@example.com' })).status).toBe(403)
    expect((await call(server, 'PATCH', `/dashboard/api/workspace/management-keys/${created.body.data.id}`, secret, { read_only: false })).status).toBe(403)
    // Another workspace cannot flip it; this one can.
    expect((await call(server, 'PATCH', `/dashboard/api/workspace/management-keys/${created.body.data.id}`, other.management_key, { read_only: false })).status).toBe(404)
    expect((await call(server, 'PATCH', `/dashboard/api/workspace/management-keys/${created.body.data.id}`, server.managementKey, { read_only: false })).body.data.read_only).toBe(false)
    expect((await call(server, 'GET', '/dashboard/api/session', secret)).body.data.read_only).toBe(false)
    expect((await overview()).management_keys).toHaveLength(2)
    // With another writer, the first one may now be made read-only.
    expect((await call(server, 'PATCH', `/dashboard/api/workspace/management-keys/${only}`, server.managementKey, { read_only: true })).body.data.read_only).toBe(true)
    expect((await overview(other.management_key)).management_keys).toHaveLength(1)
  })

  test('usage costs: tokens and the recorded cost by model and gateway; requests of unknown cost counted apart, never as $0', async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server, { name: 'costed' })
    const now = Date.now()
    const row = (index: number, model: string, gateway: string, inputTokens: number | null, outputTokens: number | null, costNanoUsd: number | null) => ({
      id: `cost-${index}`,
      workspaceId: server.workspaceId,
      keyId: key.id,
      createdAt: now - 3_600_000 - index * 60_000,
      endpoint: 'chat',
      gateway,
      model,
      status: 200,
      stream: false,
      latencyMs: 50,
      attempts: 1,
      inputTokens,
      outputTokens,
      costNanoUsd,
    })
    // Costs as the requests' finish recorded them, in whole nano-dollars (test/integration/cost.test.ts checks that arithmetic).
    server.runtime.repositories.requestLogs.insertMany([
      row(0, 'openai/gpt-4o-mini', 'openai', 1000, 500, 2_000_000),
      row(1, 'openai/gpt-4o-mini', 'openai', 3000, 1500, 6_000_000),
      row(2, 'meta-llama/llama-3.1-8b', 'groq', 200, 100, null),
      // A success that reported no tokens: unknown, not $0.
      row(3, 'openai/gpt-4o-mini', 'openai', null, null, null),
      row(4, 'openai/gpt-4.1', 'openai', null, null, null),
    ])
    const answer = await call(server, 'GET', '/dashboard/api/usage/costs?range=24h', server.managementKey)
    expect(answer.status).toBe(200)
    expect(answer.body.data.rows).toEqual([
      { model: 'openai/gpt-4o-mini', gateway: 'openai', requests: 3, input_tokens: 4000, output_tokens: 2000, cost_usd: 0.008, unpriced_requests: 1 },
      { model: 'meta-llama/llama-3.1-8b', gateway: 'groq', requests: 1, input_tokens: 200, output_tokens: 100, cost_usd: null, unpriced_requests: 1 },
      { model: 'openai/gpt-4.1', gateway: 'openai', requests: 1, input_tokens: 0, output_tokens: 0, cost_usd: null, unpriced_requests: 1 },
    ])
    expect(answer.body.data.totals).toEqual({ input_tokens: 4200, output_tokens: 2100, cost_usd: 0.008, unpriced_requests: 3 })
    // The usage summary and breakdown report the same numbers: a name none of whose requests is priced, null (unknown), not $0.
    const summary = await call(server, 'GET', '/api/v1/usage/summary?range=24h', server.managementKey)
    expect(summary.body.data).toMatchObject({ requests: 5, cost_usd: 0.008, unpriced_requests: 3 })
    const byModel = await call(server, 'GET', '/api/v1/usage/breakdown?range=24h&by=model', server.managementKey)
    expect(byModel.body.data).toEqual([
      { name: 'openai/gpt-4o-mini', requests: 3, cost_usd: 0.008, unpriced_requests: 1 },
      { name: 'meta-llama/llama-3.1-8b', requests: 1, cost_usd: null, unpriced_requests: 1 },
      { name: 'openai/gpt-4.1', requests: 1, cost_usd: null, unpriced_requests: 1 },
    ])
    // The key filter and its checks are the usage API's.
    expect((await call(server, 'GET', `/dashboard/api/usage/costs?range=24h&api_key_id=${crypto.randomUUID()}`, server.managementKey)).status).toBe(404)
    expect((await call(server, 'GET', '/dashboard/api/usage/costs', null)).status).toBe(401)
  })

  test('provider notes: free text kept for the dashboard only, never in the API\'s provider object', async () => {
    await using server = await startTestServer()
    const provider = (await call(server, 'POST', '/api/v1/providers', server.managementKey, { gateway: 'openai', key: 'sk-notes-test-1234' })).body.data
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const other = createWorkspace(server.runtime, 'other')
    const notes = async (key = server.managementKey) => (await call(server, 'GET', '/dashboard/api/providers/notes', key)).body.data
    expect(await notes()).toEqual({})
    const saved = await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, server.managementKey, { notes: 'Billing: team A. Rotate in March.' })
    expect(saved.body.data).toEqual({ id: provider.id, notes: 'Billing: team A. Rotate in March.' })
    expect(await notes()).toEqual({ [provider.id]: 'Billing: team A. Rotate in March.' })
    expect(await notes(readOnly.key)).toEqual({ [provider.id]: 'Billing: team A. Rotate in March.' })
    // Not part of the provider object the API returns (SPEC "Provider key").
    const listed = (await call(server, 'GET', '/api/v1/providers', server.managementKey)).body.data
    expect(JSON.stringify(listed)).not.toContain('Rotate in March')
    expect(JSON.stringify((await call(server, 'GET', `/api/v1/providers/${provider.id}`, server.managementKey)).body.data)).not.toContain('Rotate in March')
    // Refused: a read-only key, another workspace, too long, not a string; nothing changed.
    expect((await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, readOnly.key, { notes: 'x' })).status).toBe(403)
    expect((await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, other.management_key, { notes: 'x' })).status).toBe(404)
    expect((await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, server.managementKey, { notes: 'x'.repeat(2001) })).status).toBe(400)
    expect((await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, server.managementKey, { notes: 7 })).status).toBe(400)
    expect(await notes(other.management_key)).toEqual({})
    expect(await notes()).toEqual({ [provider.id]: 'Billing: team A. Rotate in March.' })
    // An empty text clears them.
    expect((await call(server, 'PUT', `/dashboard/api/providers/${provider.id}/notes`, server.managementKey, { notes: '' })).body.data.notes).toBeNull()
    expect(await notes()).toEqual({})
  })
})
