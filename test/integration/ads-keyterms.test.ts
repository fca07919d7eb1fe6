/**
 * Companion ads and monetizable keyterms (SPEC "Companion ads", "Monetizable keyterms", body
 * processing; CONTRACT §7): on a key with `companion_ads` the service asks `$RT_ADS_URL` for ads in
 * parallel with the model call (2 s limit) and attaches `ads` or `ads_error`; on a key with
 * `keyterms` (and `RT_KEYTERMS_ENABLED=1`) it sends the completed reply to `$RT_KEYTERMS_URL` (2 s)
 * and attaches `keyterms` or `keyterms_error`. Only on a successful answer, never failing it, placed
 * per the CONTRACT §7 table; `ad_request`/`link_request` never reach the gateway; the log row's
 * `enrichment` and `router_enrichment_outcomes_total` record each outcome.
 *
 * Real pieces on 127.0.0.1: the service (harness/server), mock gateways (harness/mock-gateway) —
 * `groq` serves Responses natively, `deepseek` by translation to chat — and the ad and keyterm
 * services (harness/plugin-services). Clients: raw fetch where the bytes matter, the official SDKs
 * where they expose the extra fields.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { chatChunks, chatCompletion, type MockHandler, type RecordedRequest } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { enrichmentOf } from '../harness/request-log'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { expectResponsesGrammar, parseClientSse, type ClientEvent } from '../harness/client-sse'
import { refusedUrl, startPluginService, type PluginReply, type PluginService } from '../harness/plugin-services'
import { parseExposition } from '../harness/prometheus'

// ---------------------------------------------------------------------------------------------
// Gateway kinds and the scripted model

/** Chat and native Responses (a Responses body goes upstream to `/responses`). */
const NATIVE = 'groq'
/** Responses served by translation to chat upstream. */
const TRANSLATED = 'deepseek'

const MODEL = 'openai/gpt-4o-mini'
const MESSAGES_MODEL = 'anthropic/claude-fx'
const CONTENT_MODEL = 'google/gemini-fx'
const PIECES = ['Paris is ', 'the capital ', 'of France.']
/** The model's whole reply, buffered or streamed. */
const REPLY = PIECES.join('')
const QUESTION = 'What is the capital of France?'

const ADS = [
  { id: 'ad_1', title: 'Paris city breaks', body: 'Three nights from 199 EUR.', url: 'https://ads.example/paris' },
  { id: 'ad_2', title: 'French lessons', url: 'https://ads.example/french' },
]
const KEYTERMS = [
  { term: 'Paris', score: 0.93, url: 'https://links.example/paris' },
  { term: 'France', score: 0.61, url: 'https://links.example/france' },
]
const ENRICHMENT_FIELDS = ['ads', 'ads_error', 'keyterms', 'keyterms_error'] as const
/** Any of the four fields as a JSON key, at any depth. */
const enrichmentKey = /"(ads|ads_error|keyterms|keyterms_error)":/

/** A Response object of the native upstream, with the reply as one message. */
function responseObject(model: string, text = REPLY) {
  return {
    id: 'resp_up_1',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    error: null,
    incomplete_details: null,
    model,
    output: [{ id: 'msg_up_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }],
    usage: { input_tokens: 11, input_tokens_details: { cached_tokens: 0 }, output_tokens: 7, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 18 },
  }
}

/** The native upstream's Responses events for the reply, shaped like the real API's. */
function responseEvents(model: string, pieces = PIECES): Record<string, unknown>[] {
  const final = responseObject(model, pieces.join(''))
  const item = final.output[0]!
  const pending = { ...final, status: 'in_progress', output: [], usage: null }
  const part = (text: string) => ({ type: 'output_text', annotations: [], text })
  const events: Record<string, unknown>[] = [
    { type: 'response.created', response: pending },
    { type: 'response.in_progress', response: pending },
    { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', content: [] } },
    { type: 'response.content_part.added', item_id: item.id, output_index: 0, content_index: 0, part: part('') },
    ...pieces.map((delta) => ({ type: 'response.output_text.delta', item_id: item.id, output_index: 0, content_index: 0, delta, logprobs: [] })),
    { type: 'response.output_text.done', item_id: item.id, output_index: 0, content_index: 0, text: pieces.join('') },
    { type: 'response.content_part.done', item_id: item.id, output_index: 0, content_index: 0, part: part(pieces.join('')) },
    { type: 'response.output_item.done', output_index: 0, item },
    { type: 'response.completed', response: final },
  ]
  return events.map((event, index) => ({ ...event, sequence_number: index }))
}

const sseResponse = (events: Record<string, unknown>[]) =>
  new Response(events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join(''), { headers: { 'content-type': 'text/event-stream' } })

interface ModelScript {
  /** Wait before answering, per request body (default none). */
  delayFor?: (body: any) => number
  /** Whether a chat stream ends with a usage chunk (default true, as the mock's chatChunks). */
  usageChunk?: boolean
}

/** The model: the reply on chat (buffered or streamed) and on native Responses (buffered or streamed). */
function model(script: ModelScript = {}): MockHandler {
  return (request: RecordedRequest) => {
    const body = request.body
    const delayMs = script.delayFor?.(body) ?? 0
    const name = String(body?.model ?? MODEL)
    if (request.path.endsWith('/chat/completions')) {
      if (!body?.stream) return { json: chatCompletion(name, REPLY), delayMs }
      const chunks = chatChunks(name, PIECES).filter((chunk) => script.usageChunk !== false || typeof chunk === 'string' || !(chunk as any).usage)
      return { sse: chunks, delayMs }
    }
    if (request.path.endsWith('/responses')) {
      if (!body?.stream) return { json: responseObject(name), delayMs }
      return Bun.sleep(delayMs).then(() => sseResponse(responseEvents(name)))
    }
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// Environment

interface Env extends AsyncDisposable {
  server: TestServer
  gateways: GatewaysEnv
  /** The ad service (answers `{ads: ADS}` unless told otherwise). */
  ads: PluginService
  /** The keyterm service (answers `{keyterms: KEYTERMS}` unless told otherwise). */
  keyterms: PluginService
}

interface EnvOptions {
  gateways?: string[]
  /** RT_ADS_URL: the ad service's URL by default; null leaves it unset. */
  adsUrl?: string | null
  /** RT_KEYTERMS_URL: the keyterm service's URL by default; null leaves it unset. */
  keytermsUrl?: string | null
  /** RT_KEYTERMS_ENABLED=1 unless false. */
  keytermsEnabled?: boolean
}

async function startEnv(options: EnvOptions = {}): Promise<Env> {
  const ads = await startPluginService({ path: '/v1/ads', answer: { json: { ads: ADS } } })
  const keyterms = await startPluginService({ path: '/v1/keyterms', answer: { json: { keyterms: KEYTERMS } } })
  const env: Record<string, string> = {}
  const adsUrl = options.adsUrl === undefined ? ads.url : options.adsUrl
  const keytermsUrl = options.keytermsUrl === undefined ? keyterms.url : options.keytermsUrl
  if (adsUrl !== null) env.RT_ADS_URL = adsUrl
  if (keytermsUrl !== null) env.RT_KEYTERMS_URL = keytermsUrl
  if (options.keytermsEnabled !== false) env.RT_KEYTERMS_ENABLED = '1'
  const gateways = await startGateways(options.gateways ?? [NATIVE], env)
  for (const mock of Object.values(gateways.mocks)) mock.handle(model())
  return {
    server: gateways.server,
    gateways,
    ads,
    keyterms,
    async [Symbol.asyncDispose]() {
      await gateways[Symbol.asyncDispose]()
      await ads.close()
      await keyterms.close()
    },
  }
}

const mockOf = (env: Env, gateway = NATIVE) => env.gateways.mocks[gateway]!

interface FeatureKey {
  id: string
  secret: string
  /** The key as POST /keys answered it. */
  data: any
}

/** An inference key of a shape, routed (priority) to the gateways, with the features asked for. */
async function featureKey(env: Env, options: { shape?: 'chat' | 'messages' | 'content'; ads?: boolean; keyterms?: boolean; gateways?: string[] } = {}): Promise<FeatureKey> {
  const data = await createInferenceKey(env.server, {
    api_shape: options.shape ?? 'chat',
    routing: { strategy: 'priority', targets: (options.gateways ?? [NATIVE]).map((gateway) => ({ provider_key_id: env.gateways.providers[gateway] })) },
    ...(options.ads !== undefined ? { companion_ads: options.ads } : {}),
    ...(options.keyterms !== undefined ? { keyterms: options.keyterms } : {}),
  })
  return { id: data.id, secret: data.key, data }
}

// ---------------------------------------------------------------------------------------------
// Calls

const chat = (env: Env, key: FeatureKey, extra: Record<string, unknown> = {}) =>
  httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: QUESTION }], ...extra }, bearerHeader(key.secret))

const responses = (env: Env, key: FeatureKey, extra: Record<string, unknown> = {}) =>
  httpCall(env.server, 'POST', '/v1/responses', { model: MODEL, input: QUESTION, ...extra }, bearerHeader(key.secret))

const messages = (env: Env, key: FeatureKey, extra: Record<string, unknown> = {}) =>
  httpCall(
    env.server,
    'POST',
    '/v1/messages',
    { model: MESSAGES_MODEL, max_tokens: 64, messages: [{ role: 'user', content: QUESTION }], ...extra },
    { ...bearerHeader(key.secret), 'anthropic-version': '2023-06-01' },
  )

const generateContent = (env: Env, key: FeatureKey, extra: Record<string, unknown> = {}) =>
  httpCall(env.server, 'POST', `/v1/models/${CONTENT_MODEL}:generateContent`, { contents: [{ role: 'user', parts: [{ text: QUESTION }] }], ...extra }, bearerHeader(key.secret))

const openai = (env: Env, key: FeatureKey) => new OpenAI({ apiKey: key.secret, baseURL: env.server.baseUrl, maxRetries: 0 })
const anthropic = (env: Env, key: FeatureKey) => new Anthropic({ apiKey: key.secret, baseURL: env.server.rootUrl, maxRetries: 0 })

/** A streamed call's events (200, an event stream), parsed strictly. */
function streamEvents(result: CallResult): ClientEvent[] {
  expect(result.status).toBe(200)
  expect(result.headers.get('content-type') ?? '').toContain('text/event-stream')
  return parseClientSse(result.text)
}

/** Each SSE record with the time its last byte arrived. */
async function timedEvents(response: Response): Promise<{ at: number; event: ClientEvent }[]> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const out: { at: number; event: ClientEvent }[] = []
  let buffer = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    const at = performance.now()
    buffer += decoder.decode(value, { stream: true })
    for (let cut = buffer.indexOf('\n\n'); cut !== -1; cut = buffer.indexOf('\n\n')) {
      for (const event of parseClientSse(buffer.slice(0, cut + 2))) out.push({ at, event })
      buffer = buffer.slice(cut + 2)
    }
  }
  expect(buffer).toBe('')
  return out
}

