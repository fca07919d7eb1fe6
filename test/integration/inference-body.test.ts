/**
 * What goes upstream and what comes back on POST /chat/completions (SPEC "Body processing",
 * "Request headers forwarded upstream", "Common response headers", "Errors", "Limits",
 * "Stream events", "What the service does" 7): body pass-through, steering, stripped siblings,
 * the top_p quirk, chat_router fields, header allowlist, rate-limit headers, validation errors,
 * streams, hang-ups, request logs and metrics.
 */
import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { setWorkspaceSettings } from '../../src/management/workspaces'
import { chatChunks, chatCompletion, startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'

const userMessages = [{ role: 'user', content: 'hi' }]

async function addProvider(server: TestServer, gateway: string, secret = `sk-${gateway}-upstream-secret`): Promise<string> {
  return (await storeProvider(server, { gateway, key: secret })).id
}

async function createKey(server: TestServer, providerIds: string[], extra: Record<string, unknown> = {}) {
  const key = await createInferenceKey(server, { ...extra, routing: { targets: providerIds.map((id) => ({ provider_key_id: id })) } })
  return { id: key.id as string, secret: key.key as string }
}

type Result = CallResult

const chat = (server: TestServer, secret: string, body: unknown, headers: Record<string, string> = {}): Promise<Result> =>
  httpCall(server, 'POST', '/v1/chat/completions', body, { ...bearerHeader(secret), ...headers })

/** A one-gateway setup on `openai` (Bearer auth). */
async function single(mock: MockGateway, server: TestServer, keyExtra: Record<string, unknown> = {}) {
  const providerId = await addProvider(server, 'openai')
  const key = await createKey(server, [providerId], keyExtra)
  return { providerId, ...key }
}

function expectError(result: Result, status: number, code: string) {
  expect(result.status).toBe(status)
  expect(result.json?.error?.code).toBe(code)
  expect(typeof result.json.error.message).toBe('string')
  expect(typeof result.json.error.type).toBe('string')
  expect(result.headers.get('x-router-request-id')).toBeTruthy()
  expect(result.headers.get('x-router-attempts')).toBe('0')
}

function logRows(server: TestServer): any[] {
  server.runtime.logQueue.flush()
  return server.runtime.storage.sqlite.query('select * from request_logs order by created_at').all() as any[]
}

async function waitFor<T>(probe: () => T | undefined, timeoutMs = 3000): Promise<T> {
  const until = performance.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (performance.now() > until) throw new Error('waitFor: timed out')
    await Bun.sleep(10)
  }
}

/** SSE `data:` payloads of a raw event stream. */
function dataRecords(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
}

describe('body pass-through', () => {
  test('the body goes upstream as sent; ad_request and link_request are stripped', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const forwarded = {
      model: 'acme/model-x',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      ],
      temperature: 0.25,
      top_p: 0.9,
      max_tokens: 33,
      tools: [{ type: 'function', function: { name: 'lookup', description: 'x', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
      tool_choice: 'auto',
      response_format: { type: 'json_object' },
      user: 'user-1',
      vendor_extension: { nested: [1, 'two', { three: null }] },
    }
    const result = await chat(server, key.secret, { ...forwarded, ad_request: { placement: 'sidebar' }, link_request: { max_keyterms: 3 } })
    expect(result.status).toBe(200)
    const upstream = mock.calls('/chat/completions')
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body).toEqual(forwarded)
    expect(upstream[0]!.rawBody).not.toContain('ad_request')
    expect(upstream[0]!.rawBody).not.toContain('link_request')
    expect(upstream[0]!.method).toBe('POST')
  })

  test('only the model is rewritten by a remap', async () => {
    await using mock = await startMockGateway()
    await using remapMock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_GATEWAY_URL_TOGETHER: remapMock.url })
    const target = await addProvider(server, 'openai')
    const remapTo = await addProvider(server, 'together')
    const created = await server.call('POST', '/api/v1/keys', {
      routing: { targets: [{ provider_key_id: target }], model_remaps: [{ match: 'acme/model-x', provider_key_id: remapTo, upstream_model: 'remapped/model-y' }] },
    })
    const body = { model: 'acme/model-x', messages: userMessages, temperature: 0.7, seed: 42 }
    expect((await chat(server, created.body.data.key, body)).status).toBe(200)
    expect(remapMock.calls('/chat/completions')[0]!.body).toEqual({ ...body, model: 'remapped/model-y' })
    expect(mock.requests).toHaveLength(0)
  })
})

