/**
 * The dialects end to end with the official SDKs, through the real server and mock gateways (SPEC
 * "POST /messages", "POST /messages/count_tokens", "POST /models/{modelPath}:generateContent",
 * "POST /responses" incl. Chaining, "POST /chat/completions" responses-only paragraph, "Error
 * envelopes (by key shape)", "Errors", "Responses-chaining codes", "Stream events").
 * Gateway kinds are picked by their capabilities from GET /api/v1/gateways, not by name.
 */
import { beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI } from '@google/genai'
import OpenAI from 'openai'
import type { MockGateway, MockHandler, RecordedRequest } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, httpCall } from '../harness/api'
import { expectResponsesGrammar, type ClientEvent } from '../harness/client-sse'
import { gatewayRoles, overrideName, type GatewayEntry } from '../harness/gateway-roles'

const fixtures = join(import.meta.dir, '..', 'fixtures')
const fixtureText = (path: string) => readFileSync(join(fixtures, path), 'utf8')
const fixtureJson = (path: string) => JSON.parse(fixtureText(path))
/** Replays a recorded SSE transcript byte for byte. */
const sseReply = (path: string) => new Response(fixtureText(path), { headers: { 'content-type': 'text/event-stream' } })

// ---------------------------------------------------------------------------------------------
// Environment: one server, one mock per gateway role, roles chosen by capability

type Role = 'retrieve' | 'chain' | 'plain' | 'plain2' | 'translated' | 'only'
const roles: Role[] = ['retrieve', 'chain', 'plain', 'plain2', 'translated', 'only']

/** Roles by capability among the chat kinds a mock can stand in for. */
function pickGateways(usable: GatewayEntry[]) {
  const find = (test: (capabilities: GatewayEntry['capabilities']) => boolean, skip: string[] = []) => usable.find((gateway) => test(gateway.capabilities) && !skip.includes(gateway.id))?.id
  const native = (capabilities: GatewayEntry['capabilities']) => capabilities.responses === 'native'
  const picked = {
    retrieve: find((c) => native(c) && c.chain && c.retrieve),
    chain: find((c) => native(c) && c.chain && !c.retrieve),
    plain: find((c) => native(c) && !c.chain && !c.retrieve),
    translated: find((c) => c.responses === 'translated'),
    only: find((c) => c.responses === 'only'),
  }
  const plain2 = find((c) => native(c) && !c.chain && !c.retrieve, [picked.plain ?? ''])
  return { ...picked, plain2 }
}

const env = gatewayRoles(roles, pickGateways)
const { gatewayOf, mocks, providers } = env
let server: TestServer
let gatewayList: GatewayEntry[] = []
beforeAll(() => {
  server = env.server
  gatewayList = env.list
})

async function createKey(shape: string, targets: Role[], extra: Record<string, unknown> = {}) {
  const created = await server.call('POST', '/api/v1/keys', { api_shape: shape, ...extra, routing: { strategy: 'priority', targets: targets.map((role) => ({ provider_key_id: providers[role] })) } })
  expect(created.status).toBe(201)
  return { id: created.body.data.id as string, secret: created.body.data.key as string }
}

/** Answers by path suffix; anything else falls back to the mock's defaults. */
function route(mock: MockGateway, routes: Record<string, (request: RecordedRequest) => ReturnType<MockHandler>>) {
  mock.handle((request) => {
    for (const [suffix, answer] of Object.entries(routes)) if (request.path.endsWith(suffix)) return answer(request)
    return undefined
  })
}

const failing = (status = 500) => () => ({ status, json: { error: { message: `mock failure ${status}`, type: 'server_error' } } })

interface Raw {
  status: number
  headers: Headers
  text: string
  json: any
}

const raw = (method: string, path: string, secret: string | undefined, body?: unknown, headers: Record<string, string> = {}): Promise<Raw> =>
  httpCall(server, method, path, body, { ...bearerHeader(secret), ...headers })

function parseSse(text: string): ClientEvent[] {
  return text
    .split('\n\n')
    .filter((record) => record.trim())
    .map((record) => {
      const lines = record.split('\n')
      const event = lines.find((line) => line.startsWith('event: '))?.slice(7)
      const payload = lines.filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n')
      return { ...(event ? { event } : {}), data: payload === '[DONE]' ? '[DONE]' : JSON.parse(payload) }
    })
}

const anthropic = (secret: string) => new Anthropic({ apiKey: secret, baseURL: server.rootUrl, maxRetries: 0 })
const genai = (secret: string, apiVersion = 'v1') => new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: server.rootUrl, apiVersion } })
const openai = (secret: string) => new OpenAI({ apiKey: secret, baseURL: server.baseUrl, maxRetries: 0 })

