/**
 * The response cache across requests (CONTRACT §15): identical requests in flight coalesced into
 * one gateway call (buffered and streamed waiters; a failed leader lets each waiter call on its
 * own); the request-log rows and money of hits (cost 0, the original's cost saved, the usage
 * summary's cache_hits and saved_usd); key limits (a hit counts toward the RPM only); the semantic
 * tier (a logged embeddings call, the nearest earlier question at or above the threshold, only among
 * requests equal in everything but the last user turn); the official SDKs reading hits as answers.
 * The single-request behaviour is in response-cache.test.ts.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { chatChunks, chatCompletion, type MockReply, type RecordedRequest } from '../harness/mock-gateway'
import { parseClientSse } from '../harness/client-sse'
import { until } from '../harness/until'

const MODEL = 'openai/gpt-4o-mini'
const ANSWER = 'Hello there'
const PIECES = ['Hel', 'lo', ' there']
const hi = [{ role: 'user', content: 'Hi' }]

/** The mock's chat answer: ANSWER, buffered or streamed as asked, after `delayMs` (and `chunkDelayMs` between a stream's events). */
function chatReply(request: RecordedRequest, timing: { delayMs?: number; chunkDelayMs?: number } = {}): MockReply {
  const model = String(request.body?.model)
  return request.body?.stream ? { sse: chatChunks(model, PIECES), ...timing } : { json: chatCompletion(model, ANSWER), ...timing }
}

async function cachedEnv(): Promise<GatewaysEnv> {
  const env = await startGateways(['openai'])
  env.mocks.openai!.handle((request) => (request.path.endsWith('/chat/completions') ? chatReply(request) : undefined))
  return env
}

async function cachedKey(env: GatewaysEnv, extra: Record<string, unknown> = {}, cache: Record<string, unknown> = {}) {
  const key = await createInferenceKey(env.server, { routing: { targets: [{ provider_key_id: env.providers.openai }] }, cache: { ttl_seconds: 600, ...cache }, ...extra })
  return { id: key.id as string, secret: key.key as string }
}

type Key = { secret: string }

const chat = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: hi, max_tokens: 100, ...extra }, { ...bearerHeader(key.secret), ...headers })

const flushed = (env: GatewaysEnv) => env.server.runtime.cache.open().flush()
const chatCalls = (env: GatewaysEnv) => env.mocks.openai!.calls('/chat/completions').length
/** The leader's call has reached the gateway: it is in flight, identical requests from now on wait for it. */
const leaderCalled = (env: GatewaysEnv) => until('the leader\'s gateway call', () => (chatCalls(env) > 0 ? true : undefined))

function cacheHeaders(result: CallResult) {
  const header = (name: string) => result.headers.get(name)
  return {
    status: result.status,
    cache: header('x-router-cache'),
    age: header('age'),
    attempts: header('x-router-attempts'),
    provider: header('x-router-provider'),
    cacheProvider: header('x-router-cache-provider'),
  }
}

const missHeaders = { status: 200, cache: 'miss', age: null, attempts: '1', provider: 'openai', cacheProvider: null }
const hitHeaders = { status: 200, cache: 'hit', age: '0', attempts: '0', provider: null, cacheProvider: 'openai' }
const coalescedHeaders = { ...hitHeaders, cache: 'coalesced' }

/** A chat stream's deltas joined (the stream well-formed: event-stream, [DONE] last, one finish). */
function streamedText(result: CallResult): string {
  expect(result.status).toBe(200)
  expect(result.headers.get('content-type') ?? '').toContain('text/event-stream')
  const events = parseClientSse(result.text)
  expect(events.at(-1)!.data).toBe('[DONE]')
  const chunks = events.slice(0, -1).map((event) => event.data)
  expect(chunks.map((chunk) => chunk.choices?.[0]?.finish_reason).filter(Boolean)).toEqual(['stop'])
  return chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').join('')
}

