/**
 * Request cost (CONTRACT §11 "Cost"): every request-log row's `cost_nano_usd` (whole nano-dollars,
 * 1e-9 USD: money is counted exactly; the usage API shows it as `cost_usd`), computed when the request
 * finishes from the catalog prices of the model as sent upstream on the gateway that answered:
 * prompt tokens at `pricing.prompt`, the cached ones among them at `pricing.input_cache_read` when
 * listed (else at the prompt price), completion tokens (reasoning included) at `pricing.completion`;
 * null when a used side has no listed price, 0 when nothing was billed.
 *
 * One block per upstream family the router calls: OpenAI-style chat completions (`openai`,
 * `openrouter`) and OpenAI Responses (`openai-responses`, which only speaks /responses). Each replays
 * recorded vendor answers (../shared/fixtures/upstream, read from there, never copied) from a mock
 * gateway on 127.0.0.1 to the real service, and checks the row's cost against the arithmetic done
 * here on the fixture's own token counts and the prices listed in the catalog. Prices are chosen so
 * that mistakes show: completion 4× the prompt price, cache reads 0.1× the prompt price, and the
 * dated model id the vendor answers with listed at a different price than the id that was sent.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import type { MockGateway, MockReply, RecordedRequest } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'

const recorded = join(import.meta.dir, '..', '..', '..', 'shared', 'fixtures', 'upstream')
const haveRecorded = existsSync(join(recorded, 'openai-chat')) && existsSync(join(recorded, 'openai-responses'))
if (!haveRecorded) console.log(`note: ${recorded} is absent; the cost tests over recorded vendor answers are skipped.`)

const recordedText = (family: string, file: string) => readFileSync(join(recorded, family, file), 'utf8')
const recordedJson = (family: string, file: string) => JSON.parse(recordedText(family, file))

// ---------------------------------------------------------------------------------------------
// Prices (USD per token) and the arithmetic

interface Price {
  prompt: number
  completion: number
  cacheRead?: number
}

interface Tokens {
  prompt: number
  completion: number
  cached?: number
}

/** CONTRACT §11 on the fixture's own counts: the uncached prompt tokens, the cached ones, the completion tokens. */
function expectedCost(tokens: Tokens, price: Price): number {
  const cached = tokens.cached ?? 0
  return (tokens.prompt - cached) * price.prompt + cached * (price.cacheRead ?? price.prompt) + tokens.completion * price.completion
}

/** A price per token in whole nano-dollars: every price here is one (checked), so a cost is an exact integer. */
function nanoPerToken(usd: number): number {
  const nano = Math.round(usd * 1e9)
  expect(Math.abs(nano - usd * 1e9)).toBeLessThan(1e-6)
  return nano
}

/** The same arithmetic in whole nano-dollars, exact. */
function expectedNano(tokens: Tokens, price: Price): number {
  const cached = tokens.cached ?? 0
  return (tokens.prompt - cached) * nanoPerToken(price.prompt) + cached * nanoPerToken(price.cacheRead ?? price.prompt) + tokens.completion * nanoPerToken(price.completion)
}

/** A catalog model object as a gateway lists it: prices as strings (OpenAI-style) or numbers (OpenRouter's form). */
function modelObject(id: string, price: Price | null, asNumbers = false) {
  if (!price) return { id, object: 'model' }
  const value = (number: number) => (asNumbers ? number : String(number))
  return {
    id,
    object: 'model',
    pricing: {
      prompt: value(price.prompt),
      completion: value(price.completion),
      ...(price.cacheRead !== undefined ? { input_cache_read: value(price.cacheRead) } : {}),
    },
  }
}

/** Replaces a gateway's catalog: each model listed with its price, or without one (null). */
async function seedCatalog(server: TestServer, gateway: string, models: Record<string, Price | null>, asNumbers = false) {
  server.runtime.repositories.gatewayCatalogs.replaceCatalog(
    gateway,
    Date.now(),
    Object.entries(models).map(([id, price]) => ({
      modelId: id,
      canonicalId: id.includes('/') ? id : `openai/${id}`,
      object: JSON.stringify(modelObject(id, price, asNumbers)),
    })),
  )
  await server.runtime.snapshots.fresh()
}

// ---------------------------------------------------------------------------------------------
// Mock replies: recorded bytes, streamed in small pieces (the chunk boundaries are not recorded)

