/**
 * Upstream faults (issue 11 items 2, 4 and 8), each reproduced on 127.0.0.1 with the fault gateway:
 * a stream that stalls after it began is ended by the idle limit on every streamed path (SPEC
 * "Stream events", "Timeouts"); a stall before the first byte is the attempt timers' business; a
 * 2xx whose body cannot be used fails over before the first byte and is a mid-stream failure after
 * it; a provider secret an upstream echoes never leaves the service.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { startFaultGateway, startHeadOnlyGateway, type Fault, type FaultGateway } from '../harness/fault-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'
import { expectResponsesGrammar, parseClientSse, type ClientEvent } from '../harness/client-sse'
import { gatewayOverrideSlug } from '../../src/gateways/catalog'
import { redacted, scrubSecret } from '../../src/gateways/scrub-secret'
import { SseRecordCheck } from '../../src/dialects/sse/check-records'

/** The gateway kinds the faults are put on, by what they serve. */
const kinds = {
  /** Chat and native Responses. */
  native: 'groq',
  /** Chat and native Responses, the failover target. */
  backup: 'together',
  /** Responses by translation to chat. */
  translated: 'deepseek',
  /** Only the Responses endpoint: chat is converted to it. */
  only: 'openai-responses',
  /** Embeddings, chat, native Responses and retrieval. */
  full: 'openai',
  /** Embeddings, the failover target. */
  fullBackup: 'openrouter',
} as const
type Kind = keyof typeof kinds

const idleMs = 1000

/** A secret shaped like a real one, different per provider key. */
const secretFor = (kind: Kind) => `sk-proj-${kind}-${'Zq7vX2mB9kLp4RtY8wNc3HsJ6dFg'.repeat(2)}`

const gateways = {} as Record<Kind, FaultGateway>
const providers = {} as Record<Kind, string>
let server: TestServer

beforeAll(async () => {
  for (const kind of Object.keys(kinds) as Kind[]) gateways[kind] = await startFaultGateway()
  const overrides: Record<string, string> = {}
  for (const kind of Object.keys(kinds) as Kind[]) overrides[`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds[kind])}`] = gateways[kind].url
  server = await startTestServer({ ...overrides, RT_STREAM_IDLE_MS: String(idleMs) })
  for (const kind of Object.keys(kinds) as Kind[]) providers[kind] = (await storeProvider(server, { gateway: kinds[kind], key: secretFor(kind) })).id
})

afterAll(async () => {
  await server?.[Symbol.asyncDispose]()
  for (const gateway of Object.values(gateways)) await gateway.close()
})

beforeEach(() => {
  for (const gateway of Object.values(gateways)) {
    gateway.use({ mode: 'ok' })
    gateway.requests.length = 0
  }
})

async function keyFor(targets: Kind[], extra: Record<string, unknown> = {}, shape = 'chat'): Promise<string> {
  const key = await createInferenceKey(server, { api_shape: shape, ...extra, routing: { strategy: 'priority', targets: targets.map((kind) => ({ provider_key_id: providers[kind] })) } })
  return key.key as string
}

const chatBody = (extra: Record<string, unknown> = {}) => ({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], ...extra })
const chat = (secret: string, extra: Record<string, unknown> = {}) => httpCall(server, 'POST', '/v1/chat/completions', chatBody(extra), bearerHeader(secret))
const responses = (secret: string, extra: Record<string, unknown> = {}) => httpCall(server, 'POST', '/v1/responses', { model: 'openai/gpt-4o-mini', input: 'Hi', ...extra }, bearerHeader(secret))
const messages = (secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/messages', { model: 'anthropic/claude-fx', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], ...extra }, { 'x-api-key': secret })

const failover = (result: CallResult) => result.headers.get('x-router-failover')

/** Every request-log row, by request id (the queue flushed first). */
function logRow(result: CallResult): any {
  server.runtime.logQueue.flush()
  return server.runtime.storage.sqlite.query('select * from request_logs where id = ?').get(result.headers.get('x-router-request-id'))
}

/** The log row of a stream, once the stream's end has been logged. */
async function streamLogRow(result: CallResult): Promise<any> {
  for (let tries = 0; tries < 200; tries++) {
    const row = logRow(result)
    if (row) return row
    await Bun.sleep(10)
  }
  throw new Error('no log row')
}

/** Chat SSE records as the client sees them (`[DONE]` as the string). */
function chatRecords(text: string): any[] {
  return parseClientSse(text).map((event) => event.data)
}

function expectStreamAborted(result: CallResult) {
  expect(result.status).toBe(200)
  const records = chatRecords(result.text)
  expect(records).not.toContain('[DONE]')
  expect(records.at(-1)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'stream_aborted' } })
  expect(records.filter((record) => record !== '[DONE]' && record.error)).toHaveLength(1)
  return records
}

