/**
 * The response cache end to end (CONTRACT §15): a key with `cache` set answers a repeated request
 * from its store, without a gateway call, in the caller's shape (buffered or streamed, fresh ids),
 * whichever of chat, messages and Responses first asked it; answers never kept (errors, cut streams,
 * `n` > 1, chained or background Responses turns); the request's Cache-Control directives; which
 * differences of a request miss and which still hit. The partitions and the purge are in
 * response-cache-partitions.test.ts; the flows that span requests
 * (coalescing, the log and money, limits, the semantic tier, the store's bound, the official SDKs)
 * in response-cache-flows.test.ts.
 */
import { describe, expect, test } from 'bun:test'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { chatChunks, chatCompletion, type MockReply, type RecordedRequest } from '../harness/mock-gateway'
import { responsesTurn } from '../harness/responses-script'
import { parseClientSse } from '../harness/client-sse'

const MODEL = 'openai/gpt-4o-mini'
const ANSWER = 'Hello there'
const hi = [{ role: 'user', content: 'Hi' }]

/** The mock's answer to chat and Responses calls: ANSWER, buffered or streamed as asked (embeddings get the mock's default). */
function answering(content = ANSWER) {
  return (request: RecordedRequest): MockReply | Response | undefined => {
    if (request.path.endsWith('/chat/completions')) {
      const model = String(request.body?.model)
      return request.body?.stream ? { sse: chatChunks(model, ['Hel', 'lo', ' there']) } : { json: chatCompletion(model, content) }
    }
    if (request.path.endsWith('/responses')) return responsesTurn(request, { text: content, usage: { input: 11, output: 7 } }, 'upstream')
    return undefined
  }
}

async function cachedEnv(): Promise<GatewaysEnv> {
  const env = await startGateways(['openai'])
  env.mocks.openai!.handle(answering())
  return env
}

const routing = (env: GatewaysEnv) => ({ routing: { targets: [{ provider_key_id: env.providers.openai }] } })

async function cachedKey(env: GatewaysEnv, extra: Record<string, unknown> = {}, cache: Record<string, unknown> = {}) {
  const key = await createInferenceKey(env.server, { ...routing(env), cache: { ttl_seconds: 600, ...cache }, ...extra })
  return { id: key.id as string, secret: key.key as string }
}

type Key = { secret: string }

const chat = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: hi, max_tokens: 100, ...extra }, { ...bearerHeader(key.secret), ...headers })

const messages = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/messages', { model: MODEL, max_tokens: 100, messages: hi, ...extra }, { 'x-api-key': key.secret, 'anthropic-version': '2023-06-01', ...headers })

const responses = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/responses', { model: MODEL, input: 'Hi', max_output_tokens: 100, ...extra }, { ...bearerHeader(key.secret), ...headers })

/** Entries are written by the store's writer thread: wait until the queued ones are committed. */
const flushed = (env: GatewaysEnv) => env.server.runtime.cache.open().flush()

const chatCalls = (env: GatewaysEnv) => env.mocks.openai!.calls('/chat/completions').length

/** The cache headers of an answer, as one object (exact values, null when absent). */
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
const bypassHeaders = { status: 200, cache: 'bypass', age: null, attempts: '1', provider: 'openai', cacheProvider: null }

/** A chat stream's text, its deltas joined; and whether it carried a usage chunk. */
function chatStream(result: CallResult) {
  expect(result.status).toBe(200)
  expect(result.headers.get('content-type') ?? '').toContain('text/event-stream')
  const events = parseClientSse(result.text)
  expect(events.at(-1)!.data).toBe('[DONE]')
  const chunks = events.slice(0, -1).map((event) => event.data)
  return {
    text: chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').join(''),
    ids: new Set(chunks.map((chunk) => chunk.id)),
    finish: chunks.map((chunk) => chunk.choices?.[0]?.finish_reason).filter(Boolean),
    usage: chunks.filter((chunk) => chunk.usage).map((chunk) => chunk.usage),
  }
}

