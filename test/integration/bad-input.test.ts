/**
 * Bad input never crashes (SPEC "Error envelopes", "Errors", "Management API", "PUT routing rules",
 * "POST /models/{modelPath}:generateContent", "POST /responses"): malformed path escapes, bodies
 * of the wrong JSON type, nested field messages, malformed upstream replies, bounded model ids,
 * the management body limit counted as read, short provider secrets, the public gateway catalog,
 * and snapshot rebuilds driven only by configuration writes from other connections.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { loadConfig } from '../../src/config/env'
import { createRuntime } from '../../src/runtime'
import { setWorkspaceSettings } from '../../src/management/workspaces'
import { silentLogger } from '../../src/observability/logger'
import { chatCompletion, startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'

const model = 'openai/gpt-4o-mini'
const userMessages = [{ role: 'user', content: 'hi' }]
const userContents = [{ role: 'user', parts: [{ text: 'hi' }] }]

interface Env extends AsyncDisposable {
  server: TestServer
  /** Mock behind the `openai` gateway kind (native Responses, retrieve-capable). */
  openai: MockGateway
  /** Mock behind the `deepseek` gateway kind (Responses served by translation). */
  deepseek: MockGateway
}

async function startEnv(extraEnv: Record<string, string> = {}): Promise<Env> {
  const openai = await startMockGateway()
  const deepseek = await startMockGateway()
  const server = await startTestServer({ RT_GATEWAY_URL_OPENAI: openai.url, RT_GATEWAY_URL_DEEPSEEK: deepseek.url, ...extraEnv })
  return {
    server,
    openai,
    deepseek,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]()
      await openai.close()
      await deepseek.close()
    },
  }
}

async function addProvider(server: TestServer, gateway: string, secret = `sk-${gateway}-upstream-secret`) {
  return (await storeProvider(server, { gateway, key: secret })) as { id: string; gateway: string; key_last4: string }
}

async function createKey(server: TestServer, providerIds: string[], extra: Record<string, unknown> = {}) {
  const key = await createInferenceKey(server, { ...extra, routing: { strategy: 'priority', targets: providerIds.map((id) => ({ provider_key_id: id })) } })
  return { id: key.id as string, secret: key.key as string }
}

interface Result {
  status: number
  headers: Headers
  json: any
  text: string
}

/** An inference call; `secret` null sends no credentials. A string body is sent as-is. */
const send = (server: TestServer, method: string, path: string, secret: string | null, body?: unknown): Promise<Result> =>
  httpCall(server, method, path, body, bearerHeader(secret))

function expectRouterHeaders(result: Result, attempts?: string) {
  expect(result.headers.get('x-router-request-id')).toBeTruthy()
  if (attempts !== undefined) expect(result.headers.get('x-router-attempts')).toBe(attempts)
}

/** Chat envelope: `{error:{message, type, code}}`. */
function expectChatError(result: Result, status: number, code?: string) {
  expect(result.status).toBe(status)
  expect(result.json).toBeDefined()
  expect(typeof result.json.error?.message).toBe('string')
  expect(typeof result.json.error?.type).toBe('string')
  if (code !== undefined) expect(result.json.error.code).toBe(code)
}

/** Messages envelope: `{type:'error', error:{type, message}}`. */
function expectMessagesError(result: Result, status: number, type: string) {
  expect(result.status).toBe(status)
  expect(result.json?.type).toBe('error')
  expect(result.json.error?.type).toBe(type)
  expect(typeof result.json.error.message).toBe('string')
}

/** Content envelope: `{error:{code (integer), message, status}}`. */
function expectContentError(result: Result, status: number, statusName?: string) {
  expect(result.status).toBe(status)
  expect(result.json?.error?.code).toBe(status)
  expect(typeof result.json.error.message).toBe('string')
  expect(typeof result.json.error.status).toBe('string')
  if (statusName !== undefined) expect(result.json.error.status).toBe(statusName)
}

async function countKeys(server: TestServer): Promise<number> {
  const response = await server.call('GET', '/api/v1/keys')
  expect(response.status).toBe(200)
  return response.body.data.length
}

async function countProviders(server: TestServer): Promise<number> {
  const response = await server.call('GET', '/api/v1/providers')
  expect(response.status).toBe(200)
  return response.body.data.length
}

