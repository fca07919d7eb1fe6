/**
 * Inference authentication (SPEC "Authentication" 1–6, "Errors", "Common response headers"):
 * accepted key carriers, invalid / revoked / rotated keys, suspended workspaces, IP allowlists,
 * key-type separation, API shapes and unserved paths.
 */
import { describe, expect, test } from 'bun:test'
import { rotateKey } from '../../src/management/keys'
import { createManagementKey, setWorkspaceSettings } from '../../src/management/workspaces'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { httpCall } from '../harness/api'

const chatBody = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }

interface Ctx {
  server: TestServer
  mock: MockGateway
  providerId: string
  keyId: string
  secret: string
}

async function createKey(server: TestServer, providerId: string, body: Record<string, unknown> = {}) {
  const created = await server.call('POST', '/api/v1/keys', { ...body, routing: { targets: [{ provider_key_id: providerId }] } })
  expect(created.status).toBe(201)
  return { keyId: created.body.data.id as string, secret: created.body.data.key as string }
}

async function setup(server: TestServer, mock: MockGateway, keyBody: Record<string, unknown> = {}): Promise<Ctx> {
  const provider = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-upstream-secret' })
  expect(provider.status).toBe(201)
  const { keyId, secret } = await createKey(server, provider.body.data.id, keyBody)
  return { server, mock, providerId: provider.body.data.id, keyId, secret }
}

const post = (server: TestServer, path: string, headers: Record<string, string>, body: unknown = chatBody) => httpCall(server, 'POST', path, body, headers)