// ---------------------------------------------------------------------------------------------
// Reading answers

/** `{code, message}` and nothing else, with the code given and a message that says something. */
/** A whole chat answer carrying, of the four enrichment fields, only `<feature>_error` with `code`. */
function expectOnlyPluginError(result: CallResult, feature: 'ads' | 'keyterms', code: string) {
  expect(result.status).toBe(200)
  expect(result.json.choices[0].message.content).toBe(REPLY)
  expect(Object.keys(enrichmentFields(result.json))).toEqual([`${feature}_error`])
  expectPluginError(result.json[`${feature}_error`], code)
}

/** The keyterm service was asked `count` times, each for the whole reply with the default five keyterms. */
function expectKeytermCalls(env: Env, count: number) {
  expect(env.keyterms.requests.map((request) => request.body)).toEqual(Array.from({ length: count }, () => ({ text: REPLY, max_keyterms: 5 })))
}

function expectPluginError(value: unknown, code: string) {
  expect(value).toEqual({ code, message: expect.any(String) })
  expect((value as { message: string }).message.length).toBeGreaterThan(0)
}

/** None of ads, ads_error, keyterms, keyterms_error, at any depth. */
function expectNoEnrichment(value: unknown) {
  expect(JSON.stringify(value ?? null)).not.toMatch(enrichmentKey)
}

/** The four fields an object carries (absent ones left out). */
function enrichmentFields(value: any): Record<string, unknown> {
  const found: Record<string, unknown> = {}
  for (const field of ENRICHMENT_FIELDS) if (value && Object.hasOwn(value, field)) found[field] = value[field]
  return found
}

/** The text of a Responses object: every output_text part of every message item. */
const responseText = (response: any): string =>
  (response.output as any[])
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content as any[])
    .filter((part) => part.type === 'output_text')
    .map((part) => part.text as string)
    .join('')

const chatStreamText = (events: ClientEvent[]) =>
  events
    .filter((event) => event.data !== '[DONE]')
    .map((event) => event.data.choices?.[0]?.delta?.content ?? '')
    .join('')

/** The chunks of a chat stream before `[DONE]` (which must be last, once). */
function chatStreamChunks(events: ClientEvent[]): any[] {
  expect(events.at(-1)!.data).toBe('[DONE]')
  expect(events.filter((event) => event.data === '[DONE]')).toHaveLength(1)
  const chunks = events.slice(0, -1).map((event) => event.data)
  for (const chunk of chunks) expect(chunk.object).toBe('chat.completion.chunk')
  return chunks
}

/**
 * The chat stream places: the last chunk before [DONE] carries `expected`, no other chunk carries
 * any of the fields. Returns that last chunk.
 */
function expectOnLastChatChunk(events: ClientEvent[], expected: Record<string, unknown>): any {
  const chunks = chatStreamChunks(events)
  const last = chunks.at(-1)!
  expect(enrichmentFields(last)).toEqual(expected)
  for (const chunk of chunks.slice(0, -1)) expectNoEnrichment(chunk)
  return last
}


const logged = (outcome: string) => ({ outcome, ms: expect.any(Number) })

// =============================================================================================

describe('the plug-in service harness', () => {
  test('records requests and answers as scripted; a refused URL refuses', async () => {
    await using service = await startPluginService({ path: '/x', answer: { json: { ok: true } } })
    expect(service.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/x$/)
    const first = await fetch(service.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' })
    expect(await first.json()).toEqual({ ok: true })
    service.handle(() => ({ status: 503, text: 'nope', delayMs: 50 }))
    const started = performance.now()
    const second = await fetch(service.url, { method: 'POST', body: 'plain' })
    expect(second.status).toBe(503)
    expect(await second.text()).toBe('nope')
    expect(performance.now() - started).toBeGreaterThanOrEqual(45)
    expect(service.requests.map((request) => [request.method, request.path, request.body, request.rawBody])).toEqual([
      ['POST', '/x', { a: 1 }, '{"a":1}'],
      ['POST', '/x', undefined, 'plain'],
    ])
    expect(service.requests[0]!.headers['content-type']).toBe('application/json')
    expect(service.requests[1]!.at).toBeGreaterThanOrEqual(service.requests[0]!.at)
    const refused = await refusedUrl('/ads')
    expect(refused).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ads$/)
    await expect(fetch(refused, { method: 'POST' })).rejects.toThrow()
  })
})

