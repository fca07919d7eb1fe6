/**
 * Mid-stream continuation (CONTRACT §16), chat shape, against scripted upstreams on 127.0.0.1: a
 * stream that breaks after its first byte (cut, an error event, a stall, an unreadable record, a
 * UTF-8 character or a record split by the break) goes on at the plan's next target with the text
 * already sent as the partial turn; the client sees one stream (same id, one seam comment, one end,
 * the text whole, the repeat removed); a prefill goes only where the catalog says the gateway takes
 * one, and a model that rejects it is asked again without; no continuation inside a tool call or a
 * reasoning block, after `max_hops`, or without the setting. The row lists every attempt.
 */
import { describe, expect, test } from 'bun:test'
import type { TestServer } from '../harness/server'
import { logRowOf } from '../harness/request-log'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { parseClientSse } from '../harness/client-sse'
import { continueInstruction } from '../../src/pipeline/stages/continuation/request'
import { chatStream, sseRecord, useScriptedService, withoutComments, type ScriptGateway } from '../harness/script-gateway'

/** Gateway kinds by how they take a prefill (catalog data): none, a trailing assistant message. */
const kinds = { first: 'together', plain: 'fireworks', prefill: 'openrouter' } as const
type Kind = keyof typeof kinds
const idleMs = 1000

let gateways: Record<Kind, ScriptGateway>
let providers: Record<Kind, string>
let server: TestServer
useScriptedService(kinds, (service) => void ({ server, gateways, providers } = service), { RT_STREAM_IDLE_MS: String(idleMs) })

async function keyFor(targets: Kind[], continuation: unknown = { max_hops: 1 }, shape = 'chat'): Promise<string> {
  const key = await createInferenceKey(server, { api_shape: shape, continuation, routing: { strategy: 'priority', targets: targets.map((kind) => ({ provider_key_id: providers[kind] })) } })
  return key.key as string
}

const question = [{ role: 'user', content: 'Tell me about the sea.' }]
const chat = (secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: question, stream: true, ...extra }, bearerHeader(secret))

/** The client's chat records, and its comment lines. */
function chatOf(result: CallResult) {
  const records = parseClientSse(withoutComments(result.text).text).map((event) => event.data)
  const chunks = records.filter((record): record is any => typeof record === 'object' && record !== null && !record.error)
  const text = chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').join('')
  const comments = result.text.split('\n').filter((line) => line.startsWith(':'))
  return { records, chunks, text, comments }
}

const broken = (texts: string[]) => ({ pieces: chatStream(texts, { id: 'chatcmpl-first' }), then: 'cut' as const })
const whole = (texts: string[], usage = { prompt_tokens: 30, completion_tokens: 7 }) => ({ pieces: chatStream(texts, { id: 'chatcmpl-second', finish: 'stop', usage }) })

/** Expects one clean chat stream: one id, text whole, one seam comment per hop, one finish and [DONE], no error. */
function expectOneStream(result: CallResult, text: string, seams: string[]) {
  expect(result.status).toBe(200)
  const { records, chunks, comments } = chatOf(result)
  expect(chatOf(result).text).toBe(text)
  expect(comments).toEqual(seams.map((seam) => `: router-continued ${seam}`))
  expect(records.filter((record) => typeof record === 'object' && record?.error)).toEqual([])
  expect(records.at(-1)).toBe('[DONE]')
  expect(new Set(chunks.map((chunk) => chunk.id))).toEqual(new Set(['chatcmpl-first']))
  expect(chunks.filter((chunk) => chunk.choices?.[0]?.finish_reason)).toHaveLength(1)
  return chunks
}