const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` })

/** Every /v1 response carries a request id and an attempts count. */
function expectRouterHeaders(headers: Headers, attempts?: number) {
  expect(headers.get('x-router-request-id')).toBeTruthy()
  expect(headers.get('x-router-attempts')).not.toBeNull()
  if (attempts !== undefined) expect(headers.get('x-router-attempts')).toBe(String(attempts))
}

/** Chat envelope `{error:{message,type,code}}` with the given status and code, nothing sent upstream. */
function expectChatError(result: { status: number; headers: Headers; json: any }, status: number, code: string) {
  expect(result.status).toBe(status)
  expect(result.json?.error?.code).toBe(code)
  expect(typeof result.json.error.message).toBe('string')
  expect(result.json.error.message.length).toBeGreaterThan(0)
  expect(typeof result.json.error.type).toBe('string')
}

describe('accepted key carriers', () => {
  test('Bearer, x-api-key, x-goog-api-key and x-content-api-key all authenticate', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    for (const headers of <Record<string, string>[]>[bearer(ctx.secret), { 'x-api-key': ctx.secret }, { 'x-goog-api-key': ctx.secret }, { 'x-content-api-key': ctx.secret }]) {
      const result = await post(server, '/v1/chat/completions', headers)
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe('Hello from the mock.')
      expectRouterHeaders(result.headers, 1)
      expect(result.headers.get('x-router-provider')).toBe('openai')
    }
    expect(mock.calls('/chat/completions')).toHaveLength(4)
  })

  test('`?key=` is accepted only on :generateContent paths', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    // On chat completions the query parameter is not a key carrier.
    const onChat = await post(server, `/v1/chat/completions?key=${encodeURIComponent(ctx.secret)}`, {})
    expectChatError(onChat, 401, 'invalid_api_key')
    expectRouterHeaders(onChat.headers, 0)
    // On :generateContent it is read: a chat key gets past authentication to the shape check.
    const onContent = await post(server, `/v1/models/google/gemini-2.5-flash:generateContent?key=${encodeURIComponent(ctx.secret)}`, {}, { contents: [] })
    expect(onContent.status).toBe(404)
    expect(onContent.text).toContain('wrong_api_shape')
    expectRouterHeaders(onContent.headers, 0)
    // A wrong query key there is 401 in the content envelope.
    const wrong = await post(server, '/v1/models/google/gemini-2.5-flash:generateContent?key=rt_live_nope', {}, { contents: [] })
    expect(wrong.status).toBe(401)
    expect(wrong.json.error.code).toBe(401)
    expect(typeof wrong.json.error.message).toBe('string')
    expect(typeof wrong.json.error.status).toBe('string')
    expect(mock.requests).toHaveLength(0)
  })
})

describe('invalid, revoked and rotated keys', () => {
  test('missing, wrong and management keys are 401 invalid_api_key with 0 attempts and no upstream call', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    const cases: Record<string, string>[] = [
      {},
      bearer('rt_live_' + 'x'.repeat(40)),
      bearer(ctx.secret.slice(0, -2) + 'zz'),
      bearer('garbage'),
      { authorization: ctx.secret },
      bearer(server.managementKey),
      { 'x-api-key': server.managementKey },
    ]
    for (const headers of cases) {
      const result = await post(server, '/v1/chat/completions', headers)
      expectChatError(result, 401, 'invalid_api_key')
      expectRouterHeaders(result.headers, 0)
      expect(result.headers.get('x-router-provider')).toBeNull()
    }
    // GET /models with a management key is refused too.
    const models = await fetch(`${server.baseUrl}/models`, { headers: bearer(server.managementKey) })
    expect(models.status).toBe(401)
    expect(((await models.json()) as any).error.code).toBe('invalid_api_key')
    expect(mock.requests).toHaveLength(0)
  })

  test('a revoked key is 401 revoked_api_key at once; restoring it works again', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
    expect((await server.call('DELETE', `/api/v1/keys/${ctx.keyId}`)).status).toBe(200)
    const revoked = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expectChatError(revoked, 401, 'revoked_api_key')
    expectRouterHeaders(revoked.headers, 0)
    expect(mock.requests).toHaveLength(1)
    expect((await server.call('PATCH', `/api/v1/keys/${ctx.keyId}`, { revoked: false })).status).toBe(200)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
  })

  test("a rotated key's old secret works during grace with X-Router-Key-Grace-Until, and fails after", async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    const rotated = rotateKey(server.runtime, ctx.keyId, 1)
    expect(rotated.key).toStartWith('rt_live_')
    expect(rotated.key).not.toBe(ctx.secret)

    const old = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expect(old.status).toBe(200)
    const graceUntil = old.headers.get('x-router-key-grace-until')
    expect(graceUntil).toBe(rotated.grace_until)
    expect(new Date(graceUntil!).toISOString()).toBe(graceUntil!)

    const fresh = await post(server, '/v1/chat/completions', bearer(rotated.key))
    expect(fresh.status).toBe(200)
    expect(fresh.headers.get('x-router-key-grace-until')).toBeNull()

    // After the grace window the old secret is an unknown key.
    const wait = Date.parse(rotated.grace_until) - Date.now() + 20
    if (wait > 0) await Bun.sleep(wait)
    const after = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expectChatError(after, 401, 'invalid_api_key')
    expect(after.headers.get('x-router-key-grace-until')).toBeNull()
    expect((await post(server, '/v1/chat/completions', bearer(rotated.key))).status).toBe(200)
    expect(mock.calls('/chat/completions')).toHaveLength(3)
  })

  test('rotation with no grace stops the old secret at once', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    const rotated = rotateKey(server.runtime, ctx.keyId, 0)
    expectChatError(await post(server, '/v1/chat/completions', bearer(ctx.secret)), 401, 'invalid_api_key')
    expect((await post(server, '/v1/chat/completions', bearer(rotated.key))).status).toBe(200)
  })
})

describe('workspace suspension', () => {
  test('a suspended workspace answers 403 workspace_suspended with no upstream call', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    setWorkspaceSettings(server.runtime, server.workspaceId, { suspended: true })
    const result = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expectChatError(result, 403, 'workspace_suspended')
    expectRouterHeaders(result.headers, 0)
    expect(mock.requests).toHaveLength(0)
    setWorkspaceSettings(server.runtime, server.workspaceId, { suspended: false })
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
  })
})

describe('IP allowlists', () => {
  test('key-level list: the socket address must match; 403 ip_not_allowed names the address; saves apply on the next request', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock, { allowed_ips: ['10.0.0.0/8'] })
    const refused = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expectChatError(refused, 403, 'ip_not_allowed')
    expect(refused.json.error.message).toContain('127.0.0.1')
    expectRouterHeaders(refused.headers, 0)
    expect(mock.requests).toHaveLength(0)

    expect((await server.call('PATCH', `/api/v1/keys/${ctx.keyId}`, { allowed_ips: '10.0.0.0/8, 127.0.0.0/24' })).status).toBe(200)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
    expect((await server.call('PATCH', `/api/v1/keys/${ctx.keyId}`, { allowed_ips: ['127.0.0.1'] })).status).toBe(200)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
    expect((await server.call('PATCH', `/api/v1/keys/${ctx.keyId}`, { allowed_ips: ['127.0.0.2'] })).status).toBe(200)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(403)
    expect((await server.call('PATCH', `/api/v1/keys/${ctx.keyId}`, { allowed_ips: [] })).status).toBe(200)
    expect((await post(server, '/v1/chat/completions', bearer(ctx.secret))).status).toBe(200)
    expect(mock.calls('/chat/completions')).toHaveLength(3)
  })

  test('workspace-level list with RT_TRUST_PROXY: an IPv4-mapped IPv6 caller matches an IPv4 CIDR entry', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_TRUST_PROXY: '1' })
    const ctx = await setup(server, mock)
    setWorkspaceSettings(server.runtime, server.workspaceId, { allowedIps: '10.0.0.0/8' })
    const mapped = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': '::ffff:10.1.2.3' })
    expect(mapped.status).toBe(200)
    const plain = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': '10.200.0.1, 192.168.0.1' })
    expect(plain.status).toBe(200)
    const outside = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': '192.168.7.7' })
    expectChatError(outside, 403, 'ip_not_allowed')
    expect(outside.json.error.message).toContain('192.168.7.7')
    const outsideMapped = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': '::ffff:172.16.0.9' })
    expectChatError(outsideMapped, 403, 'ip_not_allowed')
    expect(outsideMapped.json.error.message).toContain('172.16.0.9')
    expect(mock.calls('/chat/completions')).toHaveLength(2)
  })

  test('Fly-Client-IP takes precedence over X-Forwarded-For', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_TRUST_PROXY: '1' })
    const ctx = await setup(server, mock, { allowed_ips: ['10.0.0.0/8'] })
    const flyOutside = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'fly-client-ip': '203.0.113.5', 'x-forwarded-for': '10.1.2.3' })
    expectChatError(flyOutside, 403, 'ip_not_allowed')
    expect(flyOutside.json.error.message).toContain('203.0.113.5')
    const flyInside = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'fly-client-ip': '10.9.9.9', 'x-forwarded-for': '203.0.113.5' })
    expect(flyInside.status).toBe(200)
    expect(mock.calls('/chat/completions')).toHaveLength(1)
  })

  test('without RT_TRUST_PROXY forwarding headers are ignored', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock, { allowed_ips: ['10.0.0.0/8'] })
    const result = await post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': '10.1.2.3', 'fly-client-ip': '10.1.2.3' })
    expectChatError(result, 403, 'ip_not_allowed')
    expect(result.json.error.message).toContain('127.0.0.1')
    expect(mock.requests).toHaveLength(0)
  })

  test('when both lists have entries the caller must pass both', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_TRUST_PROXY: '1' })
    const ctx = await setup(server, mock, { allowed_ips: ['10.1.0.0/16', '2001:db8::/32'] })
    setWorkspaceSettings(server.runtime, server.workspaceId, { allowedIps: '10.0.0.0/8\n2001:db8:1::/48' })
    const as = (address: string) => post(server, '/v1/chat/completions', { ...bearer(ctx.secret), 'x-forwarded-for': address })
    expect((await as('10.1.2.3')).status).toBe(200) // both
    expect((await as('2001:db8:1::5')).status).toBe(200) // both (IPv6)
    const keyOnly = await as('2001:db8:2::5') // key list yes, workspace no
    expectChatError(keyOnly, 403, 'ip_not_allowed')
    expect(keyOnly.json.error.message).toContain('2001:db8:2::5')
    expectChatError(await as('10.2.3.4'), 403, 'ip_not_allowed') // workspace yes, key no
    expectChatError(await as('8.8.8.8'), 403, 'ip_not_allowed') // neither
    expect(mock.calls('/chat/completions')).toHaveLength(2)
  })

  test('allowlists do not apply to management keys', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    await setup(server, mock, { allowed_ips: ['10.0.0.0/8'] })
    setWorkspaceSettings(server.runtime, server.workspaceId, { allowedIps: '10.0.0.0/8' })
    expect((await server.call('GET', '/api/v1/keys')).status).toBe(200)
  })
})

describe('key types are not interchangeable', () => {
  test('an inference key is 401 on the management API and on /mcp', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    expect((await server.call('GET', '/api/v1/keys', undefined, ctx.secret)).status).toBe(401)
    expect((await server.call('GET', '/api/v1/providers', undefined, ctx.secret)).status).toBe(401)
    const mcp = await server.call('POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'ping' }, ctx.secret)
    expect(mcp.status).toBe(401)
    // A read-only management key cannot run inference either.
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const refused = await post(server, '/v1/chat/completions', bearer(readOnly.key))
    expectChatError(refused, 401, 'invalid_api_key')
    expect(mock.requests).toHaveLength(0)
    // And the management key works on /mcp.
    expect((await server.call('POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'ping' })).status).toBe(200)
  })
})

describe('API shapes and unserved paths', () => {
  test('a messages key on /v1/chat/completions is 404 wrong_api_shape (messages envelope)', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock, { api_shape: 'messages' })
    const result = await post(server, '/v1/chat/completions', bearer(ctx.secret))
    expect(result.status).toBe(404)
    expect(result.json.type).toBe('error')
    expect(result.json.error.type).toBe('not_found_error')
    expect(result.json.error.message).toContain('wrong_api_shape')
    expectRouterHeaders(result.headers, 0)
    for (const path of ['/v1/embeddings', '/v1/responses']) {
      const other = await post(server, path, bearer(ctx.secret), { model: 'x', input: 'hi' })
      expect(other.status).toBe(404)
      expect(other.text).toContain('wrong_api_shape')
    }
    expect(mock.requests).toHaveLength(0)
  })

  test('a chat key on /v1/messages and /v1/messages/count_tokens is 404 wrong_api_shape', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const result = await post(server, path, { 'x-api-key': ctx.secret }, { model: 'claude-sonnet-4', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      expectChatError(result, 404, 'wrong_api_shape')
      expectRouterHeaders(result.headers, 0)
    }
    const decisions = await post(server, '/v1/decisions', bearer(ctx.secret), { model: 'x' })
    expectChatError(decisions, 404, 'wrong_api_shape')
    expect(mock.requests).toHaveLength(0)
  })

  test('GET /models answers on every shape', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock, { api_shape: 'messages' })
    const response = await fetch(`${server.baseUrl}/models`, { headers: { 'x-api-key': ctx.secret } })
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).object).toBe('list')
  })

  test('unknown paths are 404 not_found with request id and 0 attempts', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    for (const path of ['/v1/completions', '/v1/files', '/v1/files/file-123', '/v1/fine_tuning/jobs']) {
      const posted = await post(server, path, bearer(ctx.secret), { model: 'openai/gpt-4o-mini', prompt: 'hi' })
      expectChatError(posted, 404, 'not_found')
      expectRouterHeaders(posted.headers, 0)
      const got = await fetch(server.rootUrl + path, { headers: bearer(ctx.secret) })
      expect(got.status).toBe(404)
      expect(((await got.json()) as any).error.code).toBe('not_found')
      expectRouterHeaders(got.headers, 0)
    }
    const beta = await post(server, '/v1beta/models/x:generateContent', { 'x-goog-api-key': ctx.secret }, { contents: [] })
    expect(beta.status).toBe(404)
    expect(beta.json.error.code).toBe(404)
    expect(beta.json.error.message).toContain('not_found')
    expectRouterHeaders(beta.headers, 0)
    expect(mock.requests).toHaveLength(0)
  })

  test('every /v1 response carries a distinct X-Router-Request-Id', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const ctx = await setup(server, mock)
    const ids = new Set<string>()
    const results = [
      await post(server, '/v1/chat/completions', bearer(ctx.secret)),
      await post(server, '/v1/chat/completions', {}),
      await post(server, '/v1/chat/completions', bearer(ctx.secret), '{not json'),
      await post(server, '/v1/completions', bearer(ctx.secret)),
    ]
    for (const result of results) {
      expectRouterHeaders(result.headers)
      ids.add(result.headers.get('x-router-request-id')!)
    }
    expect(ids.size).toBe(results.length)
    expect(results.map((result) => result.headers.get('x-router-attempts'))).toEqual(['1', '0', '0', '0'])
  })
})