describe('a repeated request answered from the cache', () => {
  test('chat: a miss calls the gateway, then the same request is a hit, buffered and streamed, with fresh ids and no gateway call; a streamed miss is stored too', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)

    const first = await chat(env, key)
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(first.json.choices[0].message.content).toBe(ANSWER)
    await flushed(env)

    const again = await chat(env, key)
    expect(cacheHeaders(again)).toEqual(hitHeaders)
    expect(again.headers.get('x-router-cache-similarity')).toBeNull()
    expect(again.json.object).toBe('chat.completion')
    expect(again.json.model).toBe(MODEL)
    expect(again.json.choices).toEqual([{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }])
    expect(again.json.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
    expect(again.json.id).not.toBe(first.json.id)
    expect(again.json.id).toMatch(/^chatcmpl-/)
    expect(again.headers.get('x-router-request-id')).not.toBe(first.headers.get('x-router-request-id'))

    const third = await chat(env, key)
    expect(cacheHeaders(third)).toEqual(hitHeaders)
    expect(third.json.id).not.toBe(again.json.id)

    // Streamed as asked: the same text, the usage chunk only when asked for.
    const streamed = await chat(env, key, { stream: true })
    expect(cacheHeaders(streamed)).toEqual(hitHeaders)
    const plain = chatStream(streamed)
    expect(plain.text).toBe(ANSWER)
    expect(plain.finish).toEqual(['stop'])
    expect(plain.usage).toEqual([])
    expect(plain.ids.size).toBe(1)
    expect([...plain.ids][0]).not.toBe(first.json.id)
    const withUsage = chatStream(await chat(env, key, { stream: true, stream_options: { include_usage: true } }))
    expect(withUsage.text).toBe(ANSWER)
    expect(withUsage.usage).toHaveLength(1)
    expect(withUsage.usage[0]).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })
    expect(chatCalls(env)).toBe(1)

    // Asked streamed first: the stream's parts added up are the entry; a buffered request hits it.
    const question = [{ role: 'user', content: 'Stream it' }]
    const streamedMiss = await chat(env, key, { messages: question, stream: true })
    expect(cacheHeaders(streamedMiss)).toEqual(missHeaders)
    expect(chatStream(streamedMiss).text).toBe(ANSWER)
    await flushed(env)
    const bufferedHit = await chat(env, key, { messages: question })
    expect(cacheHeaders(bufferedHit)).toEqual(hitHeaders)
    expect(bufferedHit.json.choices[0].message.content).toBe(ANSWER)
    expect(bufferedHit.json.choices[0].finish_reason).toBe('stop')
    expect(chatCalls(env)).toBe(2)
  })

  test('age counts the seconds since the entry was stored; an entry older than ttl_seconds is never served', async () => {
    await using env = await cachedEnv()
    const lasting = await cachedKey(env)
    const brief = await cachedKey(env, {}, { ttl_seconds: 1 })
    expect(cacheHeaders(await chat(env, lasting)).cache).toBe('miss')
    expect(cacheHeaders(await chat(env, brief)).cache).toBe('miss')
    await flushed(env)
    expect(cacheHeaders(await chat(env, brief))).toEqual(hitHeaders)
    await Bun.sleep(1100)
    const later = await chat(env, lasting)
    expect(cacheHeaders(later)).toEqual({ ...hitHeaders, age: '1' })
    expect(cacheHeaders(await chat(env, brief))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(3)
  })

  test('PATCH /api/v1/keys/{id} turns the cache on and off', async () => {
    await using env = await cachedEnv()
    const key = await createInferenceKey(env.server, routing(env))
    const secret = { secret: key.key as string }
    const on = await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 60 } })
    expect(on.status).toBe(200)
    expect(on.body.data.cache).toEqual({ ttl_seconds: 60, scope: 'key', semantic: null })
    expect(cacheHeaders(await chat(env, secret))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, secret))).toEqual(hitHeaders)
    const off = await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: null })
    expect(off.status).toBe(200)
    expect(off.body.data.cache).toBeNull()
    const uncached = await chat(env, secret)
    expect(uncached.status).toBe(200)
    expect(uncached.headers.get('x-router-cache')).toBeNull()
    expect(uncached.headers.get('x-router-provider')).toBe('openai')
    expect(chatCalls(env)).toBe(2)
  })

  test('a tool-call answer is kept; its hit carries the same calls under fresh call ids', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const call = { id: 'call_upstream_1', type: 'function', function: { name: 'lookup', arguments: '{"city":"Paris"}' } }
    const answer = chatCompletion(MODEL, '')
    answer.choices[0] = { index: 0, message: { role: 'assistant', content: null, tool_calls: [call] } as any, finish_reason: 'tool_calls' }
    env.mocks.openai!.handle(() => ({ json: answer }))
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
    const first = await chat(env, key, { tools })
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(first.json.choices[0].message.tool_calls[0].id).toBe('call_upstream_1')
    await flushed(env)
    const again = await chat(env, key, { tools })
    expect(cacheHeaders(again)).toEqual(hitHeaders)
    expect(again.json.choices[0].finish_reason).toBe('tool_calls')
    const [repeated] = again.json.choices[0].message.tool_calls
    expect(repeated).toMatchObject({ type: 'function', function: call.function })
    expect(repeated.id).not.toBe(call.id)
    expect(repeated.id).toMatch(/^call_/)
    expect(chatCalls(env)).toBe(1)
  })

  test('a key without a cache: no X-Router-Cache header, every request calls the gateway', async () => {
    await using env = await cachedEnv()
    const plain = await createInferenceKey(env.server, routing(env))
    for (let index = 0; index < 2; index++) {
      const answer = await chat(env, { secret: plain.key })
      expect(answer.status).toBe(200)
      expect(answer.headers.get('x-router-cache')).toBeNull()
      expect(answer.headers.get('age')).toBeNull()
      await flushed(env)
    }
    expect(chatCalls(env)).toBe(2)
  })

  test('the same question as chat, messages and Responses finds one entry (workspace scope), each hit in its own shape, buffered and streamed; a Responses hit is retrievable by its id', async () => {
    await using env = await cachedEnv()
    const chatKey = await cachedKey(env, {}, { scope: 'workspace' })
    const messagesKey = await cachedKey(env, { api_shape: 'messages' }, { scope: 'workspace' })

    expect(cacheHeaders(await chat(env, chatKey))).toEqual(missHeaders)
    await flushed(env)

    const asMessages = await messages(env, messagesKey)
    expect(cacheHeaders(asMessages)).toEqual(hitHeaders)
    expect(asMessages.json).toMatchObject({ type: 'message', role: 'assistant', model: MODEL, stop_reason: 'end_turn', content: [{ type: 'text', text: ANSWER }] })
    expect(asMessages.json.id).toMatch(/^msg_/)

    const messagesStream = await messages(env, messagesKey, { stream: true })
    expect(cacheHeaders(messagesStream)).toEqual(hitHeaders)
    const messageEvents = parseClientSse(messagesStream.text)
    expect(messageEvents[0]!.event).toBe('message_start')
    expect(messageEvents.at(-1)!.event).toBe('message_stop')
    expect(
      messageEvents
        .filter((event) => event.data.type === 'content_block_delta')
        .map((event) => event.data.delta.text)
        .join(''),
    ).toBe(ANSWER)

    const asResponse = await responses(env, chatKey)
    expect(cacheHeaders(asResponse)).toEqual(hitHeaders)
    expect(asResponse.json).toMatchObject({ object: 'response', status: 'completed', model: MODEL })
    expect(asResponse.json.output).toHaveLength(1)
    expect(asResponse.json.output[0]).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: ANSWER }] })
    expect(asResponse.json.id).toMatch(/^resp_/)

    const responseStream = await responses(env, chatKey, { stream: true })
    expect(cacheHeaders(responseStream)).toEqual(hitHeaders)
    const responseEvents = parseClientSse(responseStream.text)
    expect(responseEvents[0]!.event).toBe('response.created')
    expect(responseEvents.at(-1)!.event).toBe('response.completed')
    expect(
      responseEvents
        .filter((event) => event.event === 'response.output_text.delta')
        .map((event) => event.data.delta)
        .join(''),
    ).toBe(ANSWER)
    const streamedId = responseEvents.at(-1)!.data.response.id
    expect(streamedId).not.toBe(asResponse.json.id)

    // The hit was stored like any Responses answer: retrievable by its id, the same object.
    await flushed(env)
    const retrieved = await httpCall(env.server, 'GET', `/v1/responses/${asResponse.json.id}`, undefined, bearerHeader(chatKey.secret))
    expect(retrieved.status).toBe(200)
    expect(retrieved.json).toEqual(asResponse.json)
    const retrievedStreamed = await httpCall(env.server, 'GET', `/v1/responses/${streamedId}`, undefined, bearerHeader(chatKey.secret))
    expect(retrievedStreamed.status).toBe(200)
    expect(retrievedStreamed.json.output[0].content[0].text).toBe(ANSWER)

    // One gateway call for all of them.
    expect(env.mocks.openai!.requests.filter((request) => request.method === 'POST')).toHaveLength(1)
  })

  test('asked first as messages, then as chat and Responses: the same entry', async () => {
    await using env = await cachedEnv()
    const chatKey = await cachedKey(env, {}, { scope: 'workspace' })
    const messagesKey = await cachedKey(env, { api_shape: 'messages' }, { scope: 'workspace' })
    const first = await messages(env, messagesKey)
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(first.json.content[0].text).toBe(ANSWER)
    await flushed(env)
    expect(cacheHeaders(await chat(env, chatKey))).toEqual(hitHeaders)
    expect(cacheHeaders(await responses(env, chatKey))).toEqual(hitHeaders)
    expect(env.mocks.openai!.requests.filter((request) => request.method === 'POST')).toHaveLength(1)
  })

  test('asked first as Responses, then as chat and messages: the same entry', async () => {
    await using env = await cachedEnv()
    const chatKey = await cachedKey(env, {}, { scope: 'workspace' })
    const messagesKey = await cachedKey(env, { api_shape: 'messages' }, { scope: 'workspace' })
    const first = await responses(env, chatKey)
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(first.json.output[0].content[0].text).toBe(ANSWER)
    await flushed(env)
    expect(cacheHeaders(await chat(env, chatKey))).toEqual(hitHeaders)
    expect(cacheHeaders(await messages(env, messagesKey))).toEqual(hitHeaders)
    expect(env.mocks.openai!.requests.filter((request) => request.method === 'POST')).toHaveLength(1)
  })

  test('across shapes, the same request with a system prompt, sampling, stop sequences or earlier turns is one entry', async () => {
    await using env = await cachedEnv()
    const chatKey = await cachedKey(env, {}, { scope: 'workspace' })
    const messagesKey = await cachedKey(env, { api_shape: 'messages' }, { scope: 'workspace' })
    const turns = [
      { role: 'user', content: 'A' },
      { role: 'assistant', content: 'B' },
      { role: 'user', content: 'C' },
    ]
    const cases: { what: string; chat: Record<string, unknown>; messages: Record<string, unknown>; responses: Record<string, unknown> }[] = [
      {
        what: 'system prompt',
        chat: { messages: [{ role: 'system', content: 'Be brief.' }, ...hi] },
        messages: { system: [{ type: 'text', text: 'Be brief.' }], messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] },
        responses: { instructions: 'Be brief.' },
      },
      { what: 'temperature', chat: { temperature: 0.5, messages: [{ role: 'user', content: 'T' }] }, messages: { temperature: 0.5, messages: [{ role: 'user', content: 'T' }] }, responses: { temperature: 0.5, input: 'T' } },
      { what: 'stop sequences', chat: { stop: ['END'], messages: [{ role: 'user', content: 'S' }] }, messages: { stop_sequences: ['END'], messages: [{ role: 'user', content: 'S' }] }, responses: {} },
      { what: 'earlier turns', chat: { messages: turns }, messages: { messages: turns }, responses: { input: turns } },
    ]
    let calls = 0
    for (const { what, chat: asChat, messages: asMessages, responses: asResponses } of cases) {
      expect([what, cacheHeaders(await chat(env, chatKey, asChat))]).toEqual([what, missHeaders])
      calls++
      await flushed(env)
      expect([what, cacheHeaders(await messages(env, messagesKey, asMessages))]).toEqual([what, hitHeaders])
      // Responses has no stop sequences.
      if (Object.keys(asResponses).length > 0) expect([what, cacheHeaders(await responses(env, chatKey, asResponses))]).toEqual([what, hitHeaders])
      expect(chatCalls(env)).toBe(calls)
    }
    // A Responses input as message items is the same as the plain string.
    const items = await responses(env, chatKey, { instructions: 'Be brief.', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }] })
    expect(cacheHeaders(items)).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(calls)
  })

  test('generateContent: a repeated request is a hit, in its own shape', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env, { api_shape: 'content' })
    const body = { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], generationConfig: { maxOutputTokens: 100 } }
    const call = () => httpCall(env.server, 'POST', `/v1/models/${MODEL}:generateContent`, body, { 'x-goog-api-key': key.secret })
    const first = await call()
    expect(cacheHeaders(first)).toEqual(missHeaders)
    expect(first.json.candidates[0].content.parts[0].text).toBe(ANSWER)
    await flushed(env)
    const again = await call()
    expect(cacheHeaders(again)).toEqual(hitHeaders)
    expect(again.json.candidates[0].content).toEqual(first.json.candidates[0].content)
    expect(again.json.candidates[0].finishReason).toBe(first.json.candidates[0].finishReason)
    expect(chatCalls(env)).toBe(1)
  })

  test('embeddings: a repeated request is a hit with the same vectors; another input misses', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const embed = (input: string) => httpCall(env.server, 'POST', '/v1/embeddings', { model: 'openai/text-embedding-3-small', input }, bearerHeader(key.secret))
    const first = await embed('one')
    expect(cacheHeaders(first)).toEqual(missHeaders)
    await flushed(env)
    const again = await embed('one')
    expect(cacheHeaders(again)).toEqual(hitHeaders)
    expect(again.json.data).toEqual(first.json.data)
    expect(again.json.object).toBe('list')
    expect(cacheHeaders(await embed('two'))).toEqual(missHeaders)
    expect(env.mocks.openai!.calls('/embeddings')).toHaveLength(2)
  })
})