// =============================================================================================

describe('companion ads on a buffered chat answer', () => {
  test('fill: the ad service answer is attached as `ads`, the completion otherwise as the model gave it; logged fill', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true })
    expect(key.data.companion_ads).toBe(true)
    const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
    expect(result.status).toBe(200)
    expect(result.json).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }], usage: chatCompletion(MODEL).usage })
    expect(enrichmentFields(result.json)).toEqual({ ads: ADS })
    expect(env.ads.requests).toHaveLength(1)
    expect(env.keyterms.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('fill') })
  })

  test('the official SDK sees `ads` beside the completion', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true })
    const completion = await openai(env, key).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: QUESTION }] })
    expect(completion.choices[0]!.message.content).toBe(REPLY)
    expect((completion as any).ads).toEqual(ADS)
    expect((completion as any).ads_error).toBeUndefined()
  })

  test('no fill: `{"ads": []}` is `ads: []`, not an error; logged no_fill', async () => {
    await using env = await startEnv()
    env.ads.handle(() => ({ json: { ads: [] } }))
    const key = await featureKey(env, { ads: true })
    const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
    expect(result.status).toBe(200)
    expect(result.json.choices[0].message.content).toBe(REPLY)
    expect(enrichmentFields(result.json)).toEqual({ ads: [] })
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('no_fill') })
  })

  test('no RT_ADS_URL: ads_error ads_unconfigured, the answer as usual', async () => {
    await using env = await startEnv({ adsUrl: null })
    const key = await featureKey(env, { ads: true })
    const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
    expectOnlyPluginError(result, 'ads', 'ads_unconfigured')
    expect(env.ads.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('ads_unconfigured') })
  })

  test('a non-2xx answer (500, 404, 503 with an ads body): ads_error ads_upstream_error', async () => {
    await using env = await startEnv()
    const replies: PluginReply[] = [
      { status: 500, json: { error: 'boom' } },
      { status: 404, text: 'not found' },
      { status: 503, json: { ads: ADS } },
    ]
    const key = await featureKey(env, { ads: true })
    for (const reply of replies) {
      env.ads.handle(() => reply)
      const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe(REPLY)
      expect(Object.keys(enrichmentFields(result.json))).toEqual(['ads_error'])
      expectPluginError(result.json.ads_error, 'ads_upstream_error')
    }
    expect(env.ads.requests).toHaveLength(replies.length)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('ads_upstream_error') })
  })

  test('a refused connection: ads_error ads_unreachable', async () => {
    await using env = await startEnv({ adsUrl: await refusedUrl('/ads') })
    const key = await featureKey(env, { ads: true })
    const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
    expectOnlyPluginError(result, 'ads', 'ads_unreachable')
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('ads_unreachable') })
  })

  test('a body that is not JSON, or has no `ads` array: ads_error ads_malformed', async () => {
    await using env = await startEnv()
    const bodies = ['not json at all', '', '{"ads": {"id": "ad_1"}}', '{"ads": null}', '{"ad": []}', '{}', '[]', '"ads"']
    const key = await featureKey(env, { ads: true })
    for (const text of bodies) {
      env.ads.handle(() => ({ text, headers: { 'content-type': 'application/json' } }))
      const result = await chat(env, key, { ad_request: { placement: 'below_answer' } })
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe(REPLY)
      expect(Object.keys(enrichmentFields(result.json))).toEqual(['ads_error'])
      expectPluginError(result.json.ads_error, 'ads_malformed')
    }
    expect(env.ads.requests).toHaveLength(bodies.length)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('ads_malformed') })
  })
})

// =============================================================================================

describe('the ad service request', () => {
  test('POST $RT_ADS_URL with {ad_request, model as the client sent it, key_id}, once per request', async () => {
    await using env = await startEnv({ gateways: ['openai'] })
    // With a crawled catalog the gateway receives its own spelling; the ad service gets the client's.
    env.server.runtime.repositories.gatewayCatalogs.replaceCatalog('openai', Date.now(), [{ modelId: 'gpt-4o-mini', canonicalId: MODEL, object: '{}' }])
    const key = await featureKey(env, { ads: true, gateways: ['openai'] })
    const adRequest = { placement: 'sidebar', size: { w: 300, h: 250 }, topics: ['travel', 'food'], user: { locale: 'fr-FR' } }
    const result = await chat(env, key, { ad_request: adRequest })
    expect(result.status).toBe(200)
    expect(result.json.ads).toEqual(ADS)
    expect(mockOf(env, 'openai').calls('/chat/completions')[0]!.body.model).toBe('gpt-4o-mini')
    expect(env.ads.requests).toHaveLength(1)
    const sent = env.ads.requests[0]!
    expect(sent.method).toBe('POST')
    expect(sent.path).toBe('/v1/ads')
    expect(sent.headers['content-type']).toContain('application/json')
    expect(sent.body).toEqual({ ad_request: adRequest, model: MODEL, key_id: key.id })
  })

  test('a client that sends no ad_request: the ad service is still asked, with ad_request null', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true })
    const result = await chat(env, key)
    expect(result.status).toBe(200)
    expect(result.json.ads).toEqual(ADS)
    expect(env.ads.requests.map((request) => request.body)).toEqual([{ ad_request: null, model: MODEL, key_id: key.id }])
  })

  test('fetched in parallel with the model call: slow ads with a fast model, a slow model with fast ads, both slow', async () => {
    await using env = await startEnv()
    const DELAY = 900
    const upstreamAt = new Map<string, number>()
    const base = model({ delayFor: (body) => (String(body?.messages?.[0]?.content).startsWith('slow model') ? DELAY : 0) })
    mockOf(env).handle((request) => {
      upstreamAt.set(String(request.body?.messages?.[0]?.content), performance.now())
      return base(request)
    })
    env.ads.handle((request) => ({ json: { ads: ADS }, delayMs: request.body?.ad_request?.slow ? DELAY : 0 }))
    const key = await featureKey(env, { ads: true })
    const timed = async (content: string, slowAds: boolean) => {
      const started = performance.now()
      const result = await chat(env, key, { messages: [{ role: 'user', content }], ad_request: { slot: content, slow: slowAds } })
      return { result, ms: performance.now() - started }
    }
    const [adsSlow, modelSlow, bothSlow] = await Promise.all([timed('fast model, slow ads', true), timed('slow model, fast ads', false), timed('slow model, slow ads', true)])
    for (const { result } of [adsSlow, modelSlow, bothSlow]) {
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe(REPLY)
      expect(result.json.ads).toEqual(ADS)
    }
    // A slow ad service under its limit is waited for; a slow model does not lose its ads.
    expect(adsSlow.ms).toBeGreaterThanOrEqual(DELAY - 50)
    expect(modelSlow.ms).toBeGreaterThanOrEqual(DELAY - 50)
    // Both slow: the two waits overlap.
    expect(bothSlow.ms).toBeLessThan(2 * DELAY - 200)
    // The ad request was under way before the model answered: started with (before) the model call.
    const adAt = env.ads.requests.find((request) => request.body?.ad_request?.slot === 'slow model, slow ads')!.at
    expect(adAt).toBeLessThan(upstreamAt.get('slow model, slow ads')! + 150)
    expect(env.ads.requests).toHaveLength(3)
  })
})