function sseBytes(text: string, pieceBytes = 61): Response {
  const bytes = new TextEncoder().encode(text)
  let offset = 0
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(offset, offset + pieceBytes))
      offset += pieceBytes
    },
  })
  return new Response(stream, { headers: { 'content-type': 'text/event-stream' } })
}

const jsonBytes = (text: string, status = 200): Response => new Response(text, { status, headers: { 'content-type': 'application/json' } })

/** Answers requests whose path ends with `suffix`; anything else is a 404 the test would see. */
function answerOn(mock: MockGateway, suffix: string, reply: (request: RecordedRequest) => Response | MockReply) {
  mock.handle((request) => (request.path.endsWith(suffix) ? reply(request) : { status: 404, json: { error: { message: `mock: unexpected ${request.path}` } } }))
}

/** Sets `cached_tokens` of the first usage object in a recorded SSE text (checked to be there, and 0 as recorded). */
function withCachedTokens(text: string, cached: number): string {
  const marker = '"cached_tokens":0'
  expect(text.split(marker)).toHaveLength(2)
  return text.replace(marker, `"cached_tokens":${cached}`)
}

// ---------------------------------------------------------------------------------------------
// Requests and rows

async function createKey(server: TestServer, providerKeyId: string): Promise<{ id: string; secret: string }> {
  const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: providerKeyId }] } })
  return { id: key.id as string, secret: key.key as string }
}

const userMessages = [{ role: 'user', content: 'A bat and a ball cost $1.10 in total. How much is the ball?' }]

const chat = (server: TestServer, secret: string, body: Record<string, unknown>): Promise<CallResult> =>
  httpCall(server, 'POST', '/v1/chat/completions', { messages: userMessages, ...body }, bearerHeader(secret))

const responses = (server: TestServer, secret: string, body: Record<string, unknown>): Promise<CallResult> =>
  httpCall(server, 'POST', '/v1/responses', { input: userMessages[0]!.content, ...body }, bearerHeader(secret))

interface CostRow {
  status: number
  gateway: string | null
  upstream_model: string | null
  /** Whole nano-dollars (1e-9 USD); null when unknown. */
  cost_nano_usd: number | null
  input_tokens: number | null
  output_tokens: number | null
}

/** The request-log row of the answer (by its X-Router-Request-Id), once the log queue wrote it. */
async function rowOf(server: TestServer, result: CallResult): Promise<CostRow> {
  const requestId = result.headers.get('x-router-request-id')
  expect(requestId).toBeTruthy()
  for (let attempt = 0; attempt < 100; attempt++) {
    server.runtime.logQueue.flush()
    const row = server.runtime.storage.sqlite
      .query('select status, gateway, upstream_model, cost_nano_usd, input_tokens, output_tokens from request_logs where id = ?')
      .get(requestId) as CostRow | null
    if (row) return row
    await Bun.sleep(10)
  }
  throw new Error(`no request-log row for request ${requestId}`)
}

/** The row carries the fixture's counts and exactly the cost computed here, in whole nano-dollars (the USD arithmetic agrees to 1e-11 USD). */
function expectCost(row: CostRow, tokens: Tokens, price: Price) {
  expect(row.input_tokens).toBe(tokens.prompt)
  expect(row.output_tokens).toBe(tokens.completion)
  expect(Number.isInteger(row.cost_nano_usd)).toBe(true)
  expect(row.cost_nano_usd).toBe(expectedNano(tokens, price))
  expect(row.cost_nano_usd! / 1e9).toBeCloseTo(expectedCost(tokens, price), 11)
}

/** A streamed answer read whole; the stream must have ended with the family's own terminator. */
function expectStreamEnded(result: CallResult, terminator: string) {
  expect(result.status).toBe(200)
  expect(result.headers.get('content-type')).toContain('text/event-stream')
  expect(result.text).toContain(terminator)
  expect(result.text).not.toContain('stream_aborted')
}

// ---------------------------------------------------------------------------------------------
// Chat completions family

const OPENAI = 'openai'
const OPENROUTER = 'openrouter'
const RESPONSES = 'openai-responses'