function expectResponsesFailed(events: ClientEvent[]) {
  expectResponsesGrammar(events)
  expect(events.at(-2)!.event).toBe('error')
  expect(events.at(-1)!.event).toBe('response.failed')
  expect(events.at(-1)!.data.response.error.code).toBe('stream_aborted')
}

// =============================================================================================
// Item 2: a stream that goes silent after it began

describe('a stream that stalls after it began is ended by RT_STREAM_IDLE_MS', () => {
  test('chat pass-through: two chunks, silence, then one stream_aborted record (no [DONE]); the upstream request is aborted; logged stream_aborted', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'stall', afterChunks: 2 })
    const cancelled = gateways.native.cancelledStreams
    const started = performance.now()
    const result = await chat(secret, { stream: true })
    const elapsed = performance.now() - started
    const records = expectStreamAborted(result)
    expect(records.slice(0, 2).map((record) => record.object)).toEqual(['chat.completion.chunk', 'chat.completion.chunk'])
    expect(records.at(-1).error.message).toContain('idle')
    expect(elapsed).toBeGreaterThanOrEqual(idleMs - 50)
    expect(elapsed).toBeLessThan(idleMs + 1500)
    await gateways.native.waitForCancelled(cancelled + 1)
    const row = await streamLogRow(result)
    expect(row.status).toBe(200)
    expect(row.error_code).toBe('stream_aborted')
  })

  test('messages (translated from chat): event: error, no message_stop', async () => {
    const secret = await keyFor(['native'], {}, 'messages')
    gateways.native.use({ mode: 'stall', afterChunks: 2 })
    const result = await messages(secret, { stream: true })
    expect(result.status).toBe(200)
    const events = parseClientSse(result.text)
    expect(events[0]!.event).toBe('message_start')
    expect(events.at(-1)).toEqual({ event: 'error', data: { type: 'error', error: { type: 'api_error', message: expect.stringContaining('idle') } } })
    expect(events.some((event) => event.event === 'message_stop')).toBe(false)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses, native relay: error then one terminal response.failed', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'stall', afterChunks: 5 })
    const result = await responses(secret, { stream: true })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('native')
    const events = parseClientSse(result.text)
    expectResponsesFailed(events)
    expect(events.some((event) => event.data.type === 'response.output_text.delta')).toBe(true)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses by translation: error then one terminal response.failed', async () => {
    const secret = await keyFor(['translated'])
    gateways.translated.use({ mode: 'stall', afterChunks: 2 })
    const result = await responses(secret, { stream: true })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-responses-mode')).toBe('translated')
    expectResponsesFailed(parseClientSse(result.text))
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('chat from the responses-only kind: one stream_aborted record, no [DONE]; the upstream request is aborted', async () => {
    const secret = await keyFor(['only'])
    gateways.only.use({ mode: 'stall', afterChunks: 5 })
    const cancelled = gateways.only.cancelledStreams
    const result = await chat(secret, { stream: true })
    const records = expectStreamAborted(result)
    expect(records[0].choices[0].delta.role).toBe('assistant')
    await gateways.only.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('a stream whose chunks come more often than the idle limit is never cut, however long it lasts', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'drip', everyMs: idleMs / 4, chunks: 6 })
    const result = await chat(secret, { stream: true })
    const records = chatRecords(result.text)
    expect(records.at(-1)).toBe('[DONE]')
    expect(result.text).not.toContain('stream_aborted')
  })

  test('an endless drip stays open until the client lets go; the hang-up reaches the upstream and is logged 499', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'drip', everyMs: 50 })
    const cancelled = gateways.native.cancelledStreams
    const controller = new AbortController()
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify(chatBody({ stream: true })),
      signal: controller.signal,
    })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    let text = ''
    while (!text.includes('tick3 ')) text += new TextDecoder().decode((await reader.read()).value)
    expect(gateways.native.openStreams).toBeGreaterThanOrEqual(1)
    controller.abort()
    await gateways.native.waitForCancelled(cancelled + 1)
    const row = await streamLogRow({ headers: response.headers } as CallResult)
    expect(row.status).toBe(499)
    expect(row.error_code).toBe('client_closed')
  })

  test('an upstream that holds the connection open after [DONE] is let go at the idle limit with the answer whole', async () => {
    const secret = await keyFor(['native'])
    // role, three pieces, finish, usage, [DONE]: then silence.
    gateways.native.use({ mode: 'stall', afterChunks: 7 })
    const result = await chat(secret, { stream: true })
    expect(result.status).toBe(200)
    expect(chatRecords(result.text).at(-1)).toBe('[DONE]')
    expect(result.text).not.toContain('stream_aborted')
    const row = await streamLogRow(result)
    expect(row.error_code).toBeNull()
    expect(row.output_tokens).toBe(3)
  })
})