describe('a chat stream that breaks in text goes on at the next target', () => {
  test('cut after two chunks: the rest from the next target, one stream; its request carries the partial turn and the request for the rest (no prefill there)', async () => {
    const secret = await keyFor(['first', 'plain'])
    gateways.first.use(() => broken(['The sea ', 'is ']))
    gateways.plain.use(() => whole(['deep and ', 'blue.']))
    const result = await chat(secret, { stream_options: { include_usage: true } })
    const chunks = expectOneStream(result, 'The sea is deep and blue.', ['1 together fireworks'])
    expect(chunks.at(-1).usage).toEqual({ prompt_tokens: 30, completion_tokens: 7, total_tokens: 37 })
    const sent = gateways.plain.requests[0]!.body.messages
    expect(sent).toEqual([...question, { role: 'assistant', content: 'The sea is ' }, { role: 'user', content: continueInstruction }])
    const row = await logRowOf(server, result)
    expect(row.status).toBe(200)
    expect(row.error_code).toBeNull()
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.attempts).toBe(2)
    expect(row.continued).toBe(1)
    const metrics = await (await fetch(`${server.rootUrl}/metrics`)).text()
    expect(metrics).toMatch(/router_stream_continuations_total\{result="continued"\} [1-9]/)
  })

  test('an error event, a stall past the idle limit and an unreadable record are breaks like a cut', async () => {
    const secret = await keyFor(['first', 'plain'])
    gateways.plain.use(() => whole(['and blue.']))
    const cases = [
      { why: 'error', pieces: [...chatStream(['The sea is deep '], { id: 'chatcmpl-first' }), sseRecord({ error: { message: 'overloaded' } })], then: 'hold' as const },
      { why: 'stalled', pieces: chatStream(['The sea is deep '], { id: 'chatcmpl-first' }), then: 'hold' as const },
      { why: 'malformed', pieces: [...chatStream(['The sea is deep '], { id: 'chatcmpl-first' }), 'data: {"choices": [ not json\n\n'], then: 'hold' as const },
    ]
    for (const { why, pieces, then } of cases) {
      gateways.first.use(() => ({ pieces, then }))
      const result = await chat(secret)
      expectOneStream(result, 'The sea is deep and blue.', ['1 together fireworks'])
      expect((await logRowOf(server, result)).attempt_path).toBe(`together:mid_stream_${why}>fireworks:ok`)
    }
  })

  test('a break that splits a UTF-8 character or an SSE record: the half is never shown, the continuation brings it whole', async () => {
    const secret = await keyFor(['first', 'plain'])
    const record = new TextEncoder().encode(chatStream(['Grüß'], { id: 'chatcmpl-first' })[1]!)
    const cut = record.indexOf(0xc3, record.indexOf(0xc3) + 1) + 1 // inside the ß
    gateways.first.use(() => ({ pieces: [chatStream([], { id: 'chatcmpl-first' })[0]!, chatStream(['Hallo '])[1]!, record.slice(0, cut)], then: 'cut' }))
    gateways.plain.use(() => whole(['Grüße!']))
    const split = await chat(secret)
    expectOneStream(split, 'Hallo Grüße!', ['1 together fireworks'])
    expect(split.text).not.toContain('\ufffd')
    expect(gateways.plain.requests[0]!.body.messages[1]).toEqual({ role: 'assistant', content: 'Hallo ' })
  })

  test('a continuation that repeats the end of the sent text has the repeat removed; one that goes on mid-word keeps its letters', async () => {
    const secret = await keyFor(['first', 'plain'])
    gateways.first.use(() => broken(['The quick brown ', 'fox jum']))
    gateways.plain.use(() => whole(['brown fox ', 'jumps over.']))
    expectOneStream(await chat(secret), 'The quick brown fox jumps over.', ['1 together fireworks'])
    gateways.first.use(() => broken(['I like ap']))
    gateways.plain.use(() => whole(['ples.']))
    expectOneStream(await chat(secret), 'I like apples.', ['1 together fireworks'])
  })

  test('a gateway that takes a prefill gets the partial turn last; a model there that rejects it is asked again without', async () => {
    const secret = await keyFor(['first', 'prefill'])
    gateways.first.use(() => broken(['The sea ']))
    gateways.prefill.use(() => whole(['is wide.']))
    expectOneStream(await chat(secret), 'The sea is wide.', ['1 together openrouter'])
    expect(gateways.prefill.requests[0]!.body.messages).toEqual([...question, { role: 'assistant', content: 'The sea ' }])

    gateways.prefill.requests.length = 0
    gateways.prefill.use((request) =>
      request.body.messages.at(-1).role === 'assistant'
        ? { status: 400, json: { error: { message: 'This model does not support assistant message prefill. The conversation must end with a user message.' } } }
        : whole(['is wide.']),
    )
    const result = await chat(secret)
    expectOneStream(result, 'The sea is wide.', ['1 together openrouter'])
    expect(gateways.prefill.requests.map((request) => request.body.messages.at(-1).role)).toEqual(['assistant', 'user'])
    expect((await logRowOf(server, result)).attempt_path).toBe('together:mid_stream_cut>openrouter:http-400>openrouter:ok')
  })

  test('the only target continues itself', async () => {
    const secret = await keyFor(['first'])
    gateways.first.use((_request, index) => (index === 0 ? broken(['The sea ']) : whole(['is calm.'])))
    const result = await chat(secret)
    expectOneStream(result, 'The sea is calm.', ['1 together together'])
    expect((await logRowOf(server, result)).attempt_path).toBe('together:mid_stream_cut>together:ok')
  })
})