const generateContentPath = (modelId: string) => `/v1/models/${modelId}:generateContent`

describe('malformed percent-escapes in /v1 paths', () => {
  test('answer a JSON 404 not_found with the router headers, with or without a key, never a 500', async () => {
    await using env = await startEnv()
    const provider = await addProvider(env.server, 'openai')
    const chatKey = await createKey(env.server, [provider.id])
    const contentKey = await createKey(env.server, [provider.id], { api_shape: 'content' })
    const cases: { method: string; path: string; envelope: 'chat' | 'content'; secret: string | null; body?: unknown }[] = [
      { method: 'GET', path: '/v1/models/%ZZ', envelope: 'chat', secret: null },
      { method: 'GET', path: '/v1/models/%ZZ', envelope: 'chat', secret: chatKey.secret },
      { method: 'POST', path: '/v1/models/%ZZ:generateContent', envelope: 'content', secret: null, body: { contents: userContents } },
      { method: 'POST', path: '/v1/models/%ZZ:generateContent', envelope: 'content', secret: contentKey.secret, body: { contents: userContents } },
      { method: 'GET', path: '/v1/responses/%E0%A4%A', envelope: 'chat', secret: null },
      { method: 'GET', path: '/v1/responses/%E0%A4%A', envelope: 'chat', secret: chatKey.secret },
    ]
    for (const item of cases) {
      const result = await send(env.server, item.method, item.path, item.secret, item.body)
      expect(result.status).toBe(404)
      expect(result.headers.get('content-type')).toContain('application/json')
      expectRouterHeaders(result, '0')
      if (item.envelope === 'chat') expectChatError(result, 404, 'not_found')
      else expectContentError(result, 404)
    }
    expect(env.openai.requests).toHaveLength(0)
  })
})

describe('management bodies are validated as sent', () => {
  test('POST /api/v1/keys with a JSON array, number, string or true gives 400 and creates nothing', async () => {
    await using server = await startTestServer()
    const before = await countKeys(server)
    for (const body of [[], [{ name: 'x' }], 5, 'a string', true]) {
      const response = await server.call('POST', '/api/v1/keys', body)
      expect(response.status).toBe(400)
      expect(response.body).toEqual({ error: 'Request body must be a JSON object.' })
    }
    expect(await countKeys(server)).toBe(before)
  })

  test('POST /api/v1/providers with config [1] gives 400 naming config and stores nothing', async () => {
    await using server = await startTestServer()
    const before = await countProviders(server)
    const response = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-openai-upstream-secret', config: [1] })
    expect(response.status).toBe(400)
    expect(typeof response.body.error).toBe('string')
    expect(response.body.error).toContain('config')
    expect(await countProviders(server)).toBe(before)
  })
})

describe('content shape body checks', () => {
  test('a null part or a null function declaration gives 400 INVALID_ARGUMENT naming the field, nothing sent', async () => {
    await using env = await startEnv()
    const provider = await addProvider(env.server, 'openai')
    const key = await createKey(env.server, [provider.id], { api_shape: 'content' })
    const cases: { body: unknown; field: string }[] = [
      { body: { contents: [{ parts: [null] }] }, field: 'contents[0].parts[0]' },
      { body: { contents: userContents, tools: [{ functionDeclarations: [null] }] }, field: 'tools[0].functionDeclarations[0]' },
    ]
    for (const item of cases) {
      const result = await send(env.server, 'POST', generateContentPath(model), key.secret, item.body)
      expectContentError(result, 400, 'INVALID_ARGUMENT')
      expect(result.json.error.message).toContain(item.field)
      expectRouterHeaders(result, '0')
    }
    expect(env.openai.requests).toHaveLength(0)
  })
})