function responseObject(id: string, text: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    object: 'response',
    // A gateway reports the time it made the response (its ids carry it, see response-ids.ts).
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    error: null,
    incomplete_details: null,
    model: 'gpt-fx-2',
    output: [{ id: `msg_${id}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }],
    usage: { input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 },
    ...extra,
  }
}

// =============================================================================================

describe('the gateway catalog as SPEC counts it', () => {
  test('five chain anchors, two retrieval kinds, one translated kind, one responses-only kind', () => {
    const count = (test: (capabilities: GatewayEntry['capabilities']) => boolean) => gatewayList.filter((gateway) => gateway.routable && test(gateway.capabilities)).length
    expect(count((c) => c.chain)).toBe(5)
    expect(count((c) => c.retrieve)).toBe(2)
    expect(count((c) => c.responses === 'translated')).toBe(1)
    expect(count((c) => c.responses === 'only')).toBe(1)
  })
})

// =============================================================================================
// messages shape

describe('messages shape via @anthropic-ai/sdk', () => {
  test('messages.create: translated to chat upstream and back; request-id header; dropped fields never go upstream', async () => {
    const key = await createKey('messages', ['plain'])
    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const { data: message, response } = await anthropic(key.secret)
      .messages.create({
        model: 'anthropic/claude-fx',
        max_tokens: 100,
        system: 'Be brief.',
        messages: [{ role: 'user', content: 'Hi' }],
        metadata: { user_id: 'user-1' },
        service_tier: 'standard_only',
        // top_k is a dialect field this SDK version no longer types.
        ...({ top_k: 5 } as object),
      })
      .withResponse()
    expect(message.type).toBe('message')
    expect(message.role).toBe('assistant')
    expect(message.id).toMatch(/^msg_/)
    expect(message.model).toBe('anthropic/claude-fx')
    expect(message.content).toEqual([{ type: 'text', text: 'Grüße! 👋' } as any])
    expect(message.stop_reason).toBe('end_turn')
    expect(message.stop_sequence).toBeNull()
    expect(message.usage.input_tokens).toBe(9)
    expect(message.usage.output_tokens).toBe(5)
    expect(response.headers.get('request-id')).toBeTruthy()
    expect(response.headers.get('request-id')).toBe(response.headers.get('x-router-request-id'))
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.plain)
    expect(response.headers.get('x-router-attempts')).toBe('1')

    const upstream = mocks.plain.calls('/chat/completions')
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe('anthropic/claude-fx')
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ])
    expect(upstream[0]!.body.max_tokens).toBe(100)
    for (const dropped of ['top_k', 'metadata', 'service_tier']) expect(dropped in upstream[0]!.body).toBe(false)
    // The caller's key never goes upstream; the stored provider key does.
    expect(upstream[0]!.headers.authorization).toBe('Bearer sk-plain-upstream')
  })

  test("messages.stream: on('text') deltas, finalMessage() with real usage from the upstream stream", async () => {
    const key = await createKey('messages', ['plain'])
    route(mocks.plain, { '/chat/completions': () => sseReply('chat/text.upstream.sse') })
    const stream = anthropic(key.secret).messages.stream({ model: 'anthropic/claude-fx', max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] })
    const texts: string[] = []
    stream.on('text', (delta) => texts.push(delta))
    const final = await stream.finalMessage()
    expect(texts).toEqual(['Grüße, ', '世界 👋'])
    expect(final.content).toHaveLength(1)
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'Grüße, 世界 👋' })
    expect(final.stop_reason).toBe('end_turn')
    expect(final.model).toBe('anthropic/claude-fx')
    expect(final.usage.input_tokens).toBe(9)
    expect(final.usage.output_tokens).toBe(5)
    const upstream = mocks.plain.calls('/chat/completions')[0]!
    expect(upstream.body.stream).toBe(true)
  })

  test('messages.stream: streamed tool calls and thinking arrive as tool_use (input parsed) and thinking blocks', async () => {
    const key = await createKey('messages', ['plain'])
    route(mocks.plain, { '/chat/completions': () => sseReply('chat/tool-calls.upstream.sse') })
    const tools = await anthropic(key.secret).messages.stream({ model: 'anthropic/claude-fx', max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }] }).finalMessage()
    expect(tools.stop_reason).toBe('tool_use')
    expect(tools.content.map((block) => block.type)).toEqual(['text', 'tool_use', 'tool_use'])
    expect(tools.content[1]).toMatchObject({ type: 'tool_use', id: 'call_w1', name: 'get_weather', input: { city: 'Zürich' } })
    expect(tools.content[2]).toMatchObject({ type: 'tool_use', id: 'call_t1', name: 'get_time', input: { tz: 'Europe/Zurich' } })
    expect(tools.usage).toMatchObject({ input_tokens: 40, output_tokens: 22 })

    route(mocks.plain, { '/chat/completions': () => sseReply('chat/reasoning.upstream.sse') })
    const thinkingDeltas: string[] = []
    const stream = anthropic(key.secret).messages.stream({
      model: 'anthropic/claude-fx',
      max_tokens: 4096,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [{ role: 'user', content: 'Sets?' }],
    })
    stream.on('thinking', (delta) => thinkingDeltas.push(delta))
    const thought = await stream.finalMessage()
    expect(thinkingDeltas.join('')).toBe('Naïve sets: A ∩ B.')
    expect(thought.content.map((block) => block.type)).toEqual(['thinking', 'text'])
    expect(thought.content[0]).toMatchObject({ type: 'thinking', thinking: 'Naïve sets: A ∩ B.' })
    expect(thought.content[1]).toMatchObject({ type: 'text', text: 'Answer: ∅' })
    const upstream = mocks.plain.calls('/chat/completions').at(-1)!
    expect(upstream.body.reasoning).toEqual({ max_tokens: 2048 })
  })

  test('a stream that breaks mid-way ends with one event: error (messages envelope) and no message_stop', async () => {
    const key = await createKey('messages', ['plain'])
    route(mocks.plain, { '/chat/completions': () => sseReply('chat/cut-mid-event.upstream.sse') })
    const cut = await raw('POST', '/v1/messages', undefined, { model: 'anthropic/claude-fx', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': key.secret })
    expect(cut.status).toBe(200)
    const events = parseSse(cut.text)
    expect(events[0]!.event).toBe('message_start')
    expect(events.filter((event) => event.event === 'error')).toHaveLength(1)
    expect(events.at(-1)).toEqual({ event: 'error', data: { type: 'error', error: { type: expect.any(String), message: expect.any(String) } } })
    expect(events.some((event) => event.event === 'message_stop')).toBe(false)

    // A connection that is cut (not just ended) behaves the same.
    const piece = (content: string) => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })
    // Paced so the headers are out before the cut.
    route(mocks.plain, { '/chat/completions': () => ({ sse: [piece('Hel'), piece('lo'), '[DONE]'], breakAfter: 2, chunkDelayMs: 20 }) })
    const broken = await raw('POST', '/v1/messages', undefined, { model: 'anthropic/claude-fx', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': key.secret })
    expect(broken.status).toBe(200)
    const brokenEvents = parseSse(broken.text)
    expect(brokenEvents.at(-1)!.event).toBe('error')
    expect(brokenEvents.filter((event) => event.event === 'error')).toHaveLength(1)
    expect(brokenEvents.some((event) => event.event === 'message_stop')).toBe(false)
  })

  test('countTokens: an estimate, nothing sent upstream, steering included', async () => {
    const plainKey = await createKey('messages', ['plain'])
    const steering = 'Always answer in formal French, citing sources. '.repeat(8) // 392 characters
    const steeredKey = await createKey('messages', ['plain'], { steering_message: steering })
    const body = { model: 'anthropic/claude-fx', system: 'Be brief.', messages: [{ role: 'user' as const, content: 'How many tokens is this?' }] }
    const { data, response } = await anthropic(plainKey.secret).messages.countTokens(body).withResponse()
    expect(Number.isInteger(data.input_tokens)).toBe(true)
    expect(data.input_tokens).toBeGreaterThan(0)
    expect(response.headers.get('x-router-count-tokens')).toBe('estimate')
    expect(response.headers.get('x-router-attempts')).toBe('0')
    const steered = await anthropic(steeredKey.secret).messages.countTokens(body)
    const difference = steered.input_tokens - data.input_tokens
    expect(difference).toBeGreaterThanOrEqual(Math.floor(steering.length / 4) - 2)
    expect(difference).toBeLessThanOrEqual(Math.ceil(steering.length / 4) + 6)
    for (const role of roles) expect(mocks[role].requests).toHaveLength(0)

    const invalid = await raw('POST', '/v1/messages/count_tokens', undefined, { model: 'anthropic/claude-fx' }, { 'x-api-key': plainKey.secret })
    expect(invalid.status).toBe(400)
    expect(invalid.json).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('messages') } })
  })

  test('tool-use round trip: tool_calls come back as tool_use; the tool_result goes upstream as tool messages', async () => {
    const key = await createKey('messages', ['plain'])
    const client = anthropic(key.secret)
    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/tool-calls.upstream.json') }) })
    const tools: Anthropic.Tool[] = [
      { name: 'get_weather', description: 'Weather by city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
      { name: 'get_time', description: 'Time by zone', input_schema: { type: 'object', properties: { tz: { type: 'string' } } } },
    ]
    const question: Anthropic.MessageParam = { role: 'user', content: 'Weather and time in Zürich?' }
    const first = await client.messages.create({ model: 'anthropic/claude-fx', max_tokens: 200, tools, messages: [question] })
    expect(first.stop_reason).toBe('tool_use')
    const uses = first.content.filter((block): block is Anthropic.ToolUseBlock => block.type === 'tool_use')
    expect(uses.map((use) => [use.id, use.name, use.input])).toEqual([
      ['call_w1', 'get_weather', { city: 'Zürich' }],
      ['call_t1', 'get_time', { tz: 'Europe/Zurich' }],
    ])
    const firstUpstream = mocks.plain.calls('/chat/completions')[0]!.body
    expect(firstUpstream.tools).toEqual(tools.map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.input_schema } })))

    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const second = await client.messages.create({
      model: 'anthropic/claude-fx',
      max_tokens: 200,
      tools,
      messages: [
        question,
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_w1', content: 'Snow, -3 °C' },
            { type: 'tool_result', tool_use_id: 'call_t1', content: [{ type: 'text', text: '12:00' }] },
          ],
        },
      ],
    })
    expect(second.content).toEqual([{ type: 'text', text: 'Grüße! 👋' } as any])
    const sent = mocks.plain.calls('/chat/completions')[1]!.body.messages as any[]
    expect(sent[0]).toEqual({ role: 'user', content: 'Weather and time in Zürich?' })
    expect(sent[1].role).toBe('assistant')
    expect(sent[1].tool_calls.map((call: any) => [call.id, call.type, call.function.name, JSON.parse(call.function.arguments)])).toEqual([
      ['call_w1', 'function', 'get_weather', { city: 'Zürich' }],
      ['call_t1', 'function', 'get_time', { tz: 'Europe/Zurich' }],
    ])
    expect(sent.slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'call_w1', content: 'Snow, -3 °C' },
      { role: 'tool', tool_call_id: 'call_t1', content: '12:00' },
    ])
  })

  test('failover in the middle of the route: the first target answers 500, the second serves', async () => {
    const key = await createKey('messages', ['plain', 'plain2'])
    route(mocks.plain, { '/chat/completions': failing(500) })
    route(mocks.plain2, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const { data, response } = await anthropic(key.secret).messages.create({ model: 'anthropic/claude-fx', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }).withResponse()
    expect(data.content).toEqual([{ type: 'text', text: 'Grüße! 👋' } as any])
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.plain2)
    expect(response.headers.get('x-router-failover')).toBe(`${gatewayOf.plain}:server-error`)
    expect(response.headers.get('x-router-attempts')).toBe('2')
    expect(mocks.plain.calls('/chat/completions')).toHaveLength(1)
    expect(mocks.plain2.calls('/chat/completions')).toHaveLength(1)

    // And on a stream.
    route(mocks.plain2, { '/chat/completions': () => sseReply('chat/text.upstream.sse') })
    const final = await anthropic(key.secret).messages.stream({ model: 'anthropic/claude-fx', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage()
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'Grüße, 世界 👋' })
  })

  test('the SDK sees the messages envelope: error type, status and request id', async () => {
    const key = await createKey('messages', ['plain'])
    let caught: any
    try {
      await anthropic(key.secret).messages.create({ model: '', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(Anthropic.BadRequestError)
    expect(caught.status).toBe(400)
    expect(caught.error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('model') } })
    expect(caught.requestID).toBeTruthy()
    expect(caught.requestID).toBe(caught.headers.get('x-router-request-id'))
  })

  describe('error envelopes: {type:"error", error:{type, message}} with the type/status table', () => {
    const messagesBody = { model: 'anthropic/claude-fx', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }

    function expectMessagesError(result: Raw, status: number, type: string, mentions?: string) {
      expect(result.status).toBe(status)
      expect(result.json).toEqual({ type: 'error', error: { type, message: expect.any(String) } })
      if (mentions) expect(result.json.error.message).toContain(mentions)
      expect(result.headers.get('x-router-request-id')).toBeTruthy()
      // SPEC "Common response headers": on /messages the request id is also sent as request-id, errors included.
      expect(result.headers.get('request-id')).toBe(result.headers.get('x-router-request-id'))
    }

    test('400 invalid_request_error for a malformed body, naming the field', async () => {
      const key = await createKey('messages', ['plain'])
      const post = (body: unknown) => raw('POST', '/v1/messages', undefined, body, { 'x-api-key': key.secret })
      expectMessagesError(await post({ max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }), 400, 'invalid_request_error', 'model')
      expectMessagesError(await post({ model: 'm', max_tokens: 10, messages: [] }), 400, 'invalid_request_error', 'messages')
      expectMessagesError(await post({ model: 'm', max_tokens: 10, messages: [{ role: 'developer', content: 'Hi' }] }), 400, 'invalid_request_error', 'messages.0.role')
      expectMessagesError(await post({ model: 'm', max_tokens: 'ten', messages: [{ role: 'user', content: 'Hi' }] }), 400, 'invalid_request_error', 'max_tokens')
      expectMessagesError(await post('{"model": "m", '), 400, 'invalid_request_error')
      for (const role of roles) expect(mocks[role].requests).toHaveLength(0)
    })

    test('401 authentication_error', async () => {
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': 'rt_live_not_a_real_key' }), 401, 'authentication_error')
    })

    test('403 permission_error (caller outside the allowlist)', async () => {
      const key = await createKey('messages', ['plain'], { allowed_ips: ['10.9.8.7'] })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 403, 'permission_error')
      expect(mocks.plain.requests).toHaveLength(0)
    })

    test('404 not_found_error (another shape’s endpoint; every target answered 404)', async () => {
      const key = await createKey('messages', ['plain'])
      const wrongShape = await raw('POST', '/v1/chat/completions', undefined, { model: 'm', messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': key.secret })
      expect(wrongShape.status).toBe(404)
      expect(wrongShape.json).toEqual({ type: 'error', error: { type: 'not_found_error', message: expect.any(String) } })
      route(mocks.plain, { '/chat/completions': () => ({ status: 404, json: { error: { message: 'The model `m` does not exist', type: 'invalid_request_error', code: 'model_not_found' } } }) })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 404, 'not_found_error')
    })

    test('413 request_too_large', async () => {
      const key = await createKey('messages', ['plain'])
      const big = { ...messagesBody, messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024 + 10) }] }
      expectMessagesError(await raw('POST', '/v1/messages', undefined, big, { 'x-api-key': key.secret }), 413, 'request_too_large')
      expect(mocks.plain.requests).toHaveLength(0)
    })

    test('429 rate_limit_error', async () => {
      const key = await createKey('messages', ['plain'])
      mocks.plain.handle(() => ({ status: 429, headers: { 'retry-after': '7' }, json: { error: { message: 'slow down', type: 'rate_limit' } } }))
      const result = await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret })
      expectMessagesError(result, 429, 'rate_limit_error')
      expect(result.headers.get('retry-after')).toBe('7')
    })

    test('502 api_error (every target failed) and 400 relayed from the gateway', async () => {
      const key = await createKey('messages', ['plain'])
      route(mocks.plain, { '/chat/completions': failing(500) })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 502, 'api_error')
      route(mocks.plain, { '/chat/completions': () => ({ status: 400, json: { error: { message: 'temperature is out of range', type: 'invalid_request_error' } } }) })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 400, 'invalid_request_error', 'temperature is out of range')
    })

    test('503 overloaded_error (every target’s gateway switched off)', async () => {
      await using isolated = await startTestServer({ [overrideName(gatewayOf.plain)]: mocks.plain.url })
      const provider = await isolated.call('POST', '/api/v1/providers', { gateway: gatewayOf.plain, key: 'sk-isolated' })
      const created = await isolated.call('POST', '/api/v1/keys', { api_shape: 'messages', routing: { targets: [{ provider_key_id: provider.body.data.id }] } })
      isolated.runtime.repositories.providerKeys.setGatewayEnabled(gatewayOf.plain, false, new Date().toISOString())
      const response = await fetch(`${isolated.rootUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': created.body.data.key, 'content-type': 'application/json' }, body: JSON.stringify(messagesBody) })
      const result: Raw = { status: response.status, headers: response.headers, text: '', json: await response.json() }
      expectMessagesError(result, 503, 'overloaded_error')
    })

    test('502 in the messages envelope when the upstream reply cannot be translated', async () => {
      const key = await createKey('messages', ['plain'])
      route(mocks.plain, { '/chat/completions': () => ({ json: { object: 'chat.completion', note: 'no choices here' } }) })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 502, 'api_error')
      route(mocks.plain, { '/chat/completions': () => ({ text: 'this is not JSON', headers: { 'content-type': 'application/json' } }) })
      expectMessagesError(await raw('POST', '/v1/messages', undefined, messagesBody, { 'x-api-key': key.secret }), 502, 'api_error')
    })
  })
})