test('a client that goes away after the seam: the continuation’s upstream request is let go', async () => {
  const secret = await keyFor(['first', 'plain'])
  gateways.first.use(() => broken(['The sea ']))
  gateways.plain.use(() => ({ pieces: chatStream(['is '], { id: 'chatcmpl-second' }), then: 'hold' }))
  const before = gateways.plain.cancelled
  const response = await fetch(`${server.rootUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...bearerHeader(secret), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: question, stream: true }),
  })
  const reader = response.body!.getReader()
  let seen = ''
  while (!seen.includes('"is "')) seen += new TextDecoder().decode((await reader.read()).value)
  expect(seen).toContain(': router-continued 1 together fireworks')
  await reader.cancel()
  for (let tries = 0; tries < 100 && gateways.plain.cancelled === before; tries++) await Bun.sleep(10)
  expect(gateways.plain.cancelled).toBe(before + 1)
})

describe('breaks that end the stream as without the setting', () => {
  function expectAborted(result: CallResult) {
    const { records, comments } = chatOf(result)
    expect(records).not.toContain('[DONE]')
    expect(records.at(-1)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'stream_aborted' } })
    expect(comments).toEqual([])
  }

  test('inside a tool call’s arguments, and inside a reasoning block', async () => {
    const secret = await keyFor(['first', 'plain'])
    gateways.plain.use(() => whole(['never']))
    const base = { id: 'chatcmpl-first', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini' }
    const toolPieces = [
      chatStream([], { id: 'chatcmpl-first' })[0]!,
      sseRecord({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q": "se' } }] }, finish_reason: null }] }),
    ]
    gateways.first.use(() => ({ pieces: toolPieces, then: 'cut' }))
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }]
    const tool = await chat(secret, { tools })
    expectAborted(tool)
    gateways.first.use(() => ({ pieces: chatStream([], { id: 'chatcmpl-first', reasoning: ['Let me think ', 'about wa'] }), then: 'cut' }))
    const reasoning = await chat(secret)
    expectAborted(reasoning)
    expect(gateways.plain.requests).toHaveLength(0)
    expect((await logRowOf(server, tool)).attempt_path).toBe('together:mid_stream_cut')
    expect((await logRowOf(server, reasoning)).continued).toBeNull()
    const metrics = await (await fetch(`${server.rootUrl}/metrics`)).text()
    expect(metrics).toMatch(/router_stream_continuations_total\{result="not_text"\} [2-9]/)
  })

  test('two breaks with max_hops 1: the second ends the stream; with max_hops 2 both are continued', async () => {
    gateways.first.use(() => broken(['One, ']))
    gateways.plain.use(() => broken(['two, ']))
    gateways.prefill.use(() => whole(['three.']))
    const once = await keyFor(['first', 'plain', 'prefill'], { max_hops: 1 })
    const cut = await chat(once)
    expect(chatOf(cut).text).toBe('One, two, ')
    expect(chatOf(cut).comments).toEqual([': router-continued 1 together fireworks'])
    expect(chatOf(cut).records.at(-1).error.code).toBe('stream_aborted')
    const row = await logRowOf(server, cut)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:mid_stream_cut')
    expect(row.continued).toBe(1)
    expect(row.error_code).toBe('stream_aborted')

    const twice = await keyFor(['first', 'plain', 'prefill'], { max_hops: 2 })
    const result = await chat(twice)
    expectOneStream(result, 'One, two, three.', ['1 together fireworks', '2 fireworks openrouter'])
    expect(gateways.prefill.requests.at(-1)!.body.messages.at(-1)).toEqual({ role: 'assistant', content: 'One, two, ' })
    expect((await logRowOf(server, result)).continued).toBe(2)
  })

  test('a key without continuation: SPEC’s in-stream error, nothing asked of the next target', async () => {
    const secret = await keyFor(['first', 'plain'], null)
    gateways.first.use(() => broken(['The sea ']))
    gateways.plain.use(() => whole(['never']))
    expectAborted(await chat(secret))
    expect(gateways.plain.requests).toHaveLength(0)
  })
})