describe('malformed upstream chat replies on translated shapes', () => {
  const badMessages: Record<string, Record<string, unknown>> = {
    'tool_calls {}': { role: 'assistant', content: 'hi', tool_calls: {} },
    'reasoning_details 5': { role: 'assistant', content: 'hi', reasoning_details: 5 },
  }
  for (const [label, message] of Object.entries(badMessages)) {
    test(`${label}: 502 in the messages and content envelopes, never 500`, async () => {
      await using env = await startEnv()
      env.openai.handle((request) => {
        if (!request.path.endsWith('/chat/completions')) return undefined
        const reply = chatCompletion(String(request.body?.model ?? model))
        return { json: { ...reply, choices: [{ index: 0, message, finish_reason: 'stop' }] } }
      })
      const provider = await addProvider(env.server, 'openai')
      const messagesKey = await createKey(env.server, [provider.id], { api_shape: 'messages' })
      const contentKey = await createKey(env.server, [provider.id], { api_shape: 'content' })

      const viaMessages = await send(env.server, 'POST', '/v1/messages', messagesKey.secret, { model, max_tokens: 64, messages: userMessages })
      expectMessagesError(viaMessages, 502, 'api_error')
      expectRouterHeaders(viaMessages)
      expect(env.openai.calls('/chat/completions')).toHaveLength(1)

      const viaContent = await send(env.server, 'POST', generateContentPath(model), contentKey.secret, { contents: userContents })
      expectContentError(viaContent, 502)
      expectRouterHeaders(viaContent)
      expect(env.openai.calls('/chat/completions')).toHaveLength(2)
    })
  }
})

describe('POST /v1/responses input checked before the translated kind is called', () => {
  test('input [] and [5] give 400 with X-Router-Attempts 0 and no upstream call', async () => {
    await using env = await startEnv()
    const catalog = (await env.server.call('GET', '/api/v1/gateways')).body.data as { id: string; capabilities: { responses: string } }[]
    expect(catalog.find((gateway) => gateway.id === 'deepseek')?.capabilities.responses).toBe('translated')
    const provider = await addProvider(env.server, 'deepseek')
    const key = await createKey(env.server, [provider.id])
    for (const input of [[], [5]]) {
      const result = await send(env.server, 'POST', '/v1/responses', key.secret, { model, input })
      expectChatError(result, 400)
      expectRouterHeaders(result, '0')
      expect(result.headers.get('x-router-failover')).toBeNull()
    }
    expect(env.deepseek.requests).toHaveLength(0)
  })
})

describe('GET /v1/responses/{id} with an unreadable upstream body', () => {
  test('a 200 non-JSON body from the retrieve-capable gateway gives 502 upstream_unreadable, never 500', async () => {
    await using env = await startEnv()
    let retrieveBody = 'this is not JSON'
    env.openai.handle((request) => {
      if (request.method === 'POST' && request.path.endsWith('/responses')) {
        return { json: { id: 'resp_up_1', object: 'response', status: 'completed', model: 'm', output: [], usage: { input_tokens: 1, output_tokens: 1 } } }
      }
      if (request.method === 'GET' && request.path.includes('/responses/')) return { status: 200, text: retrieveBody, headers: { 'content-type': 'application/json' } }
      return undefined
    })
    const provider = await addProvider(env.server, 'openai')
    const key = await createKey(env.server, [provider.id])
    const created = await send(env.server, 'POST', '/v1/responses', key.secret, { model: 'm', input: 'hi' })
    expect(created.status).toBe(200)
    expect(created.headers.get('x-router-responses-mode')).toBe('native')
    const id = created.json.id as string
    expect(id.startsWith('resp_rt_')).toBe(true)

    for (const body of ['this is not JSON', '']) {
      retrieveBody = body
      const result = await send(env.server, 'GET', `/v1/responses/${encodeURIComponent(id)}`, key.secret)
      expectChatError(result, 502, 'upstream_unreadable')
      expectRouterHeaders(result)
    }
    const retrieves = env.openai.requests.filter((request) => request.method === 'GET' && request.path.endsWith('/responses/resp_up_1'))
    expect(retrieves).toHaveLength(2)
  })
})

describe('GET /api/v1/keys offset', () => {
  test('an unsafe, huge or negative offset gives 400 naming offset', async () => {
    await using server = await startTestServer()
    for (const offset of ['99999999999999999999', '1e300', '-1']) {
      const response = await server.call('GET', `/api/v1/keys?offset=${offset}`)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
      expect(response.body.error).toContain('offset')
    }
  })
})