describe('steering', () => {
  test("the key's steering message goes in front of the system prompt", async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server, { steering_message: 'Always answer in French.' })
    const messages = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'again' },
    ]
    expect((await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages })).status).toBe(200)
    const sent = mock.calls('/chat/completions')[0]!.body.messages
    expect(sent).toHaveLength(4)
    expect(sent[0].role).toBe('system')
    expect(typeof sent[0].content).toBe('string')
    expect(sent[0].content.startsWith('Always answer in French.')).toBe(true)
    expect(sent[0].content).toContain('You are a helpful assistant.')
    expect(sent[0].content.indexOf('Always answer in French.')).toBeLessThan(sent[0].content.indexOf('You are a helpful assistant.'))
    expect(sent.slice(1)).toEqual(messages.slice(1))
  })

  test('a body without a system message gets one', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server, { steering_message: 'Be brief.' })
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ]
    expect((await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages })).status).toBe(200)
    const sent = mock.calls('/chat/completions')[0]!.body.messages
    expect(sent).toEqual([{ role: 'system', content: 'Be brief.' }, ...messages])
  })

  test('the workspace default applies when the key has none; the key value wins otherwise', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    setWorkspaceSettings(server.runtime, server.workspaceId, { steeringMessage: 'Workspace rule.' })
    const providerId = await addProvider(server, 'openai')
    const plain = await createKey(server, [providerId])
    const steered = await createKey(server, [providerId], { steering_message: 'Key rule.' })
    const body = { model: 'openai/gpt-4o-mini', messages: userMessages }

    expect((await chat(server, plain.secret, body)).status).toBe(200)
    expect(mock.calls('/chat/completions')[0]!.body.messages).toEqual([{ role: 'system', content: 'Workspace rule.' }, ...userMessages])

    expect((await chat(server, steered.secret, body)).status).toBe(200)
    const keyMessages = mock.calls('/chat/completions')[1]!.body.messages
    expect(keyMessages).toEqual([{ role: 'system', content: 'Key rule.' }, ...userMessages])

    // Clearing the key's message brings the workspace default back.
    expect((await server.call('PATCH', `/api/v1/keys/${steered.id}`, { steering_message: null })).status).toBe(200)
    expect((await chat(server, steered.secret, body)).status).toBe(200)
    expect(mock.calls('/chat/completions')[2]!.body.messages).toEqual([{ role: 'system', content: 'Workspace rule.' }, ...userMessages])
  })

  test('no steering anywhere leaves messages untouched', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    expect((await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })).status).toBe(200)
    expect(mock.calls('/chat/completions')[0]!.body.messages).toEqual(userMessages)
  })
})

describe('gateway quirks and router-style bodies', () => {
  test('the gateway with omit_params top_p gets no top_p; other gateways keep it', async () => {
    let quirkId: string
    {
      await using probe = await startTestServer()
      const catalog = (await probe.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean; capabilities: { omit_params: string[] } }[]
      const quirky = catalog.filter((gateway) => gateway.capabilities.omit_params.includes('top_p'))
      expect(quirky).toHaveLength(1)
      quirkId = quirky[0]!.id
      expect(quirkId).not.toBe('openai')
    }
    const slug = quirkId.toUpperCase().replace(/[^A-Z0-9]/g, '_')
    await using quirkMock = await startMockGateway()
    await using mock = await startMockGateway()
    quirkMock.handle(() => ({ status: 500, json: { error: { message: 'fail over please' } } }))
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, [`RT_GATEWAY_URL_${slug}`]: quirkMock.url })
    const quirkProvider = await addProvider(server, quirkId)
    const openaiProvider = await addProvider(server, 'openai')
    const key = await createKey(server, [quirkProvider, openaiProvider])
    const body = { model: 'acme/model', messages: userMessages, temperature: 0.4, top_p: 0.8 }
    const result = await chat(server, key.secret, body)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-failover')).toBe(`${quirkId}:server-error`)
    const quirkBody = quirkMock.calls('/chat/completions')[0]!.body
    expect('top_p' in quirkBody).toBe(false)
    expect(quirkBody).toEqual({ model: 'acme/model', messages: userMessages, temperature: 0.4 })
    expect(mock.calls('/chat/completions')[0]!.body).toEqual(body)
  })

  test('chat_router keys forward `models` and `provider` verbatim; routing reads only `model`', async () => {
    await using mock = await startMockGateway()
    await using other = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_GATEWAY_URL_GROQ: other.url })
    const first = await addProvider(server, 'openai')
    const second = await addProvider(server, 'groq')
    const key = await createKey(server, [first, second], { api_shape: 'chat_router' })
    const body = {
      model: 'openai/gpt-4o-mini',
      messages: userMessages,
      models: ['anthropic/claude-sonnet-4', 'google/gemini-2.5-pro'],
      provider: { order: ['groq'], allow_fallbacks: false, only: ['groq'] },
    }
    const result = await chat(server, key.secret, body)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe('openai')
    expect(mock.calls('/chat/completions')[0]!.body).toEqual(body)
    expect(other.requests).toHaveLength(0)
  })
})