// =============================================================================================
// content shape

describe('content shape via @google/genai', () => {
  test('generateContent: translated to chat upstream and back', async () => {
    const key = await createKey('content', ['plain'])
    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const response = await genai(key.secret).models.generateContent({
      model: 'google/gemini-fx',
      contents: 'Hi',
      config: { systemInstruction: 'Be brief.', temperature: 0.2, maxOutputTokens: 64 },
    })
    expect(response.text).toBe('Grüße! 👋')
    expect(response.candidates?.[0]?.finishReason).toBe('STOP' as any)
    expect(response.usageMetadata).toMatchObject({ promptTokenCount: 9, candidatesTokenCount: 5, totalTokenCount: 14 })
    const upstream = mocks.plain.calls('/chat/completions')
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe('google/gemini-fx')
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ])
    expect(upstream[0]!.body.temperature).toBe(0.2)
    expect(upstream[0]!.body.max_tokens).toBe(64)
  })

  test('function calling round trip: tool_calls come back as functionCalls; functionResponses go upstream as tool messages', async () => {
    const key = await createKey('content', ['plain'])
    const ai = genai(key.secret)
    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/tool-calls.upstream.json') }) })
    const functionDeclarations = [
      { name: 'get_weather', description: 'Weather by city', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } },
      { name: 'get_time', description: 'Time by zone', parametersJsonSchema: { type: 'object', properties: { tz: { type: 'string' } } } },
    ]
    const question = { role: 'user', parts: [{ text: 'Weather and time in Zürich?' }] }
    const first = await ai.models.generateContent({ model: 'google/gemini-fx', contents: [question], config: { tools: [{ functionDeclarations }] } })
    expect(first.functionCalls?.map((call) => [call.name, call.args])).toEqual([
      ['get_weather', { city: 'Zürich' }],
      ['get_time', { tz: 'Europe/Zurich' }],
    ])
    const firstUpstream = mocks.plain.calls('/chat/completions')[0]!.body
    expect(firstUpstream.tools).toEqual(functionDeclarations.map((declaration) => ({ type: 'function', function: { name: declaration.name, description: declaration.description, parameters: declaration.parametersJsonSchema } })))

    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const calls = first.functionCalls!
    const second = await ai.models.generateContent({
      model: 'google/gemini-fx',
      contents: [
        question,
        first.candidates![0]!.content!,
        {
          role: 'user',
          parts: [
            { functionResponse: { id: calls[0]!.id, name: 'get_weather', response: { temp: -3 } } },
            { functionResponse: { id: calls[1]!.id, name: 'get_time', response: { time: '12:00' } } },
          ],
        },
      ],
      config: { tools: [{ functionDeclarations }] },
    })
    expect(second.text).toBe('Grüße! 👋')
    const sent = mocks.plain.calls('/chat/completions')[1]!.body.messages as any[]
    expect(sent[0]).toEqual({ role: 'user', content: 'Weather and time in Zürich?' })
    expect(sent[1].role).toBe('assistant')
    const callIds = sent[1].tool_calls.map((call: any) => call.id)
    expect(sent[1].tool_calls.map((call: any) => [call.function.name, JSON.parse(call.function.arguments)])).toEqual([
      ['get_weather', { city: 'Zürich' }],
      ['get_time', { tz: 'Europe/Zurich' }],
    ])
    expect(sent.slice(2)).toEqual([
      { role: 'tool', tool_call_id: callIds[0], content: '{"temp":-3}' },
      { role: 'tool', tool_call_id: callIds[1], content: '{"time":"12:00"}' },
    ])
  })

  test(':streamGenerateContent answers 400 in the content envelope; nothing goes upstream', async () => {
    const key = await createKey('content', ['plain'])
    let caught: any
    try {
      const stream = await genai(key.secret).models.generateContentStream({ model: 'google/gemini-fx', contents: 'Hi' })
      for await (const _ of stream) {
      }
    } catch (error) {
      caught = error
    }
    expect(caught?.status).toBe(400)
    const direct = await raw('POST', '/v1/models/google/gemini-fx:streamGenerateContent?alt=sse', undefined, { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }, { 'x-goog-api-key': key.secret })
    expect(direct.status).toBe(400)
    expect(direct.json).toEqual({ error: { code: 400, message: expect.any(String), status: 'INVALID_ARGUMENT' } })
    expect(mocks.plain.requests).toHaveLength(0)
  })

  test('/v1beta/... answers 404 in the content envelope', async () => {
    const key = await createKey('content', ['plain'])
    const direct = await raw('POST', '/v1beta/models/google/gemini-fx:generateContent', undefined, { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }, { 'x-goog-api-key': key.secret })
    expect(direct.status).toBe(404)
    expect(direct.json).toEqual({ error: { code: 404, message: expect.any(String), status: 'NOT_FOUND' } })
    let caught: any
    try {
      await genai(key.secret, 'v1beta').models.generateContent({ model: 'google/gemini-fx', contents: 'Hi' })
    } catch (error) {
      caught = error
    }
    expect(caught?.status).toBe(404)
    expect(mocks.plain.requests).toHaveLength(0)
  })

  test('the key may ride as ?key= on :generateContent', async () => {
    const key = await createKey('content', ['plain'])
    route(mocks.plain, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const result = await raw('POST', `/v1/models/google/gemini-fx:generateContent?key=${encodeURIComponent(key.secret)}`, undefined, { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] })
    expect(result.status).toBe(200)
    expect(result.json.candidates[0].content.parts).toEqual([{ text: 'Grüße! 👋' }])
  })

  test('failover in the middle of the route: the first target answers 500, the second serves', async () => {
    const key = await createKey('content', ['plain', 'plain2'])
    route(mocks.plain, { '/chat/completions': failing(503) })
    route(mocks.plain2, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const response = await genai(key.secret).models.generateContent({ model: 'google/gemini-fx', contents: 'Hi' })
    expect(response.text).toBe('Grüße! 👋')
    expect(mocks.plain.calls('/chat/completions')).toHaveLength(1)
    expect(mocks.plain2.calls('/chat/completions')).toHaveLength(1)
    const headers = response.sdkHttpResponse?.headers ?? {}
    expect(headers['x-router-provider']).toBe(gatewayOf.plain2)
    expect(headers['x-router-failover']).toBe(`${gatewayOf.plain}:server-error`)
  })

  test('a malformed body is a 400 in the content envelope naming the field; an untranslatable reply is a 502', async () => {
    const key = await createKey('content', ['plain'])
    const missing = await raw('POST', '/v1/models/google/gemini-fx:generateContent', undefined, { generationConfig: { temperature: 0 } }, { 'x-goog-api-key': key.secret })
    expect(missing.status).toBe(400)
    expect(missing.json).toEqual({ error: { code: 400, message: expect.stringContaining('contents'), status: 'INVALID_ARGUMENT' } })
    const badPart = await raw('POST', '/v1/models/google/gemini-fx:generateContent', undefined, { contents: [{ role: 'user', parts: [] }] }, { 'x-goog-api-key': key.secret })
    expect(badPart.status).toBe(400)
    expect(badPart.json.error.message).toContain('contents[0].parts')
    expect(mocks.plain.requests).toHaveLength(0)

    route(mocks.plain, { '/chat/completions': () => ({ json: { choices: [] } }) })
    const untranslatable = await raw('POST', '/v1/models/google/gemini-fx:generateContent', undefined, { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }, { 'x-goog-api-key': key.secret })
    expect(untranslatable.status).toBe(502)
    expect(untranslatable.json).toEqual({ error: { code: 502, message: expect.any(String), status: expect.any(String) } })
  })
})

