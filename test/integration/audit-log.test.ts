/**
 * The audit log (CONTRACT §12): every management write through REST and MCP appends one event in
 * the write's own transaction — who (the management key's id and prefix), through which door, which
 * operation on which object, what it set with secrets and key values "[redacted]", the caller's
 * address and a request id — and a refused or failed write appends none. Read back newest first with
 * GET /api/v1/audit (limit, after, action, target_id; read-only keys may read) and the MCP tool
 * list_audit_events, only ever the caller's own workspace.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startTestServer, type TestServer } from '../harness/server'
import { createManagementKey, createWorkspace } from '../../src/management/workspaces'

async function audit(server: TestServer, query = '', key?: string | null) {
  const result = await server.call('GET', `/api/v1/audit${query}`, undefined, key)
  return result
}

async function mcpClient(server: TestServer, key: string) {
  const client = new Client({ name: 'audit-tests', version: '0.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }))
  return client
}

const providerSecret = 'sk-audit-upstream-Zq7vX2mB9kLp4RtY'

describe('audit events of REST writes', () => {
  test('a write appends one event: actor, via, action, target, changes with the secret redacted, caller address, request id', async () => {
    await using server = await startTestServer()
    const created = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret, label: 'main' })
    expect(created.status).toBe(201)
    const listed = await audit(server)
    expect(listed.status).toBe(200)
    expect(listed.body.has_more).toBe(false)
    expect(listed.body.data).toHaveLength(1)
    const event = listed.body.data[0]
    const managementKeyRow = server.runtime.repositories.workspaces.listManagementKeys(server.workspaceId)[0]!
    expect(event).toMatchObject({
      workspace_id: server.workspaceId,
      actor: { kind: 'management_key', id: managementKeyRow.id, prefix: managementKeyRow.prefix },
      via: 'rest',
      action: 'providers.create',
      target: { type: 'provider_key', id: created.body.data.id },
      changes: { gateway: 'openai', key: '[redacted]', label: 'main' },
      caller_ip: '127.0.0.1',
    })
    expect(event.request_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(Date.parse(event.time)).toBeGreaterThan(Date.now() - 60_000)
    expect(listed.body.last_id).toBe(event.id)
    expect(JSON.stringify(listed.body)).not.toContain(providerSecret)
  })

  test("each write operation names itself; a new key's secret never appears in the log", async () => {
    await using server = await startTestServer()
    const provider = (await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })).body.data
    const key = (await server.call('POST', '/api/v1/keys', { name: 'app', routing: { targets: [{ provider_key_id: provider.id }] } })).body.data
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { label: 'renamed', steering_message: 'Be brief.' })).status).toBe(200)
    expect((await server.call('PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: provider.id }] })).status).toBe(200)
    expect((await server.call('PATCH', `/api/v1/providers/${provider.id}`, { label: 'main' })).status).toBe(200)
    expect((await server.call('DELETE', `/api/v1/keys/${key.id}`)).status).toBe(200)
    expect((await server.call('DELETE', `/api/v1/providers/${provider.id}`)).status).toBe(200)
    // Reads leave no event.
    expect((await server.call('GET', '/api/v1/keys')).status).toBe(200)
    expect((await server.call('GET', '/api/v1/account')).status).toBe(200)

    const events = (await audit(server)).body.data as any[]
    expect(events.map((event) => [event.action, event.target.type, event.target.id])).toEqual([
      ['providers.delete', 'provider_key', provider.id],
      ['keys.revoke', 'inference_key', key.id],
      ['providers.update', 'provider_key', provider.id],
      ['routing.set', 'inference_key', key.id],
      ['keys.update', 'inference_key', key.id],
      ['keys.create', 'inference_key', key.id],
      ['providers.create', 'provider_key', provider.id],
    ])
    expect(events.find((event) => event.action === 'keys.update').changes).toEqual({ label: 'renamed', steering_message: 'Be brief.' })
    expect(events.find((event) => event.action === 'keys.revoke').changes).toEqual({ revoked: true })
    const text = JSON.stringify(events)
    expect(text).not.toContain(key.key)
    expect(text).not.toContain(providerSecret)
  })

  test('a refused write appends nothing: invalid input, unknown object, a read-only key', async () => {
    await using server = await startTestServer()
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    expect((await server.call('POST', '/api/v1/providers', { gateway: 'no-such-gateway', key: 'x' })).status).toBe(400)
    expect((await server.call('PATCH', `/api/v1/keys/${crypto.randomUUID()}`, { label: 'x' })).status).toBe(404)
    expect((await server.call('POST', '/api/v1/keys', { name: 'x', routing: { targets: [{ provider_key_id: crypto.randomUUID() }] } })).status).toBe(400)
    expect((await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret }, readOnly.key)).status).toBe(403)
    expect((await audit(server)).body).toEqual({ data: [], has_more: false, last_id: null })
  })

  test('a write whose event cannot be written is rolled back whole', async () => {
    await using server = await startTestServer()
    server.runtime.storage.sqlite.exec('alter table audit_events rename to audit_events_away')
    const refused = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })
    expect(refused.status).toBe(500)
    server.runtime.storage.sqlite.exec('alter table audit_events_away rename to audit_events')
    expect((await server.call('GET', '/api/v1/providers')).body.data).toEqual([])
  })
})

describe('audit events of MCP writes', () => {
  test("a tool's write is an event via mcp; a read-only key's refused write leaves none", async () => {
    await using server = await startTestServer()
    const client = await mcpClient(server, server.managementKey)
    try {
      const result = (await client.callTool({ name: 'create_provider_key', arguments: { gateway: 'openai', key: providerSecret, label: 'from mcp' } })) as any
      expect(result.isError).not.toBe(true)
      const provider = JSON.parse(result.content[0].text)
      const events = (await audit(server)).body.data
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ via: 'mcp', action: 'providers.create', target: { type: 'provider_key', id: provider.id }, changes: { key: '[redacted]', label: 'from mcp' } })
    } finally {
      await client.close()
    }
    const readOnly = await mcpClient(server, createManagementKey(server.runtime, server.workspaceId, true).key)
    try {
      const refused = (await readOnly.callTool({ name: 'create_provider_key', arguments: { gateway: 'openai', key: providerSecret } })) as any
      expect(refused.isError).toBe(true)
      // A read-only key reads the log.
      const page = JSON.parse(((await readOnly.callTool({ name: 'list_audit_events', arguments: { limit: 10 } })) as any).content[0].text)
      expect(page.data).toHaveLength(1)
      expect(page.data[0].via).toBe('mcp')
    } finally {
      await readOnly.close()
    }
  })

  test('the tools carry the MCP annotations of their operation', async () => {
    await using server = await startTestServer()
    const client = await mcpClient(server, server.managementKey)
    try {
      const { tools } = await client.listTools()
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool.annotations]))
      expect(byName.list_api_keys).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true })
      expect(byName.create_api_key).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: false })
      expect(byName.delete_provider_key).toMatchObject({ readOnlyHint: false, destructiveHint: true })
      expect(byName.set_routing).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true })
      expect(byName.list_audit_events).toMatchObject({ readOnlyHint: true })
    } finally {
      await client.close()
    }
  })
})

describe('GET /api/v1/audit', () => {
  test('newest first, in pages (limit, after, has_more, last_id), filtered by action and target_id', async () => {
    await using server = await startTestServer()
    const providers: string[] = []
    for (let index = 0; index < 5; index++) providers.push((await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: `${providerSecret}-${index}`, label: `p${index}` })).body.data.id)
    expect((await server.call('PATCH', `/api/v1/providers/${providers[2]}`, { label: 'changed' })).status).toBe(200)

    const first = (await audit(server, '?limit=2')).body
    expect(first.data.map((event: any) => event.action)).toEqual(['providers.update', 'providers.create'])
    expect(first.has_more).toBe(true)
    const second = (await audit(server, `?limit=2&after=${first.last_id}`)).body
    expect(second.data.map((event: any) => event.target.id)).toEqual([providers[3], providers[2]])
    const rest = (await audit(server, `?limit=10&after=${second.last_id}`)).body
    expect(rest.data.map((event: any) => event.target.id)).toEqual([providers[1], providers[0]])
    expect(rest.has_more).toBe(false)

    expect((await audit(server, '?action=providers.update')).body.data).toHaveLength(1)
    const aboutOne = (await audit(server, `?target_id=${providers[2]}`)).body.data
    expect(aboutOne.map((event: any) => event.action)).toEqual(['providers.update', 'providers.create'])
  })

  test('only the caller workspace; a read-only key may read; bad limit or after is 400; no key is 401', async () => {
    await using server = await startTestServer()
    expect((await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })).status).toBe(201)
    const other = createWorkspace(server.runtime, 'other')
    expect((await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret }, other.management_key)).status).toBe(201)
    const mine = (await audit(server)).body.data
    const theirs = (await audit(server, '', other.management_key)).body.data
    expect(mine).toHaveLength(1)
    expect(theirs).toHaveLength(1)
    expect(mine[0].workspace_id).toBe(server.workspaceId)
    expect(theirs[0].workspace_id).toBe(other.workspace.id)
    // Another workspace's event id is not a page boundary here.
    expect((await audit(server, `?after=${theirs[0].id}`)).status).toBe(400)

    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    expect((await audit(server, '', readOnly.key)).body.data).toHaveLength(1)
    for (const limit of ['0', '101', 'abc', '-1', '1.5']) expect([limit, (await audit(server, `?limit=${limit}`)).status]).toEqual([limit, 400])
    expect((await audit(server, '', null)).status).toBe(401)
  })
})

describe('audit events of the dashboard and the operator CLI', () => {
  async function dashboard(server: TestServer, method: string, path: string, body?: unknown) {
    const response = await fetch(`${server.rootUrl}/dashboard/api${path}`, {
      method,
      headers: { authorization: `Bearer ${server.managementKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: response.status, body: (await response.json()) as any }
  }

  test('dashboard writes are events via dashboard; a webhook signing secret and a rotated key never appear', async () => {
    await using server = await startTestServer({ RT_WEBHOOK_ALLOW_PRIVATE: '1' })
    const provider = (await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })).body.data
    const key = (await server.call('POST', '/api/v1/keys', { name: 'app', routing: { targets: [{ provider_key_id: provider.id }] } })).body.data
    const rotated = await dashboard(server, 'POST', `/keys/${key.id}/rotate`, { grace_seconds: 60 })
    expect(rotated.status).toBe(200)
    const webhook = await dashboard(server, 'PUT', `/keys/${key.id}/webhook`, { url: 'http://127.0.0.1:9/hook' })
    expect(webhook.status).toBe(200)
    expect((await dashboard(server, 'PUT', `/keys/${key.id}/notify-email`, { on: true })).status).toBe(200)
    const attached = await dashboard(server, 'POST', `/keys/${key.id}/mcp-servers`, { url: 'http://127.0.0.1:9/mcp', name: 'tools' })
    expect(attached.status).toBe(200)
    expect((await dashboard(server, 'DELETE', `/keys/${key.id}/mcp-servers/${attached.body.data[0].id}`)).status).toBe(200)
    expect((await dashboard(server, 'PATCH', '/workspace', { steering_message: 'Be brief.' })).status).toBe(200)
    expect((await dashboard(server, 'PUT', `/providers/${provider.id}/notes`, { notes: 'the main one' })).status).toBe(200)
    const created = await dashboard(server, 'POST', '/workspace/management-keys', { read_only: true })
    expect(created.status).toBe(200)
    // A refused dashboard write (a URL that is not one) leaves nothing.
    expect((await dashboard(server, 'PUT', `/keys/${key.id}/webhook`, { url: 'not a url' })).status).toBe(400)

    const events = ((await audit(server, '?limit=100')).body.data as any[]).filter((event) => event.via === 'dashboard')
    expect(events.map((event) => event.action)).toEqual([
      'management_keys.create',
      'providers.notes.set',
      'workspace.set',
      'keys.mcp_servers.remove',
      'keys.mcp_servers.add',
      'keys.notify_email.set',
      'keys.webhook.set',
      'keys.rotate',
    ])
    expect(events.find((event) => event.action === 'keys.webhook.set').changes).toEqual({ webhook_url: 'http://127.0.0.1:9/hook', signing_secret_rotated: true })
    expect(events.find((event) => event.action === 'workspace.set').target).toEqual({ type: 'workspace', id: server.workspaceId })
    expect(events.find((event) => event.action === 'management_keys.create').target).toEqual({ type: 'management_key', id: created.body.data.id })
    const text = JSON.stringify(events)
    expect(text).not.toContain(webhook.body.data.signing_secret)
    expect(text).not.toContain(rotated.body.data.key)
    expect(text).not.toContain(created.body.data.key)
  })

  test('operator CLI writes are events of the workspace they touch, by actor cli; `audit list` prints them', async () => {
    await using server = await startTestServer()
    const provider = (await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })).body.data
    const key = (await server.call('POST', '/api/v1/keys', { name: 'app', routing: { targets: [{ provider_key_id: provider.id }] } })).body.data
    const cli = async (...args: string[]) => {
      const child = Bun.spawn(['bun', 'run', 'src/cli/index.ts', ...args], { cwd: join(import.meta.dir, '../..'), env: { ...process.env, ...server.env }, stdout: 'pipe', stderr: 'pipe' })
      const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
      expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' })
      return JSON.parse(stdout)
    }
    const rotated = await cli('key', 'rotate', '--id', key.id, '--grace-seconds', '30')
    await cli('member', 'add', '--workspace', server.workspaceId, '--email', 'ops@example.com')
    await cli('gateway', 'set', '--gateway', 'groq', '--enabled', 'false')
    const page = await cli('audit', 'list', '--workspace', server.workspaceId, '--limit', '10')
    const fromCli = (page.data as any[]).filter((event) => event.via === 'cli')
    expect(fromCli.map((event) => [event.action, event.actor])).toEqual([
      ['members.add', { kind: 'cli', id: null, prefix: null }],
      ['keys.rotate', { kind: 'cli', id: null, prefix: null }],
    ])
    expect(fromCli[1].target).toEqual({ type: 'inference_key', id: key.id })
    expect(fromCli[1].changes).toEqual({ rotated: true, grace_seconds: 30 })
    expect(JSON.stringify(page)).not.toContain(rotated.key)
    expect(JSON.stringify(page)).not.toContain('ops@example.com')
    // The platform-wide switch is in no workspace's log.
    expect((page.data as any[]).some((event) => event.action === 'gateways.set')).toBe(false)
    // The same events through the API.
    expect(((await audit(server)).body.data as any[]).filter((event) => event.via === 'cli')).toHaveLength(2)
  })
})

describe('the transaction of a write', () => {
  test('takes the write lock before its first read: a commit of another connection cannot slip in between (no SQLITE_BUSY_SNAPSHOT)', async () => {
    await using server = await startTestServer()
    const { Database } = await import('bun:sqlite')
    const other = new Database(server.runtime.config.dbPath)
    other.exec('PRAGMA busy_timeout = 0')
    let otherCommitted: boolean | undefined
    const output = server.runtime.repositories.transaction(() => {
      // The rule reads first …
      server.runtime.repositories.workspaces.get(server.workspaceId)
      // … another connection (the scheduler's thread, say) tries to commit now …
      try {
        other.exec("insert into config_version (id, version) values (2, 0) on conflict (id) do update set version = version + 1")
        otherCommitted = true
      } catch {
        otherCommitted = false
      }
      // … and the rule writes.
      return server.runtime.repositories.workspaces.addMember({ id: crypto.randomUUID(), workspaceId: server.workspaceId, email: 'lock@example.com', createdAt: new Date().toISOString() })
    })
    other.close()
    expect(output.email).toBe('lock@example.com')
    // The other connection had to wait for the write: it could not commit in the middle of it.
    expect(otherCommitted).toBe(false)
  })
})

describe('audit retention (RT_AUDIT_RETENTION_DAYS)', () => {
  test('the log-prune job deletes the events older than the retention and keeps the rest; a bad value stops the start', async () => {
    await using server = await startTestServer({ RT_AUDIT_RETENTION_DAYS: '30' })
    expect((await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: providerSecret })).status).toBe(201)
    const old = { workspaceId: server.workspaceId, actorKind: 'cli', actorId: null, actorPrefix: null, via: 'cli', action: 'members.add', targetType: 'member', targetId: 'm1', changes: '{}', callerIp: null, requestId: null }
    server.runtime.repositories.auditEvents.append({ ...old, id: crypto.randomUUID(), time: new Date(Date.now() - 31 * 86_400_000).toISOString() })
    server.runtime.repositories.auditEvents.append({ ...old, id: crypto.randomUUID(), time: new Date(Date.now() - 29 * 86_400_000).toISOString() })
    expect((await audit(server)).body.data).toHaveLength(3)
    const { runJob } = await import('../../src/scheduler/jobs')
    const result = (await runJob(server.runtime, 'log-prune')) as any
    expect(result.audit_events).toMatchObject({ deleted: 1, retention_days: 30 })
    const left = (await audit(server)).body.data as any[]
    expect(left).toHaveLength(2)
    expect(left.every((event) => Date.parse(event.time) > Date.now() - 30 * 86_400_000)).toBe(true)

    const { loadConfig } = await import('../../src/config/env')
    for (const value of ['0', '1.5', 'forever']) expect(() => loadConfig({ RT_AUDIT_RETENTION_DAYS: value })).toThrow('RT_AUDIT_RETENTION_DAYS')
    expect(loadConfig({}).auditRetentionDays).toBe(400)
  })
})