describe('headers', () => {
  test('forwarded header allowlist: HTTP-Referer, X-Title, Idempotency-Key only; the caller key never leaves', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages }, {
      'HTTP-Referer': 'https://example.com/app',
      'X-Title': 'My App',
      'Idempotency-Key': 'idem-123',
      'User-Agent': 'caller-agent/9.9',
      Cookie: 'session=abc',
      'X-Custom-Header': 'custom',
      'OpenAI-Organization': 'org-caller',
      'x-api-key': key.secret,
    })
    expect(result.status).toBe(200)
    const headers = mock.calls('/chat/completions')[0]!.headers
    expect(headers['http-referer']).toBe('https://example.com/app')
    expect(headers['x-title']).toBe('My App')
    expect(headers['idempotency-key']).toBe('idem-123')
    expect(headers['user-agent']).not.toBe('caller-agent/9.9')
    expect(headers.cookie).toBeUndefined()
    expect(headers['x-custom-header']).toBeUndefined()
    expect(headers['openai-organization']).toBeUndefined()
    expect(headers['x-api-key']).toBeUndefined()
    expect(headers.authorization).toBe('Bearer sk-openai-upstream-secret')
    for (const value of Object.values(headers)) {
      expect(value).not.toContain(key.secret)
      expect(value).not.toContain('rt_live_')
    }
  })

  test('values over 512 characters or with control characters are dropped silently', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const exactly512 = 'r'.repeat(512)
    const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages }, {
      'HTTP-Referer': `https://example.com/${'a'.repeat(500)}`, // 520 chars
      'X-Title': 'tab\there',
      'Idempotency-Key': exactly512,
    })
    expect(result.status).toBe(200)
    const headers = mock.calls('/chat/completions')[0]!.headers
    expect(headers['http-referer']).toBeUndefined()
    expect(headers['x-title']).toBeUndefined()
    expect(headers['idempotency-key']).toBe(exactly512)
  })

  test("the provider secret reaches the upstream in the gateway's own auth header (Portkey)", async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_PORTKEY: mock.url })
    const catalog = (await server.call('GET', '/api/v1/gateways')).body.data as { id: string; auth_header?: string }[]
    const portkey = catalog.find((gateway) => gateway.id === 'portkey')
    expect(portkey).toBeDefined()
    const providerId = await addProvider(server, 'portkey', 'pk-stored-secret')
    const key = await createKey(server, [providerId])
    const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })
    expect(result.status).toBe(200)
    const headers = mock.calls('/chat/completions')[0]!.headers
    expect(headers['x-portkey-api-key']).toBe('pk-stored-secret')
    for (const value of Object.values(headers)) {
      expect(value).not.toContain(key.secret)
      expect(value).not.toContain('rt_live_')
    }
  })

  test('X-RateLimit-* and Retry-After are passed through; no other upstream header is', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const upstreamHeaders = {
      'x-ratelimit-remaining-requests': '99',
      'x-ratelimit-reset-tokens': '6s',
      'retry-after': '2',
      'x-upstream-trace': 'trace-1',
      'openai-organization': 'org-upstream',
      'set-cookie': 'upstream=1',
      'x-request-id': 'req-upstream',
    }
    mock.handle((request) => (request.body?.stream ? { headers: upstreamHeaders, sse: chatChunks('m') } : { headers: upstreamHeaders, json: { id: 'x', choices: [] } }))
    for (const stream of [false, true]) {
      const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages, stream })
      expect(result.status).toBe(200)
      expect(result.headers.get('x-ratelimit-remaining-requests')).toBe('99')
      expect(result.headers.get('x-ratelimit-reset-tokens')).toBe('6s')
      expect(result.headers.get('retry-after')).toBe('2')
      expect(result.headers.get('x-upstream-trace')).toBeNull()
      expect(result.headers.get('openai-organization')).toBeNull()
      expect(result.headers.get('set-cookie')).toBeNull()
      expect(result.headers.get('x-request-id')).toBeNull()
    }
  })
})