// =============================================================================================

describe('ad_request and link_request never reach the gateway', () => {
  const adRequest = { placement: 'sidebar', topics: ['travel'] }
  const linkRequest = { max_keyterms: 2 }
  const siblings = { ad_request: adRequest, link_request: linkRequest }
  const expectStripped = (request: RecordedRequest | undefined) => {
    expect(request).toBeDefined()
    expect(Object.hasOwn(request!.body, 'ad_request')).toBe(false)
    expect(Object.hasOwn(request!.body, 'link_request')).toBe(false)
    expect(request!.rawBody).not.toContain('ad_request')
    expect(request!.rawBody).not.toContain('link_request')
  }

  test('/chat/completions, buffered and streamed: the rest of the body goes as sent', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const sent = { messages: [{ role: 'user', content: QUESTION }], temperature: 0.3, max_tokens: 50 }
    expect((await chat(env, key, { ...sent, ...siblings })).status).toBe(200)
    expect(streamEvents(await chat(env, key, { ...sent, ...siblings, stream: true })).at(-1)!.data).toBe('[DONE]')
    const calls = mockOf(env).calls('/chat/completions')
    expect(calls).toHaveLength(2)
    for (const call of calls) {
      expectStripped(call)
      expect(call.body).toMatchObject({ model: MODEL, ...sent })
    }
    expect(env.ads.requests.map((request) => request.body.ad_request)).toEqual([adRequest, adRequest])
    expect(env.keyterms.requests.map((request) => request.body.max_keyterms)).toEqual([2, 2])
  })

  test('/responses on a native target (upstream /responses) and a translated one (upstream /chat/completions)', async () => {
    await using env = await startEnv({ gateways: [NATIVE, TRANSLATED] })
    for (const gateway of [NATIVE, TRANSLATED]) {
      const key = await featureKey(env, { ads: true, keyterms: true, gateways: [gateway] })
      const result = await responses(env, key, { instructions: 'Be brief.', ...siblings })
      expect(result.status).toBe(200)
      expect(result.headers.get('x-router-responses-mode')).toBe(gateway === NATIVE ? 'native' : 'translated')
      expect(result.json.ads).toEqual(ADS)
    }
    const native = mockOf(env, NATIVE).calls('/responses')
    expect(native).toHaveLength(1)
    expectStripped(native[0])
    expect(native[0]!.body).toMatchObject({ model: MODEL, input: QUESTION, instructions: 'Be brief.' })
    const translated = mockOf(env, TRANSLATED).calls('/chat/completions')
    expect(translated).toHaveLength(1)
    expectStripped(translated[0])
    expect(env.ads.requests.map((request) => request.body.ad_request)).toEqual([adRequest, adRequest])
  })

  test.each([
    ['/messages (translated to chat upstream): stripped; the ad service gets the client model', 'messages', messages, MESSAGES_MODEL],
    [':generateContent (translated to chat upstream): stripped; the ad service gets the model from the path', 'content', generateContent, CONTENT_MODEL],
  ] as const)('%s', async (_, shape, send, model) => {
    await using env = await startEnv()
    const key = await featureKey(env, { shape, ads: true, keyterms: true })
    const result = await send(env, key, siblings)
    expect(result.status).toBe(200)
    expect(result.json.ads).toEqual(ADS)
    const calls = mockOf(env).calls('/chat/completions')
    expect(calls).toHaveLength(1)
    expectStripped(calls[0])
    expect(env.ads.requests.map((request) => request.body)).toEqual([{ ad_request: adRequest, model, key_id: key.id }])
  })

  test('a key with neither feature strips them too, and asks no plug-in service', async () => {
    await using env = await startEnv()
    const key = await featureKey(env)
    const result = await chat(env, key, siblings)
    expect(result.status).toBe(200)
    expectNoEnrichment(result.json)
    expectStripped(mockOf(env).calls('/chat/completions')[0])
    expect(env.ads.requests).toHaveLength(0)
    expect(env.keyterms.requests).toHaveLength(0)
  })
})

// =============================================================================================

describe('placement on buffered answers: top-level siblings of the answer object', () => {
  const both = { ads: ADS, keyterms: KEYTERMS }

  test('chat completion', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const result = await chat(env, key)
    expect(result.status).toBe(200)
    expect(result.json.object).toBe('chat.completion')
    expect(enrichmentFields(result.json)).toEqual(both)
    expectNoEnrichment(result.json.choices)
    expectKeytermCalls(env, 1)
  })

  test('Response object, native target (raw and SDK)', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const result = await responses(env, key)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('native')
    expect(result.json.object).toBe('response')
    expect(responseText(result.json)).toBe(REPLY)
    expect(enrichmentFields(result.json)).toEqual(both)
    expectNoEnrichment(result.json.output)
    const sdk = await openai(env, key).responses.create({ model: MODEL, input: QUESTION })
    expect(sdk.output_text).toBe(REPLY)
    expect(enrichmentFields(sdk)).toEqual(both)
    expectKeytermCalls(env, 2)
  })

  test('Response object, translated target', async () => {
    await using env = await startEnv({ gateways: [TRANSLATED] })
    const key = await featureKey(env, { ads: true, keyterms: true, gateways: [TRANSLATED] })
    const result = await responses(env, key)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('translated')
    expect(result.json.object).toBe('response')
    expect(responseText(result.json)).toBe(REPLY)
    expect(enrichmentFields(result.json)).toEqual(both)
    expectNoEnrichment(result.json.output)
    expectKeytermCalls(env, 1)
  })

  test('messages Message (raw and SDK)', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { shape: 'messages', ads: true, keyterms: true })
    const result = await messages(env, key)
    expect(result.status).toBe(200)
    expect(result.json).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'text', text: REPLY }] })
    expect(enrichmentFields(result.json)).toEqual(both)
    expectNoEnrichment(result.json.content)
    const sdk = await anthropic(env, key).messages.create({ model: MESSAGES_MODEL, max_tokens: 64, messages: [{ role: 'user', content: QUESTION }] })
    expect(enrichmentFields(sdk)).toEqual(both)
    expect(env.keyterms.requests.map((request) => request.body.text)).toEqual([REPLY, REPLY])
  })

  test('generateContent response', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { shape: 'content', ads: true, keyterms: true })
    const result = await generateContent(env, key)
    expect(result.status).toBe(200)
    expect(result.json.candidates[0].content.parts.map((part: any) => part.text).join('')).toBe(REPLY)
    expect(enrichmentFields(result.json)).toEqual(both)
    expectNoEnrichment(result.json.candidates)
    expectKeytermCalls(env, 1)
  })
})

// =============================================================================================