// =============================================================================================
// POST /responses via the openai SDK

describe('Responses via openai: native gateways and chaining', () => {
  test('buffered and streamed ids come back as resp_rt_…; a chained follow-up sends the gateway’s own id', async () => {
    const key = await createKey('chat', ['retrieve'])
    const client = openai(key.secret)
    let turn = 0
    route(mocks.retrieve, {
      '/responses': (request) => (request.body?.stream ? sseReply('responses/text.upstream.sse') : { json: responseObject(`resp_up_${++turn}`, `answer ${turn}`) }),
    })
    const { data: first, response } = await client.responses.create({ model: 'openai/gpt-fx', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 50 }).withResponse()
    expect(first.id).toMatch(/^resp_rt_/)
    expect(first.output_text).toBe('answer 1')
    expect(response.headers.get('x-router-responses-mode')).toBe('native')
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.retrieve)
    // Native: the body goes upstream verbatim.
    expect(mocks.retrieve.calls('/responses')[0]!.body).toEqual({ model: 'openai/gpt-fx', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 50 })

    const second = await client.responses.create({ model: 'openai/gpt-fx', input: 'More', previous_response_id: first.id })
    expect(second.id).toMatch(/^resp_rt_/)
    expect(second.id).not.toBe(first.id)
    expect(mocks.retrieve.calls('/responses')[1]!.body.previous_response_id).toBe('resp_up_1')

    const { data: stream, response: streamResponse } = await client.responses.create({ model: 'openai/gpt-fx', input: 'Stream it', stream: true }).withResponse()
    expect(streamResponse.headers.get('x-router-responses-mode')).toBe('native')
    const events: any[] = []
    for await (const event of stream) events.push(event)
    const created = events.find((event) => event.type === 'response.created')
    const completed = events.find((event) => event.type === 'response.completed')
    expect(created.response.id).toMatch(/^resp_rt_/)
    expect(completed.response.id).toBe(created.response.id)
    expect(completed.response.id).toMatch(/^resp_rt_/)
    expect(events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('')).toBe('Bonjour à tous ✨')
    await client.responses.create({ model: 'openai/gpt-fx', input: 'Follow the stream', previous_response_id: completed.response.id })
    expect(mocks.retrieve.calls('/responses').at(-1)!.body.previous_response_id).toBe('resp_fx1')
  })

  test('a native stream that ends before its terminal event ends with error then one terminal response.failed, sequence continuous', async () => {
    const key = await createKey('chat', ['retrieve'])
    const full = fixtureText('responses/text.upstream.sse')
    const truncated = full.slice(0, full.indexOf('event: response.completed'))
    route(mocks.retrieve, { '/responses': () => new Response(truncated, { headers: { 'content-type': 'text/event-stream' } }) })
    const result = await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Hi', stream: true })
    expect(result.status).toBe(200)
    const events = parseSse(result.text)
    expectResponsesGrammar(events)
    expect(events.slice(-2).map((event) => event.event)).toEqual(['error', 'response.failed'])
    expect(events.at(-2)!.data.error).toEqual({ type: 'server_error', code: 'stream_aborted', message: expect.any(String), param: null })
    const failed = events.at(-1)!.data.response
    expect(failed).toMatchObject({ id: events[0]!.data.response.id, status: 'failed', error: { code: 'stream_aborted', message: events.at(-2)!.data.error.message } })
    expect(failed.id).toMatch(/^resp_rt_/)
    // The finished message the client saw is in the failed response.
    expect(failed.output.map((item: any) => item.type)).toEqual(['message'])
  })

  test('a gateway error mid-stream: the real API’s error + response.failed pass through as one terminal; a flat error or an error with no terminal gets both', async () => {
    const key = await createKey('chat', ['retrieve'])
    const head = fixtureText('responses/text.upstream.sse')
    const opening = head.slice(0, head.indexOf('event: response.output_item.added'))
    const sse = (events: object[]) => new Response(opening + events.map((event: any) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join(''), { headers: { 'content-type': 'text/event-stream' } })
    const created = parseSse(opening).find((event) => event.data.type === 'response.created')!.data
    const nested = { type: 'error', sequence_number: 2, error: { type: 'insufficient_quota', code: 'insufficient_quota', message: 'You exceeded your current quota.', param: null } }
    const failedEvent = { type: 'response.failed', sequence_number: 3, response: { ...created.response, status: 'failed', error: { code: 'insufficient_quota', message: 'You exceeded your current quota.' } } }

    route(mocks.retrieve, { '/responses': () => sse([nested, failedEvent]) })
    const passed = parseSse((await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Hi', stream: true })).text)
    expectResponsesGrammar(passed)
    expect(passed.at(-2)!.data).toEqual(nested)
    expect(passed.at(-1)!.data.response).toMatchObject({ status: 'failed', error: failedEvent.response.error })
    expect(passed.at(-1)!.data.response.id).toBe(passed[0]!.data.response.id)

    for (const upstreamError of [nested, { type: 'error', sequence_number: 2, code: 'server_error', message: 'Flat and final.', param: null }]) {
      route(mocks.retrieve, { '/responses': () => sse([upstreamError]) })
      const events = parseSse((await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Hi', stream: true })).text)
      expectResponsesGrammar(events)
      expect(events.slice(-2).map((event) => event.event)).toEqual(['error', 'response.failed'])
      const error = events.at(-2)!.data.error
      expect(error.message).toBe('error' in upstreamError ? upstreamError.error.message : upstreamError.message)
      expect(events.at(-1)!.data.response.error).toEqual({ code: error.code, message: error.message })
    }
  })

  test('failover in the middle of the route; the chained turn is pinned to the provider that holds the state, with no failover', async () => {
    const key = await createKey('chat', ['retrieve', 'chain'])
    const client = openai(key.secret)
    route(mocks.retrieve, { '/responses': failing(500) })
    route(mocks.chain, { '/responses': () => ({ json: responseObject('resp_chain_1', 'from the chain gateway') }) })
    const { data: first, response } = await client.responses.create({ model: 'openai/gpt-fx', input: 'Hi' }).withResponse()
    expect(first.output_text).toBe('from the chain gateway')
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.chain)
    expect(response.headers.get('x-router-failover')).toBe(`${gatewayOf.retrieve}:server-error`)

    // The first target is healthy again, yet the follow-up goes to the provider holding the state.
    route(mocks.retrieve, { '/responses': () => ({ json: responseObject('resp_wrong', 'wrong provider') }) })
    mocks.retrieve.requests.length = 0
    const { data: second, response: secondResponse } = await client.responses.create({ model: 'openai/gpt-fx', input: 'Again', previous_response_id: first.id }).withResponse()
    expect(second.output_text).toBe('from the chain gateway')
    expect(secondResponse.headers.get('x-router-provider')).toBe(gatewayOf.chain)
    expect(mocks.retrieve.requests).toHaveLength(0)
    expect(mocks.chain.calls('/responses').at(-1)!.body.previous_response_id).toBe('resp_chain_1')

    // The pinned provider failing does not fail over.
    route(mocks.chain, { '/responses': failing(500) })
    const failed = await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Once more', previous_response_id: first.id })
    expect(failed.status).toBeGreaterThanOrEqual(500)
    expect(failed.json.error.message).toBeString()
    expect(failed.headers.get('x-router-attempts')).toBe('1')
    expect(mocks.retrieve.requests).toHaveLength(0)
  })

  test('chain refusals: invalid or altered ids, another key, a non-chain gateway, a provider removed from the key, conversation', async () => {
    const key = await createKey('chat', ['retrieve', 'plain'])
    route(mocks.retrieve, { '/responses': () => ({ json: responseObject('resp_up_9', 'ok') }) })
    const first = await openai(key.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    mocks.retrieve.requests.length = 0
    const follow = (secret: string, previous: unknown, extra: Record<string, unknown> = {}) => raw('POST', '/v1/responses', secret, { model: 'openai/gpt-fx', input: 'More', previous_response_id: previous, ...extra })
    const expectChatError = (result: Raw, status: number | 'client', code: string) => {
      if (status === 'client') {
        expect(result.status).toBeGreaterThanOrEqual(400)
        expect(result.status).toBeLessThan(500)
      } else expect(result.status).toBe(status)
      expect(result.json.error.code).toBe(code)
      expect(result.json.error.message).toBeString()
    }

    const altered = first.id.slice(0, 12) + (first.id[12] === 'A' ? 'B' : 'A') + first.id.slice(13)
    for (const bad of ['resp_abc123', 'resp_rt_forged.signature', first.id.slice(0, -1), altered, `${first.id}x`]) {
      expectChatError(await follow(key.secret, bad), 400, 'invalid_previous_response_id')
    }

    const otherKey = await createKey('chat', ['retrieve'])
    expectChatError(await follow(otherKey.secret, first.id), 'client', 'response_chain_wrong_key')

    const plainKey = await createKey('chat', ['plain'])
    route(mocks.plain, { '/responses': () => ({ json: responseObject('resp_plain_1', 'from a gateway that does not store responses') }) })
    const unstored = await openai(plainKey.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    expect(unstored.id).toMatch(/^resp_rt_/)
    mocks.plain.requests.length = 0
    expectChatError(await follow(plainKey.secret, unstored.id), 'client', 'response_chain_unsupported_target')
    expect(mocks.plain.requests).toHaveLength(0)

    expectChatError(await follow(key.secret, first.id, { conversation: 'conv_123' }), 400, 'stateful_responses_unsupported')
    expectChatError(await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Hi', conversation: { id: 'conv_123' } }), 400, 'stateful_responses_unsupported')

    const rerouted = await server.call('PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: providers.plain }] })
    expect(rerouted.status).toBe(200)
    expectChatError(await follow(key.secret, first.id), 409, 'response_chain_target_unavailable')
    for (const role of roles) expect(mocks[role].requests).toHaveLength(0)
  })

  test('GET /v1/responses/{id}: the stored object with its resp_rt id on a retrieve-capable kind; 501 on others', async () => {
    const key = await createKey('chat', ['retrieve'])
    mocks.retrieve.handle((request) => {
      if (request.method === 'GET' && request.path.endsWith('/responses/resp_up_r')) return { json: responseObject('resp_up_r', 'stored answer', { metadata: { kept: 'yes' } }) }
      if (request.method === 'POST' && request.path.endsWith('/responses')) return { json: responseObject('resp_up_r', 'stored answer') }
      return undefined
    })
    const created = await openai(key.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    const fetched = await openai(key.secret).responses.retrieve(created.id)
    expect(fetched.id).toBe(created.id)
    expect(fetched.output_text).toBe('stored answer')
    expect((fetched as any).metadata).toEqual({ kept: 'yes' })
    const get = mocks.retrieve.requests.find((request) => request.method === 'GET')!
    expect(get.path.endsWith('/responses/resp_up_r')).toBe(true)

    const chainKey = await createKey('chat', ['chain'])
    route(mocks.chain, { '/responses': () => ({ json: responseObject('resp_chain_r', 'x') }) })
    const chained = await openai(chainKey.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    const refused = await raw('GET', `/v1/responses/${encodeURIComponent(chained.id)}`, chainKey.secret)
    expect(refused.status).toBe(501)
    expect(refused.json.error.code).toBe('responses_retrieve_unsupported')
    expect(mocks.chain.requests.filter((request) => request.method === 'GET')).toHaveLength(0)

    const translatedKey = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const translated = await openai(translatedKey.secret).responses.create({ model: 'deepseek/fx', input: 'Hi' })
    const notStored = await raw('GET', `/v1/responses/${encodeURIComponent(translated.id)}`, translatedKey.secret)
    expect(notStored.status).toBe(501)
    expect(notStored.json.error.code).toBe('responses_retrieve_unsupported')
  })

  test('a chained turn shows only our ids: previous_response_id in the reply, in every stream event and in GET /responses/{id}', async () => {
    const key = await createKey('chat', ['retrieve'])
    const client = openai(key.secret)
    // A stateful gateway: it stores what it answers and reports its own previous ids.
    const stored = new Map<string, Record<string, unknown>>()
    let made = 0
    mocks.retrieve.handle((request) => {
      if (request.method === 'GET') {
        const found = stored.get(decodeURIComponent(request.path.slice(request.path.lastIndexOf('/') + 1)))
        return found ? { json: found } : { status: 404, json: { error: { message: 'No response found.', type: 'invalid_request_error' } } }
      }
      if (!request.path.endsWith('/responses')) return undefined
      const object = responseObject(`resp_gw_${++made}`, `turn ${made}`, { previous_response_id: request.body.previous_response_id ?? null })
      stored.set(object.id, object)
      if (!request.body.stream) return { json: object }
      const inProgress = { ...object, status: 'in_progress', output: [], usage: null }
      return { sse: [{ type: 'response.created', sequence_number: 0, response: inProgress }, { type: 'response.in_progress', sequence_number: 1, response: inProgress }, { type: 'response.completed', sequence_number: 2, response: object }] }
    })

    const first = await client.responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    expect(first.previous_response_id).toBeNull()
    const second = await client.responses.create({ model: 'openai/gpt-fx', input: 'More', previous_response_id: first.id })
    expect(mocks.retrieve.calls('/responses').at(-1)!.body.previous_response_id).toBe('resp_gw_1')
    expect(second.previous_response_id).toBe(first.id)

    const streamed = parseSse((await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx', input: 'Stream', stream: true, previous_response_id: second.id })).text)
    expect(mocks.retrieve.calls('/responses').at(-1)!.body.previous_response_id).toBe('resp_gw_2')
    const carrying = streamed.filter((event) => event.data.response)
    expect(carrying.map((event) => event.data.type)).toEqual(['response.created', 'response.in_progress', 'response.completed'])
    for (const event of carrying) expect(event.data.response.previous_response_id).toBe(second.id)
    const third = carrying[0]!.data.response.id as string
    expect(third).toMatch(/^resp_rt_/)

    // Retrieval gives each object exactly the ids the client was handed.
    const fetchedSecond = await client.responses.retrieve(second.id)
    expect(fetchedSecond.id).toBe(second.id)
    expect(fetchedSecond.previous_response_id).toBe(first.id)
    const fetchedThird = await client.responses.retrieve(third)
    expect(fetchedThird.id).toBe(third)
    expect(fetchedThird.previous_response_id).toBe(second.id)
    expect((await client.responses.retrieve(first.id)).previous_response_id).toBeNull()
    // No response id the client saw is a gateway's (item ids inside the output are the gateway's own).
    const seen = JSON.stringify([first, second, streamed, fetchedSecond, fetchedThird])
    expect(seen).not.toMatch(/"resp_gw_\d+"/)
  })

  test('steering is appended to instructions (native and translated)', async () => {
    const steering = 'Answer in French.'
    const nativeKey = await createKey('chat', ['retrieve'], { steering_message: steering })
    route(mocks.retrieve, { '/responses': () => ({ json: responseObject('resp_s', 'ok') }) })
    await openai(nativeKey.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi', instructions: 'Be brief.' })
    const sent = mocks.retrieve.calls('/responses')[0]!.body.instructions as string
    expect(sent.startsWith('Be brief.')).toBe(true)
    expect(sent.endsWith(steering)).toBe(true)
    await openai(nativeKey.secret).responses.create({ model: 'openai/gpt-fx', input: 'Hi' })
    expect(mocks.retrieve.calls('/responses')[1]!.body.instructions).toContain(steering)

    const translatedKey = await createKey('chat', ['translated'], { steering_message: steering })
    route(mocks.translated, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    await openai(translatedKey.secret).responses.create({ model: 'deepseek/fx', input: 'Hi', instructions: 'Be brief.' })
    const system = mocks.translated.calls('/chat/completions')[0]!.body.messages[0]
    expect(system.role).toBe('system')
    expect(system.content.startsWith('Be brief.')).toBe(true)
    expect(system.content.endsWith(steering)).toBe(true)
  })

  test('a malformed body is a 400 in the chat envelope naming the field', async () => {
    const key = await createKey('chat', ['retrieve'])
    const missing = await raw('POST', '/v1/responses', key.secret, { model: 'openai/gpt-fx' })
    expect(missing.status).toBe(400)
    expect(missing.json.error.message).toContain('input')
    expect(missing.json.error.type).toBeString()
    expect(mocks.retrieve.requests).toHaveLength(0)
    const messagesKey = await createKey('messages', ['retrieve'])
    const wrongShape = await raw('POST', '/v1/responses', messagesKey.secret, { model: 'openai/gpt-fx', input: 'Hi' })
    expect(wrongShape.status).toBe(404)
  })
})

describe('Responses via openai: the translated gateway kind', () => {
  test('buffered: X-Router-Responses-Mode translated, a resp_rt_ id, the reply shape, chat upstream', async () => {
    const key = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': () => ({ json: fixtureJson('chat/text.upstream.json') }) })
    const { data, response } = await openai(key.secret).responses.create({ model: 'deepseek/fx', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 40 }).withResponse()
    expect(response.headers.get('x-router-responses-mode')).toBe('translated')
    expect(data.id).toMatch(/^resp_rt_/)
    expect(data.object).toBe('response')
    expect(data.status).toBe('completed')
    expect(data.output_text).toBe('Grüße! 👋')
    expect(data.usage).toMatchObject({ input_tokens: 9, output_tokens: 5 })
    const upstream = mocks.translated.calls('/chat/completions')
    expect(upstream).toHaveLength(1)
    expect(mocks.translated.calls('/responses')).toHaveLength(0)
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ])
    expect(upstream[0]!.body.max_tokens).toBe(40)

    // A translated id cannot anchor a chain.
    const follow = await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'More', previous_response_id: data.id })
    expect(follow.json.error.code).toBe('response_chain_unsupported_target')
  })

  test('streamed: one response.created, one terminal event, continuous sequence_number and output_index', async () => {
    const key = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': () => sseReply('chat/tool-calls.upstream.sse') })
    const body = { model: 'deepseek/fx', input: 'Weather?', stream: true, tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }] }
    const result = await raw('POST', '/v1/responses', key.secret, body)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('translated')
    const events = parseSse(result.text)
    for (const event of events) expect(event.event).toBe(event.data.type)
    expectResponsesGrammar(events)
    const terminal = events.at(-1)!.data
    expect(terminal.type).toBe('response.completed')
    expect(terminal.response.id).toMatch(/^resp_rt_/)
    expect(events[0]!.data.response.id).toBe(terminal.response.id)
    expect(terminal.response.output.map((item: any) => item.type)).toEqual(['message', 'function_call', 'function_call'])
    expect(terminal.response.output[1]).toMatchObject({ call_id: 'call_w1', name: 'get_weather', arguments: '{"city":"Zürich"}' })
    expect(terminal.response.usage).toMatchObject({ input_tokens: 40, output_tokens: 22 })
    expect(mocks.translated.calls('/chat/completions')[0]!.body.stream).toBe(true)

    // The SDK reads the same stream.
    const stream = await openai(key.secret).responses.create(body as any)
    const types: string[] = []
    for await (const event of stream as any) types.push(event.type)
    expect(types.filter((type) => type === 'response.created')).toHaveLength(1)
    expect(types.at(-1)).toBe('response.completed')
  })

  test('a translated stream cut mid-event ends with error then response.failed after one response.created', async () => {
    const key = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': () => sseReply('chat/cut-mid-event.upstream.sse') })
    const result = await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'Hi', stream: true })
    expect(result.status).toBe(200)
    const events = parseSse(result.text)
    expectResponsesGrammar(events)
    expect(events.slice(-2).map((event) => event.event)).toEqual(['error', 'response.failed'])
    expect(events.at(-2)!.data.error.code).toBe('stream_aborted')
    expect(events.at(-1)!.data.response.status).toBe('failed')
    expect(events.filter((event) => event.data.type === 'response.output_text.delta').map((event) => event.data.delta).join('')).toBe('Partial ')
    expect(events.at(-1)!.data.response.output[0].content[0].text).toBe('Partial ')

    // The SDK sees the failure as the stream's end.
    const stream = await openai(key.secret).responses.create({ model: 'deepseek/fx', input: 'Hi', stream: true })
    const types: string[] = []
    let caught: unknown
    try {
      for await (const event of stream) types.push(event.type)
    } catch (error) {
      caught = error
    }
    expect(caught ?? types.at(-1)).toBeDefined()
    expect(types.filter((type) => type === 'response.created')).toHaveLength(1)
  })

  test('three translated responses within one second each get their own id, and each still names its provider', async () => {
    const key = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': (request) => (request.body?.stream ? sseReply('chat/text.upstream.sse') : { json: fixtureJson('chat/text.upstream.json') }) })
    const client = openai(key.secret)
    // In parallel, so within one second: the old ids (key, provider, second) were all the same.
    const buffered = await Promise.all([1, 2, 3].map(() => client.responses.create({ model: 'deepseek/fx', input: 'Hi' })))
    const streamed: string[] = []
    for (let index = 0; index < 2; index++) {
      const events = parseSse((await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'Hi', stream: true })).text)
      expect(events.at(-1)!.data.response.id).toBe(events[0]!.data.response.id)
      streamed.push(events[0]!.data.response.id)
    }
    const ids = [...buffered.map((response) => response.id), ...streamed]
    expect(new Set(ids).size).toBe(5)
    for (const id of ids) {
      expect(id).toMatch(/^resp_rt_/)
      // Each id still encodes the provider that served it: chaining is refused for that provider's reason.
      const follow = await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'More', previous_response_id: id })
      expect(follow.json.error.code).toBe('response_chain_unsupported_target')
    }
  })

  test('a reasoning-budget exhaustion: status incomplete, max_output_tokens, reasoning_tokens (buffered and streamed)', async () => {
    const key = await createKey('chat', ['translated'])
    const usage = { prompt_tokens: 12, completion_tokens: 32, total_tokens: 44, completion_tokens_details: { reasoning_tokens: 32 } }
    route(mocks.translated, {
      '/chat/completions': (request) =>
        request.body?.stream
          ? {
              sse: [
                { id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'deepseek/fx', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
                { id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'deepseek/fx', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] },
                { id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'deepseek/fx', choices: [], usage },
                '[DONE]',
              ],
            }
          : { json: { id: 'chatcmpl-r', object: 'chat.completion', created: 1, model: 'deepseek/fx', choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'length' }], usage } },
    })
    const buffered = await openai(key.secret).responses.create({ model: 'deepseek/fx', input: 'Think hard', max_output_tokens: 32 })
    expect(buffered.status).toBe('incomplete')
    expect(buffered.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(buffered.usage?.output_tokens_details.reasoning_tokens).toBe(32)
    expect(mocks.translated.calls('/chat/completions')[0]!.body.max_tokens).toBe(32)

    const streamed = await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'Think hard', max_output_tokens: 32, stream: true })
    const events = parseSse(streamed.text)
    expectResponsesGrammar(events)
    const terminal = events.at(-1)!.data
    expect(terminal.type).toBe('response.incomplete')
    expect(terminal.response.status).toBe('incomplete')
    expect(terminal.response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(terminal.response.usage.output_tokens_details.reasoning_tokens).toBe(32)
  })

  test('an untranslatable upstream reply is a 502 in the chat envelope', async () => {
    const key = await createKey('chat', ['translated'])
    route(mocks.translated, { '/chat/completions': () => ({ json: { id: 'x', object: 'chat.completion' } }) })
    const result = await raw('POST', '/v1/responses', key.secret, { model: 'deepseek/fx', input: 'Hi' })
    expect(result.status).toBe(502)
    expect(result.json).toEqual({ error: { message: expect.any(String), type: expect.any(String), code: expect.any(String) } })
  })
})