interface LogRow {
  id: string
  key_id: string
  endpoint: string
  status: number
  error_code: string | null
  gateway: string | null
  provider_key_id: string | null
  attempts: number
  cost_nano_usd: number | null
  cache: string | null
  saved_nano_usd: number | null
  input_tokens: number | null
  output_tokens: number | null
}

function logRows(env: GatewaysEnv): LogRow[] {
  env.server.runtime.logQueue.flush()
  return env.server.runtime.storage.sqlite
    .query<LogRow, []>('select id, key_id, endpoint, status, error_code, gateway, provider_key_id, attempts, cost_nano_usd, cache, saved_nano_usd, input_tokens, output_tokens from request_logs order by seq')
    .all()
}

const rowOf = (env: GatewaysEnv, result: CallResult): LogRow => {
  const id = result.headers.get('x-router-request-id')
  const row = logRows(env).find((candidate) => candidate.id === id)
  expect(row).toBeDefined()
  return row!
}

/** gpt-4o-mini at $1 per million prompt tokens and $4 per million completion tokens (the mock's answer: 11 + 7 tokens). */
async function priceCatalog(env: GatewaysEnv) {
  env.server.runtime.repositories.gatewayCatalogs.replaceCatalog('openai', Date.now(), [
    { modelId: 'gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: JSON.stringify({ id: 'gpt-4o-mini', pricing: { prompt: '0.000001', completion: '0.000004' } }) },
  ])
  await env.server.runtime.snapshots.fresh()
}
/** 11 prompt tokens at 1,000 nano-USD and 7 completion tokens at 4,000. */
const ANSWER_COST_NANO = 11 * 1_000 + 7 * 4_000

describe('coalescing', () => {
  test('100 identical concurrent buffered requests: one gateway call; the others coalesced, each with its own id', async () => {
    await using env = await cachedEnv()
    env.mocks.openai!.handle((request) => chatReply(request, { delayMs: 300 }))
    const key = await cachedKey(env)
    const answers = await Promise.all(Array.from({ length: 100 }, () => chat(env, key)))
    expect(chatCalls(env)).toBe(1)
    const byResult = Map.groupBy(answers, (answer) => answer.headers.get('x-router-cache'))
    expect(byResult.get('miss')).toHaveLength(1)
    expect(byResult.get('coalesced')).toHaveLength(99)
    expect(cacheHeaders(byResult.get('miss')![0]!)).toEqual(missHeaders)
    for (const answer of byResult.get('coalesced')!) {
      expect(cacheHeaders(answer)).toEqual(coalescedHeaders)
      expect(answer.json.choices[0].message.content).toBe(ANSWER)
      expect(answer.json.choices[0].finish_reason).toBe('stop')
    }
    expect(new Set(answers.map((answer) => answer.json.id)).size).toBe(100)
    expect(new Set(answers.map((answer) => answer.headers.get('x-router-request-id'))).size).toBe(100)
    // Then stored: a later request is a plain hit.
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(1)
  })

  test('streamed waiters get the parts as they come: each stream reassembles the whole answer; buffered waiters of a streamed leader get it whole', async () => {
    await using env = await cachedEnv()
    env.mocks.openai!.handle((request) => chatReply(request, { delayMs: 100, chunkDelayMs: 60 }))
    const key = await cachedKey(env)
    const leader = chat(env, key, { stream: true })
    await leaderCalled(env)
    const streamed = Array.from({ length: 20 }, () => chat(env, key, { stream: true }))
    const buffered = Array.from({ length: 5 }, () => chat(env, key))
    const [first, ...rest] = await Promise.all([leader, ...streamed])
    const whole = await Promise.all(buffered)
    expect(chatCalls(env)).toBe(1)
    expect(cacheHeaders(first!)).toEqual(missHeaders)
    expect(streamedText(first!)).toBe(ANSWER)
    for (const answer of rest) {
      expect(cacheHeaders(answer)).toEqual(coalescedHeaders)
      expect(streamedText(answer)).toBe(ANSWER)
    }
    for (const answer of whole) {
      expect(cacheHeaders(answer)).toEqual(coalescedHeaders)
      expect(answer.json.choices[0].message.content).toBe(ANSWER)
    }
  })

  test('a streamed waiter that joins after the answer began gets what came so far, then the rest', async () => {
    await using env = await cachedEnv()
    env.mocks.openai!.handle((request) => chatReply(request, { chunkDelayMs: 150 }))
    const key = await cachedKey(env)
    const leader = chat(env, key, { stream: true })
    // The leader's stream has begun (its first events are out) when the waiter comes.
    await leaderCalled(env)
    await Bun.sleep(200)
    const late = await chat(env, key, { stream: true })
    const first = await leader
    expect(chatCalls(env)).toBe(1)
    expect(cacheHeaders(late)).toEqual(coalescedHeaders)
    expect(streamedText(late)).toBe(ANSWER)
    expect(streamedText(first)).toBe(ANSWER)
  })

  test('a leader that fails (400, not retried): each waiter makes its own call', async () => {
    await using env = await cachedEnv()
    let calls = 0
    env.mocks.openai!.handle((request) => (++calls === 1 ? { status: 400, delayMs: 300, json: { error: { message: 'bad', type: 'invalid_request_error' } } } : chatReply(request)))
    const key = await cachedKey(env)
    const answers = await Promise.all(Array.from({ length: 10 }, () => chat(env, key)))
    expect(chatCalls(env)).toBe(10)
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 400])
    for (const answer of answers) expect(answer.headers.get('x-router-cache')).toBe('miss')
    for (const answer of answers.filter((answer) => answer.status === 200)) expect(cacheHeaders(answer)).toEqual(missHeaders)
  })

  test('a leader that fails with a 500: each waiter makes its own call; the next request hits what they stored', async () => {
    await using env = await cachedEnv()
    let calls = 0
    env.mocks.openai!.handle((request) => (++calls === 1 ? { status: 500, delayMs: 300, json: { error: { message: 'boom', type: 'server_error' } } } : chatReply(request)))
    const key = await cachedKey(env, {}, {})
    const answers = await Promise.all(Array.from({ length: 5 }, () => chat(env, key, { stream: true })))
    expect(chatCalls(env)).toBe(5)
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(4)
    for (const answer of answers.filter((answer) => answer.status === 200)) expect(streamedText(answer)).toBe(ANSWER)
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(5)
  })

  test('a leader whose stream is cut after it began: its streamed waiters are cut too; nothing is stored', async () => {
    await using env = await cachedEnv()
    let calls = 0
    env.mocks.openai!.handle((request) => (++calls === 1 ? { sse: chatChunks(MODEL, PIECES), chunkDelayMs: 100, breakAfter: 3 } : chatReply(request)))
    const key = await cachedKey(env)
    const leader = chat(env, key, { stream: true })
    await leaderCalled(env)
    const waiter = await chat(env, key, { stream: true })
    await leader
    expect(chatCalls(env)).toBe(1)
    expect(waiter.headers.get('x-router-cache')).toBe('coalesced')
    expect(waiter.text).not.toContain('[DONE]')
    expect(waiter.text).not.toContain('"finish_reason":"stop"')
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
  })
})