describe('placement on streams', () => {
  const both = { ads: ADS, keyterms: KEYTERMS }

  test('chat stream with a usage chunk: the fields ride on the usage chunk, the last before [DONE]; keyterms get the whole streamed reply', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const events = streamEvents(await chat(env, key, { stream: true, stream_options: { include_usage: true } }))
    expect(chatStreamText(events)).toBe(REPLY)
    const last = expectOnLastChatChunk(events, both)
    expect(last.choices).toEqual([])
    expect(last.usage).toMatchObject({ prompt_tokens: 11 })
    const chunks = chatStreamChunks(events)
    expect(chunks.filter((chunk) => chunk.choices?.[0]?.finish_reason === 'stop')).toHaveLength(1)
    expectKeytermCalls(env, 1)
  })

  test('chat stream without a usage chunk: the fields ride on the finish chunk', async () => {
    await using env = await startEnv()
    mockOf(env).handle(model({ usageChunk: false }))
    const key = await featureKey(env, { ads: true, keyterms: true })
    const events = streamEvents(await chat(env, key, { stream: true }))
    expect(chatStreamText(events)).toBe(REPLY)
    const last = expectOnLastChatChunk(events, both)
    expect(last.choices[0].finish_reason).toBe('stop')
    expect(env.keyterms.requests.map((request) => request.body.text)).toEqual([REPLY])
  })

  test('chat stream through the official SDK: the last chunk carries the fields', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const stream = openai(env, key).chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: QUESTION }], stream_options: { include_usage: true } })
    const chunks: any[] = []
    for await (const chunk of stream) chunks.push(chunk)
    const final = await stream.finalChatCompletion()
    expect(final.choices[0]!.message.content).toBe(REPLY)
    expect(enrichmentFields(chunks.at(-1))).toEqual(both)
    for (const chunk of chunks.slice(0, -1)) expect(enrichmentFields(chunk)).toEqual({})
  })

  test('Responses stream, native target: inside the response of the terminal response.completed; same events as upstream (raw and SDK)', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    const result = await responses(env, key, { stream: true })
    expect(result.headers.get('x-router-responses-mode')).toBe('native')
    const events = streamEvents(result)
    expectResponsesGrammar(events)
    // No new event type: exactly the upstream's events, in order.
    expect(events.map((event) => event.data.type)).toEqual(responseEvents(MODEL).map((event) => event.type))
    const terminal = events.at(-1)!.data
    expect(terminal.type).toBe('response.completed')
    expect(enrichmentFields(terminal.response)).toEqual(both)
    expect(enrichmentFields(terminal)).toEqual({})
    for (const event of events.slice(0, -1)) expectNoEnrichment(event.data)
    expect(responseText(terminal.response)).toBe(REPLY)

    const sdkStream = openai(env, key).responses.stream({ model: MODEL, input: QUESTION })
    for await (const _event of sdkStream) {
    }
    const final = await sdkStream.finalResponse()
    expect(final.output_text).toBe(REPLY)
    expect(enrichmentFields(final)).toEqual(both)
    expectKeytermCalls(env, 2)
  })

  test('Responses stream, translated target: inside the response of response.completed; same event types as a plain key gets', async () => {
    await using env = await startEnv({ gateways: [TRANSLATED] })
    const key = await featureKey(env, { ads: true, keyterms: true, gateways: [TRANSLATED] })
    const plain = await featureKey(env, { gateways: [TRANSLATED] })
    const result = await responses(env, key, { stream: true })
    expect(result.headers.get('x-router-responses-mode')).toBe('translated')
    const events = streamEvents(result)
    expectResponsesGrammar(events)
    const plainEvents = streamEvents(await responses(env, plain, { stream: true }))
    expect(events.map((event) => event.data.type)).toEqual(plainEvents.map((event) => event.data.type))
    const terminal = events.at(-1)!.data
    expect(terminal.type).toBe('response.completed')
    expect(enrichmentFields(terminal.response)).toEqual(both)
    expect(enrichmentFields(terminal)).toEqual({})
    for (const event of events.slice(0, -1)) expectNoEnrichment(event.data)
    expect(responseText(terminal.response)).toBe(REPLY)
    expectNoEnrichment(plainEvents.map((event) => event.data))

    const final = await openai(env, key).responses.stream({ model: MODEL, input: QUESTION }).finalResponse()
    expect(final.output_text).toBe(REPLY)
    expect(enrichmentFields(final)).toEqual(both)
    expect(env.keyterms.requests.map((request) => request.body.text)).toEqual([REPLY, REPLY])
  })

  test('messages stream: extra fields of the message_delta event, nowhere else (raw and SDK events)', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { shape: 'messages', ads: true, keyterms: true })
    const events = streamEvents(await messages(env, key, { stream: true }))
    const types = events.map((event) => event.data.type)
    for (const event of events) expect(event.event).toBe(event.data.type)
    expect(types[0]).toBe('message_start')
    expect(types.at(-1)).toBe('message_stop')
    expect(types.filter((type) => type === 'message_delta')).toHaveLength(1)
    const delta = events.find((event) => event.data.type === 'message_delta')!.data
    expect(enrichmentFields(delta)).toEqual(both)
    expect(delta.delta.stop_reason).toBe('end_turn')
    expectNoEnrichment(delta.delta)
    expectNoEnrichment(delta.usage)
    for (const event of events.filter((event) => event.data.type !== 'message_delta')) expectNoEnrichment(event.data)
    const text = events
      .filter((event) => event.data.type === 'content_block_delta' && event.data.delta.type === 'text_delta')
      .map((event) => event.data.delta.text)
      .join('')
    expect(text).toBe(REPLY)

    const stream = anthropic(env, key).messages.stream({ model: MESSAGES_MODEL, max_tokens: 64, messages: [{ role: 'user', content: QUESTION }] })
    const sdkDeltas: any[] = []
    for await (const event of stream) if (event.type === 'message_delta') sdkDeltas.push(event)
    expect(sdkDeltas).toHaveLength(1)
    expect(enrichmentFields(sdkDeltas[0])).toEqual(both)
    const message = await stream.finalMessage()
    expect(message.content.map((block) => (block.type === 'text' ? block.text : '')).join('')).toBe(REPLY)
    expectKeytermCalls(env, 2)
  })

  test('a stream holds only its last event for the keyterm call: the prose flows first', async () => {
    await using env = await startEnv()
    const HOLD = 1000
    env.keyterms.handle(() => ({ json: { keyterms: KEYTERMS }, delayMs: HOLD }))
    const key = await featureKey(env, { keyterms: true })
    const response = await fetch(`${env.server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearerHeader(key.secret) },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: QUESTION }], stream: true, stream_options: { include_usage: true } }),
    })
    expect(response.status).toBe(200)
    const timed = await timedEvents(response)
    const events = timed.map((entry) => entry.event)
    expect(chatStreamText(events)).toBe(REPLY)
    const last = expectOnLastChatChunk(events, { keyterms: KEYTERMS })
    const lastAt = timed.find((entry) => entry.event.data === last)!.at
    expect(env.keyterms.requests).toHaveLength(1)
    const askedAt = env.keyterms.requests[0]!.at
    // The keyterm call starts once the reply is complete: every piece of prose was already out.
    const proseAt = timed.filter((entry) => entry.event.data !== '[DONE]' && entry.event.data.choices?.[0]?.delta?.content).map((entry) => entry.at)
    expect(proseAt).toHaveLength(PIECES.length)
    for (const at of proseAt) expect(at).toBeLessThan(askedAt + HOLD / 2)
    // The last chunk waited for the keyterm answer.
    expect(lastAt).toBeGreaterThanOrEqual(askedAt + HOLD - 50)
  })
})

// =============================================================================================

describe('keyterm links', () => {
  test('ok: POST $RT_KEYTERMS_URL with the completed reply after the model answered; keyterms attached as given; logged ok', async () => {
    await using env = await startEnv()
    let upstreamAt = 0
    const base = model()
    mockOf(env).handle((request) => {
      upstreamAt = performance.now()
      return base(request)
    })
    const key = await featureKey(env, { keyterms: true })
    expect(key.data.keyterms).toBe(true)
    const result = await chat(env, key)
    expect(result.status).toBe(200)
    expect(result.json.choices[0].message.content).toBe(REPLY)
    expect(enrichmentFields(result.json)).toEqual({ keyterms: KEYTERMS })
    expect(env.keyterms.requests).toHaveLength(1)
    const sent = env.keyterms.requests[0]!
    expect(sent.method).toBe('POST')
    expect(sent.path).toBe('/v1/keyterms')
    expect(sent.headers['content-type']).toContain('application/json')
    expect(sent.body).toEqual({ text: REPLY, max_keyterms: 5 })
    expect(sent.at).toBeGreaterThanOrEqual(upstreamAt)
    expect(env.ads.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ keyterms: logged('ok') })
  })

  test('max_keyterms: link_request.max_keyterms when an integer 1..50, else 5', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { keyterms: true })
    const cases: [unknown, number][] = [
      [{ max_keyterms: 3 }, 3],
      [{ max_keyterms: 1 }, 1],
      [{ max_keyterms: 50 }, 50],
      [{ max_keyterms: 0 }, 5],
      [{ max_keyterms: 51 }, 5],
      [{ max_keyterms: -2 }, 5],
      [{ max_keyterms: 2.5 }, 5],
      [{ max_keyterms: '3' }, 5],
      [{ max_keyterms: null }, 5],
      [{}, 5],
      [undefined, 5],
    ]
    for (const [linkRequest, expected] of cases) {
      const before = env.keyterms.requests.length
      const result = await chat(env, key, linkRequest === undefined ? {} : { link_request: linkRequest })
      expect(result.status).toBe(200)
      expect(result.json.keyterms).toEqual(KEYTERMS)
      expect(env.keyterms.requests).toHaveLength(before + 1)
      expect(env.keyterms.requests.at(-1)!.body).toEqual({ text: REPLY, max_keyterms: expected })
    }
  })

  test('no RT_KEYTERMS_URL: keyterms_error keyterms_unconfigured', async () => {
    await using env = await startEnv({ keytermsUrl: null })
    const key = await featureKey(env, { keyterms: true })
    const result = await chat(env, key)
    expectOnlyPluginError(result, 'keyterms', 'keyterms_unconfigured')
    expect(env.keyterms.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ keyterms: logged('keyterms_unconfigured') })
  })

  test('a non-2xx answer (500, 404, 502 with a keyterms body): keyterms_error keyterms_upstream_error', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { keyterms: true })
    const replies: PluginReply[] = [
      { status: 500, json: { error: 'boom' } },
      { status: 404, text: 'not found' },
      { status: 502, json: { keyterms: KEYTERMS } },
    ]
    for (const reply of replies) {
      env.keyterms.handle(() => reply)
      const result = await chat(env, key)
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe(REPLY)
      expect(Object.keys(enrichmentFields(result.json))).toEqual(['keyterms_error'])
      expectPluginError(result.json.keyterms_error, 'keyterms_upstream_error')
    }
    expect(await enrichmentOf(env.server, key.id)).toEqual({ keyterms: logged('keyterms_upstream_error') })
  })

  test('a refused connection: keyterms_error keyterms_unreachable', async () => {
    await using env = await startEnv({ keytermsUrl: await refusedUrl('/keyterms') })
    const key = await featureKey(env, { keyterms: true })
    const result = await chat(env, key)
    expectOnlyPluginError(result, 'keyterms', 'keyterms_unreachable')
    expect(await enrichmentOf(env.server, key.id)).toEqual({ keyterms: logged('keyterms_unreachable') })
  })

  test('not JSON, no keyterms array, or an entry without string term, number score, string url: keyterms_error keyterms_malformed', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { keyterms: true })
    const entry = KEYTERMS[0]!
    const bodies = [
      'not json',
      '',
      '{}',
      '{"keyterms": {"term": "Paris"}}',
      '{"keyterms": null}',
      JSON.stringify({ keyterms: [entry, { score: 0.5, url: 'https://links.example/x' }] }),
      JSON.stringify({ keyterms: [{ ...entry, term: 7 }] }),
      JSON.stringify({ keyterms: [{ ...entry, score: '0.9' }] }),
      JSON.stringify({ keyterms: [{ term: 'Paris', url: entry.url }] }),
      JSON.stringify({ keyterms: [{ ...entry, url: null }] }),
      JSON.stringify({ keyterms: [{ term: 'Paris', score: 0.9 }] }),
      JSON.stringify({ keyterms: ['Paris'] }),
    ]
    for (const text of bodies) {
      env.keyterms.handle(() => ({ text, headers: { 'content-type': 'application/json' } }))
      const result = await chat(env, key)
      expect(result.status).toBe(200)
      expect(result.json.choices[0].message.content).toBe(REPLY)
      expect(Object.keys(enrichmentFields(result.json))).toEqual(['keyterms_error'])
      expectPluginError(result.json.keyterms_error, 'keyterms_malformed')
    }
    expect(env.keyterms.requests).toHaveLength(bodies.length)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ keyterms: logged('keyterms_malformed') })
  })

  test('an empty list is attached as it is', async () => {
    await using env = await startEnv()
    env.keyterms.handle(() => ({ json: { keyterms: [] } }))
    const key = await featureKey(env, { keyterms: true })
    const result = await chat(env, key)
    expect(result.status).toBe(200)
    expect(enrichmentFields(result.json)).toEqual({ keyterms: [] })
  })

  test('without RT_KEYTERMS_ENABLED=1: keyterms true is stored false; no keyterm call, no keyterm fields (ads still work)', async () => {
    await using env = await startEnv({ keytermsEnabled: false })
    const key = await featureKey(env, { ads: true, keyterms: true })
    expect(key.data.keyterms).toBe(false)
    expect(key.data.companion_ads).toBe(true)
    const buffered = await chat(env, key, { link_request: { max_keyterms: 3 } })
    expect(buffered.status).toBe(200)
    expect(enrichmentFields(buffered.json)).toEqual({ ads: ADS })
    const streamed = streamEvents(await chat(env, key, { stream: true, link_request: { max_keyterms: 3 } }))
    expectOnLastChatChunk(streamed, { ads: ADS })
    expect(env.keyterms.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('fill') })
  })

  test("the key's keyterms off: no keyterm call, no keyterm fields; companion_ads off: no ad call, no ad fields", async () => {
    await using env = await startEnv()
    const adsOnly = await featureKey(env, { ads: true, keyterms: false })
    const keytermsOnly = await featureKey(env, { ads: false, keyterms: true })
    const ads = await chat(env, adsOnly, { ad_request: { slot: 'a' }, link_request: { max_keyterms: 2 } })
    expect(enrichmentFields(ads.json)).toEqual({ ads: ADS })
    expect(env.keyterms.requests).toHaveLength(0)
    const keyterms = await chat(env, keytermsOnly, { ad_request: { slot: 'b' }, link_request: { max_keyterms: 2 } })
    expect(enrichmentFields(keyterms.json)).toEqual({ keyterms: KEYTERMS })
    expect(env.ads.requests.map((request) => request.body.ad_request)).toEqual([{ slot: 'a' }])
    expect(env.keyterms.requests.map((request) => request.body.max_keyterms)).toEqual([2])
    expect(await enrichmentOf(env.server, adsOnly.id)).toEqual({ ads: logged('fill') })
    expect(await enrichmentOf(env.server, keytermsOnly.id)).toEqual({ keyterms: logged('ok') })
  })
})

// =============================================================================================

describe('both features together', () => {
  test('buffered and streamed chat carry both; the log row records both stages', async () => {
    await using env = await startEnv()
    env.ads.handle(() => ({ json: { ads: [] } }))
    const key = await featureKey(env, { ads: true, keyterms: true })
    const buffered = await chat(env, key, { ad_request: { slot: 'top' }, link_request: { max_keyterms: 4 } })
    expect(buffered.status).toBe(200)
    expect(enrichmentFields(buffered.json)).toEqual({ ads: [], keyterms: KEYTERMS })
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('no_fill'), keyterms: logged('ok') })

    env.ads.handle(() => undefined)
    env.keyterms.handle(() => ({ status: 500, json: {} }))
    const streamed = streamEvents(await chat(env, key, { stream: true, ad_request: { slot: 'top' } }))
    const last = expectOnLastChatChunk(streamed, { ads: ADS, keyterms_error: expect.anything() })
    expectPluginError(last.keyterms_error, 'keyterms_upstream_error')
    expect(await enrichmentOf(env.server, key.id)).toEqual({ ads: logged('fill'), keyterms: logged('keyterms_upstream_error') })
    expect(env.keyterms.requests.map((request) => request.body)).toEqual([
      { text: REPLY, max_keyterms: 4 },
      { text: REPLY, max_keyterms: 5 },
    ])
  })
})

// =============================================================================================

describe('slow plug-in services (3 s) are cut at 2 s and never fail inference', () => {
  test('buffered chat, chat stream and messages stream: *_timeout errors, each answer within 2.8 s; logged', async () => {
    await using env = await startEnv()
    env.ads.handle(() => ({ json: { ads: ADS }, delayMs: 3000 }))
    env.keyterms.handle(() => ({ json: { keyterms: KEYTERMS }, delayMs: 3000 }))
    const adsKey = await featureKey(env, { ads: true })
    const keytermsKey = await featureKey(env, { keyterms: true })
    const bothKey = await featureKey(env, { ads: true, keyterms: true })
    const messagesKey = await featureKey(env, { shape: 'messages', ads: true, keyterms: true })
    const timed = async (call: () => Promise<CallResult>) => {
      const started = performance.now()
      const result = await call()
      return { result, ms: performance.now() - started }
    }
    const [adsSlow, keytermsSlow, chatStream, messagesStream] = await Promise.all([
      timed(() => chat(env, adsKey, { ad_request: { slot: 'x' } })),
      timed(() => chat(env, keytermsKey)),
      timed(() => chat(env, bothKey, { stream: true })),
      timed(() => messages(env, messagesKey, { stream: true })),
    ])
    for (const { ms } of [adsSlow, keytermsSlow, chatStream, messagesStream]) expect(ms).toBeLessThan(2800)

    expect(adsSlow.result.status).toBe(200)
    expect(adsSlow.result.json.choices[0].message.content).toBe(REPLY)
    expect(Object.keys(enrichmentFields(adsSlow.result.json))).toEqual(['ads_error'])
    expectPluginError(adsSlow.result.json.ads_error, 'ads_timeout')
    expect(adsSlow.ms).toBeGreaterThanOrEqual(1900)

    expect(keytermsSlow.result.status).toBe(200)
    expect(keytermsSlow.result.json.choices[0].message.content).toBe(REPLY)
    expect(Object.keys(enrichmentFields(keytermsSlow.result.json))).toEqual(['keyterms_error'])
    expectPluginError(keytermsSlow.result.json.keyterms_error, 'keyterms_timeout')

    const chatEvents = streamEvents(chatStream.result)
    expect(chatStreamText(chatEvents)).toBe(REPLY)
    const last = expectOnLastChatChunk(chatEvents, { ads_error: expect.anything(), keyterms_error: expect.anything() })
    expectPluginError(last.ads_error, 'ads_timeout')
    expectPluginError(last.keyterms_error, 'keyterms_timeout')

    const messageEvents = streamEvents(messagesStream.result)
    expect(messageEvents.at(-1)!.data.type).toBe('message_stop')
    const delta = messageEvents.find((event) => event.data.type === 'message_delta')!.data
    expectPluginError(delta.ads_error, 'ads_timeout')
    expectPluginError(delta.keyterms_error, 'keyterms_timeout')
    expect(delta.ads).toBeUndefined()
    expect(delta.keyterms).toBeUndefined()

    const adsLog = await enrichmentOf(env.server, adsKey.id)
    expect(adsLog).toEqual({ ads: logged('ads_timeout') })
    expect(adsLog.ads.ms).toBeGreaterThanOrEqual(1900)
    expect(adsLog.ads.ms).toBeLessThan(2800)
    expect(await enrichmentOf(env.server, keytermsKey.id)).toEqual({ keyterms: logged('keyterms_timeout') })
    expect(await enrichmentOf(env.server, bothKey.id)).toEqual({ ads: logged('ads_timeout'), keyterms: logged('keyterms_timeout') })
  })
})

// =============================================================================================

describe('failed answers carry neither', () => {
  test('an upstream 400 relayed (buffered, streamed, messages): no ads or keyterms fields, no keyterm call', async () => {
    await using env = await startEnv()
    mockOf(env).handle(() => ({ status: 400, json: { error: { message: 'bad request from upstream', type: 'invalid_request_error' } } }))
    const chatKey = await featureKey(env, { ads: true, keyterms: true })
    const messagesKey = await featureKey(env, { shape: 'messages', ads: true, keyterms: true })
    const buffered = await chat(env, chatKey, { ad_request: { slot: 'x' } })
    expect(buffered.status).toBe(400)
    expect(buffered.json.error).toBeDefined()
    expectNoEnrichment(buffered.json)
    const streamed = await chat(env, chatKey, { stream: true, ad_request: { slot: 'x' } })
    expect(streamed.status).toBe(400)
    expect(streamed.text).not.toMatch(enrichmentKey)
    const message = await messages(env, messagesKey, { ad_request: { slot: 'x' } })
    expect(message.status).toBe(400)
    expect(message.json.type).toBe('error')
    expectNoEnrichment(message.json)
    expect(env.keyterms.requests).toHaveLength(0)
  })

  test('every target failing: the error answer has no ads or keyterms fields', async () => {
    await using env = await startEnv({ gateways: [NATIVE, TRANSLATED] })
    for (const gateway of [NATIVE, TRANSLATED]) mockOf(env, gateway).handle(() => ({ status: 500, json: { error: { message: 'down' } } }))
    const key = await featureKey(env, { ads: true, keyterms: true, gateways: [NATIVE, TRANSLATED] })
    const buffered = await chat(env, key, { ad_request: { slot: 'x' } })
    expect(buffered.status).toBeGreaterThanOrEqual(500)
    expect(buffered.json.error).toBeDefined()
    expectNoEnrichment(buffered.json)
    const streamed = await chat(env, key, { stream: true })
    expect(streamed.status).toBeGreaterThanOrEqual(500)
    expect(streamed.text).not.toMatch(enrichmentKey)
    // Both targets were tried.
    expect(mockOf(env, NATIVE).calls('/chat/completions').length).toBeGreaterThanOrEqual(2)
    expect(mockOf(env, TRANSLATED).calls('/chat/completions').length).toBeGreaterThanOrEqual(2)
    expect(env.keyterms.requests).toHaveLength(0)
  })

  test('a stream cut mid-way ends with stream_aborted and carries neither', async () => {
    await using env = await startEnv()
    // A gap between events lets the first ones out before the cut (a cut before any byte is a connection failure).
    mockOf(env).handle((request) => (request.body?.stream ? { sse: chatChunks(MODEL, PIECES), breakAfter: 3, chunkDelayMs: 20 } : undefined))
    const key = await featureKey(env, { ads: true, keyterms: true })
    const result = await chat(env, key, { stream: true })
    const events = streamEvents(result)
    expect(events.some((event) => event.data === '[DONE]')).toBe(false)
    expect(events.at(-1)!.data.error?.code).toBe('stream_aborted')
    expect(result.text).not.toMatch(enrichmentKey)
    expect(env.keyterms.requests).toHaveLength(0)
  })
})

// =============================================================================================

describe('a key with neither feature', () => {
  test('the buffered answer is the upstream body byte for byte; plug-in services get nothing; no enrichment logged', async () => {
    await using env = await startEnv()
    const raw = `{"id":"chatcmpl-raw",   "object":"chat.completion","created":1700000000,"model":"${MODEL}",\n "choices":[{"index":0,"message":{"role":"assistant","content":"${REPLY}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18},"x_vendor":{"kept":true}}`
    const streamed = model()
    mockOf(env).handle((request) => (request.body?.stream ? streamed(request) : new Response(raw, { headers: { 'content-type': 'application/json' } })))
    const key = await featureKey(env)
    expect(key.data.companion_ads).toBe(false)
    expect(key.data.keyterms).toBe(false)
    const sent = `{"model":"${MODEL}","messages":[{"role":"user","content":"${QUESTION}"}],"temperature":0.5}`
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', sent, bearerHeader(key.secret))
    expect(result.status).toBe(200)
    expect(result.text).toBe(raw)
    expectNoEnrichment(result.json)
    expect(mockOf(env).calls('/chat/completions')[0]!.rawBody).toBe(sent)

    const events = streamEvents(await chat(env, key, { stream: true, stream_options: { include_usage: true } }))
    expect(chatStreamText(events)).toBe(REPLY)
    for (const chunk of chatStreamChunks(events)) expectNoEnrichment(chunk)

    expect(env.ads.requests).toHaveLength(0)
    expect(env.keyterms.requests).toHaveLength(0)
    expect(await enrichmentOf(env.server, key.id)).toBeNull()
  })
})

// =============================================================================================

describe('GET /metrics', () => {
  test('router_enrichment_outcomes_total counts each outcome by stage', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    // ads: fill ×2, no_fill ×1, ads_malformed ×1; keyterms: ok ×3, keyterms_upstream_error ×1.
    expect((await chat(env, key)).status).toBe(200)
    expect((await chat(env, key, { stream: true })).status).toBe(200)
    env.ads.handle(() => ({ json: { ads: [] } }))
    expect((await chat(env, key)).status).toBe(200)
    env.ads.handle(() => ({ text: 'garbage' }))
    env.keyterms.handle(() => ({ status: 503, text: 'busy' }))
    expect((await chat(env, key)).status).toBe(200)

    const response = await fetch(`${env.server.rootUrl}/metrics`)
    expect(response.status).toBe(200)
    const { families, problems } = parseExposition(await response.text())
    expect(problems.filter((problem) => problem.includes('router_enrichment_outcomes'))).toEqual([])
    const family = families.get('router_enrichment_outcomes_total')
    expect(family?.type).toBe('counter')
    const counts: Record<string, number> = {}
    for (const sample of family?.samples ?? []) {
      expect(Object.keys(sample.labels).sort()).toEqual(['outcome', 'stage'])
      counts[`${sample.labels.stage} ${sample.labels.outcome}`] = sample.value
    }
    expect(counts).toMatchObject({
      'ads fill': 2,
      'ads no_fill': 1,
      'ads ads_malformed': 1,
      'keyterms ok': 3,
      'keyterms keyterms_upstream_error': 1,
    })
    for (const [labels, value] of Object.entries(counts)) if (!['ads fill', 'ads no_fill', 'ads ads_malformed', 'keyterms ok', 'keyterms keyterms_upstream_error'].includes(labels)) expect(value).toBe(0)
  })
})

// =============================================================================================

describe('when the plug-ins are called, and what a stream keeps', () => {
  test('a request that fails before any model call (nothing listed, no route) makes no ad call', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { ads: true, keyterms: true })
    // A fresh catalog that lists another model: the target is skipped, nothing is sent (404).
    env.server.runtime.repositories.gatewayCatalogs.replaceCatalog(NATIVE, Date.now(), [{ modelId: 'other-model', canonicalId: 'meta-llama/other-model', object: '{}' }])
    env.server.runtime.repositories.gatewayCatalogs.replaceCatalog('openai', Date.now(), [{ modelId: 'gpt-4o-mini', canonicalId: MODEL, object: '{}' }])
    const refused = await chat(env, key, { ad_request: { slot: 'top' } })
    expect(refused.status).toBe(404)
    expect(refused.json.error.code).toBe('model_not_available')
    expectNoEnrichment(refused.json)
    expect(mockOf(env).calls('/chat/completions')).toHaveLength(0)
    expect(env.ads.requests).toHaveLength(0)
    expect(env.keyterms.requests).toHaveLength(0)
  })

  test('a reply that cannot be translated is a 502 without a keyterm call', async () => {
    await using env = await startEnv()
    const key = await featureKey(env, { shape: 'messages', keyterms: true })
    // A chat completion whose tool_calls is not an array: the messages translation refuses it.
    mockOf(env).handle((request) =>
      request.path.endsWith('/chat/completions') ? { json: { ...chatCompletion(MESSAGES_MODEL, REPLY), choices: [{ index: 0, message: { role: 'assistant', content: 'x', tool_calls: 'nope' }, finish_reason: 'stop' }] } } : undefined,
    )
    const result = await messages(env, key)
    expect(result.status).toBe(502)
    expectNoEnrichment(result.json)
    expect(env.keyterms.requests).toHaveLength(0)
  })

  test('a native Responses stream with fields to attach stays the gateway stream: its id chains, and the fields ride in response.completed', async () => {
    // openai: a gateway kind that anchors chains.
    await using env = await startEnv({ gateways: ['openai'] })
    const key = await featureKey(env, { ads: true, gateways: ['openai'] })
    const events = streamEvents(await responses(env, key, { stream: true }))
    const completed = events.find((event) => event.data.type === 'response.completed')!.data
    expect(completed.response.ads).toEqual(ADS)
    const id = completed.response.id as string
    expect(id).toStartWith('resp_rt_')
    // Every event names the same id, and it anchors a chain to the gateway's own response.
    for (const event of events) if (event.data.response) expect(event.data.response.id).toBe(id)
    const chained = await responses(env, key, { previous_response_id: id })
    expect(chained.status).toBe(200)
    expect(mockOf(env, 'openai').calls('/responses').at(-1)!.body.previous_response_id).toBe('resp_up_1')
  })
})
