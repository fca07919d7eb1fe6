/**
 * How a begun stream ends (issue 37 items 11 and 12; SPEC "Stream events"), against a scripted
 * upstream on 127.0.0.1 that sends a recorded or written stream and then either ends its body or
 * keeps the connection open. A stream whose every choice gave its finish reason is complete without
 * `[DONE]` (the chat client gets one), on every path; an error event ends the client's stream at
 * once with the dialect's in-stream error, and the router lets the upstream go. RT_STREAM_IDLE_MS is
 * set far above the test timeout, so nothing here is ended by the idle limit.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'
import { expectResponsesGrammar, parseClientSse } from '../harness/client-sse'
import { gatewayOverrideSlug } from '../../src/gateways/catalog'

const recorded = join(import.meta.dir, '..', '..', '..', 'shared', 'fixtures', 'upstream')
const haveRecorded = existsSync(join(recorded, 'openai-chat')) && existsSync(join(recorded, 'openai-responses'))
if (!haveRecorded) console.log(`note: ${recorded} is absent; the recorded-stream cases of stream-endings are skipped.`)
const recordedText = (family: string, file: string) => readFileSync(join(recorded, family, file), 'utf8')
/** `.chunks.jsonl` keeps one `data:` payload per line; framed back into SSE. */
const jsonlAsSse = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => `data: ${line}\n\n`)
    .join('')

/** Far above the test timeout: a stream that waits for it fails the test. */
const idleMs = 60_000
/** An error ends the stream at once. */
const errorEndsWithinMs = 1000
/** A whole answer whose upstream keeps the connection open is let go after the grace (2 s). */
const answeredEndsWithinMs = 3500

// ---------------------------------------------------------------------------------------------
// The scripted upstream

interface Script {
  /** The SSE body sent, in pieces. */
  body: string
  /** Then: keep the connection open until the router lets go (`hold`), or end the body. */
  then: 'hold' | 'end'
}

interface ScriptedGateway {
  url: string
  /** Paths requested, in order. */
  paths: string[]
  /** Streams the router let go of before their end (a held stream the router closed). */
  readonly cancelled: number
  waitForCancelled(count: number): Promise<void>
  use(script: Script): void
  close(): void
}

/** A real Bun.serve on 127.0.0.1: each request gets the script's body, cut into 61-byte pieces. */
function startScriptedGateway(): ScriptedGateway {
  let script: Script = { body: '', then: 'end' }
  let cancelled = 0
  const waiters: { count: number; resolve: () => void }[] = []
  const paths: string[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    // Held streams are the point: Bun's own idle cut would end them.
    idleTimeout: 0,
    development: false,
    async fetch(request) {
      await request.text()
      paths.push(new URL(request.url).pathname)
      const { body, then } = script
      const bytes = new TextEncoder().encode(body)
      let offset = 0
      let release: () => void = () => {}
      const letGo = new Promise<void>((resolve) => (release = resolve))
      let open = true
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (offset < bytes.length) {
            controller.enqueue(bytes.slice(offset, offset + 61))
            offset += 61
            return
          }
          if (then === 'hold') return letGo
          open = false
          controller.close()
        },
        cancel() {
          if (!open) return
          open = false
          cancelled++
          for (const waiter of waiters.splice(0)) {
            if (cancelled >= waiter.count) waiter.resolve()
            else waiters.push(waiter)
          }
          release()
        },
      })
      return new Response(stream, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    paths,
    get cancelled() {
      return cancelled
    },
    waitForCancelled(count) {
      if (cancelled >= count) return Promise.resolve()
      return new Promise((resolve) => waiters.push({ count, resolve }))
    },
    use(next) {
      script = next
    },
    close: () => server.stop(true),
  }
}

// ---------------------------------------------------------------------------------------------
// Streams