describe('the deadline never cuts a stream that has begun; the idle limit does', () => {
  let deadlineServer: TestServer
  let gateway: FaultGateway
  let secret: string

  beforeAll(async () => {
    gateway = await startFaultGateway()
    deadlineServer = await startTestServer({ [`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds.native)}`]: gateway.url, RT_DEADLINE_MS: '1000', RT_STREAM_IDLE_MS: '1000' })
    const provider = await storeProvider(deadlineServer, { gateway: kinds.native, key: secretFor('native') })
    secret = (await createInferenceKey(deadlineServer, { routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })).key
  })

  afterAll(async () => {
    await deadlineServer?.[Symbol.asyncDispose]()
    await gateway?.close()
  })

  test('a stream dripping past the 1 s deadline completes; one stalling past it is ended by the idle limit', async () => {
    gateway.use({ mode: 'drip', everyMs: 300, chunks: 6 })
    const long = await httpCall(deadlineServer, 'POST', '/v1/chat/completions', chatBody({ stream: true }), bearerHeader(secret))
    expect(long.status).toBe(200)
    expect(chatRecords(long.text).at(-1)).toBe('[DONE]')

    gateway.use({ mode: 'stall', afterChunks: 2 })
    const started = performance.now()
    const stalled = await httpCall(deadlineServer, 'POST', '/v1/chat/completions', chatBody({ stream: true }), bearerHeader(secret))
    expectStreamAborted(stalled)
    expect(performance.now() - started).toBeLessThan(3000)
  })

  test('a head with no first byte before the deadline: 504 deadline_exceeded, `deadline` in X-Router-Failover', async () => {
    await using headOnly = await startHeadOnlyGateway()
    await using other = await startTestServer({ [`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds.native)}`]: headOnly.url, RT_DEADLINE_MS: '1000' })
    const provider = await storeProvider(other, { gateway: kinds.native, key: secretFor('native') })
    const key = (await createInferenceKey(other, { routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })).key
    const result = await httpCall(other, 'POST', '/v1/chat/completions', chatBody({ stream: true }), bearerHeader(key))
    expect(result.status).toBe(504)
    expect(result.json.error.code).toBe('deadline_exceeded')
    expect(failover(result)).toBe(`${kinds.native}:deadline`)
    expect(headOnly.requests).toBe(1)
  })
})