describe('answers never kept', () => {
  test('n > 1 is a bypass: no read, no write', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    for (let index = 0; index < 2; index++) {
      expect(cacheHeaders(await chat(env, key, { n: 2 }))).toEqual(bypassHeaders)
      await flushed(env)
    }
    expect(chatCalls(env)).toBe(2)
  })

  test('Responses with previous_response_id or background: a bypass', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const first = await responses(env, key)
    expect(cacheHeaders(first)).toEqual(missHeaders)
    await flushed(env)
    // Chained on a stored answer: not cached, twice a call.
    for (let index = 0; index < 2; index++) {
      const chained = await responses(env, key, { previous_response_id: first.json.id, input: 'And then?' })
      expect(chained.status).toBe(200)
      expect(chained.headers.get('x-router-cache')).toBe('bypass')
      await flushed(env)
    }
    expect(env.mocks.openai!.calls('/responses').filter((request) => request.method === 'POST')).toHaveLength(3)
    const background = await responses(env, key, { background: true })
    expect(background.headers.get('x-router-cache')).toBe('bypass')
    expect(background.headers.get('age')).toBeNull()
  })

  test('an error is not stored: the next identical request calls the gateway again', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    env.mocks.openai!.handle(() => ({ status: 500, json: { error: { message: 'boom', type: 'server_error' } } }))
    const failed = await chat(env, key)
    expect(failed.status).toBeGreaterThanOrEqual(500)
    expect(failed.headers.get('x-router-cache')).toBe('miss')
    const failedCalls = chatCalls(env)
    expect(failedCalls).toBeGreaterThanOrEqual(1)
    await flushed(env)
    env.mocks.openai!.handle(answering())
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(failedCalls + 1)
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(failedCalls + 1)
  })

  test('a stream cut mid-way is not stored', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    env.mocks.openai!.handle((request) => (request.body?.stream ? { sse: chatChunks(MODEL, ['Hel', 'lo', ' there']), breakAfter: 2 } : undefined))
    const cut = await chat(env, key, { stream: true })
    expect(cut.headers.get('x-router-cache')).toBe('miss')
    expect(cut.text).not.toContain('"finish_reason":"stop"')
    await flushed(env)
    env.mocks.openai!.handle(answering())
    const next = await chat(env, key, { stream: true })
    expect(cacheHeaders(next)).toEqual(missHeaders)
    expect(chatStream(next).text).toBe(ANSWER)
    expect(chatCalls(env)).toBe(2)
  })

  test('an answer that did not finish (content_filter) is not stored', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const filtered = chatCompletion(MODEL, 'Hel')
    filtered.choices[0]!.finish_reason = 'content_filter'
    env.mocks.openai!.handle(() => ({ json: filtered }))
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(2)
  })
})