describe('PUT /api/v1/keys/:id/routing nested field messages', () => {
  test('each bad nested field gives 400 naming it, and the rule is unchanged', async () => {
    await using server = await startTestServer()
    const catalog = (await server.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean; config_fields?: unknown; capabilities: { decisioner: boolean } }[]
    const decisionerGateway = catalog.find((gateway) => gateway.capabilities.decisioner && !gateway.config_fields)!
    const targetGateway = catalog.find((gateway) => gateway.routable && !gateway.config_fields && gateway.id !== decisionerGateway.id)!
    expect(decisionerGateway).toBeDefined()
    expect(targetGateway).toBeDefined()
    const target = await addProvider(server, targetGateway.id)
    const decider = await addProvider(server, decisionerGateway.id)
    const created = await server.call('POST', '/api/v1/keys', {})
    expect(created.status).toBe(201)
    const keyId = created.body.data.id as string

    const remap = (overrides: Record<string, unknown> = {}) => ({ match: 'openai/gpt-4o', provider_key_id: target.id, upstream_model: 'other/model', ...overrides })
    const decisioner = (overrides: Record<string, unknown> = {}) => ({ provider_key_id: decider.id, objective: 'cost', ...overrides })
    const rule = (overrides: Record<string, unknown> = {}) => ({ strategy: 'priority', targets: [{ provider_key_id: target.id }], model_remaps: [remap()], decisioner: decisioner(), ...overrides })

    const stored = await server.call('PUT', `/api/v1/keys/${keyId}/routing`, rule())
    expect(stored.status).toBe(200)
    const routing = async () => {
      const response = await server.call('GET', `/api/v1/keys/${keyId}/routing`)
      expect(response.status).toBe(200)
      return response.body.data
    }
    const before = await routing()
    expect(before.model_remaps).toHaveLength(1)
    expect(before.decisioner).not.toBeNull()

    const cases: { body: unknown; field: string }[] = [
      { body: rule({ model_remaps: [remap({ percent: 0 })] }), field: 'model_remaps[0].percent' },
      { body: rule({ model_remaps: [remap({ match: '' })] }), field: 'model_remaps[0].match' },
      { body: rule({ model_remaps: Array.from({ length: 21 }, (_, index) => remap({ match: `vendor/model-${index}` })) }), field: 'model_remaps' },
      { body: rule({ decisioner: decisioner({ models: Array.from({ length: 13 }, (_, index) => `vendor/model-${index}`) }) }), field: 'decisioner.models' },
      { body: rule({ decisioner: decisioner({ objective: 'speed' }) }), field: 'decisioner.objective' },
      { body: rule({ decisioner: decisioner({ max_usd_m: 0 }) }), field: 'decisioner.max_usd_m' },
      { body: rule({ decisioner: decisioner({ notes: 5 }) }), field: 'decisioner.notes' },
    ]
    for (const item of cases) {
      const response = await server.call('PUT', `/api/v1/keys/${keyId}/routing`, item.body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
      expect(response.body.error).toContain(item.field)
      expect(await routing()).toEqual(before)
    }
  })
})

describe('model ids are bounded', () => {
  test('a model id longer than 256 characters gives 400 on every inference endpoint, nothing sent', async () => {
    await using env = await startEnv()
    const provider = await addProvider(env.server, 'openai')
    const chatKey = await createKey(env.server, [provider.id])
    const messagesKey = await createKey(env.server, [provider.id], { api_shape: 'messages' })
    const contentKey = await createKey(env.server, [provider.id], { api_shape: 'content' })
    const long = `openai/${'x'.repeat(250)}`
    expect(long.length).toBe(257)

    const chat = await send(env.server, 'POST', '/v1/chat/completions', chatKey.secret, { model: long, messages: userMessages })
    expectChatError(chat, 400)
    expectRouterHeaders(chat, '0')
    const embeddings = await send(env.server, 'POST', '/v1/embeddings', chatKey.secret, { model: long, input: 'hi' })
    expectChatError(embeddings, 400)
    expectRouterHeaders(embeddings, '0')
    const responses = await send(env.server, 'POST', '/v1/responses', chatKey.secret, { model: long, input: 'hi' })
    expectChatError(responses, 400)
    expectRouterHeaders(responses, '0')
    const messages = await send(env.server, 'POST', '/v1/messages', messagesKey.secret, { model: long, max_tokens: 16, messages: userMessages })
    expectMessagesError(messages, 400, 'invalid_request_error')
    expectRouterHeaders(messages, '0')
    const content = await send(env.server, 'POST', generateContentPath(long), contentKey.secret, { contents: userContents })
    expectContentError(content, 400, 'INVALID_ARGUMENT')
    expectRouterHeaders(content, '0')
    expect(env.openai.requests).toHaveLength(0)

    // 256 characters is within the bound and is served.
    const atLimit = `openai/${'x'.repeat(249)}`
    expect(atLimit.length).toBe(256)
    const served = await send(env.server, 'POST', '/v1/chat/completions', chatKey.secret, { model: atLimit, messages: userMessages })
    expect(served.status).toBe(200)
    expect(env.openai.calls('/chat/completions')).toHaveLength(1)
  })
})

describe('management body limit counted as read', () => {
  function chunkedBody(text: string, chunkSize = 64 * 1024): ReadableStream<Uint8Array> {
    const bytes = new TextEncoder().encode(text)
    let offset = 0
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= bytes.length) {
          controller.close()
          return
        }
        controller.enqueue(bytes.subarray(offset, offset + chunkSize))
        offset += chunkSize
      },
    })
  }

  const postChunked = (server: TestServer, text: string) =>
    fetch(`${server.appUrl}/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.managementKey}`, 'content-type': 'application/json' },
      body: chunkedBody(text),
      duplex: 'half',
    } as RequestInit)

  test('a chunked POST /api/v1/keys body over 1 MB gives 400 naming the limit and creates nothing', async () => {
    await using server = await startTestServer()
    const before = await countKeys(server)
    const big = JSON.stringify({ name: 'big', steering_message: 'x'.repeat(1_200_000) })
    const response = await postChunked(server, big)
    expect(response.status).toBe(400)
    const body = (await response.json()) as any
    expect(typeof body.error).toBe('string')
    expect(body.error).toMatch(/limit/i)
    expect(await countKeys(server)).toBe(before)

    // The same transfer encoding with a small body is read normally.
    const small = await postChunked(server, JSON.stringify({ name: 'chunked' }))
    expect(small.status).toBe(201)
    expect(await countKeys(server)).toBe(before + 1)
  })
})

