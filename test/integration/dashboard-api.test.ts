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
    server.runtime.repositories.requestLogs.insertMany([
      row(0, first.id, 200, 'openai/gpt-4o-mini'),
      row(1, second.id, 502, 'openai/gpt-4o-mini'),
      row(2, first.id, 200, 'anthropic/claude-sonnet'),
      row(3, first.id, 200, 'openai/gpt-4o-mini', other.workspace.id),
      // Older than 24 hours: only in 7d.
      { ...row(4, first.id, 200, 'openai/gpt-4o-mini'), createdAt: now - 2 * 86_400_000 },
    ])
    const list = async (query: string) => {
      const answer = await call(server, 'GET', `/dashboard/api/requests${query}`, server.managementKey)
      expect(answer.status).toBe(200)
      return (answer.body.data as any[]).map((entry) => entry.id)
    }
    expect(await list('?range=24h')).toEqual(['req-0', 'req-1', 'req-2'])
    // No range: 7 days, as the usage API reads a missing range.
    expect(await list('')).toEqual(['req-0', 'req-1', 'req-2', 'req-4'])
    expect(await list(`?range=24h&api_key_id=${first.id}`)).toEqual(['req-0', 'req-2'])
    expect(await list('?range=24h&status=error')).toEqual(['req-1'])
    expect(await list('?range=24h&status=ok')).toEqual(['req-0', 'req-2'])
    expect(await list('?range=24h&status=502')).toEqual(['req-1'])
    expect(await list('?range=24h&model=anthropic/claude-sonnet')).toEqual(['req-2'])
    const detail = (await call(server, 'GET', '/dashboard/api/requests', server.managementKey)).body.data[0]
    expect(detail).toMatchObject({
      id: 'req-0',
      api_key_id: first.id,
      status: 200,
      attempts: 2,
      attempt_path: 'groq:server-error > openai:ok',
      stage_timings: { auth: 0.01, body: 0.02, plan: 0.01, upstream: 99 },
      request_body: '{"model":"openai/gpt-4o-mini"}',
    })
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
    expect((await call(server, 'POST', `/dashboard/api/keys/${key.id}/rotate`, server.managementKey, { grace_seconds: 'soon' })).status).toBe(400)
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
})