describe('a stall before the first byte is the attempt timers’ business', () => {
  test('a head and then nothing: the failover timeout (ttfb_ms) moves on to the next target', async () => {
    await using headOnly = await startHeadOnlyGateway()
    await using other = await startTestServer({
      [`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds.native)}`]: headOnly.url,
      [`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds.backup)}`]: gateways.backup.url,
    })
    const stalled = await storeProvider(other, { gateway: kinds.native, key: secretFor('native') })
    const backup = await storeProvider(other, { gateway: kinds.backup, key: secretFor('backup') })
    const key = (await createInferenceKey(other, { routing: { strategy: 'priority', targets: [{ provider_key_id: stalled.id, ttfb_ms: 1000 }, { provider_key_id: backup.id }] } })).key
    const started = performance.now()
    const result = await httpCall(other, 'POST', '/v1/chat/completions', chatBody({ stream: true }), bearerHeader(key))
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.native}:ttfb-timeout`)
    expect(result.headers.get('x-router-provider')).toBe(kinds.backup)
    expect(chatRecords(result.text).at(-1)).toBe('[DONE]')
    expect(performance.now() - started).toBeLessThan(3000)
  })

  test('no head at all on the last target: the upstream timeout ends it (502, `timeout`)', async () => {
    const secret = await keyFor(['native'], { upstream_timeout_ms: 5000 })
    gateways.native.use({ mode: 'hang' })
    const started = performance.now()
    const result = await chat(secret, { stream: true })
    const elapsed = performance.now() - started
    expect(result.status).toBe(502)
    expect(result.json.error.code).toBe('all_targets_failed')
    expect(failover(result)).toBe(`${kinds.native}:timeout`)
    expect(elapsed).toBeGreaterThanOrEqual(4900)
    expect(elapsed).toBeLessThan(7000)
  }, 10_000)
})

// =============================================================================================
// Item 4: a 2xx whose body cannot be used

describe('a 2xx with an unusable body is a failed attempt', () => {
  const unusableBuffered: { name: string; fault: Fault }[] = [
    { name: 'truncated JSON', fault: { mode: 'truncated' } },
    { name: 'malformed JSON', fault: { mode: 'malformed' } },
    { name: 'an HTML page', fault: { mode: 'html' } },
    { name: 'an empty body', fault: { mode: 'empty' } },
  ]

  test.each(unusableBuffered)('buffered chat, $name: fails over (reason unknown) and the next target serves', async ({ fault }) => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use(fault)
    const result = await chat(secret)
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.native}:unknown`)
    expect(result.headers.get('x-router-provider')).toBe(kinds.backup)
    expect(result.headers.get('x-router-attempts')).toBe('2')
    expect(result.json.choices[0].message.content).toBe('Hello from the fault gateway.')
  })

  test('a JSON object of the wrong kind (an error object, a list) fails over too', async () => {
    const secret = await keyFor(['native', 'backup'])
    for (const body of [{ error: { message: 'upstream trouble' } }, { object: 'list', data: [] }]) {
      gateways.native.use({ mode: 'fixed', body })
      const result = await chat(secret)
      expect(result.status).toBe(200)
      expect(failover(result)).toBe(`${kinds.native}:unknown`)
      expect(result.json.choices[0].message.content).toBe('Hello from the fault gateway.')
    }
  })

  test('every target unusable: 502 upstream_unreadable saying why; mixed with another failure: 502 all_targets_failed', async () => {
    const single = await keyFor(['native'])
    gateways.native.use({ mode: 'html' })
    const alone = await chat(single)
    expect(alone.status).toBe(502)
    expect(alone.json.error.code).toBe('upstream_unreadable')
    expect(alone.json.error.message).toContain('not JSON')
    expect(failover(alone)).toBe(`${kinds.native}:unknown`)

    const pair = await keyFor(['native', 'backup'])
    gateways.backup.use({ mode: 'truncated' })
    const both = await chat(pair)
    expect(both.status).toBe(502)
    expect(both.json.error.code).toBe('upstream_unreadable')
    expect(failover(both)).toBe(`${kinds.native}:unknown,${kinds.backup}:unknown`)

    gateways.native.use({ mode: 'echo-auth', status: 500 })
    const mixed = await chat(pair)
    expect(mixed.status).toBe(502)
    expect(mixed.json.error.code).toBe('all_targets_failed')
    expect(failover(mixed)).toBe(`${kinds.native}:server-error,${kinds.backup}:unknown`)
  })

  test('embeddings: a 200 that is not an embeddings list fails over', async () => {
    const secret = await keyFor(['full', 'fullBackup'])
    gateways.full.use({ mode: 'html' })
    const result = await httpCall(server, 'POST', '/v1/embeddings', { model: 'openai/text-embedding-3-small', input: 'hi' }, bearerHeader(secret))
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.full}:unknown`)
    expect(result.json.data[0].embedding).toEqual([0.1, 0.2, 0.3])
  })

  test('Responses, native and buffered: a 200 that is not a Response object fails over', async () => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use({ mode: 'malformed' })
    const result = await responses(secret)
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.native}:unknown`)
    expect(result.json.object).toBe('response')
    expect(result.json.output[0].content[0].text).toBe('Hello from the fault gateway.')
  })

  test('messages (translated): an HTML 200 fails over; alone it is a 502 in the messages envelope', async () => {
    const pair = await keyFor(['native', 'backup'], {}, 'messages')
    gateways.native.use({ mode: 'html' })
    const served = await messages(pair)
    expect(served.status).toBe(200)
    expect(failover(served)).toBe(`${kinds.native}:unknown`)
    expect(served.json.content[0].text).toBe('Hello from the fault gateway.')

    const single = await keyFor(['native'], {}, 'messages')
    const alone = await messages(single)
    expect(alone.status).toBe(502)
    expect(alone.json).toEqual({ type: 'error', error: { type: 'api_error', message: expect.stringContaining('upstream_unreadable') } })
  })

  const unusableStreamStarts: { name: string; fault: Fault }[] = [
    { name: 'a first record that is not JSON', fault: { mode: 'malformed', afterChunks: 0 } },
    { name: 'an HTML page', fault: { mode: 'html' } },
    { name: 'a JSON document', fault: { mode: 'fixed', body: { id: 'chatcmpl-x', object: 'chat.completion', choices: [] } } },
    { name: 'lines that are not server-sent events', fault: { mode: 'fixed', body: 'Service temporarily unavailable\n', contentType: 'text/plain' } },
    { name: 'an empty body', fault: { mode: 'empty' } },
  ]

  test.each(unusableStreamStarts)('a chat stream starting with $name fails over before anything is sent', async ({ fault }) => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use(fault)
    const result = await chat(secret, { stream: true })
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.native}:unknown`)
    expect(result.headers.get('x-router-provider')).toBe(kinds.backup)
    expect(chatRecords(result.text).at(-1)).toBe('[DONE]')
    expect(result.text).not.toContain('oops')
  })

  test('a chat stream with a record that is not JSON after it began: the records before it, then stream_aborted; the bad record and [DONE] never reach the client', async () => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use({ mode: 'malformed', afterChunks: 2 })
    const result = await chat(secret, { stream: true })
    const records = expectStreamAborted(result)
    expect(records).toHaveLength(3)
    expect(records[1].choices[0].delta.content).toBe('Hel')
    expect(result.text).not.toContain('oops')
    expect(result.headers.get('x-router-failover')).toBeNull()
    expect(gateways.backup.requests).toHaveLength(0)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('usage is recorded for what was served before the stream went bad', async () => {
    const secret = await keyFor(['native'])
    // role, 3 pieces, finish, usage: the bad record comes where [DONE] should.
    gateways.native.use({ mode: 'malformed', afterChunks: 6 })
    const result = await chat(secret, { stream: true })
    const records = expectStreamAborted(result)
    expect(records.at(-2).usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 })
    const row = await streamLogRow(result)
    expect(row.error_code).toBe('stream_aborted')
    expect(row.input_tokens).toBe(9)
    expect(row.output_tokens).toBe(3)
  })

  test('Responses, native stream: an event that is not JSON after it began ends with error then response.failed', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'malformed', afterChunks: 5 })
    const result = await responses(secret, { stream: true })
    expect(result.status).toBe(200)
    const events = parseClientSse(result.text)
    expectResponsesFailed(events)
    expect(events.some((event) => event.data.type === 'response.completed')).toBe(false)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses, native stream: a first event that is not JSON fails over', async () => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use({ mode: 'malformed', afterChunks: 0 })
    const result = await responses(secret, { stream: true })
    expect(result.status).toBe(200)
    expect(failover(result)).toBe(`${kinds.native}:unknown`)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.at(-1)!.event).toBe('response.completed')
  })

  test('chat from the responses-only kind: an unusable first event or body fails over', async () => {
    const secret = await keyFor(['only', 'backup'])
    gateways.only.use({ mode: 'malformed', afterChunks: 0 })
    const streamed = await chat(secret, { stream: true })
    expect(streamed.status).toBe(200)
    expect(failover(streamed)).toBe(`${kinds.only}:unknown`)
    expect(chatRecords(streamed.text).at(-1)).toBe('[DONE]')

    gateways.only.use({ mode: 'html' })
    const buffered = await chat(secret)
    expect(buffered.status).toBe(200)
    expect(failover(buffered)).toBe(`${kinds.only}:unknown`)
    expect(buffered.json.choices[0].message.content).toBe('Hello from the fault gateway.')
  })

  test('a stream cut mid-way (connection reset) is still one stream_aborted record', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'reset', afterChunks: 2 })
    const result = await chat(secret, { stream: true })
    expectStreamAborted(result)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })
})

// =============================================================================================
// Item 8: an upstream that echoes the provider secret

/** Fails when any trace of the secret (whole, an 8-character run, the masked form) is in `text`. */
function expectNoSecret(text: string, secret: string) {
  expect(text).not.toContain(secret)
  for (let start = 0; start + 8 <= secret.length; start++) expect(text).not.toContain(secret.slice(start, start + 8))
  expect(text).not.toContain(secret.slice(-4))
}

describe('a provider secret echoed by an upstream never leaves the service', () => {
  test('chat: a relayed 400 that echoes the key, whole and masked, in its body and a rate-limit header', async () => {
    const secret = await keyFor(['native'])
    gateways.native.use({ mode: 'echo-auth', inHeader: true })
    const result = await chat(secret)
    expect(result.status).toBe(400)
    expect(result.json.error.code).toBe('invalid_api_key')
    expectNoSecret(result.text, secretFor('native'))
    expect(result.json.error.message).toContain(redacted)
    expect(result.json.error.message).toStartWith('Incorrect API key provided: [redacted].')
    const echoed = result.headers.get('x-ratelimit-echo')
    expect(echoed).toBe(`key=${redacted}`)
  })

  test('messages and Responses (translated relay, native relay): the same', async () => {
    gateways.native.use({ mode: 'echo-auth' })
    const onMessages = await messages(await keyFor(['native'], {}, 'messages'))
    expect(onMessages.status).toBe(400)
    expect(onMessages.json.type).toBe('error')
    expectNoSecret(onMessages.text, secretFor('native'))
    expect(onMessages.json.error.message).toContain(redacted)

    const native = await responses(await keyFor(['native']))
    expect(native.status).toBe(400)
    expectNoSecret(native.text, secretFor('native'))

    gateways.translated.use({ mode: 'echo-auth' })
    const translated = await responses(await keyFor(['translated']))
    expect(translated.status).toBe(400)
    expectNoSecret(translated.text, secretFor('translated'))
  })

  test('a final 404 relays the last gateway’s message (model_not_found), scrubbed; a 429 header too', async () => {
    const secret = await keyFor(['native', 'backup'])
    gateways.native.use({ mode: 'echo-auth', status: 404 })
    gateways.backup.use({ mode: 'echo-auth', status: 404, inHeader: true })
    const result = await chat(secret)
    expect(result.status).toBe(404)
    expect(result.json.error.code).toBe('model_not_found')
    expectNoSecret(result.text, secretFor('backup'))
    expect(result.json.error.message).toContain(redacted)

    gateways.native.use({ mode: 'echo-auth', status: 429, inHeader: true })
    gateways.backup.use({ mode: 'echo-auth', status: 429, inHeader: true })
    const limited = await chat(secret)
    expect(limited.status).toBe(429)
    expect(limited.headers.get('x-ratelimit-echo')).toBe(`key=${redacted}`)
  })

  test('GET /v1/responses/{id}: a gateway error relayed from retrieval is scrubbed', async () => {
    const secret = await keyFor(['full'])
    const created = await responses(secret)
    expect(created.status).toBe(200)
    gateways.full.use({ mode: 'echo-auth', inHeader: true })
    const fetched = await httpCall(server, 'GET', `/v1/responses/${created.json.id}`, undefined, bearerHeader(secret))
    expect(fetched.status).toBe(400)
    expectNoSecret(fetched.text, secretFor('full'))
    expect(fetched.headers.get('x-ratelimit-echo')).toBe(`key=${redacted}`)
  })
})

describe('scrubSecret (the rule)', () => {
  const secret = 'sk-proj-Zq7vX2mB9kLp4RtY8wNc3HsJ6dFg'

  test('the whole secret, any run of 8 or more of its characters, and masked echoes are redacted', () => {
    expect(scrubSecret(`Bearer ${secret}`, secret)).toBe(`Bearer ${redacted}`)
    expect(scrubSecret(`key …${secret.slice(10, 20)}… end`, secret)).not.toContain(secret.slice(10, 18))
    expect(scrubSecret(`got ${secret.slice(5, 13)} here`, secret)).toBe(`got ${redacted} here`)
    expect(scrubSecret(`Incorrect API key provided: sk-proj-********************6dFg.`, secret)).toBe(`Incorrect API key provided: ${redacted}.`)
    expect(scrubSecret('Incorrect API key provided: sk-pr...6dFg', secret)).toBe(`Incorrect API key provided: ${redacted}`)
    expect(scrubSecret(`a ${secret} b ${secret}`, secret)).toBe(`a ${redacted} b ${redacted}`)
  })

  test('text without the secret is left as it is; short fragments and unrelated masks stay', () => {
    const text = '{"error":{"message":"Rate limit reached. Try again in 20s... or later","code":"rate_limited"}}'
    expect(scrubSecret(text, secret)).toBe(text)
    expect(scrubSecret('model sk-proj is unknown', secret)).toBe('model sk-proj is unknown')
    expect(scrubSecret('', secret)).toBe('')
  })

  test('a secret with characters JSON escapes is found in its escaped form too', () => {
    const quoted = 'abc"def\\ghijklmnop'
    const body = JSON.stringify({ error: { message: `key ${quoted}` } })
    const scrubbed = scrubSecret(body, quoted)
    expect(scrubbed).not.toContain('ghijklmn')
    expect(JSON.parse(scrubbed).error.message).toContain(redacted)
  })
})

describe('SseRecordCheck (the pass-through relay\'s one reader)', () => {
  const stream = [
    ': keep-alive\n\n',
    'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Grüße ✨"}}]}\n\n',
    'event: message\r\ndata: {"id":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\r\n\r\n',
    'data: [DONE]\n\n',
  ].join('')
  const bytes = new TextEncoder().encode(stream)

  /** Feeds `bytes` cut at `cuts`; returns what would go to the client and the check. */
  function feedInPieces(input: Uint8Array, cuts: number[]) {
    const check = new SseRecordCheck()
    const out: Uint8Array[] = []
    let from = 0
    for (const to of [...cuts, input.byteLength]) {
      const passed = check.feed(input.subarray(from, to))
      if (passed === undefined) return { check, text: undefined }
      out.push(passed)
      from = to
    }
    const last = check.end()
    if (last === undefined) return { check, text: undefined }
    out.push(last)
    return { check, text: new TextDecoder().decode(Buffer.concat(out)) }
  }

  test('split at every byte: the same bytes pass, whole lines only, with [DONE] and the usage read', () => {
    for (let cut = 1; cut < bytes.byteLength; cut++) {
      const { check, text } = feedInPieces(bytes, [cut])
      expect(text).toBe(stream)
      expect(check.sawDone).toBe(true)
      expect(check.usage).toEqual({ prompt_tokens: 4, completion_tokens: 2 })
    }
    const { text } = feedInPieces(bytes, Array.from({ length: bytes.byteLength - 1 }, (_, index) => index + 1))
    expect(text).toBe(stream)
  })

  test('finish reasons: only a non-null finish_reason is read, for each choice; split at every byte', () => {
    const record = (value: string) => `data: ${value}\n\n`
    const first = [
      record('{"id":"c","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null},{"index":1,"delta":{"role":"assistant"},"finish_reason" : null}]}'),
      // A finish reason spelled inside content (escaped) is text, not a finish.
      record('{"id":"c","choices":[{"index":0,"delta":{"content":"say \\"finish_reason\\":\\"stop\\""},"finish_reason":null}]}'),
      record('{"id":"c","choices":[{"index":1,"delta":{},"finish_reason": null},{"index":0,"delta":{},"finish_reason" :\t"stop"}]}'),
    ].join('')
    const second = [record('{"id":"c","choices":[{"index":1,"delta":{},"finish_reason":"length"}]}'), record('{"id":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}')].join('')
    for (const [input, one, two] of [
      [first, true, false],
      [first + second, true, true],
    ] as const) {
      const bytes = new TextEncoder().encode(input)
      for (let cut = 1; cut < bytes.byteLength; cut++) {
        const { check, text } = feedInPieces(bytes, [cut])
        expect(text).toBe(input)
        expect(check.finished(1)).toBe(one)
        expect(check.finished(2)).toBe(two)
        expect(check.finished(3)).toBe(false)
        expect(check.errorReported).toBe(false)
        expect(check.sawDone).toBe(false)
      }
    }
    const unfinished = feedInPieces(new TextEncoder().encode(record('{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}')), [3])
    expect(unfinished.check.finished(1)).toBe(false)
  })

  test('error records: a top-level error is reported (its own abort too); the word in content or a finish reason is not', () => {
    const read = (line: string) => feedInPieces(new TextEncoder().encode(`data: ${line}\n\n`), [7]).check
    const upstream = read('{"error":{"message":"Tool call validation failed","type":"invalid_request_error","code":"tool_use_failed"}}')
    expect([upstream.errorReported, upstream.abortReported]).toEqual([true, false])
    const ours = read('{"error":{"message":"x","type":"api_error","code":"stream_aborted"}}')
    expect([ours.errorReported, ours.abortReported]).toEqual([true, true])
    expect(read('{"error":"overloaded"}').errorReported).toBe(true)
    // OpenRouter: an error with finish_reason "error" on its choice is an error, not a finish.
    const routed = read('{"id":"c","error":{"code":502,"message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}')
    expect([routed.errorReported, routed.finished(1)]).toEqual([true, false])
    expect(read('{"id":"c","choices":[{"index":0,"delta":{"content":"\\"error\\": none"},"finish_reason":null}],"error":null}').errorReported).toBe(false)
    expect(read('{"id":"c","choices":[{"index":0,"delta":{},"content_filter_results":{"error":{"code":"x"}},"finish_reason":"stop"}]}').errorReported).toBe(false)
  })

  test('a record that is not JSON, a line that is not SSE, or a record cut at the end is refused; nothing of it passes', () => {
    for (const bad of ['data: {"id":"c",oops}\n\n', '<html>\n', 'data: {"id":"c","choices":[']) {
      const input = new TextEncoder().encode(stream.replace('data: [DONE]\n\n', '') + bad)
      for (const cut of [1, input.byteLength - bad.length, input.byteLength - 3]) {
        const { check, text } = feedInPieces(input, [cut])
        expect(text).toBeUndefined()
        expect(check.problem).toBeString()
      }
    }
  })
})