describe('chat messages entries', () => {
  test('a null message or one without a role gives 400 invalid_request naming messages[0], nothing sent', async () => {
    await using env = await startEnv()
    const provider = await addProvider(env.server, 'openai')
    const key = await createKey(env.server, [provider.id])
    for (const messages of [[null], [{ content: 'x' }]]) {
      const result = await send(env.server, 'POST', '/v1/chat/completions', key.secret, { model, messages })
      expectChatError(result, 400, 'invalid_request')
      expect(result.json.error.message).toContain('messages[0]')
      expectRouterHeaders(result, '0')
    }
    expect(env.openai.requests).toHaveLength(0)
  })
})

describe('provider key_last4', () => {
  test('a secret under 12 characters shows an empty key_last4 everywhere; 12 or more shows the last four', async () => {
    await using server = await startTestServer()
    const cases = [
      // Not hex: a short hex secret could occur inside a random UUID in the responses below.
      { secret: 'xyz', last4: '' },
      { secret: 'sk-12345', last4: '' },
      { secret: 'sk-12345678', last4: '' },
      { secret: 'sk-123456789', last4: '6789' },
      { secret: 'sk-openai-upstream-secret', last4: 'cret' },
    ]
    const ids: Record<string, string> = {}
    for (const item of cases) {
      expect(item.secret.length < 12).toBe(item.last4 === '')
      const created = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: item.secret })
      expect(created.status).toBe(201)
      expect(created.body.data.key_last4).toBe(item.last4)
      ids[item.secret] = created.body.data.id
    }
    const list = (await server.call('GET', '/api/v1/providers')).body.data as { id: string; key_last4: string }[]
    const account = (await server.call('GET', '/api/v1/account')).body.data.provider_keys as { id: string; key_last4: string }[]
    for (const item of cases) {
      const id = ids[item.secret]!
      const got = await server.call('GET', `/api/v1/providers/${id}`)
      expect(got.status).toBe(200)
      expect(got.body.data.key_last4).toBe(item.last4)
      expect(list.find((provider) => provider.id === id)?.key_last4).toBe(item.last4)
      expect(account.find((provider) => provider.id === id)?.key_last4).toBe(item.last4)
      const patched = await server.call('PATCH', `/api/v1/providers/${id}`, { label: 'renamed' })
      expect(patched.status).toBe(200)
      expect(patched.body.data.key_last4).toBe(item.last4)
    }
    // The secret itself never appears.
    const everything = JSON.stringify([list, account])
    for (const item of cases) expect(everything).not.toContain(item.secret)
  })
})