describe('Cache-Control on the request', () => {
  test('no-store: no read, no write', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'no-store' }))).toEqual(bypassHeaders)
    await flushed(env)
    // Nothing was written.
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    // Something is stored now, and no-store does not read it.
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'no-store' }))).toEqual(bypassHeaders)
    expect(chatCalls(env)).toBe(3)
  })

  test('no-cache: no read, but the answer is stored (a following plain request hits the new answer)', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    env.mocks.openai!.handle(answering('A newer answer'))
    const refreshed = await chat(env, key, {}, { 'cache-control': 'no-cache' })
    expect(cacheHeaders(refreshed)).toEqual(bypassHeaders)
    expect(refreshed.json.choices[0].message.content).toBe('A newer answer')
    await flushed(env)
    const hit = await chat(env, key)
    expect(cacheHeaders(hit)).toEqual(hitHeaders)
    expect(hit.json.choices[0].message.content).toBe('A newer answer')
    expect(chatCalls(env)).toBe(2)
  })

  test('max-age=N: only an entry at most N seconds old', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'max-age=60' }))).toEqual(hitHeaders)
    await Bun.sleep(1100)
    // Too old for max-age=0: a miss, a call; its answer replaces the entry.
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'max-age=0' }))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(2)
    await flushed(env)
    // The new entry is young enough for max-age=1.
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'max-age=1' }))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(2)
  })

  test('only-if-cached: a miss is 504 cache_miss in the key\'s envelope without a call; a hit is served', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const messagesKey = await cachedKey(env, { api_shape: 'messages' })
    const onlyCached = { 'cache-control': 'only-if-cached' }

    const refused = await chat(env, key, {}, onlyCached)
    expect(refused.status).toBe(504)
    expect(refused.headers.get('x-router-cache')).toBe('miss')
    expect(refused.headers.get('x-router-provider')).toBeNull()
    expect(refused.json.error).toMatchObject({ type: 'api_error', code: 'cache_miss' })
    expect(typeof refused.json.error.message).toBe('string')

    const refusedMessages = await messages(env, messagesKey, {}, onlyCached)
    expect(refusedMessages.status).toBe(504)
    expect(refusedMessages.headers.get('x-router-cache')).toBe('miss')
    expect(refusedMessages.json.type).toBe('error')
    expect(refusedMessages.json.error.type).toBe('api_error')
    expect(refusedMessages.json.error.message).toContain('only-if-cached')
    expect(env.mocks.openai!.requests).toHaveLength(0)

    expect(cacheHeaders(await chat(env, key))).toEqual(missHeaders)
    await flushed(env)
    const served = await chat(env, key, {}, onlyCached)
    expect(cacheHeaders(served)).toEqual(hitHeaders)
    expect(served.json.choices[0].message.content).toBe(ANSWER)
    // With max-age too: the entry is fresh enough.
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'only-if-cached, max-age=60' }))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(1)
  })
})