describe('validation', () => {
  test('413 request_too_large over 10 MB, nothing sent', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const big = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024 + 100) }] })
    const result = await chat(server, key.secret, big)
    expectError(result, 413, 'request_too_large')
    expect(mock.requests).toHaveLength(0)
  })

  test('invalid_json, missing_model, missing_messages (missing and empty)', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    expectError(await chat(server, key.secret, '{"model": "openai/gpt-4o-mini", "messages": ['), 400, 'invalid_json')
    expectError(await chat(server, key.secret, ''), 400, 'invalid_json')
    expectError(await chat(server, key.secret, { messages: userMessages }), 400, 'missing_model')
    expectError(await chat(server, key.secret, { model: 'openai/gpt-4o-mini' }), 400, 'missing_messages')
    expectError(await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: [] }), 400, 'missing_messages')
    expect(mock.requests).toHaveLength(0)
  })
})

describe('streams', () => {
  test('streaming with the official openai SDK: chunks delivered, ending with [DONE]', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    mock.handle((request) => (request.body?.stream ? { sse: chatChunks('gpt-4o-mini', ['One', ' two', ' three']), chunkDelayMs: 5 } : undefined))
    const client = new OpenAI({ apiKey: key.secret, baseURL: server.baseUrl })
    const stream = await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'count' }], stream: true })
    let text = ''
    let chunks = 0
    for await (const chunk of stream) {
      chunks++
      expect(chunk.object).toBe('chat.completion.chunk')
      text += chunk.choices[0]?.delta?.content ?? ''
    }
    expect(text).toBe('One two three')
    expect(chunks).toBe(6)
    expect(mock.calls('/chat/completions')[0]!.body.stream).toBe(true)

    const raw = await fetch(`${server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: userMessages, stream: true }),
    })
    expect(raw.status).toBe(200)
    expect(raw.headers.get('content-type')).toContain('text/event-stream')
    expect(raw.headers.get('x-router-provider')).toBe('openai')
    expect(raw.headers.get('x-router-attempts')).toBe('1')
    const records = dataRecords(await raw.text())
    expect(records.at(-1)).toBe('[DONE]')
    expect(records.filter((record) => record === '[DONE]')).toHaveLength(1)
  })

  test('a mid-stream break ends with exactly one stream_aborted record and no [DONE]', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    // A small gap between events lets the headers and first events out before the cut (a cut
    // before any byte is a connection failure, not a mid-stream break).
    mock.handle(() => ({ sse: chatChunks('gpt-4o-mini', ['a', 'b', 'c', 'd']), breakAfter: 3, chunkDelayMs: 20 }))
    const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages, stream: true })
    expect(result.status).toBe(200)
    const records = dataRecords(result.text)
    expect(records).not.toContain('[DONE]')
    const errors = records.filter((record) => record.includes('"error"'))
    expect(errors).toHaveLength(1)
    expect(records.at(-1)).toBe(errors[0])
    const parsed = JSON.parse(errors[0]!)
    expect(parsed.error.code).toBe('stream_aborted')
    expect(typeof parsed.error.message).toBe('string')
    // The chunks that arrived before the break were delivered.
    const chunks = records.slice(0, -1).map((record) => JSON.parse(record))
    expect(chunks.length).toBeGreaterThanOrEqual(1)
    expect(chunks.length).toBeLessThanOrEqual(3)
    for (const chunk of chunks) expect(chunk.object).toBe('chat.completion.chunk')
  })

  test('a client hang-up mid-request aborts the upstream, is logged 499 client_closed, and no further target is tried', async () => {
    let receivedResolve!: () => void
    const received = new Promise<void>((resolve) => (receivedResolve = resolve))
    let abortedResolve!: () => void
    const upstreamAborted = new Promise<void>((resolve) => (abortedResolve = resolve))
    let upstreamCalls = 0
    // A gateway that never answers and reports when its request signal aborts.
    const watcher = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      idleTimeout: 0,
      async fetch(request) {
        upstreamCalls++
        request.signal.addEventListener('abort', () => abortedResolve())
        receivedResolve()
        await upstreamAborted
        return new Response(null, { status: 499 })
      },
    })
    try {
      await using fallback = await startMockGateway()
      await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: `http://127.0.0.1:${watcher.port}`, RT_GATEWAY_URL_GROQ: fallback.url })
      const first = await addProvider(server, 'openai')
      const second = await addProvider(server, 'groq')
      const key = await createKey(server, [first, second])
      const controller = new AbortController()
      const pending = fetch(`${server.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: userMessages }),
        signal: controller.signal,
      }).catch((error: unknown) => error)
      await received
      controller.abort()
      await pending
      const aborted = await Promise.race([upstreamAborted.then(() => true), Bun.sleep(3000).then(() => false)])
      expect(aborted).toBe(true)
      const row = await waitFor(() => logRows(server)[0])
      expect(row.status).toBe(499)
      expect(row.error_code).toBe('client_closed')
      expect(row.attempts).toBe(1)
      expect(upstreamCalls).toBe(1)
      expect(fallback.requests).toHaveLength(0)
    } finally {
      await watcher.stop(true)
    }
  })
})

describe('request logs and metrics', () => {
  test('one row per request with stage timings, attempts, attempt path and the response request id', async () => {
    await using first = await startMockGateway()
    await using second = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: first.url, RT_GATEWAY_URL_GROQ: second.url })
    first.handle(() => ({ status: 503, json: { error: { message: 'down' } } }))
    const a = await addProvider(server, 'openai')
    const b = await addProvider(server, 'groq')
    const key = await createKey(server, [a, b])
    const empty = await server.call('POST', '/api/v1/keys', {})
    const emptySecret = empty.body.data.key as string

    const ok = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })
    const bad = await chat(server, key.secret, '{oops')
    const noRoute = await chat(server, emptySecret, { model: 'openai/gpt-4o-mini', messages: userMessages })
    expect([ok.status, bad.status, noRoute.status]).toEqual([200, 400, 402])

    const rows = logRows(server)
    expect(rows).toHaveLength(3)
    const byId = new Map(rows.map((row) => [row.id, row]))
    const okRow = byId.get(ok.headers.get('x-router-request-id'))
    const badRow = byId.get(bad.headers.get('x-router-request-id'))
    const noRouteRow = byId.get(noRoute.headers.get('x-router-request-id'))
    expect(okRow).toBeDefined()
    expect(badRow).toBeDefined()
    expect(noRouteRow).toBeDefined()

    expect(okRow.key_id).toBe(key.id)
    expect(okRow.workspace_id).toBe(server.workspaceId)
    expect(okRow.gateway).toBe('groq')
    expect(okRow.model).toBe('openai/gpt-4o-mini')
    expect(okRow.status).toBe(200)
    expect(okRow.attempts).toBe(2)
    expect(okRow.attempt_path).toContain('openai')
    expect(okRow.attempt_path).toContain('groq')
    expect(okRow.attempt_path.indexOf('openai')).toBeLessThan(okRow.attempt_path.indexOf('groq'))
    expect(okRow.latency_ms).toBeGreaterThan(0)
    const stages = JSON.parse(okRow.stage_timings)
    expect(Object.keys(stages).length).toBeGreaterThan(0)
    for (const value of Object.values(stages)) expect(typeof value).toBe('number')
    expect(okRow.request_body).toBeNull()

    expect(badRow.status).toBe(400)
    expect(badRow.attempts).toBe(0)
    expect(noRouteRow.status).toBe(402)
    expect(noRouteRow.attempts).toBe(0)
    expect(noRouteRow.key_id).toBe(empty.body.data.id)
  })

  test('token counts come from the upstream usage object, buffered and streamed', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    // A usage object whose fields are spaced out and followed by nested details must still be read.
    mock.handle((request) =>
      request.body?.stream
        ? undefined
        : { json: { ...chatCompletion('gpt-4o-mini'), usage: { prompt_tokens: 123, completion_tokens: 45, total_tokens: 168, prompt_tokens_details: { cached_tokens: 9 } } } },
    )
    const buffered = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })
    expect(buffered.status).toBe(200)
    const streamed = await fetch(`${server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { ...bearerHeader(key.secret), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: userMessages, stream: true }),
    })
    expect(await streamed.text()).toContain('data: [DONE]')
    const rows = await waitFor(() => {
      const all = logRows(server)
      return all.length === 2 ? all : undefined
    })
    const byStream = Object.fromEntries(rows.map((row) => [row.stream ? 'stream' : 'buffered', row]))
    expect([byStream.buffered.input_tokens, byStream.buffered.output_tokens]).toEqual([123, 45])
    // chatChunks ends with usage { prompt_tokens: 11, completion_tokens: <pieces> } (three pieces).
    expect([byStream.stream.input_tokens, byStream.stream.output_tokens]).toEqual([11, 3])
  })

  test('request bodies are stored only when workspace capture is on', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'capture me' }] })
    const off = await chat(server, key.secret, body)
    setWorkspaceSettings(server.runtime, server.workspaceId, { captureBodies: true })
    const on = await chat(server, key.secret, body)
    const rows = new Map(logRows(server).map((row) => [row.id, row]))
    expect(rows.get(off.headers.get('x-router-request-id'))!.request_body).toBeNull()
    const stored = rows.get(on.headers.get('x-router-request-id'))!.request_body
    expect(stored).toBeTruthy()
    expect(JSON.parse(stored)).toEqual(JSON.parse(body))
    // Response bodies are never stored.
    expect(JSON.stringify([...rows.values()])).not.toContain('Hello from the mock.')
  })

  test('last_used_at is set on the key after a flush', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const key = await single(mock, server)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.last_used_at).toBeNull()
    const before = Date.now()
    expect((await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })).status).toBe(200)
    server.runtime.logQueue.flush()
    const lastUsed = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.last_used_at
    expect(typeof lastUsed).toBe('string')
    expect(Date.parse(lastUsed)).toBeGreaterThanOrEqual(before - 1000)
    expect(Date.parse(lastUsed)).toBeLessThanOrEqual(Date.now() + 1000)
  })

  test('/metrics shows request and failover counters', async () => {
    await using first = await startMockGateway()
    await using second = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: first.url, RT_GATEWAY_URL_GROQ: second.url })
    first.handle(() => ({ status: 500, json: { error: { message: 'down' } } }))
    const key = await createKey(server, [await addProvider(server, 'openai'), await addProvider(server, 'groq')])
    expect((await chat(server, key.secret, { model: 'openai/gpt-4o-mini', messages: userMessages })).status).toBe(200)
    const response = await fetch(`${server.rootUrl}/metrics`)
    expect(response.status).toBe(200)
    const samples = (await response.text())
      .split('\n')
      .filter((line) => line && !line.startsWith('#'))
      .map((line) => {
        const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line)
        return match ? { name: match[1]!, labels: match[2] ?? '', value: Number(match[3]) } : undefined
      })
      .filter((sample) => sample !== undefined)
    const requestCounter = samples.find((sample) => /request/.test(sample.name) && sample.labels.includes('"200"') && sample.value >= 1)
    expect(requestCounter).toBeDefined()
    const failoverCounter = samples.find(
      (sample) => /failover/.test(sample.name) && sample.labels.includes('"openai"') && sample.labels.includes('"server-error"') && sample.value >= 1,
    )
    expect(failoverCounter).toBeDefined()
  })
})