describe('request log and money', () => {
  test('a hit\'s row: cache hit, no attempt, no gateway, cost 0, the original\'s cost saved; coalesced rows too; the usage summary counts them', async () => {
    await using env = await cachedEnv()
    await priceCatalog(env)
    env.mocks.openai!.handle((request) => chatReply(request, { delayMs: 200 }))
    const key = await cachedKey(env)

    const [miss, coalesced] = await Promise.all([chat(env, key), (async () => (await leaderCalled(env), chat(env, key)))()])
    expect(miss!.headers.get('x-router-cache')).toBe('miss')
    expect(coalesced!.headers.get('x-router-cache')).toBe('coalesced')
    await flushed(env)
    const hit = await chat(env, key)
    const streamedHit = await chat(env, key, { stream: true })
    expect(hit.headers.get('x-router-cache')).toBe('hit')
    expect(chatCalls(env)).toBe(1)

    const missRow = rowOf(env, miss!)
    expect(missRow).toMatchObject({ key_id: key.id, endpoint: 'chat', status: 200, gateway: 'openai', provider_key_id: env.providers.openai, attempts: 1, cost_nano_usd: ANSWER_COST_NANO, saved_nano_usd: null, input_tokens: 11, output_tokens: 7 })
    expect(missRow.cache === null || missRow.cache === 'miss').toBe(true)
    const hitShape = { key_id: key.id, endpoint: 'chat', status: 200, error_code: null, gateway: null, attempts: 0, cost_nano_usd: 0, saved_nano_usd: ANSWER_COST_NANO }
    expect(rowOf(env, hit)).toMatchObject({ ...hitShape, cache: 'hit' })
    expect(rowOf(env, streamedHit)).toMatchObject({ ...hitShape, cache: 'hit' })
    expect(rowOf(env, coalesced!)).toMatchObject({ ...hitShape, cache: 'coalesced' })

    const summary = await env.server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(summary.status).toBe(200)
    expect(summary.body.data).toMatchObject({ requests: 4, cache_hits: 3, saved_usd: (3 * ANSWER_COST_NANO) / 1e9, cost_usd: ANSWER_COST_NANO / 1e9 })
    const perKey = await env.server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${key.id}`)
    expect(perKey.body.data).toMatchObject({ requests: 4, cache_hits: 3 })
  })

  test('an unpriced original: the hit\'s saving is null, the summary adds nothing for it', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const miss = await chat(env, key)
    await flushed(env)
    const hit = await chat(env, key)
    expect(rowOf(env, miss).cost_nano_usd).toBeNull()
    expect(rowOf(env, hit)).toMatchObject({ cache: 'hit', attempts: 0, gateway: null, cost_nano_usd: 0, saved_nano_usd: null })
    const summary = await env.server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(summary.body.data).toMatchObject({ requests: 2, cache_hits: 1, saved_usd: 0 })
  })
})

describe('key limits', () => {
  test('a hit counts toward the key\'s requests per minute: after two requests a third (a hit) is 429 key_rate_limited', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect((await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { limits: { requests_per_minute: 2 } })).status).toBe(200)
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(hitHeaders)
    const refused = await chat(env, key)
    expect(refused.status).toBe(429)
    expect(refused.json.error.code).toBe('key_rate_limited')
    expect(refused.headers.get('retry-after')).not.toBeNull()
    expect(chatCalls(env)).toBe(1)
  })

  test('a hit does not count toward the tokens per minute nor the USD caps: served when a new call is refused', async () => {
    await using env = await cachedEnv()
    await priceCatalog(env)
    const tokens = await cachedKey(env)
    expect((await env.server.call('PATCH', `/api/v1/keys/${tokens.id}`, { limits: { tokens_per_minute: 10 } })).status).toBe(200)
    const dollars = await cachedKey(env)
    // Room for one request's worst case (about 180,000 nano-USD), not for a second's beside the first's cost (39,000).
    expect((await env.server.call('PATCH', `/api/v1/keys/${dollars.id}`, { limits: { usd_per_day: 0.0002 } })).status).toBe(200)
    for (const [key, code] of [
      [tokens, 'key_rate_limited'],
      [dollars, 'key_budget_exhausted'],
    ] as const) {
      const first = await chat(env, key, { max_tokens: 5 })
      expect([code, cacheHeaders(first), first.json.error]).toEqual([code, missHeaders, undefined])
      await flushed(env)
      const other = await chat(env, key, { max_tokens: 5, messages: [{ role: 'user', content: 'Something else' }] })
      expect([code, other.status, other.json.error.code]).toEqual([code, 429, code])
      for (let index = 0; index < 3; index++) expect([code, cacheHeaders(await chat(env, key, { max_tokens: 5 }))]).toEqual([code, hitHeaders])
    }
    expect(chatCalls(env)).toBe(2)
  })
})

/** A toy embedding: words (lower-cased, without punctuation) counted into 64 buckets by a string hash. */
function embed(text: string): number[] {
  const vector = new Array<number>(64).fill(0)
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    let hash = 7
    for (const char of word) hash = (hash * 31 + char.charCodeAt(0)) >>> 0
    vector[hash % 64]! += 1
  }
  return vector
}

function cosine(a: number[], b: number[]): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let index = 0; index < a.length; index++) {
    dot += a[index]! * b[index]!
    na += a[index]! * a[index]!
    nb += b[index]! * b[index]!
  }
  return dot / Math.sqrt(na * nb)
}

describe('the semantic tier', () => {
  const question = 'What is the capital of France?'
  const near = 'What is the capital city of France?'
  const far = 'How do I bake sourdough bread at home?'

  async function semanticEnv() {
    const env = await cachedEnv()
    env.mocks.openai!.handle((request) => {
      if (request.path.endsWith('/embeddings')) {
        return { json: { object: 'list', data: [{ object: 'embedding', index: 0, embedding: embed(String(request.body?.input)) }], model: request.body?.model, usage: { prompt_tokens: 3, total_tokens: 3 } } }
      }
      return chatReply(request)
    })
    const key = await cachedKey(env, {}, { semantic: { threshold: 0.9, provider_key_id: env.providers.openai, model: 'text-embedding-3-small' } })
    return { env, key }
  }

  const ask = (env: GatewaysEnv, key: Key, text: string, extra: Record<string, unknown> = {}) => chat(env, key, { messages: [{ role: 'user', content: text }], ...extra })
  const embeddingCalls = (env: GatewaysEnv) => env.mocks.openai!.calls('/embeddings')

  test('a near question is a semantic hit (with its similarity), a far one a miss; each lookup a logged embeddings request of the key', async () => {
    const { env, key } = await semanticEnv()
    await using _ = env
    await priceCatalog(env)
    expect(cosine(embed(question), embed(near))).toBeGreaterThanOrEqual(0.9)
    expect(cosine(embed(question), embed(far))).toBeLessThan(0.5)

    const first = await ask(env, key, question)
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(embeddingCalls(env).map((call) => call.body)).toEqual([{ model: 'text-embedding-3-small', input: question }])
    expect(chatCalls(env)).toBe(1)
    await flushed(env)

    const semantic = await ask(env, key, near)
    expect(cacheHeaders(semantic)).toEqual({ ...hitHeaders, cache: 'semantic-hit' })
    const similarity = Number(semantic.headers.get('x-router-cache-similarity'))
    expect(similarity).toBeGreaterThanOrEqual(0.9)
    expect(similarity).toBeCloseTo(cosine(embed(question), embed(near)), 3)
    expect(semantic.json.choices[0].message.content).toBe(ANSWER)
    expect(embeddingCalls(env).map((call) => call.body.input)).toEqual([question, near])
    expect(chatCalls(env)).toBe(1)

    // The exact question again: an exact hit, no embeddings call.
    const exact = await ask(env, key, question)
    expect(cacheHeaders(exact)).toEqual(hitHeaders)
    expect(exact.headers.get('x-router-cache-similarity')).toBeNull()
    expect(embeddingCalls(env)).toHaveLength(2)

    const unrelated = await ask(env, key, far)
    expect(cacheHeaders(unrelated)).toEqual(missHeaders)
    expect(unrelated.headers.get('x-router-cache-similarity')).toBeNull()
    expect(embeddingCalls(env)).toHaveLength(3)
    expect(chatCalls(env)).toBe(2)

    // Streamed: a semantic hit streamed as asked.
    await flushed(env)
    const streamed = await ask(env, key, 'What is the capital city of France', { stream: true })
    expect(cacheHeaders(streamed)).toEqual({ ...hitHeaders, cache: 'semantic-hit' })
    expect(streamedText(streamed)).toBe(ANSWER)
    expect(chatCalls(env)).toBe(2)

    // The log: each embeddings call a row of the key's own; the semantic hit's row.
    const rows = logRows(env)
    const embeddingRows = rows.filter((row) => row.endpoint === 'embeddings')
    expect(embeddingRows).toHaveLength(4)
    for (const row of embeddingRows) expect(row).toMatchObject({ key_id: key.id, status: 200, gateway: 'openai', provider_key_id: env.providers.openai, attempts: 1, input_tokens: 3 })
    expect(rowOf(env, semantic)).toMatchObject({ endpoint: 'chat', cache: 'semantic-hit', attempts: 0, gateway: null, cost_nano_usd: 0, saved_nano_usd: ANSWER_COST_NANO })
    const summary = await env.server.call('GET', '/api/v1/usage/summary?range=24h')
    // Two chat calls, two semantic hits, one exact hit, four embeddings calls.
    expect(summary.body.data).toMatchObject({ requests: 9, cache_hits: 3 })
  })

  test('never across different earlier turns or system prompts; a request whose last turn is not user text makes no embeddings call', async () => {
    const { env, key } = await semanticEnv()
    await using _ = env
    const earlier = [
      { role: 'user', content: 'I am planning a trip.' },
      { role: 'assistant', content: 'Where to?' },
    ]
    expect(cacheHeaders(await chat(env, key, { messages: [...earlier, { role: 'user', content: question }] })).cache).toBe('miss')
    await flushed(env)
    // Same earlier turns, a near last question: a semantic hit.
    expect(cacheHeaders(await chat(env, key, { messages: [...earlier, { role: 'user', content: near }] })).cache).toBe('semantic-hit')
    // Other earlier turns: a miss.
    const otherEarlier = [{ role: 'user', content: 'I am planning a dinner.' }, earlier[1]!]
    expect(cacheHeaders(await chat(env, key, { messages: [...otherEarlier, { role: 'user', content: near }] })).cache).toBe('miss')
    // No earlier turns at all: a miss.
    expect(cacheHeaders(await ask(env, key, near)).cache).toBe('miss')
    // A system prompt more: a miss.
    expect(cacheHeaders(await chat(env, key, { messages: [{ role: 'system', content: 'Be brief.' }, ...earlier, { role: 'user', content: near }] })).cache).toBe('miss')
    // Another temperature: a miss.
    expect(cacheHeaders(await chat(env, key, { temperature: 0.7, messages: [...earlier, { role: 'user', content: near }] })).cache).toBe('miss')
    expect(chatCalls(env)).toBe(5)
    expect(embeddingCalls(env)).toHaveLength(6)

    // The last turn is the assistant's (a prefill): no semantic lookup, no embeddings call.
    const prefill = await chat(env, key, { messages: [{ role: 'user', content: question }, { role: 'assistant', content: 'The capital' }] })
    expect(cacheHeaders(prefill)).toEqual(missHeaders)
    // The last user turn is an image: none either.
    const image = await chat(env, key, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] })
    expect(cacheHeaders(image)).toEqual(missHeaders)
    expect(embeddingCalls(env)).toHaveLength(6)
    expect(chatCalls(env)).toBe(7)
  })

  test('no-cache skips the semantic lookup too (no embeddings call)', async () => {
    const { env, key } = await semanticEnv()
    await using _ = env
    expect(cacheHeaders(await ask(env, key, question)).cache).toBe('miss')
    await flushed(env)
    const semantic = await ask(env, key, near)
    expect(semantic.headers.get('x-router-cache')).toBe('semantic-hit')
    const fresh = await chat(env, key, { messages: [{ role: 'user', content: 'What is the capital city of France' }] }, { 'cache-control': 'no-cache' })
    expect(cacheHeaders(fresh).cache).toBe('bypass')
    expect(embeddingCalls(env)).toHaveLength(2)
    expect(chatCalls(env)).toBe(2)
  })
})

describe('the store\'s bound', () => {
  test('RT_CACHE_MAX_MB=1: while 3 MB of answers are written the entries and the file stay under 1 MiB, the least recently used go first, and the metrics count the evictions', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'response-cache-bound-'))
    const cachePath = join(directory, 'cache.db')
    try {
      await using env = await startGateways(['openai'], { RT_CACHE_MAX_MB: '1', RT_CACHE_PATH: cachePath })
      // 30,000 characters an answer: about 30 fit in the bound.
      env.mocks.openai!.handle((request) => ({ json: chatCompletion(MODEL, 'x'.repeat(30_000) + String(request.body.messages[0].content)) }))
      const key = await cachedKey(env)
      const bound = 1024 * 1024
      const ask = (index: number) => chat(env, key, { messages: [{ role: 'user', content: `Question ${index}` }] })
      const store = env.server.runtime.cache.open()
      expect(cacheHeaders(await ask(0)).cache).toBe('miss')
      await flushed(env)
      for (let index = 1; index <= 100; index++) {
        expect(cacheHeaders(await ask(index)).cache).toBe('miss')
        // Question 0 kept in use: the least recently used are the others.
        if (index % 10 === 0) {
          expect(cacheHeaders(await ask(0)).cache).toBe('hit')
          await flushed(env)
          expect(store.stats().bytes).toBeLessThanOrEqual(bound)
          expect(statSync(cachePath).size).toBeLessThanOrEqual(bound)
        }
      }
      await flushed(env)
      const stats = store.stats()
      expect(stats.entries).toBeGreaterThan(20)
      expect(stats.entries).toBeLessThan(35)
      expect(stats.evictions).toBe(101 - stats.entries)
      expect(cacheHeaders(await ask(0)).cache).toBe('hit')
      expect(cacheHeaders(await ask(100)).cache).toBe('hit')
      expect(cacheHeaders(await ask(1)).cache).toBe('miss')
      const metrics = await (await fetch(`${env.server.rootUrl}/metrics`)).text()
      expect(metrics).toContain(`router_cache_evictions_total ${stats.evictions}`)
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  })
})

describe('the official SDKs read a hit as an answer', () => {
  test('openai: chat buffered and streamed', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const client = new OpenAI({ apiKey: key.secret, baseURL: env.server.baseUrl, maxRetries: 0 })
    const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hi' }], max_tokens: 100 }
    const first = await client.chat.completions.create(request).withResponse()
    expect(first.response.headers.get('x-router-cache')).toBe('miss')
    await flushed(env)
    const hit = await client.chat.completions.create(request).withResponse()
    expect(hit.response.headers.get('x-router-cache')).toBe('hit')
    expect(hit.data.choices[0]!.message.content).toBe(ANSWER)
    expect(hit.data.choices[0]!.finish_reason).toBe('stop')
    expect(hit.data.id).not.toBe(first.data.id)

    const { data: stream, response } = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } }).withResponse()
    expect(response.headers.get('x-router-cache')).toBe('hit')
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe(ANSWER)
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })
    const final = await client.chat.completions.stream(request).finalChatCompletion()
    expect(final.choices[0]!.message.content).toBe(ANSWER)
    expect(chatCalls(env)).toBe(1)
  })

  test('@anthropic-ai/sdk on a messages key: buffered and streamed', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env, { api_shape: 'messages' })
    const client = new Anthropic({ apiKey: key.secret, baseURL: env.server.rootUrl, maxRetries: 0 })
    const request = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: 'Hi' }] }
    const first = await client.messages.create(request).withResponse()
    expect(first.response.headers.get('x-router-cache')).toBe('miss')
    await flushed(env)
    const hit = await client.messages.create(request).withResponse()
    expect(hit.response.headers.get('x-router-cache')).toBe('hit')
    expect(hit.data.content).toHaveLength(1)
    expect(hit.data.content[0]).toMatchObject({ type: 'text', text: ANSWER })
    expect(hit.data.stop_reason).toBe('end_turn')
    expect(hit.data.id).not.toBe(first.data.id)

    const stream = client.messages.stream(request)
    const texts: string[] = []
    stream.on('text', (delta) => texts.push(delta))
    const final = await stream.finalMessage()
    expect(texts.join('')).toBe(ANSWER)
    expect(final.content).toHaveLength(1)
    expect(final.content[0]).toMatchObject({ type: 'text', text: ANSWER })
    expect(final.stop_reason).toBe('end_turn')
    expect(final.usage.output_tokens).toBe(7)
    expect(chatCalls(env)).toBe(1)
  })
})