describe('what makes two requests the same', () => {
  test('a different system prompt, tools list, temperature or model misses; user, metadata, stream, stream_options, store, field order and synonyms still hit', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const tool = (name: string) => ({ type: 'function', function: { name, description: 'A tool.', parameters: { type: 'object', properties: {} } } })
    const base = { messages: [{ role: 'system', content: 'Be brief.' }, ...hi], tools: [tool('lookup')], temperature: 0.2 }
    expect(cacheHeaders(await chat(env, key, base))).toEqual(missHeaders)
    await flushed(env)
    expect(chatCalls(env)).toBe(1)

    const misses: [string, Record<string, unknown>][] = [
      ['system prompt', { messages: [{ role: 'system', content: 'Be verbose.' }, ...hi] }],
      ['no system prompt', { messages: hi }],
      ['tools', { tools: [tool('search')] }],
      ['more tools', { tools: [tool('lookup'), tool('search')] }],
      ['temperature', { temperature: 0.3 }],
      ['model', { model: 'openai/gpt-4.1' }],
      ['max_tokens', { max_tokens: 99 }],
      ['question', { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }] }],
    ]
    for (const [what, change] of misses) {
      const answer = await chat(env, key, { ...base, ...change })
      expect([what, answer.headers.get('x-router-cache')]).toEqual([what, 'miss'])
    }
    expect(chatCalls(env)).toBe(1 + misses.length)

    const hits: [string, Record<string, unknown>][] = [
      ['user', { user: 'someone' }],
      ['metadata', { metadata: { trace: 'abc' } }],
      ['store', { store: true }],
      ['stream', { stream: true }],
      ['stream_options', { stream: true, stream_options: { include_usage: true } }],
      // Synonyms: one choice is the default; a developer message is what a system one becomes upstream.
      ['n: 1', { n: 1 }],
      ['developer role', { messages: [{ role: 'developer', content: 'Be brief.' }, ...hi] }],
      ['text parts', { messages: [{ role: 'system', content: [{ type: 'text', text: 'Be ' }, { type: 'text', text: 'brief.' }] }, ...hi] }],
    ]
    for (const [what, change] of hits) {
      const answer = await chat(env, key, { ...base, ...change })
      expect([what, answer.headers.get('x-router-cache')]).toEqual([what, 'hit'])
    }
    // The same fields in another order, sent as raw JSON text.
    const reordered = `{"temperature":0.2,"tools":${JSON.stringify(base.tools)},"max_tokens":100,"messages":${JSON.stringify(base.messages)},"model":"${MODEL}"}`
    const inOrder = await httpCall(env.server, 'POST', '/v1/chat/completions', reordered, { ...bearerHeader(key.secret), 'content-type': 'application/json' })
    expect(cacheHeaders(inOrder)).toEqual(hitHeaders)
    // A tool's schema with its keys in another order is the same tool.
    const reorderedTool = { function: { parameters: { properties: {}, type: 'object' }, description: 'A tool.', name: 'lookup' }, type: 'function' }
    expect(cacheHeaders(await chat(env, key, { ...base, tools: [reorderedTool] }))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(1 + misses.length)
  })
})