describe('public gateway catalog', () => {
  const expectPublicEntries = (entries: any[], overrideUrl: string, text: string) => {
    expect(entries).toHaveLength(21)
    for (const entry of entries) {
      expect(entry).not.toHaveProperty('base_url')
      expect(typeof entry.id).toBe('string')
      expect(typeof entry.name).toBe('string')
      expect(typeof entry.routable).toBe('boolean')
      expect(typeof entry.decisions).toBe('boolean')
      expect(typeof entry.auth_header).toBe('string')
      expect(typeof entry.capabilities).toBe('object')
      expect(entry.capabilities).not.toBeNull()
    }
    expect(text).not.toContain(overrideUrl)
    expect(text).not.toContain('base_url')
  }

  test('GET /api/v1/gateways and the MCP list_gateways tool carry no base_url, even with an override set', async () => {
    await using env = await startEnv()
    const rest = await env.server.api('/api/v1/gateways')
    expect(rest.status).toBe(200)
    const restText = await rest.text()
    expectPublicEntries(JSON.parse(restText).data, env.openai.url, restText)

    const mcp = await fetch(`${env.server.rootUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.server.managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_gateways', arguments: {} } }),
    })
    expect(mcp.status).toBe(200)
    const rpc = (await mcp.json()) as any
    expect(rpc.jsonrpc).toBe('2.0')
    expect(rpc.id).toBe(1)
    expect(rpc.error).toBeUndefined()
    const toolText = rpc.result.content[0].text as string
    expectPublicEntries(JSON.parse(toolText), env.openai.url, toolText)
  })
})

describe('malformed ids on the management API', () => {
  test('GET /api/v1/keys/%ZZ and /api/v1/providers/%ZZ give 404 with the SPEC messages', async () => {
    await using server = await startTestServer()
    const key = await server.call('GET', '/api/v1/keys/%ZZ')
    expect(key.status).toBe(404)
    expect(key.body).toEqual({ error: 'API key not found.' })
    const provider = await server.call('GET', '/api/v1/providers/%ZZ')
    expect(provider.status).toBe(404)
    expect(provider.body).toEqual({ error: 'Provider key not found.' })
  })
})

describe('snapshot rebuilds follow configuration writes only', () => {
  test('a request-log write from another connection does not rebuild; a configuration write from another runtime is seen', async () => {
    await using env = await startEnv()
    const { server } = env
    const provider = await addProvider(server, 'openai')
    const key = await createKey(server, [provider.id])
    const chat = () => send(server, 'POST', '/v1/chat/completions', key.secret, { model, messages: userMessages })

    // Warm the snapshot and flush this process's own log rows.
    expect((await chat()).status).toBe(200)
    server.runtime.logQueue.flush()
    expect((await chat()).status).toBe(200)
    server.runtime.logQueue.flush()

    const buildsBefore = server.runtime.snapshots.builds()
    const dataVersionBefore = server.runtime.storage.dataVersion()
    const other = new Database(server.runtime.config.dbPath)
    try {
      other
        .query('insert into request_logs (id, workspace_id, key_id, created_at, endpoint, status, latency_ms) values (?, ?, ?, ?, ?, ?, ?)')
        .run(crypto.randomUUID(), server.workspaceId, key.id, Date.now(), 'chat', 200, 12.5)
    } finally {
      other.close()
    }
    // The other connection's commit is visible to this process.
    expect(server.runtime.storage.dataVersion()).not.toBe(dataVersionBefore)
    for (let index = 0; index < 3; index++) {
      expect((await chat()).status).toBe(200)
      server.runtime.logQueue.flush()
    }
    expect(server.runtime.snapshots.builds()).toBe(buildsBefore)

    const second = createRuntime(loadConfig(server.env), { logger: silentLogger })
    try {
      setWorkspaceSettings(second, server.workspaceId, { suspended: true })
      const suspended = await chat()
      expectChatError(suspended, 403, 'workspace_suspended')
      expectRouterHeaders(suspended)
    } finally {
      second.logQueue.stop()
      second.storage.close()
    }
  })
})