const base = { id: 'chatcmpl-end', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'acme/fx-1' }
const chatRecord = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`
const delta = (content: string, index = 0) => chatRecord([{ index, delta: { content }, finish_reason: null }])
const roleChunk = (index = 0) => chatRecord([{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }])
const finishChunk = (index = 0) => chatRecord([{ index, delta: {}, finish_reason: 'stop' }])
const usageChunk = chatRecord([], { usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 } })
/** A whole chat answer: role, text, the finish chunk and a usage-only chunk; no [DONE]. */
const answeredChat = roleChunk() + delta('Hel') + delta('lo!') + finishChunk() + usageChunk
/** The same answer cut before its finish. */
const unfinishedChat = roleChunk() + delta('Hel') + delta('lo!')

/** A whole Responses stream (response.completed last, no [DONE]). */
const answeredResponses = () => recordedText('openai-responses', 'stream-text.sse')
/** A Responses stream failing mid-way: created, in_progress, then `error` (response.failed left out). */
function responsesErrorOnly(): string {
  const lines = recordedText('openai-responses', 'stream-error-insufficient-quota.chunks.jsonl').split('\n')
  return jsonlAsSse(lines.filter((line) => !line.includes('"type":"response.failed"')).join('\n'))
}
const responsesErrorThenFailed = () => jsonlAsSse(recordedText('openai-responses', 'stream-error-insufficient-quota.chunks.jsonl'))
const groqError = () => recordedText('openai-chat', 'stream-error-midstream-groq.sse')

// ---------------------------------------------------------------------------------------------
// The server

const kinds = {
  /** Chat and native Responses. */
  native: 'groq',
  /** Responses by translation to chat. */
  translated: 'deepseek',
  /** Only the Responses endpoint: chat is converted to it. */
  only: 'openai-responses',
} as const
type Kind = keyof typeof kinds

const gateways = {} as Record<Kind, ScriptedGateway>
const providers = {} as Record<Kind, string>
let server: TestServer

beforeAll(async () => {
  const overrides: Record<string, string> = {}
  for (const kind of Object.keys(kinds) as Kind[]) {
    gateways[kind] = startScriptedGateway()
    overrides[`RT_GATEWAY_URL_${gatewayOverrideSlug(kinds[kind])}`] = gateways[kind].url
  }
  server = await startTestServer({ ...overrides, RT_STREAM_IDLE_MS: String(idleMs) })
  for (const kind of Object.keys(kinds) as Kind[]) providers[kind] = (await storeProvider(server, { gateway: kinds[kind], key: `sk-${kind}-0123456789abcdef` })).id
})

afterAll(async () => {
  await server?.[Symbol.asyncDispose]()
  for (const gateway of Object.values(gateways)) gateway.close()
})

beforeEach(() => {
  for (const gateway of Object.values(gateways)) gateway.paths.length = 0
})

async function keyFor(kind: Kind, shape = 'chat'): Promise<string> {
  const key = await createInferenceKey(server, { api_shape: shape, routing: { strategy: 'priority', targets: [{ provider_key_id: providers[kind] }] } })
  return key.key as string
}

const chat = (secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], stream: true, ...extra }, bearerHeader(secret))
const responses = (secret: string) => httpCall(server, 'POST', '/v1/responses', { model: 'openai/gpt-4o-mini', input: 'Hi', stream: true }, bearerHeader(secret))
const messages = (secret: string) =>
  httpCall(server, 'POST', '/v1/messages', { model: 'anthropic/claude-fx', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': secret })

/** The call, and how long it took to read whole. */
async function timed(call: () => Promise<CallResult>): Promise<CallResult & { elapsed: number }> {
  const started = performance.now()
  const result = await call()
  return { ...result, elapsed: performance.now() - started }
}

/** The request-log row of a stream, once its end has been logged. */
async function streamLogRow(result: CallResult): Promise<any> {
  for (let tries = 0; tries < 200; tries++) {
    server.runtime.logQueue.flush()
    const row = server.runtime.storage.sqlite.query('select * from request_logs where id = ?').get(result.headers.get('x-router-request-id'))
    if (row) return row
    await Bun.sleep(10)
  }
  throw new Error('no log row')
}

/** Chat SSE records as the client sees them (`[DONE]` as the string). */
const chatRecords = (text: string): any[] => parseClientSse(text).map((event) => event.data)

function expectChatComplete(result: CallResult, content: string) {
  expect(result.status).toBe(200)
  const records = chatRecords(result.text)
  expect(records.at(-1)).toBe('[DONE]')
  expect(records.filter((record) => record === '[DONE]')).toHaveLength(1)
  expect(result.text).not.toContain('"error"')
  const streamed = records
    .filter((record) => record !== '[DONE]')
    .map((record) => record.choices?.[0]?.delta?.content ?? '')
    .join('')
  expect(streamed).toBe(content)
  return records
}

function expectChatAborted(result: CallResult) {
  expect(result.status).toBe(200)
  const records = chatRecords(result.text)
  expect(records).not.toContain('[DONE]')
  expect(records.at(-1)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'stream_aborted' } })
  expect(records.filter((record) => record?.error?.code === 'stream_aborted')).toHaveLength(1)
  return records
}

// =============================================================================================
// Item 11: a complete stream is complete

describe('a stream whose every choice finished is complete without [DONE]', () => {
  test('chat pass-through, closed after the finish and usage chunks: the records as sent, then one [DONE]; logged a success with its usage', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: answeredChat, then: 'end' })
    const result = await chat(secret)
    const records = expectChatComplete(result, 'Hello!')
    expect(result.text).toBe(answeredChat + 'data: [DONE]\n\n')
    expect(records.at(-2).usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 })
    const row = await streamLogRow(result)
    expect(row.status).toBe(200)
    expect(row.error_code).toBeNull()
    expect(row.input_tokens).toBe(9)
    expect(row.output_tokens).toBe(3)

    // Without a finish reason it is still a break.
    gateways.native.use({ body: unfinishedChat, then: 'end' })
    const cut = await chat(secret)
    expectChatAborted(cut)
    expect((await streamLogRow(cut)).error_code).toBe('stream_aborted')
  })

  test('chat pass-through, the connection held open after the finish: ended promptly with [DONE], the upstream let go, logged a success', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: answeredChat, then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => chat(secret))
    expect(result.text).toBe(answeredChat + 'data: [DONE]\n\n')
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    await gateways.native.waitForCancelled(cancelled + 1)
    const row = await streamLogRow(result)
    expect(row.error_code).toBeNull()
    expect(row.output_tokens).toBe(3)
  })

  test.skipIf(!haveRecorded)('chat pass-through, a recorded stream with usage on its finish chunk (deepseek) and no [DONE], held open: complete, usage logged', async () => {
    const secret = await keyFor('native')
    const text = recordedText('openai-chat', 'stream-reasoning-content-deepseek.sse')
    const body = text.slice(0, text.indexOf('data: [DONE]'))
    gateways.native.use({ body, then: 'hold' })
    const result = await timed(() => chat(secret))
    expect(result.text).toBe(body + 'data: [DONE]\n\n')
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    const row = await streamLogRow(result)
    expect(row.error_code).toBeNull()
    expect(row.input_tokens).toBe(6)
    expect(row.output_tokens).toBe(212)
  })

  test('chat pass-through with n = 2: complete only once both choices finished', async () => {
    const secret = await keyFor('native')
    const both = roleChunk(0) + roleChunk(1) + delta('A', 0) + delta('B', 1) + finishChunk(0) + finishChunk(1)
    gateways.native.use({ body: both, then: 'end' })
    const whole = await chat(secret, { n: 2 })
    expect(whole.text).toBe(both + 'data: [DONE]\n\n')
    expect((await streamLogRow(whole)).error_code).toBeNull()

    gateways.native.use({ body: roleChunk(0) + roleChunk(1) + delta('A', 0) + delta('B', 1) + finishChunk(0), then: 'end' })
    const half = await chat(secret, { n: 2 })
    expectChatAborted(half)
    expect((await streamLogRow(half)).error_code).toBe('stream_aborted')
  })

  test('an upstream without a trailing blank line: our [DONE] is still a record of its own', async () => {
    const secret = await keyFor('native')
    const body = answeredChat.slice(0, -2)
    gateways.native.use({ body, then: 'end' })
    const result = await chat(secret)
    expect(result.text).toBe(body + '\n\ndata: [DONE]\n\n')
    expectChatComplete(result, 'Hello!')
  })

  test('messages (translated from chat), held open after the finish: message_stop promptly with the usage, the upstream let go, a success', async () => {
    const secret = await keyFor('native', 'messages')
    gateways.native.use({ body: answeredChat, then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => messages(secret))
    expect(result.status).toBe(200)
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    const events = parseClientSse(result.text)
    expect(events.at(-1)!.event).toBe('message_stop')
    expect(events.some((event) => event.event === 'error')).toBe(false)
    expect(events.find((event) => event.event === 'message_delta')!.data.usage).toEqual({ input_tokens: 9, output_tokens: 3 })
    await gateways.native.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBeNull()

    // Closed after the finish, no [DONE]: the same ending, at once.
    gateways.native.use({ body: answeredChat, then: 'end' })
    const closed = parseClientSse((await messages(secret)).text)
    expect(closed.at(-1)!.event).toBe('message_stop')
  })

  test('Responses by translation (chat upstream), held open after the finish: response.completed promptly, the upstream let go', async () => {
    const secret = await keyFor('translated')
    gateways.translated.use({ body: answeredChat, then: 'hold' })
    const cancelled = gateways.translated.cancelled
    const result = await timed(() => responses(secret))
    expect(result.headers.get('x-router-responses-mode')).toBe('translated')
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.at(-1)!.event).toBe('response.completed')
    expect(events.at(-1)!.data.response.usage.output_tokens).toBe(3)
    await gateways.translated.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBeNull()
  })

  test.skipIf(!haveRecorded)('chat from the responses-only kind, held open after response.completed: [DONE] promptly, the upstream let go', async () => {
    const secret = await keyFor('only')
    gateways.only.use({ body: answeredResponses(), then: 'hold' })
    const cancelled = gateways.only.cancelled
    const result = await timed(() => chat(secret))
    expect(gateways.only.paths).toEqual(['/responses'])
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    expectChatComplete(result, 'This is a test.')
    await gateways.only.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBeNull()
  })

  test.skipIf(!haveRecorded)('Responses, native relay, held open after response.completed: ended promptly, the upstream let go, a success', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: answeredResponses(), then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => responses(secret))
    expect(result.headers.get('x-router-responses-mode')).toBe('native')
    expect(result.elapsed).toBeLessThan(answeredEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.at(-1)!.event).toBe('response.completed')
    await gateways.native.waitForCancelled(cancelled + 1)
    const row = await streamLogRow(result)
    expect(row.error_code).toBeNull()
    expect(row.output_tokens).toBe(6)
  })
})

// =============================================================================================
// Item 12: an error event ends a stream when it arrives

describe.skipIf(!haveRecorded)('an error event mid-stream ends the client stream at once and lets the upstream go', () => {
  test('chat pass-through (stream-error-midstream-groq.sse, then held open): the records and the error as sent, then one stream_aborted record', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: groqError(), then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => chat(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const records = expectChatAborted(result)
    expect(result.text.startsWith(groqError())).toBe(true)
    expect(records.at(-2).error.code).toBe('tool_use_failed')
    await gateways.native.waitForCancelled(cancelled + 1)
    const row = await streamLogRow(result)
    expect(row.status).toBe(200)
    expect(row.error_code).toBe('stream_aborted')
  })

  test('messages (translated from chat), the groq error held open: event: error at once, no message_stop', async () => {
    const secret = await keyFor('native', 'messages')
    gateways.native.use({ body: groqError(), then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => messages(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const events = parseClientSse(result.text)
    expect(events.at(-1)).toEqual({ event: 'error', data: { type: 'error', error: { type: 'api_error', message: expect.stringContaining('Tool call validation failed') } } })
    expect(events.some((event) => event.event === 'message_stop')).toBe(false)
    await gateways.native.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses by translation, the groq error held open: error then response.failed at once', async () => {
    const secret = await keyFor('translated')
    gateways.translated.use({ body: groqError(), then: 'hold' })
    const cancelled = gateways.translated.cancelled
    const result = await timed(() => responses(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.at(-1)!.event).toBe('response.failed')
    await gateways.translated.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses, native relay: an error event held open (no response.failed after it) ends at once with the error and a terminal response.failed', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: responsesErrorOnly(), then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => responses(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.map((event) => event.event)).toEqual(['response.created', 'response.in_progress', 'error', 'response.failed'])
    expect(events[2]!.data.error.code).toBe('insufficient_quota')
    expect(events[3]!.data.response.error.code).toBe('insufficient_quota')
    expect(events[3]!.data.response.id).toStartWith('resp_rt_')
    await gateways.native.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses, native relay: the recorded error and response.failed, held open: the same events, ended at once', async () => {
    const secret = await keyFor('native')
    gateways.native.use({ body: responsesErrorThenFailed(), then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => responses(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.map((event) => event.event)).toEqual(['response.created', 'response.in_progress', 'error', 'response.failed'])
    await gateways.native.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('Responses, native relay: an error as the first event, held open: response.created first, then the error and response.failed, at once', async () => {
    const secret = await keyFor('native')
    const error = { type: 'error', sequence_number: 0, error: { type: 'rate_limit_exceeded', code: 'rate_limit_exceeded', message: 'Slow down.', param: null } }
    gateways.native.use({ body: `event: error\ndata: ${JSON.stringify(error)}\n\n`, then: 'hold' })
    const cancelled = gateways.native.cancelled
    const result = await timed(() => responses(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const events = parseClientSse(result.text)
    expectResponsesGrammar(events)
    expect(events.map((event) => event.event)).toEqual(['response.created', 'error', 'response.failed'])
    expect(events[1]!.data.error).toMatchObject({ code: 'rate_limit_exceeded', message: 'Slow down.' })
    await gateways.native.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })

  test('chat from the responses-only kind: the recorded error held open ends at once with one stream_aborted record', async () => {
    const secret = await keyFor('only')
    gateways.only.use({ body: responsesErrorThenFailed(), then: 'hold' })
    const cancelled = gateways.only.cancelled
    const result = await timed(() => chat(secret))
    expect(result.elapsed).toBeLessThan(errorEndsWithinMs)
    const records = expectChatAborted(result)
    expect(records.filter((record) => record?.error)).toHaveLength(1)
    expect(records.at(-1).error.message).toContain('exceeded your current quota')
    await gateways.only.waitForCancelled(cancelled + 1)
    expect((await streamLogRow(result)).error_code).toBe('stream_aborted')
  })
})