/** openai: gpt-5-nano with a cache-read price; the dated id the vendor answers with at another price (a decoy). */
const NANO: Price = { prompt: 0.000001, completion: 0.000004, cacheRead: 0.0000001 }
const NANO_DATED: Price = { prompt: 0.00005, completion: 0.00007, cacheRead: 0.00003 }
/** openai: gpt-4o-mini without a cache-read price. */
const MINI: Price = { prompt: 0.0000003, completion: 0.0000012 }
/** openrouter: openai/gpt-4o-mini, prices listed as numbers. */
const ROUTER_MINI: Price = { prompt: 0.00000015, completion: 0.0000006, cacheRead: 0.000000015 }

describe.skipIf(!haveRecorded)('cost of chat-completions answers (openai, openrouter; ../shared/fixtures/upstream/openai-chat)', () => {
  let env: GatewaysEnv
  let server: TestServer
  let openaiKey: { id: string; secret: string }
  let routerKey: { id: string; secret: string }

  beforeAll(async () => {
    env = await startGateways([OPENAI, OPENROUTER])
    server = env.server
    await seedCatalog(server, OPENAI, {
      'gpt-5-nano': NANO,
      'gpt-5-nano-2025-08-07': NANO_DATED,
      'gpt-4o-mini': MINI,
      'gpt-4o-mini-2024-07-18': NANO_DATED,
      'gpt-4.1-nano': null,
    })
    await seedCatalog(server, OPENROUTER, { 'openai/gpt-4o-mini': ROUTER_MINI, 'openai/gpt-4o-mini-2024-07-18': NANO_DATED }, true)
    openaiKey = await createKey(server, env.providers[OPENAI]!)
    routerKey = await createKey(server, env.providers[OPENROUTER]!)
  })
  afterAll(async () => {
    await env?.[Symbol.asyncDispose]()
  })

  test('buffered (chat-completion-reasoning-tokens.json): prompt × prompt price + completion (192 reasoning included) × completion price, at the price of the model as sent', async () => {
    const body = recordedText('openai-chat', 'chat-completion-reasoning-tokens.json')
    const usage = JSON.parse(body).usage
    expect(usage.completion_tokens_details.reasoning_tokens).toBe(192)
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => jsonBytes(body))

    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano' })
    expect(result.status).toBe(200)
    expect(result.json.usage.completion_tokens).toBe(267)
    // Sent as the catalog spells it; the vendor answers with its dated id, which is priced otherwise.
    expect(env.mocks[OPENAI]!.calls('/chat/completions').at(-1)!.body.model).toBe('gpt-5-nano')
    expect(result.json.model).toBe('gpt-5-nano-2025-08-07')

    const row = await rowOf(server, result)
    expect(row.gateway).toBe(OPENAI)
    expect(row.upstream_model).toBe('gpt-5-nano')
    expectCost(row, { prompt: usage.prompt_tokens, completion: usage.completion_tokens }, NANO)
    // 27 × $1e-6 + 267 × $4e-6 (reasoning tokens not added on top, nor left out).
    expect(row.cost_nano_usd).toBe(1_095_000)
  })

  test('streamed with include_usage (stream-include-usage-finish-length.sse): the usage-only last chunk is priced', async () => {
    const text = recordedText('openai-chat', 'stream-include-usage-finish-length.sse')
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => sseBytes(text))

    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano', stream: true, stream_options: { include_usage: true }, max_completion_tokens: 100 })
    expectStreamEnded(result, 'data: [DONE]')
    expect(result.text).toContain('"finish_reason":"length"')

    const row = await rowOf(server, result)
    expect(row.upstream_model).toBe('gpt-5-nano')
    // 12 prompt tokens, 100 completion tokens, all of them reasoning.
    expectCost(row, { prompt: 12, completion: 100 }, NANO)
    expect(row.cost_nano_usd).toBe(412_000)
  })

  test('streamed parallel tool calls through openrouter (stream-tool-calls-parallel-include-usage.sse): prices listed as numbers', async () => {
    const text = recordedText('openai-chat', 'stream-tool-calls-parallel-include-usage.sse')
    answerOn(env.mocks[OPENROUTER]!, '/chat/completions', () => sseBytes(text, 17))

    const result = await chat(server, routerKey.secret, { model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(result, 'data: [DONE]')
    expect(env.mocks[OPENROUTER]!.calls('/chat/completions').at(-1)!.body.model).toBe('openai/gpt-4o-mini')

    const row = await rowOf(server, result)
    expect(row.gateway).toBe(OPENROUTER)
    expectCost(row, { prompt: 75, completion: 51 }, ROUTER_MINI)
  })

  test('cached prompt tokens (buffered, cached_tokens set in memory): the cached ones at the cache-read price, the rest at the prompt price', async () => {
    const value = recordedJson('openai-chat', 'chat-completion-reasoning-tokens.json')
    expect(value.usage.prompt_tokens_details.cached_tokens).toBe(0)
    value.usage.prompt_tokens_details.cached_tokens = 20
    const body = JSON.stringify(value, null, 2)
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => jsonBytes(body))

    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano' })
    expect(result.status).toBe(200)
    const row = await rowOf(server, result)
    expectCost(row, { prompt: 27, completion: 267, cached: 20 }, NANO)
    // 7 × $1e-6 + 20 × $1e-7 + 267 × $4e-6: $0.000018 less than with no cache hit.
    expect(row.cost_nano_usd).toBe(1_077_000)
  })

  test('cached prompt tokens (streamed, cached_tokens set in memory): split pricing from the usage chunk', async () => {
    const text = withCachedTokens(recordedText('openai-chat', 'stream-include-usage-finish-length.sse'), 8)
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => sseBytes(text, 23))

    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(result, 'data: [DONE]')
    const row = await rowOf(server, result)
    expectCost(row, { prompt: 12, completion: 100, cached: 8 }, NANO)
    // 4 × $1e-6 + 8 × $1e-7 + 100 × $4e-6, in nano-dollars.
    expect(row.cost_nano_usd).toBe(4 * 1000 + 8 * 100 + 100 * 4000)
  })

  test('cached prompt tokens on a model with no cache-read price listed: every prompt token at the prompt price', async () => {
    const text = withCachedTokens(recordedText('openai-chat', 'stream-tool-calls-parallel-include-usage.sse'), 64)
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => sseBytes(text))

    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(result, 'data: [DONE]')
    expect(env.mocks[OPENAI]!.calls('/chat/completions').at(-1)!.body.model).toBe('gpt-4o-mini')
    const row = await rowOf(server, result)
    expect(row.upstream_model).toBe('gpt-4o-mini')
    expectCost(row, { prompt: 75, completion: 51, cached: 64 }, MINI)
    // The same as with no cache hit at all: 75 × $3e-7 + 51 × $1.2e-6, in nano-dollars.
    expect(row.cost_nano_usd).toBe(75 * 300 + 51 * 1200)
  })

  test('failover: priced at the catalog of the gateway that answered (openrouter), not the one that failed first (openai)', async () => {
    const key = await createInferenceKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: env.providers[OPENAI] }, { provider_key_id: env.providers[OPENROUTER] }] } })
    const text = recordedText('openai-chat', 'stream-tool-calls-parallel-include-usage.sse')
    env.mocks[OPENAI]!.handle(() => ({ status: 503, json: { error: { message: 'down', type: 'server_error' } } }))
    answerOn(env.mocks[OPENROUTER]!, '/chat/completions', () => sseBytes(text))

    const result = await chat(server, key.key, { model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(result, 'data: [DONE]')
    expect(result.headers.get('x-router-provider')).toBe(OPENROUTER)
    expect(result.headers.get('x-router-failover')).toContain(`${OPENAI}:`)
    const row = await rowOf(server, result)
    expect(row.gateway).toBe(OPENROUTER)
    expect(row.upstream_model).toBe('openai/gpt-4o-mini')
    expectCost(row, { prompt: 75, completion: 51 }, ROUTER_MINI)
    // openai lists the same model at other prices: they do not apply (more than $1e-6 apart).
    expect(Math.abs(row.cost_nano_usd! - expectedNano({ prompt: 75, completion: 51 }, MINI))).toBeGreaterThan(1000)
  })

  test('an unpriced model (listed without pricing): cost_nano_usd null on the row and counted in unpriced_requests, not as $0', async () => {
    const key = await createKey(server, env.providers[OPENAI]!)
    const body = recordedText('openai-chat', 'chat-completion-reasoning-tokens.json')
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => jsonBytes(body))

    const unpriced = await chat(server, key.secret, { model: 'openai/gpt-4.1-nano' })
    expect(unpriced.status).toBe(200)
    expect(env.mocks[OPENAI]!.calls('/chat/completions').at(-1)!.body.model).toBe('gpt-4.1-nano')
    const unpricedRow = await rowOf(server, unpriced)
    expect(unpricedRow.input_tokens).toBe(27)
    expect(unpricedRow.output_tokens).toBe(267)
    expect(unpricedRow.cost_nano_usd).toBeNull()

    const priced = await chat(server, key.secret, { model: 'openai/gpt-5-nano' })
    const pricedRow = await rowOf(server, priced)
    expect(pricedRow.cost_nano_usd).toBe(1_095_000)

    const summary = await server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${key.id}`)
    expect(summary.status).toBe(200)
    expect(summary.body.data.requests).toBe(2)
    expect(summary.body.data.unpriced_requests).toBe(1)
    expect(summary.body.data.cost_usd).toBeCloseTo(0.001095, 9)

    const breakdown = await server.call('GET', `/api/v1/usage/breakdown?by=model&range=24h&api_key_id=${key.id}`)
    expect(breakdown.status).toBe(200)
    const byName = new Map((breakdown.body.data as any[]).map((row) => [row.name, row]))
    // Every request of that name unpriced: its cost is unknown, null, not $0.
    expect(byName.get('openai/gpt-4.1-nano')).toMatchObject({ requests: 1, unpriced_requests: 1, cost_usd: null })
    expect(byName.get('openai/gpt-5-nano')).toMatchObject({ requests: 1, unpriced_requests: 0 })
    expect(byName.get('openai/gpt-5-nano').cost_usd).toBeCloseTo(0.001095, 9)
  })

  test('a gateway that answered with no usage (stream-text.sse, no usage chunk): cost unknown (null), not $0', async () => {
    const text = recordedText('openai-chat', 'stream-text.sse')
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => sseBytes(text))
    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano', stream: true })
    expectStreamEnded(result, 'data: [DONE]')
    const row = await rowOf(server, result)
    expect(row.gateway).toBe(OPENAI)
    expect(row.input_tokens).toBeNull()
    expect(row.cost_nano_usd).toBeNull()
  })

  test('an upstream error with no usage (error-400-unsupported-parameter.json): cost_nano_usd 0', async () => {
    const body = recordedText('openai-chat', 'error-400-unsupported-parameter.json')
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => jsonBytes(body, 400))
    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano', max_tokens: 10 })
    expect(result.status).toBe(400)
    const row = await rowOf(server, result)
    expect(row.status).toBe(400)
    expect(row.cost_nano_usd).toBe(0)
  })

  test('a stream the upstream ends with an error and no usage (stream-error-midstream-groq.sse, status 200): cost_nano_usd 0, not unknown', async () => {
    const text = recordedText('openai-chat', 'stream-error-midstream-groq.sse')
    answerOn(env.mocks[OPENAI]!, '/chat/completions', () => sseBytes(text))
    const result = await chat(server, openaiKey.secret, { model: 'openai/gpt-5-nano', stream: true })
    expect(result.status).toBe(200)
    const row = await rowOf(server, result)
    expect(row.gateway).toBe(OPENAI)
    expect(row.status).toBe(200)
    expect(row.input_tokens).toBeNull()
    expect(row.cost_nano_usd).toBe(0)
  })

  test('a request refused before any upstream call (400, a body that is not JSON): cost_nano_usd 0', async () => {
    const before = env.mocks[OPENAI]!.requests.length
    const result = await httpCall(server, 'POST', '/v1/chat/completions', '{"model": "openai/gpt-5-nano", "messages": [', bearerHeader(openaiKey.secret))
    expect(result.status).toBe(400)
    expect(env.mocks[OPENAI]!.requests.length).toBe(before)
    const row = await rowOf(server, result)
    expect(row.status).toBe(400)
    expect(row.gateway).toBeNull()
    expect(row.cost_nano_usd).toBe(0)
  })
})

// ---------------------------------------------------------------------------------------------
// Responses family

/** openai-responses prices: gpt-5-mini and gpt-5 with cache reads, gpt-4o-mini too; the dated ids are decoys. */
const R_GPT5_MINI: Price = { prompt: 0.00000025, completion: 0.000001, cacheRead: 0.000000025 }
const R_GPT5: Price = { prompt: 0.00000125, completion: 0.000005, cacheRead: 0.000000125 }
const R_MINI: Price = { prompt: 0.00000015, completion: 0.0000006, cacheRead: 0.000000015 }
const R_DATED: Price = { prompt: 0.00009, completion: 0.00008, cacheRead: 0.00007 }

describe.skipIf(!haveRecorded)('cost of Responses answers (openai-responses; ../shared/fixtures/upstream/openai-responses)', () => {
  let env: GatewaysEnv
  let server: TestServer
  let key: { id: string; secret: string }

  beforeAll(async () => {
    env = await startGateways([RESPONSES])
    server = env.server
    await seedCatalog(server, RESPONSES, {
      'gpt-5-mini': R_GPT5_MINI,
      'gpt-5-mini-2025-08-07': R_DATED,
      'gpt-5': R_GPT5,
      'gpt-5-2025-08-07': R_DATED,
      'gpt-4o-mini': R_MINI,
      'gpt-4o-mini-2024-07-18': R_DATED,
      'o3-pro': null,
    })
    key = await createKey(server, env.providers[RESPONSES]!)
  })
  afterAll(async () => {
    await env?.[Symbol.asyncDispose]()
  })

  const lastResponsesCall = () => env.mocks[RESPONSES]!.calls('/responses').at(-1)!

  test('buffered, chat client translated to /responses (response-reasoning-summary.json): input × prompt + output (reasoning included) × completion', async () => {
    const body = recordedText('openai-responses', 'response-reasoning-summary.json')
    const usage = JSON.parse(body).usage
    expect(usage.output_tokens_details.reasoning_tokens).toBe(128)
    answerOn(env.mocks[RESPONSES]!, '/responses', () => jsonBytes(body))

    const result = await chat(server, key.secret, { model: 'openai/gpt-5-mini' })
    expect(result.status).toBe(200)
    expect(result.json.object).toBe('chat.completion')
    expect(lastResponsesCall().body.model).toBe('gpt-5-mini')

    const row = await rowOf(server, result)
    expect(row.gateway).toBe(RESPONSES)
    expect(row.upstream_model).toBe('gpt-5-mini')
    expectCost(row, { prompt: usage.input_tokens, completion: usage.output_tokens }, R_GPT5_MINI)
    // 865 × $2.5e-7 + 163 × $1e-6
    expect(row.cost_nano_usd).toBe(379_250)
  })

  test('buffered, /v1/responses client (native): the same arithmetic on the relayed Response', async () => {
    const body = recordedText('openai-responses', 'response-reasoning-summary.json')
    answerOn(env.mocks[RESPONSES]!, '/responses', () => jsonBytes(body))

    const result = await responses(server, key.secret, { model: 'openai/gpt-5-mini' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('native')
    expect(result.json.usage.output_tokens).toBe(163)
    const row = await rowOf(server, result)
    expectCost(row, { prompt: 865, completion: 163 }, R_GPT5_MINI)
  })

  test('streamed, chat client translated (stream-text.sse): usage of response.completed', async () => {
    const text = recordedText('openai-responses', 'stream-text.sse')
    answerOn(env.mocks[RESPONSES]!, '/responses', () => sseBytes(text))

    const result = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(result, 'data: [DONE]')
    expect(lastResponsesCall().body.stream).toBe(true)
    const row = await rowOf(server, result)
    expect(row.upstream_model).toBe('gpt-4o-mini')
    expectCost(row, { prompt: 22, completion: 6 }, R_MINI)
  })

  test('streamed, /v1/responses client (stream-reasoning-item-function-call.sse): 448 reasoning tokens inside the 469 output tokens', async () => {
    const text = recordedText('openai-responses', 'stream-reasoning-item-function-call.sse')
    expect(text).toContain('"output_tokens":469')
    answerOn(env.mocks[RESPONSES]!, '/responses', () => sseBytes(text, 97))

    const result = await responses(server, key.secret, { model: 'openai/gpt-5', stream: true })
    expectStreamEnded(result, 'response.completed')
    expect(lastResponsesCall().body.model).toBe('gpt-5')
    const row = await rowOf(server, result)
    expectCost(row, { prompt: 53, completion: 469 }, R_GPT5)
    // 53 × $1.25e-6 + 469 × $5e-6, in nano-dollars.
    expect(row.cost_nano_usd).toBe(53 * 1250 + 469 * 5000)
  })

  test('cached input tokens (input_tokens_details.cached_tokens set in memory), buffered both ways: split at the cache-read price', async () => {
    const value = recordedJson('openai-responses', 'response-reasoning-summary.json')
    expect(value.usage.input_tokens_details.cached_tokens).toBe(0)
    value.usage.input_tokens_details.cached_tokens = 768
    const body = JSON.stringify(value, null, 2)
    answerOn(env.mocks[RESPONSES]!, '/responses', () => jsonBytes(body))
    const tokens = { prompt: 865, completion: 163, cached: 768 }
    // 97 × $2.5e-7 + 768 × $2.5e-8 + 163 × $1e-6, in nano-dollars.
    const literal = 97 * 250 + 768 * 25 + 163 * 1000

    const translated = await chat(server, key.secret, { model: 'openai/gpt-5-mini' })
    expect(translated.status).toBe(200)
    expect(translated.json.usage.prompt_tokens_details.cached_tokens).toBe(768)
    const translatedRow = await rowOf(server, translated)
    expectCost(translatedRow, tokens, R_GPT5_MINI)
    expect(translatedRow.cost_nano_usd).toBe(literal)

    const native = await responses(server, key.secret, { model: 'openai/gpt-5-mini' })
    expect(native.status).toBe(200)
    const nativeRow = await rowOf(server, native)
    expectCost(nativeRow, tokens, R_GPT5_MINI)
    expect(nativeRow.cost_nano_usd).toBe(literal)
  })

  test('cached input tokens in a stream (stream-text.sse, cached_tokens set in memory), both ways: split pricing from response.completed', async () => {
    const text = withCachedTokens(recordedText('openai-responses', 'stream-text.sse'), 16)
    answerOn(env.mocks[RESPONSES]!, '/responses', () => sseBytes(text, 41))
    const tokens = { prompt: 22, completion: 6, cached: 16 }
    // 6 × $1.5e-7 + 16 × $1.5e-8 + 6 × $6e-7, in nano-dollars.
    const literal = 6 * 150 + 16 * 15 + 6 * 600

    const native = await responses(server, key.secret, { model: 'openai/gpt-4o-mini', stream: true })
    expectStreamEnded(native, 'response.completed')
    const nativeRow = await rowOf(server, native)
    expectCost(nativeRow, tokens, R_MINI)
    expect(nativeRow.cost_nano_usd).toBe(literal)

    const translated = await chat(server, key.secret, { model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true } })
    expectStreamEnded(translated, 'data: [DONE]')
    const translatedRow = await rowOf(server, translated)
    expectCost(translatedRow, tokens, R_MINI)
    expect(translatedRow.cost_nano_usd).toBe(literal)
  })

  test('an unpriced Responses-only model: cost_nano_usd null on the row and counted in unpriced_requests', async () => {
    const own = await createKey(server, env.providers[RESPONSES]!)
    const body = recordedText('openai-responses', 'response-reasoning-summary.json')
    answerOn(env.mocks[RESPONSES]!, '/responses', () => jsonBytes(body))

    const result = await responses(server, own.secret, { model: 'openai/o3-pro' })
    expect(result.status).toBe(200)
    expect(lastResponsesCall().body.model).toBe('o3-pro')
    const row = await rowOf(server, result)
    expect(row.input_tokens).toBe(865)
    expect(row.cost_nano_usd).toBeNull()

    const summary = await server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${own.id}`)
    expect(summary.body.data).toMatchObject({ requests: 1, unpriced_requests: 1, cost_usd: 0 })
  })

  test('a /v1/responses request refused before any upstream call (400, no input): cost_nano_usd 0', async () => {
    const before = env.mocks[RESPONSES]!.requests.length
    const result = await httpCall(server, 'POST', '/v1/responses', { model: 'openai/gpt-5-mini' }, bearerHeader(key.secret))
    expect(result.status).toBe(400)
    expect(env.mocks[RESPONSES]!.requests.length).toBe(before)
    const row = await rowOf(server, result)
    expect(row.status).toBe(400)
    expect(row.cost_nano_usd).toBe(0)
  })
})