// =============================================================================================
// chat completions through the responses-only kind

describe('chat completions through the responses-only gateway kind', () => {
  test('buffered: the gateway gets POST …/responses; the client gets a chat completion', async () => {
    const key = await createKey('chat', ['only'])
    route(mocks.only, { '/responses': () => ({ json: fixtureJson('responses/text.upstream.json') }) })
    const { data, response } = await openai(key.secret)
      .chat.completions.create({ model: 'openai/o3-pro', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 50 })
      .withResponse()
    expect(data.object).toBe('chat.completion')
    expect(data.choices[0]!.message.content).toBe('Bonjour à tous ✨')
    expect(data.choices[0]!.finish_reason).toBe('stop')
    expect(data.usage).toMatchObject({ prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 })
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.only)
    expect(mocks.only.calls('/chat/completions')).toHaveLength(0)
    const upstream = mocks.only.calls('/responses')
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.method).toBe('POST')
    expect(upstream[0]!.body).toEqual({ model: 'openai/o3-pro', instructions: 'Be brief.', input: [{ role: 'user', content: 'Hi' }], max_output_tokens: 50 })
  })

  test('streamed: chat.completion.chunk records ending data: [DONE]', async () => {
    const key = await createKey('chat', ['only'])
    route(mocks.only, { '/responses': () => sseReply('responses/text.upstream.sse') })
    const stream = await openai(key.secret).chat.completions.create({ model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Hi' }], stream: true })
    let text = ''
    let finish: string | null = null
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk')
      text += chunk.choices[0]?.delta?.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    expect(text).toBe('Bonjour à tous ✨')
    expect(finish).toBe('stop')
    expect(mocks.only.calls('/responses')[0]!.body.stream).toBe(true)

    const direct = await raw('POST', '/v1/chat/completions', key.secret, { model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Hi' }], stream: true })
    expect(direct.status).toBe(200)
    expect(direct.headers.get('content-type')).toContain('text/event-stream')
    expect(direct.text.endsWith('data: [DONE]\n\n')).toBe(true)
    const records = parseSse(direct.text)
    expect(records.filter((record) => record.data === '[DONE]')).toHaveLength(1)
    expect(records.slice(0, -1).every((record) => record.data.object === 'chat.completion.chunk')).toBe(true)
  })

  test('tool calls both ways, buffered and streamed', async () => {
    const key = await createKey('chat', ['only'])
    const client = openai(key.secret)
    const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }]
    const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Find cafés.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_prev', type: 'function', function: { name: 'lookup', arguments: '{"q":"bars"}' } }] },
      { role: 'tool', tool_call_id: 'call_prev', content: '{"found":0}' },
    ]
    route(mocks.only, { '/responses': (request) => (request.body?.stream ? sseReply('responses/function-call.upstream.sse') : { json: fixtureJson('responses/function-call.upstream.json') }) })
    const buffered = await client.chat.completions.create({ model: 'openai/o3-pro', messages: history, tools, tool_choice: 'auto' })
    expect(buffered.choices[0]!.finish_reason).toBe('tool_calls')
    expect(buffered.choices[0]!.message.tool_calls).toEqual([{ id: 'call_fx1', type: 'function', function: { name: 'lookup', arguments: '{"q":"café"}' } }])
    const sent = mocks.only.calls('/responses')[0]!.body
    expect(sent.tools).toEqual([{ type: 'function', name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } } }])
    expect(sent.tool_choice).toBe('auto')
    expect(sent.input).toEqual([
      { role: 'user', content: 'Find cafés.' },
      { type: 'function_call', call_id: 'call_prev', name: 'lookup', arguments: '{"q":"bars"}' },
      { type: 'function_call_output', call_id: 'call_prev', output: '{"found":0}' },
    ])

    const stream = await client.chat.completions.create({ model: 'openai/o3-pro', messages: history, tools, stream: true })
    const calls: { id?: string; name: string; arguments: string }[] = []
    let finish: string | null = null
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
        calls[call.index] ??= { name: '', arguments: '' }
        if (call.id) calls[call.index]!.id = call.id
        if (call.function?.name) calls[call.index]!.name += call.function.name
        if (call.function?.arguments) calls[call.index]!.arguments += call.function.arguments
      }
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    expect(calls).toEqual([
      { id: 'call_fx1', name: 'lookup', arguments: '{"q":"café"}' },
      { id: 'call_fx2', name: 'clock', arguments: '{"zone":"UTC"}' },
    ])
    expect(finish).toBe('tool_calls')
  })

  test('max_tokens consumed by hidden reasoning: an empty reply, finish_reason length, reasoning_tokens; the budget is never raised; encrypted reasoning dropped', async () => {
    const key = await createKey('chat', ['only'])
    route(mocks.only, { '/responses': (request) => (request.body?.stream ? sseReply('responses/incomplete.upstream.sse') : { json: fixtureJson('responses/incomplete.upstream.json') }) })
    const { data, response } = await openai(key.secret).chat.completions.create({ model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Think' }], max_tokens: 5 }).withResponse()
    expect(mocks.only.calls('/responses')[0]!.body.max_output_tokens).toBe(5)
    expect(data.choices[0]!.message.content ?? '').toBe('')
    expect(data.choices[0]!.finish_reason).toBe('length')
    expect(data.usage?.completion_tokens_details?.reasoning_tokens).toBe(16)
    expect(JSON.stringify(data)).not.toContain('ENCRYPTED')
    expect(response.status).toBe(200)

    const streamed = await raw('POST', '/v1/chat/completions', key.secret, { model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Think' }], max_tokens: 5, stream: true })
    expect(mocks.only.calls('/responses')[1]!.body.max_output_tokens).toBe(5)
    expect(streamed.text).not.toContain('ENCRYPTED')
    const records = parseSse(streamed.text)
    expect(records.at(-1)!.data).toBe('[DONE]')
    const chunks = records.slice(0, -1).map((record) => record.data)
    expect(chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('')).toBe('')
    expect(chunks.find((chunk) => chunk.choices[0]?.finish_reason)!.choices[0].finish_reason).toBe('length')
    expect(chunks.find((chunk) => chunk.usage)!.usage.completion_tokens_details.reasoning_tokens).toBe(16)

    route(mocks.only, { '/responses': () => sseReply('responses/reasoning-encrypted.upstream.sse') })
    const encrypted = await raw('POST', '/v1/chat/completions', key.secret, { model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Think' }], stream: true })
    expect(encrypted.text).not.toContain('ENCRYPTED')
    expect(encrypted.text).not.toContain('encrypted_content')
  })

  test('a mid-stream error is one stream_aborted record with no [DONE]', async () => {
    const key = await createKey('chat', ['only'])
    route(mocks.only, { '/responses': () => sseReply('responses/error.upstream.sse') })
    const result = await raw('POST', '/v1/chat/completions', key.secret, { model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Hi' }], stream: true })
    expect(result.status).toBe(200)
    const records = parseSse(result.text)
    expect(records.some((record) => record.data === '[DONE]')).toBe(false)
    const errors = records.filter((record) => record.data?.error)
    expect(errors).toHaveLength(1)
    expect(errors[0]!.data.error.code).toBe('stream_aborted')
    expect(records.at(-1)).toBe(errors[0])
    expect(records[0]!.data.choices[0].delta.role).toBe('assistant')
  })

  test('failover in the middle of the route, and an untranslatable reply is a 502 in the chat envelope', async () => {
    const key = await createKey('chat', ['only', 'plain'])
    route(mocks.only, { '/responses': failing(500) })
    const { data, response } = await openai(key.secret).chat.completions.create({ model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Hi' }] }).withResponse()
    expect(data.choices[0]!.message.content).toBe('Hello from the mock.')
    expect(response.headers.get('x-router-failover')).toBe(`${gatewayOf.only}:server-error`)
    expect(response.headers.get('x-router-provider')).toBe(gatewayOf.plain)

    const onlyKey = await createKey('chat', ['only'])
    route(mocks.only, { '/responses': () => ({ json: { id: 'resp_bad', object: 'response', status: 'completed' } }) })
    const result = await raw('POST', '/v1/chat/completions', onlyKey.secret, { model: 'openai/o3-pro', messages: [{ role: 'user', content: 'Hi' }] })
    expect(result.status).toBe(502)
    expect(result.json).toEqual({ error: { message: expect.any(String), type: expect.any(String), code: expect.any(String) } })
  })
})
