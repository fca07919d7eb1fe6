/**
 * The dialect translators on their own (SPEC "POST /messages", "POST /messages/count_tokens",
 * "POST /responses", "POST /chat/completions" responses-only paragraph, "Stream events"; STYLE 5
 * and 8): our hand-written transcripts replayed whole, in small pieces and split at every byte and
 * compared with the expected client transcripts; the recorded vendor transcripts through the
 * decoders; the buffered and request converters; the count_tokens estimate; the ping after silence.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { deflateSync } from 'node:zlib'
import { decodeChatStream } from '../../src/dialects/chat/decode-stream'
import { encodeChatStream } from '../../src/dialects/chat/encode-stream'
import { readChatCompletion, writeChatCompletion } from '../../src/dialects/chat/convert-response'
import { encodeMessagesStream, pingAfterSilenceMs } from '../../src/dialects/messages/encode-stream'
import { writeMessage } from '../../src/dialects/messages/convert-response'
import { messagesToChat, validateMessagesBody } from '../../src/dialects/messages/convert-request'
import { estimateInputTokens } from '../../src/dialects/messages/count-tokens'
import { contentToChat } from '../../src/dialects/content/convert-request'
import { writeGenerateContentResponse } from '../../src/dialects/content/convert-response'
import { chatToResponses, responsesToChat } from '../../src/dialects/responses/convert-request'
import { readResponseObject, writeResponseObject, type ResponseShell } from '../../src/dialects/responses/convert-response'
import { decodeResponsesStream } from '../../src/dialects/responses/decode-stream'
import { encodeResponsesStream } from '../../src/dialects/responses/encode-stream'
import { answeredStreamGraceMs, breakSafe, UpstreamEnding, upstreamBroke, type ByteChunk, type StreamPart } from '../../src/dialects/stream-parts'
import { SseRecordCheck } from '../../src/dialects/sse/check-records'
import type { UpstreamBody } from '../../src/dialects/upstream-body'
import type { AssistantResult } from '../../src/dialects/assistant-result'
import { RouterError } from '../../src/errors/router-error'
import { expectResponsesGrammar, parseClientSse, type ClientEvent } from '../harness/client-sse'

const fixtures = join(import.meta.dir, '..', 'fixtures')
const recorded = join(import.meta.dir, '..', '..', '..', 'shared', 'fixtures', 'upstream')
const encoder = new TextEncoder()

const fixtureBytes = (path: string) => new Uint8Array(readFileSync(join(fixtures, path)))
const fixtureText = (path: string) => readFileSync(join(fixtures, path), 'utf8')
const fixtureJson = (path: string) => JSON.parse(fixtureText(path))

// ---------------------------------------------------------------------------------------------
// Stream plumbing

type Translator = { decode: () => TransformStream<ByteChunk, StreamPart>; encode: () => TransformStream<StreamPart, Uint8Array> }

async function translate(chunks: readonly ByteChunk[], translator: Translator): Promise<string> {
  const source = new ReadableStream<ByteChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk)
      controller.close()
    },
  })
  return new Response(source.pipeThrough(translator.decode()).pipeThrough(translator.encode())).text()
}

async function decodeParts(chunks: readonly ByteChunk[], decode: () => TransformStream<ByteChunk, StreamPart>): Promise<StreamPart[]> {
  const source = new ReadableStream<ByteChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk)
      controller.close()
    },
  })
  const parts: StreamPart[] = []
  const reader = source.pipeThrough(decode()).getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return parts
    parts.push(value)
  }
}

/** Cuts bytes into pieces whose sizes cycle through `sizes`. */
function pieces(bytes: Uint8Array, sizes: readonly number[] = [1, 2, 3, 5, 7, 11]): Uint8Array[] {
  const out: Uint8Array[] = []
  let offset = 0
  let turn = 0
  while (offset < bytes.length) {
    const size = sizes[turn++ % sizes.length]!
    out.push(bytes.subarray(offset, offset + size))
    offset += size
  }
  return out
}

/** Deterministic pseudo-random piece sizes (1 to 64 bytes). */
function randomPieces(bytes: Uint8Array, seed = 7): Uint8Array[] {
  let state = seed
  const next = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return 1 + (state % 64)
  }
  const out: Uint8Array[] = []
  for (let offset = 0; offset < bytes.length; ) {
    const size = next()
    out.push(bytes.subarray(offset, offset + size))
    offset += size
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Client transcripts: normalisation (the strict framing parse is parseClientSse in the harness)

const genericError = '<error message>'

/**
 * Generated ids (`msg_…`, `rs_…`, `fc_…`) become `<prefix>_<n>` in order of first appearance, and
 * the wording of error messages becomes a placeholder (checked to be a non-empty string first).
 */
function normalise(events: ClientEvent[]): ClientEvent[] {
  const copy: ClientEvent[] = structuredClone(events)
  for (const { event, data } of copy) {
    const holder = data?.type === 'error' && event === 'error' ? (typeof data.message === 'string' ? data : data.error) : typeof data === 'object' && data?.error && !data.type ? data.error : undefined
    if (holder && typeof holder.message === 'string') {
      expect(holder.message.length).toBeGreaterThan(0)
      holder.message = genericError
    }
    // A failed Response carries the same error message as the error event before it.
    const failed = data?.type === 'response.failed' ? data.response?.error : undefined
    if (failed && typeof failed.message === 'string') {
      expect(failed.message.length).toBeGreaterThan(0)
      failed.message = genericError
    }
  }
  const seen = new Map<string, string>()
  const counters = new Map<string, number>()
  const text = JSON.stringify(copy).replace(/\b(msg|rs|fc)_[A-Za-z0-9]+\b/g, (id, prefix: string) => {
    let replacement = seen.get(id)
    if (!replacement) {
      const count = (counters.get(prefix) ?? 0) + 1
      counters.set(prefix, count)
      replacement = `${prefix}_${count}`
      seen.set(id, replacement)
    }
    return replacement
  })
  return JSON.parse(text)
}

const normalisedTranscript = (text: string) => normalise(parseClientSse(text))

function normaliseJson(value: unknown): unknown {
  return normalise([{ data: value }])[0]!.data
}

// ---------------------------------------------------------------------------------------------
// Translators under test

const responseShell: ResponseShell = { id: 'resp_rt_fixture', model: 'acme/fx-1', createdAt: 1_700_000_200, now: () => 1_700_000_201, request: { model: 'acme/fx-1', input: 'hi', stream: true } }

const chatToMessages: Translator = { decode: decodeChatStream, encode: () => encodeMessagesStream('claude-fx', undefined) }
const chatToResponsesStream: Translator = { decode: decodeChatStream, encode: () => encodeResponsesStream(responseShell) }
const responsesToChatStream: Translator = { decode: decodeResponsesStream, encode: () => encodeChatStream({ id: 'chatcmpl-fallback', model: 'gpt-fx' }) }

/** Whole, in small pieces, byte by byte, in random pieces, and split in two at every byte offset. */
async function expectEveryReplay(upstreamPath: string, expectedPath: string, translator: Translator) {
  const bytes = fixtureBytes(upstreamPath)
  const expected = normalisedTranscript(fixtureText(expectedPath))
  expect(normalisedTranscript(await translate([bytes], translator))).toEqual(expected)
  expect(normalisedTranscript(await translate(pieces(bytes), translator))).toEqual(expected)
  expect(normalisedTranscript(await translate(pieces(bytes, [1]), translator))).toEqual(expected)
  expect(normalisedTranscript(await translate(randomPieces(bytes), translator))).toEqual(expected)
  for (let offset = 0; offset <= bytes.length; offset++) {
    const split = [bytes.subarray(0, offset), bytes.subarray(offset)]
    const actual = normalisedTranscript(await translate(split, translator))
    if (!Bun.deepEquals(actual, expected)) {
      // Say where it broke, then show the diff.
      expect(`split at byte ${offset}`).toBe('no split changes the transcript')
      expect(actual).toEqual(expected)
    }
  }
}

// =============================================================================================
// 1. Hand-written transcripts, replayed

describe('chat SSE → messages SSE (decodeChatStream → encodeMessagesStream)', () => {
  for (const name of ['text', 'tool-calls', 'reasoning', 'cut-mid-event', 'error-record']) {
    test(`${name}: whole, in pieces and split at every byte`, async () => {
      await expectEveryReplay(`chat/${name}.upstream.sse`, `chat/${name}.expected-messages.sse`, chatToMessages)
    })
  }

  test('an upstream that breaks off (connection error) ends with one event: error and no message_stop', async () => {
    const bytes = fixtureBytes('chat/text.upstream.sse')
    const cut = Buffer.from(bytes).indexOf('"finish_reason":"stop"')
    expect(cut).toBeGreaterThan(0)
    const events = parseClientSse(await translate([bytes.subarray(0, cut), upstreamBroke], chatToMessages))
    expect(events.filter((event) => event.event === 'error')).toHaveLength(1)
    expect(events.at(-1)!.event).toBe('error')
    expect(events.at(-1)!.data).toEqual({ type: 'error', error: { type: 'api_error', message: expect.any(String) } })
    expect(events.some((event) => event.event === 'message_stop')).toBe(false)
  })

  test('the stop sequence is detected from the tail of the streamed text', async () => {
    const parts: StreamPart[] = [
      { type: 'start', id: 'chatcmpl-s', model: 'm' },
      { type: 'text-delta', delta: 'The list ends here ' },
      { type: 'text-delta', delta: '###' },
      { type: 'finish', reason: 'stop', usage: { inputTokens: 3, outputTokens: 4 } },
    ]
    const events = parseClientSse(await new Response(partsStream(parts).pipeThrough(encodeMessagesStream('claude-fx', ['STOP', '###']))).text())
    const delta = events.find((event) => event.event === 'message_delta')!.data
    expect(delta.delta).toEqual({ stop_reason: 'stop_sequence', stop_sequence: '###' })
    expect(delta.usage).toEqual({ input_tokens: 3, output_tokens: 4 })

    const plain = parseClientSse(
      await new Response(partsStream([parts[0]!, { type: 'text-delta', delta: 'No marker' }, parts[3]!]).pipeThrough(encodeMessagesStream('claude-fx', ['###']))).text(),
    )
    expect(plain.find((event) => event.event === 'message_delta')!.data.delta).toEqual({ stop_reason: 'end_turn', stop_sequence: null })
  })

  test('finish reasons map to stop_reason on streams too', async () => {
    const cases: [StreamPart & { type: 'finish' }, string][] = [
      [{ type: 'finish', reason: 'stop', usage: undefined }, 'end_turn'],
      [{ type: 'finish', reason: 'length', usage: undefined }, 'max_tokens'],
      [{ type: 'finish', reason: 'tool_calls', usage: undefined }, 'tool_use'],
      [{ type: 'finish', reason: 'content_filter', usage: undefined }, 'refusal'],
      [{ type: 'finish', reason: 'refusal', usage: undefined }, 'refusal'],
    ]
    for (const [finish, stopReason] of cases) {
      const events = parseClientSse(await new Response(partsStream([{ type: 'text-delta', delta: 'x' }, finish]).pipeThrough(encodeMessagesStream('claude-fx', undefined))).text())
      expect(events.map((event) => event.event)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
      expect(events[4]!.data.delta.stop_reason).toBe(stopReason)
    }
  })
})

describe('chat SSE → Responses SSE (decodeChatStream → encodeResponsesStream, translated mode)', () => {
  for (const name of ['text', 'tool-calls', 'reasoning', 'cut-mid-event', 'error-record']) {
    test(`${name}: whole, in pieces and split at every byte`, async () => {
      await expectEveryReplay(`chat/${name}.upstream.sse`, `chat/${name}.expected-responses.sse`, chatToResponsesStream)
    })
    test(`${name}: one response.created, one terminal event, continuous sequence_number and output_index`, async () => {
      expectResponsesGrammar(parseClientSse(await translate([fixtureBytes(`chat/${name}.upstream.sse`)], chatToResponsesStream)))
    })
  }

  test('a reasoning-budget exhaustion ends in response.incomplete with max_output_tokens and reasoning_tokens', async () => {
    const parts: StreamPart[] = [
      { type: 'start', id: 'chatcmpl-l', model: 'm' },
      { type: 'finish', reason: 'length', usage: { inputTokens: 12, outputTokens: 100, reasoningTokens: 100 } },
    ]
    const events = parseClientSse(await new Response(partsStream(parts).pipeThrough(encodeResponsesStream(responseShell))).text())
    expectResponsesGrammar(events)
    const terminal = events.at(-1)!.data
    expect(terminal.type).toBe('response.incomplete')
    expect(terminal.response.status).toBe('incomplete')
    expect(terminal.response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(terminal.response.usage.output_tokens_details.reasoning_tokens).toBe(100)
  })
})

describe('Responses SSE → chat SSE (the responses-only gateway kind)', () => {
  for (const name of ['text', 'function-call', 'reasoning-encrypted', 'incomplete', 'error']) {
    test(`${name}: whole, in pieces and split at every byte`, async () => {
      await expectEveryReplay(`responses/${name}.upstream.sse`, `responses/${name}.expected-chat.sse`, responsesToChatStream)
    })
  }

  test('a completed stream ends with data: [DONE]; a failed one ends with one stream_aborted record and no [DONE]', async () => {
    const good = parseClientSse(await translate([fixtureBytes('responses/text.upstream.sse')], responsesToChatStream))
    expect(good.at(-1)!.data).toBe('[DONE]')
    const bad = parseClientSse(await translate([fixtureBytes('responses/error.upstream.sse')], responsesToChatStream))
    expect(bad.some((event) => event.data === '[DONE]')).toBe(false)
    expect(bad.filter((event) => event.data?.error)).toHaveLength(1)
    expect(bad.at(-1)!.data.error.code).toBe('stream_aborted')
  })

  test('encrypted reasoning items are dropped', async () => {
    for (const name of ['reasoning-encrypted', 'incomplete']) {
      const upstream = fixtureText(`responses/${name}.upstream.sse`)
      expect(upstream).toContain('ENCRYPTED-REASONING-BLOB')
      const text = await translate([fixtureBytes(`responses/${name}.upstream.sse`)], responsesToChatStream)
      expect(text).not.toContain('ENCRYPTED-REASONING-BLOB')
      expect(text).not.toContain('encrypted_content')
    }
  })

  test('a stream that ends without a terminal event becomes one stream_aborted record', async () => {
    const full = fixtureText('responses/text.upstream.sse')
    const truncated = full.slice(0, full.indexOf('event: response.completed'))
    const events = parseClientSse(await translate([encoder.encode(truncated)], responsesToChatStream))
    expect(events.some((event) => event.data === '[DONE]')).toBe(false)
    expect(events.at(-1)!.data.error.code).toBe('stream_aborted')
    expect(events.filter((event) => event.data?.error)).toHaveLength(1)
  })
})

function partsStream(parts: readonly StreamPart[]): ReadableStream<StreamPart> {
  return new ReadableStream<StreamPart>({
    start(controller) {
      for (const part of parts) controller.enqueue(part)
      controller.close()
    },
  })
}

// =============================================================================================
// 2. Recorded vendor transcripts through the decoders

interface Summary {
  start: { id?: string; model?: string } | undefined
  text: string
  reasoning: string
  signatures: string[]
  tools: { id: string; name: string; arguments: string }[]
  finish: { reason: string; usage: unknown } | undefined
  error: { message: string; code: string } | undefined
  partsAfterEnd: number
}

function summarise(parts: StreamPart[]): Summary {
  const summary: Summary = { start: undefined, text: '', reasoning: '', signatures: [], tools: [], finish: undefined, error: undefined, partsAfterEnd: 0 }
  for (const part of parts) {
    if (summary.finish || summary.error) summary.partsAfterEnd++
    switch (part.type) {
      case 'start':
        summary.start ??= { id: part.id, model: part.model }
        break
      case 'text-delta':
        summary.text += part.delta
        break
      case 'reasoning-delta':
        summary.reasoning += part.delta
        break
      case 'reasoning-signature':
        summary.signatures.push(part.signature)
        break
      case 'tool-input-start':
        expect(part.index).toBe(summary.tools.length)
        summary.tools.push({ id: part.id, name: part.name, arguments: '' })
        break
      case 'tool-input-delta':
        summary.tools[part.index]!.arguments += part.delta
        break
      case 'finish':
        summary.finish = { reason: part.reason, usage: part.usage }
        break
      case 'error':
        summary.error = { message: part.message, code: part.code }
        break
    }
  }
  return summary
}

/** The JSON payload of every `data:` line of a recorded stream, in order ([DONE] left out): read without the decoders. */
function dataPayloads(text: string): any[] {
  const payloads: any[] = []
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith('data:')) continue
    const payload = line.slice(5).trim()
    if (payload !== '[DONE]') payloads.push(JSON.parse(payload))
  }
  return payloads
}

/** An independent reading of a recorded chat stream: every `data:` line's delta fields, in order. */
function chatOracle(text: string) {
  let content = ''
  let reasoning = ''
  for (const chunk of dataPayloads(text)) {
    const delta = chunk.choices?.[0]?.delta ?? {}
    if (typeof delta.content === 'string') content += delta.content
    const thought = typeof delta.reasoning_content === 'string' ? delta.reasoning_content : typeof delta.reasoning === 'string' ? delta.reasoning : ''
    reasoning += thought
  }
  return { content, reasoning }
}

function responsesOracle(text: string) {
  let content = ''
  let reasoning = ''
  for (const event of dataPayloads(text)) {
    if (event.type === 'response.output_text.delta') content += event.delta
    if (event.type === 'response.reasoning_summary_text.delta' || event.type === 'response.reasoning_text.delta') reasoning += event.delta
  }
  return { content, reasoning }
}

/** `.chunks.jsonl` keeps one `data:` payload per line; framed back into SSE. */
const jsonlAsSse = (text: string) => encoder.encode(text.split('\n').filter((line) => line.trim()).map((line) => `data: ${line}\n\n`).join(''))

function recordedBytes(dialect: string, file: string): Uint8Array {
  const path = join(recorded, dialect, file)
  return file.endsWith('.jsonl') ? jsonlAsSse(readFileSync(path, 'utf8')) : new Uint8Array(readFileSync(path))
}

/** Decodes whole, byte by byte and in random pieces; all three must agree. */
async function decodeRecorded(bytes: Uint8Array, decode: () => TransformStream<ByteChunk, StreamPart>): Promise<StreamPart[]> {
  const whole = await decodeParts([bytes], decode)
  expect(await decodeParts(randomPieces(bytes, 3), decode)).toEqual(whole)
  expect(await decodeParts(pieces(bytes, [1]), decode)).toEqual(whole)
  return whole
}

const haveRecorded = existsSync(join(recorded, 'openai-chat')) && existsSync(join(recorded, 'openai-responses'))
if (!haveRecorded) console.log(`note: ${recorded} is absent; the recorded vendor transcript tests are skipped.`)

describe.skipIf(!haveRecorded)('recorded chat transcripts (../shared/fixtures/upstream/openai-chat)', () => {
  test('every recorded .sse decodes the same whole and split, and translates to well-formed messages and Responses streams', async () => {
    const files = readdirSync(join(recorded, 'openai-chat')).filter((file) => file.endsWith('.sse') || file.endsWith('.chunks.jsonl'))
    expect(files.length).toBeGreaterThanOrEqual(6)
    for (const file of files) {
      const bytes = recordedBytes('openai-chat', file)
      const parts = await decodeRecorded(bytes, decodeChatStream)
      const summary = summarise(parts)
      expect(summary.partsAfterEnd).toBe(0)
      expect(Boolean(summary.finish) !== Boolean(summary.error)).toBe(true)

      const messages = parseClientSse(await translate([bytes], chatToMessages))
      expect(messages[0]!.event).toBe('message_start')
      if (summary.finish) {
        expect(messages.at(-1)!.event).toBe('message_stop')
        expect(messages.filter((event) => event.event === 'message_delta')).toHaveLength(1)
      } else expect(messages.at(-1)!.event).toBe('error')
      const streamedText = messages.filter((event) => event.data.delta?.type === 'text_delta').map((event) => event.data.delta.text).join('')
      expect(streamedText).toBe(summary.text)
      const streamedThinking = messages.filter((event) => event.data.delta?.type === 'thinking_delta').map((event) => event.data.delta.thinking).join('')
      expect(streamedThinking).toBe(summary.reasoning)

      expectResponsesGrammar(parseClientSse(await translate([bytes], chatToResponsesStream)))
    }
  })

  test('stream-text.sse: the text, finish stop, no usage (none was sent)', async () => {
    const text = readFileSync(join(recorded, 'openai-chat/stream-text.sse'), 'utf8')
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-text.sse'), decodeChatStream))
    expect(summary.text).toBe(chatOracle(text).content)
    expect(summary.text.startsWith('Hi there!')).toBe(true)
    expect(summary.start).toEqual({ id: 'chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp', model: 'gpt-5-nano-2025-08-07' })
    expect(summary.finish).toEqual({ reason: 'stop', usage: undefined })
    expect(summary.error).toBeUndefined()
  })

  test('stream-include-usage-finish-length.sse: no text, finish length, usage from the choices:[] chunk with reasoning_tokens', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-include-usage-finish-length.sse'), decodeChatStream))
    expect(summary.text).toBe('')
    expect(summary.finish).toEqual({ reason: 'length', usage: { inputTokens: 12, outputTokens: 100, reasoningTokens: 100, cachedInputTokens: 0 } })
  })

  test('stream-tool-calls-parallel-include-usage.sse: two parallel calls with their argument fragments joined', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-tool-calls-parallel-include-usage.sse'), decodeChatStream))
    expect(summary.text).toBe('')
    expect(summary.tools.map((tool) => [tool.id, tool.name])).toEqual([
      ['call_fHCjJqt9Pysde6vcJcvbXGBx', 'get_current_weather'],
      [expect.stringMatching(/^call_/), 'get_current_weather'],
    ])
    expect(summary.tools[0]!.id).not.toBe(summary.tools[1]!.id)
    expect(JSON.parse(summary.tools[0]!.arguments)).toEqual({ location: 'Seattle, WA' })
    expect(JSON.parse(summary.tools[1]!.arguments)).toEqual({ location: 'San Francisco, CA' })
    expect(summary.finish).toEqual({ reason: 'tool_calls', usage: { inputTokens: 75, outputTokens: 51, reasoningTokens: 0, cachedInputTokens: 0 } })
  })

  test('stream-reasoning-content-deepseek.sse: reasoning_content becomes reasoning, then the answer; usage on the finish chunk', async () => {
    const text = readFileSync(join(recorded, 'openai-chat/stream-reasoning-content-deepseek.sse'), 'utf8')
    const oracle = chatOracle(text)
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-reasoning-content-deepseek.sse'), decodeChatStream))
    expect(oracle.reasoning.length).toBeGreaterThan(100)
    expect(summary.reasoning).toBe(oracle.reasoning)
    expect(summary.text).toBe(oracle.content)
    expect(summary.text.endsWith(' you today?')).toBe(true)
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 6, outputTokens: 212, reasoningTokens: 198, cachedInputTokens: 0 } })
    // On the messages side it streams as thinking_delta before the text block.
    const events = parseClientSse(await translate([recordedBytes('openai-chat', 'stream-reasoning-content-deepseek.sse')], chatToMessages))
    const blocks = events.filter((event) => event.event === 'content_block_start').map((event) => event.data.content_block.type)
    expect(blocks).toEqual(['thinking', 'text'])
    expect(events.find((event) => event.event === 'message_delta')!.data.usage).toEqual({ input_tokens: 6, output_tokens: 212 })
  })

  test('stream-reasoning-openrouter-sse-comments.sse: SSE comments ignored, `reasoning` read, usage after the finish chunk', async () => {
    const text = readFileSync(join(recorded, 'openai-chat/stream-reasoning-openrouter-sse-comments.sse'), 'utf8')
    expect(text).toContain(': OPENROUTER PROCESSING')
    const oracle = chatOracle(text)
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-reasoning-openrouter-sse-comments.sse'), decodeChatStream))
    expect(summary.reasoning).toBe(oracle.reasoning)
    expect(summary.reasoning).toContain('2+2 equals 4.')
    expect(summary.text).toBe(oracle.content)
    expect(summary.text).toContain('2 + 2 = 4')
    expect(summary.text).not.toContain('OPENROUTER')
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 43, outputTokens: 36, reasoningTokens: 13, cachedInputTokens: 0 } })
    expect(summary.error).toBeUndefined()
  })

  test('stream-error-midstream-groq.sse: reasoning, then the in-stream error becomes one error part (no finish)', async () => {
    const text = readFileSync(join(recorded, 'openai-chat/stream-error-midstream-groq.sse'), 'utf8')
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-error-midstream-groq.sse'), decodeChatStream))
    expect(summary.reasoning.length).toBeGreaterThan(0)
    expect(summary.reasoning).toBe(chatOracle(text.slice(0, text.indexOf('event: error'))).reasoning)
    expect(summary.finish).toBeUndefined()
    expect(summary.error).toEqual({ code: 'stream_aborted', message: expect.stringContaining('Tool call validation failed') })
    const messages = parseClientSse(await translate([recordedBytes('openai-chat', 'stream-error-midstream-groq.sse')], chatToMessages))
    expect(messages.at(-1)!.event).toBe('error')
    expect(messages.filter((event) => event.event === 'error')).toHaveLength(1)
  })

  test('stream-azure-content-filter.chunks.jsonl: the empty-choices first chunk (empty id) is skipped; text, stop and usage come through', async () => {
    const text = readFileSync(join(recorded, 'openai-chat/stream-azure-content-filter.chunks.jsonl'), 'utf8')
    const oracle = chatOracle(new TextDecoder().decode(jsonlAsSse(text)))
    const summary = summarise(await decodeRecorded(recordedBytes('openai-chat', 'stream-azure-content-filter.chunks.jsonl'), decodeChatStream))
    expect(summary.start).toEqual({ id: 'chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt', model: 'gpt-5-nano-2025-08-07' })
    expect(summary.text).toBe(oracle.content)
    expect(summary.text.startsWith('Capital')).toBe(true)
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 15, outputTokens: 78, reasoningTokens: 64, cachedInputTokens: 0 } })
  })
})

describe.skipIf(!haveRecorded)('recorded Responses transcripts (../shared/fixtures/upstream/openai-responses)', () => {
  test('every recorded transcript decodes the same whole and split and ends in exactly one finish or error', async () => {
    const files = readdirSync(join(recorded, 'openai-responses')).filter((file) => file.endsWith('.sse') || file.endsWith('.chunks.jsonl'))
    expect(files.length).toBeGreaterThanOrEqual(6)
    for (const file of files) {
      const bytes = recordedBytes('openai-responses', file)
      const summary = summarise(await decodeRecorded(bytes, decodeResponsesStream))
      expect(summary.partsAfterEnd).toBe(0)
      expect(Boolean(summary.finish) !== Boolean(summary.error)).toBe(true)
      const oracle = responsesOracle(new TextDecoder().decode(bytes))
      expect(summary.text).toBe(oracle.content)
      expect(summary.reasoning).toBe(oracle.reasoning)
      const chat = parseClientSse(await translate([bytes], responsesToChatStream))
      if (summary.finish) expect(chat.at(-1)!.data).toBe('[DONE]')
      else {
        expect(chat.some((event) => event.data === '[DONE]')).toBe(false)
        expect(chat.at(-1)!.data.error.code).toBe('stream_aborted')
      }
      const streamed = chat.filter((event) => event.data?.choices?.[0]?.delta?.content).map((event) => event.data.choices[0].delta.content).join('')
      expect(streamed).toBe(summary.text)
    }
  })

  test('stream-text.sse: text, stop and usage', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-text.sse'), decodeResponsesStream))
    expect(summary.text).toBe('This is a test.')
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 22, outputTokens: 6, reasoningTokens: 0, cachedInputTokens: 0 } })
  })

  test('stream-reasoning-item-function-call.sse: the encrypted reasoning item is dropped; the function call and reasoning_tokens come through', async () => {
    const bytes = recordedBytes('openai-responses', 'stream-reasoning-item-function-call.sse')
    const summary = summarise(await decodeRecorded(bytes, decodeResponsesStream))
    expect(summary.reasoning).toBe('')
    expect(summary.tools).toEqual([{ id: 'call_CWXgs68YprAjp6t0371hiPOI', name: 'final_result', arguments: '{"result":6666}' }])
    expect(summary.finish).toEqual({ reason: 'tool_calls', usage: { inputTokens: 53, outputTokens: 469, reasoningTokens: 448, cachedInputTokens: 0 } })
    const chat = await translate([bytes], responsesToChatStream)
    expect(chat).not.toContain('encrypted_content')
    expect(chat).not.toContain('gAAAAA')
    const events = parseClientSse(chat)
    expect(events.find((event) => event.data?.choices?.[0]?.finish_reason)!.data.choices[0].finish_reason).toBe('tool_calls')
    expect(events.find((event) => event.data?.usage)!.data.usage.completion_tokens_details).toEqual({ reasoning_tokens: 448 })
  })

  test('stream-function-call-legacy-no-sequence-number.sse: parsed without sequence_number', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-function-call-legacy-no-sequence-number.sse'), decodeResponsesStream))
    expect(summary.tools).toEqual([{ id: 'call_kL0PCQV7M2WMoVX8V8OtYSAL', name: 'get_capital', arguments: '{"country":"France"}' }])
    expect(summary.finish).toEqual({ reason: 'tool_calls', usage: { inputTokens: 255, outputTokens: 16, reasoningTokens: 0, cachedInputTokens: 0 } })
  })

  test('stream-reasoning-summary.sse: summary deltas become reasoning, then the text; reasoning_tokens', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-reasoning-summary.sse'), decodeResponsesStream))
    expect(summary.reasoning.length).toBeGreaterThan(1000)
    expect(summary.text.length).toBeGreaterThan(100)
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 13, outputTokens: 1680, reasoningTokens: 1408, cachedInputTokens: 0 } })
  })

  test('stream-reasoning-text-openrouter.sse: comment and [DONE] ignored, reasoning_text deltas read', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-reasoning-text-openrouter.sse'), decodeResponsesStream))
    expect(summary.reasoning.startsWith('The user asks')).toBe(true)
    expect(summary.text).toBe('4')
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 78, outputTokens: 37, reasoningTokens: 22, cachedInputTokens: 0 } })
  })

  test('stream-background-queued.sse: the queued status and extra response.queued event do not disturb the text', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-background-queued.sse'), decodeResponsesStream))
    expect(summary.text.length).toBeGreaterThan(0)
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 15, outputTokens: 9, reasoningTokens: 0, cachedInputTokens: 0 } })
  })

  test('stream-error-insufficient-quota.chunks.jsonl: the `error` event is one error part; response.failed adds nothing', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-error-insufficient-quota.chunks.jsonl'), decodeResponsesStream))
    expect(summary.finish).toBeUndefined()
    expect(summary.error).toEqual({ code: 'stream_aborted', message: expect.stringContaining('You exceeded your current quota') })
    expect(summary.partsAfterEnd).toBe(0)
  })

  test('stream-reasoning-summary-function-call.chunks.jsonl: reasoning then a function call', async () => {
    const summary = summarise(await decodeRecorded(recordedBytes('openai-responses', 'stream-reasoning-summary-function-call.chunks.jsonl'), decodeResponsesStream))
    expect(summary.reasoning.length).toBeGreaterThan(0)
    expect(summary.tools).toHaveLength(1)
    expect(() => JSON.parse(summary.tools[0]!.arguments)).not.toThrow()
    expect(summary.finish?.reason).toBe('tool_calls')
  })
})

// =============================================================================================
// 2b. Where a decoded stream ends (issue 37 items 11 and 12)

/** An upstream body that sends `text` and then keeps its connection open until it is let go. */
function heldOpenBody(text: string): { body: UpstreamBody; letGo: Promise<void> } {
  const bytes = encoder.encode(text)
  let release!: () => void
  const letGo = new Promise<void>((resolve) => (release = resolve))
  let sent = false
  const source = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent) return letGo
      sent = true
      for (const piece of pieces(bytes, [61])) controller.enqueue(piece)
    },
    cancel() {
      release()
    },
  })
  return { body: { reader: source.getReader(), head: [], checkedHead: new Uint8Array(0), records: new SseRecordCheck(), watch: undefined }, letGo }
}

/**
 * The parts a decoder makes of a held-open body, read to their end, and how long that took; it
 * returns only once the body was let go (a decoder that never lets go fails the test by its timeout).
 */
async function decodeHeldOpen(text: string, decode: (ending: UpstreamEnding) => TransformStream<ByteChunk, StreamPart>) {
  const { body, letGo } = heldOpenBody(text)
  const ending = new UpstreamEnding(body)
  const started = performance.now()
  const parts: StreamPart[] = []
  let hangUps = 0
  const reader = breakSafe(body, () => hangUps++, ending).pipeThrough(decode(ending)).getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    parts.push(value)
  }
  const elapsed = performance.now() - started
  await letGo
  // Letting go is no client hang-up.
  expect(hangUps).toBe(0)
  return { parts, elapsed }
}

describe('where a decoded stream ends', () => {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ id: 'chatcmpl-n', model: 'm', choices, ...extra })}\n\n`
  const twoChoices = chunk([{ index: 0, delta: { content: 'A' }, finish_reason: null }]) + chunk([{ index: 1, delta: { content: 'B' }, finish_reason: null }]) + chunk([{ index: 0, delta: {}, finish_reason: 'stop' }])
  const bothFinished = twoChoices + chunk([{ index: 1, delta: {}, finish_reason: 'stop' }]) + chunk([], { usage: { prompt_tokens: 5, completion_tokens: 2 } })

  test('chat: a stream that ends without [DONE] is whole once every choice seen finished (n > 1), else one error part', async () => {
    const whole = summarise(await decodeRecorded(encoder.encode(bothFinished), decodeChatStream))
    expect(whole.finish).toEqual({ reason: 'stop', usage: { inputTokens: 5, outputTokens: 2 } })
    expect(whole.error).toBeUndefined()
    const half = summarise(await decodeRecorded(encoder.encode(twoChoices), decodeChatStream))
    expect(half.finish).toBeUndefined()
    expect(half.error).toEqual({ code: 'stream_aborted', message: expect.any(String) })
  })

  test('chat: a break after every choice finished is a clean end (finish with the usage), before it an error', async () => {
    const whole = summarise(await decodeParts([encoder.encode(bothFinished), upstreamBroke], decodeChatStream))
    expect(whole.finish?.usage).toEqual({ inputTokens: 5, outputTokens: 2 })
    expect(whole.error).toBeUndefined()
    expect(summarise(await decodeParts([encoder.encode(twoChoices), upstreamBroke], decodeChatStream)).error?.code).toBe('stream_aborted')
  })

  test.skipIf(!haveRecorded)('chat: an in-stream error (stream-error-midstream-groq.sse) on a body held open ends the parts at once and lets the upstream go', async () => {
    const { parts, elapsed } = await decodeHeldOpen(readFileSync(join(recorded, 'openai-chat/stream-error-midstream-groq.sse'), 'utf8'), decodeChatStream)
    expect(elapsed).toBeLessThan(500)
    expect(parts.at(-1)).toEqual({ type: 'error', code: 'stream_aborted', why: 'error', message: expect.stringContaining('Tool call validation failed') })
    expect(summarise(parts).partsAfterEnd).toBe(0)
  })

  test.skipIf(!haveRecorded)('Responses: an `error` event on a body held open (no response.failed after it) ends the parts at once and lets the upstream go', async () => {
    const lines = readFileSync(join(recorded, 'openai-responses/stream-error-insufficient-quota.chunks.jsonl'), 'utf8').split('\n')
    const text = new TextDecoder().decode(jsonlAsSse(lines.filter((line) => !line.includes('"type":"response.failed"')).join('\n')))
    const { parts, elapsed } = await decodeHeldOpen(text, decodeResponsesStream)
    expect(elapsed).toBeLessThan(500)
    expect(parts.at(-1)).toEqual({ type: 'error', code: 'stream_aborted', why: 'error', message: expect.stringContaining('You exceeded your current quota') })
  })

  test('chat: a whole answer on a body held open (no [DONE]) ends with its finish and usage after the grace, and the upstream is let go', async () => {
    const { parts, elapsed } = await decodeHeldOpen(bothFinished, decodeChatStream)
    expect(parts.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: { inputTokens: 5, outputTokens: 2 } })
    expect(elapsed).toBeGreaterThanOrEqual(answeredStreamGraceMs - 50)
    expect(elapsed).toBeLessThan(answeredStreamGraceMs + 1000)
  })
})

// =============================================================================================
// 3. Buffered converters

describe('buffered replies', () => {
  const bufferedShell: ResponseShell = { id: 'resp_rt_fixture', model: 'acme/fx-1', createdAt: 1_700_000_200, now: () => 1_700_000_201, request: { model: 'acme/fx-1', input: 'hi' } }

  for (const name of ['text', 'tool-calls', 'reasoning']) {
    test(`chat completion ${name} → message, generateContent response and Response object`, () => {
      const result = readChatCompletion(fixtureJson(`chat/${name}.upstream.json`))
      expect(normaliseJson(writeMessage(result, 'claude-fx', undefined))).toEqual(normaliseJson(fixtureJson(`chat/${name}.expected-message.json`)))
      expect(writeGenerateContentResponse(result, 'gemini-fx')).toEqual(fixtureJson(`chat/${name}.expected-generate-content.json`))
      expect(normaliseJson(writeResponseObject(result, bufferedShell))).toEqual(normaliseJson(fixtureJson(`chat/${name}.expected-response.json`)))
    })
  }

  for (const name of ['text', 'function-call', 'incomplete']) {
    test(`Response object ${name} → chat completion`, () => {
      const upstream = fixtureJson(`responses/${name}.upstream.json`)
      expect(writeChatCompletion(readResponseObject(upstream))).toEqual(fixtureJson(`responses/${name}.expected-chat.json`))
    })
  }

  test('encrypted reasoning in a buffered Response object is dropped; max_tokens spent on reasoning gives an empty reply with finish_reason length', () => {
    const completion = writeChatCompletion(readResponseObject(fixtureJson('responses/incomplete.upstream.json')))
    expect(JSON.stringify(completion)).not.toContain('ENCRYPTED')
    expect(completion.choices[0]!.message.content).toBe('')
    expect(completion.choices[0]!.finish_reason).toBe('length')
    expect(completion.usage!.completion_tokens_details).toEqual({ reasoning_tokens: 16 })
  })

  test('stop_reason: end_turn, max_tokens, tool_use, refusal, and stop_sequence detected from the tail of the text', () => {
    const base: AssistantResult = { id: 'chatcmpl-x', model: 'm', created: 1, text: 'Done', reasoning: '', reasoningSignature: undefined, toolCalls: [], finishReason: 'stop', usage: undefined }
    const stopOf = (result: Partial<AssistantResult>, stops?: string[]) => {
      const message = writeMessage({ ...base, ...result }, 'claude-fx', stops)
      return [message.stop_reason, message.stop_sequence]
    }
    expect(stopOf({})).toEqual(['end_turn', null])
    expect(stopOf({ finishReason: 'length' })).toEqual(['max_tokens', null])
    expect(stopOf({ finishReason: 'tool_calls', toolCalls: [{ id: 'call_1', name: 'f', arguments: '{}' }] })).toEqual(['tool_use', null])
    expect(stopOf({ finishReason: 'content_filter' })).toEqual(['refusal', null])
    expect(stopOf({ finishReason: 'refusal' })).toEqual(['refusal', null])
    expect(stopOf({ text: 'Here is the list END' }, ['STOP', 'END'])).toEqual(['stop_sequence', 'END'])
    expect(stopOf({ text: 'Here is the list END\n' }, ['END'])).toEqual(['stop_sequence', 'END'])
    expect(stopOf({ text: 'Nothing to see' }, ['END'])).toEqual(['end_turn', null])
    // A chat refusal and a content_filter finish both read as a refusal.
    const refused = readChatCompletion({ id: 'c', choices: [{ message: { role: 'assistant', content: null, refusal: 'I cannot help with that.' }, finish_reason: 'stop' }] })
    expect(writeMessage(refused, 'claude-fx', undefined).stop_reason).toBe('refusal')
    const filtered = readChatCompletion({ id: 'c', choices: [{ message: { role: 'assistant', content: '' }, finish_reason: 'content_filter' }] })
    expect(writeMessage(filtered, 'claude-fx', undefined).stop_reason).toBe('refusal')
  })

  test('a reply with no choices cannot be read (answered 502 upstream of here)', () => {
    expect(() => readChatCompletion({ id: 'x', object: 'chat.completion' })).toThrow()
    expect(() => readChatCompletion('nope')).toThrow()
    expect(() => readResponseObject({ id: 'resp_1' })).toThrow()
  })
})

// =============================================================================================
// 4. Request converters

/** Every key anywhere in a JSON value. */
function allKeys(value: unknown, keys = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) allKeys(item, keys)
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      keys.add(key)
      allKeys(item, keys)
    }
  }
  return keys
}

describe('messagesToChat (SPEC "POST /messages" translation table)', () => {
  test('a plain request: system, messages, max_tokens, temperature, stop_sequences, stream', () => {
    const body = validateMessagesBody({
      model: 'anthropic/claude-fx',
      system: 'Be brief.',
      max_tokens: 256,
      temperature: 0.5,
      stop_sequences: ['END'],
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: [{ type: 'text', text: 'Hello!' }] },
        { role: 'user', content: [{ type: 'text', text: 'Grüße ' }, { type: 'text', text: 'again' }] },
      ],
    })
    expect(messagesToChat(body)).toEqual({
      model: 'anthropic/claude-fx',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!' },
        { role: 'user', content: 'Grüße again' },
      ],
      max_tokens: 256,
      temperature: 0.5,
      stop: ['END'],
    })
    const streamed = messagesToChat(validateMessagesBody({ model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] }))
    expect(streamed.stream).toBe(true)
  })

  test('extended thinking: budget_tokens → reasoning.max_tokens; thinking and redacted_thinking in history are stripped', () => {
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        messages: [
          { role: 'user', content: 'What is 2+2?' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'SECRET-CHAIN adding two and two', signature: 'SIGNATURE-BLOB' },
              { type: 'redacted_thinking', data: 'REDACTED-BLOB' },
              { type: 'text', text: '4' },
            ],
          },
          { role: 'user', content: 'And 3+3?' },
        ],
      }),
    )
    expect(chat.reasoning).toEqual({ max_tokens: 2048 })
    expect(chat.messages).toEqual([
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4' },
      { role: 'user', content: 'And 3+3?' },
    ])
    const wire = JSON.stringify(chat)
    for (const marker of ['SECRET-CHAIN', 'SIGNATURE-BLOB', 'REDACTED-BLOB', 'redacted_thinking', '"thinking"']) expect(wire).not.toContain(marker)
  })

  test('document blocks: base64, URL and file_id as chat file parts; plain-text sources inline', () => {
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' } },
              { type: 'document', source: { type: 'url', url: 'https://example.com/paper.pdf' } },
              { type: 'document', source: { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' } },
              { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'The grass is green.' } },
              { type: 'text', text: 'Summarise these.' },
            ],
          },
        ],
      }),
    )
    expect(chat.messages).toHaveLength(1)
    const parts = chat.messages[0].content
    expect(parts).toHaveLength(5)
    expect(parts[0].type).toBe('file')
    expect(parts[0].file.file_data).toBe('data:application/pdf;base64,JVBERi0xLjQK')
    expect(parts[1].type).toBe('file')
    expect(JSON.stringify(parts[1].file)).toContain('https://example.com/paper.pdf')
    expect(parts[2]).toEqual({ type: 'file', file: { file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' } })
    expect(parts[3]).toEqual({ type: 'text', text: 'The grass is green.' })
    expect(parts[4]).toEqual({ type: 'text', text: 'Summarise these.' })
  })

  test('server tools are passed as sent; server_tool_use and *_tool_result blocks from earlier turns are dropped, assistant text kept', () => {
    const webSearch = { type: 'web_search_20250305', name: 'web_search', max_uses: 3, allowed_domains: ['example.com'] }
    const codeExecution = { type: 'code_execution_20250522', name: 'code_execution' }
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        tools: [webSearch, codeExecution, { name: 'get_weather', description: 'Weather by city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
        messages: [
          { role: 'user', content: 'Search for the news.' },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'Searching. ' },
              { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'news' } },
              { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01', content: [{ type: 'web_search_result', url: 'https://example.com', title: 'News' }] },
              { type: 'code_execution_tool_result', tool_use_id: 'srvtoolu_02', content: { type: 'code_execution_result', stdout: '42' } },
              { type: 'text', text: 'Found it.' },
            ],
          },
          { role: 'user', content: 'Thanks.' },
        ],
      }),
    )
    expect(chat.tools).toEqual([
      webSearch,
      codeExecution,
      { type: 'function', function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    ])
    expect(chat.messages).toEqual([
      { role: 'user', content: 'Search for the news.' },
      { role: 'assistant', content: 'Searching. Found it.' },
      { role: 'user', content: 'Thanks.' },
    ])
    const wire = JSON.stringify(chat.messages)
    for (const marker of ['server_tool_use', 'srvtoolu_01', 'web_search_tool_result', 'code_execution_tool_result', 'web_search_result']) expect(wire).not.toContain(marker)
  })

  test('tool_use → tool_calls, tool_result → tool messages, and an image inside a tool_result follows the tool messages as a user message', () => {
    const png = 'iVBORw0KGgoAAAANSUhEUg=='
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        messages: [
          { role: 'user', content: 'Weather in Oslo and a photo?' },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'Checking.' },
              { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } },
              { type: 'tool_use', id: 'toolu_02', name: 'get_photo', input: { city: 'Oslo' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'toolu_01', content: 'Snow, -3 °C' },
              { type: 'tool_result', tool_use_id: 'toolu_02', content: [{ type: 'text', text: 'Photo attached.' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] },
              { type: 'text', text: 'Describe both.' },
            ],
          },
        ],
      }),
    )
    const messages = chat.messages as any[]
    expect(messages[0]).toEqual({ role: 'user', content: 'Weather in Oslo and a photo?' })
    expect(messages[1].role).toBe('assistant')
    expect(messages[1].content).toBe('Checking.')
    expect(messages[1].tool_calls).toEqual([
      { id: 'toolu_01', type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Oslo' }) } },
      { id: 'toolu_02', type: 'function', function: { name: 'get_photo', arguments: JSON.stringify({ city: 'Oslo' }) } },
    ])
    expect(messages[2]).toEqual({ role: 'tool', tool_call_id: 'toolu_01', content: 'Snow, -3 °C' })
    expect(messages[3].role).toBe('tool')
    expect(messages[3].tool_call_id).toBe('toolu_02')
    expect(messages[3].content).toContain('Photo attached.')
    expect(JSON.stringify(messages[3])).not.toContain(png)
    // Right after the tool messages: a user message carrying the image.
    expect(messages[4].role).toBe('user')
    expect(JSON.stringify(messages[4].content)).toContain(`data:image/png;base64,${png}`)
    expect(messages[4].content.some((part: any) => part.type === 'image_url' && part.image_url.url === `data:image/png;base64,${png}`)).toBe(true)
    // The user's own text still follows.
    const rest = JSON.stringify(messages.slice(4))
    expect(rest).toContain('Describe both.')
    expect(messages.slice(4).every((message) => message.role === 'user')).toBe(true)
  })

  test('tool_choice.disable_parallel_tool_use → parallel_tool_calls: false', () => {
    const tools = [{ name: 'f', input_schema: { type: 'object' } }]
    const messages = [{ role: 'user', content: 'x' }]
    expect(messagesToChat(validateMessagesBody({ model: 'm', tools, messages, tool_choice: { type: 'auto', disable_parallel_tool_use: true } })).parallel_tool_calls).toBe(false)
    expect(messagesToChat(validateMessagesBody({ model: 'm', tools, messages, tool_choice: { type: 'any', disable_parallel_tool_use: true } })).parallel_tool_calls).toBe(false)
    expect(messagesToChat(validateMessagesBody({ model: 'm', tools, messages, tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true } })).parallel_tool_calls).toBe(false)
    expect('parallel_tool_calls' in messagesToChat(validateMessagesBody({ model: 'm', tools, messages, tool_choice: { type: 'auto' } }))).toBe(false)
  })

  test('dropped: top_k, metadata, service_tier, cache_control', () => {
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        max_tokens: 10,
        top_k: 5,
        metadata: { user_id: 'u-1' },
        service_tier: 'standard_only',
        system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
        tools: [{ name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi', cache_control: { type: 'ephemeral', ttl: '1h' } }] }],
      }),
    )
    const keys = allKeys(chat)
    for (const dropped of ['top_k', 'metadata', 'service_tier', 'cache_control', 'user_id', 'ttl']) expect(keys.has(dropped)).toBe(false)
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ])
  })

  test('structured output (output_config.format, or the beta output_format) becomes response_format; effort becomes reasoning_effort', () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }
    const chat = messagesToChat(validateMessagesBody({ model: 'm', max_tokens: 100, output_config: { format: { type: 'json_schema', schema }, effort: 'max' }, messages: [{ role: 'user', content: 'Where?' }] }))
    expect(chat.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'response', schema } })
    expect(chat.reasoning_effort).toBe('xhigh')
    const beta = messagesToChat(validateMessagesBody({ model: 'm', output_format: { type: 'json_schema', schema }, messages: [{ role: 'user', content: 'Where?' }] }))
    expect(beta.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'response', schema } })
    expect(beta.reasoning_effort).toBeUndefined()
    // Thinking switched off keeps its word: no effort goes up.
    expect(messagesToChat(validateMessagesBody({ model: 'm', thinking: { type: 'disabled' }, output_config: { effort: 'low' }, messages: [{ role: 'user', content: 'x' }] })).reasoning_effort).toBeUndefined()
    expect(messagesToChat(validateMessagesBody({ model: 'm', thinking: { type: 'adaptive' }, output_config: { effort: 'medium' }, messages: [{ role: 'user', content: 'x' }] })).reasoning_effort).toBe('medium')
  })

  test("what Claude Code sends to a model that is not Claude: a system entry inside messages stays in place; context_management is not sent on", () => {
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'openai/gpt-4o-mini',
        max_tokens: 32000,
        system: [{ type: 'text', text: 'You are Claude Code.' }],
        thinking: { type: 'adaptive' },
        output_config: { effort: 'high' },
        context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'List the files.' }] },
          { role: 'system', content: [{ type: 'text', text: '# Environment' }, { type: 'text', text: 'cwd: /repo' }] },
          { role: 'user', content: 'Go on.' },
        ],
      }),
    )
    expect(chat.messages).toEqual([
      { role: 'system', content: 'You are Claude Code.' },
      { role: 'user', content: 'List the files.' },
      { role: 'system', content: '# Environment\ncwd: /repo' },
      { role: 'user', content: 'Go on.' },
    ])
    expect(chat.reasoning_effort).toBe('high')
    expect(chat.context_management).toBeUndefined()
  })

  test('validation names the field (messages envelope 400 upstream of here)', () => {
    const cases: [unknown, string][] = [
      [{ messages: [{ role: 'user', content: 'x' }] }, 'model'],
      [{ model: 'm', messages: [] }, 'messages'],
      [{ model: 'm', messages: [{ role: 'tool', content: 'x' }] }, 'messages.0.role'],
      [{ model: 'm', messages: [{ role: 'user', content: 5 }] }, 'messages.0.content'],
      [{ model: 'm', max_tokens: 0, messages: [{ role: 'user', content: 'x' }] }, 'max_tokens'],
      [{ model: 'm', thinking: { type: 'enabled' }, messages: [{ role: 'user', content: 'x' }] }, 'thinking.budget_tokens'],
      [{ model: 'm', thinking: { type: 'sometimes' }, messages: [{ role: 'user', content: 'x' }] }, 'thinking.type'],
      [{ model: 'm', output_config: { effort: 'extreme' }, messages: [{ role: 'user', content: 'x' }] }, 'output_config.effort'],
      [{ model: 'm', output_config: { format: { type: 'json_object' } }, messages: [{ role: 'user', content: 'x' }] }, 'output_config.format.type'],
      [{ model: 'm', output_config: { format: { type: 'json_schema' } }, messages: [{ role: 'user', content: 'x' }] }, 'output_config.format.schema'],
      [{ model: 'm', output_format: { type: 'json_schema', schema: 'x' }, messages: [{ role: 'user', content: 'x' }] }, 'output_format.schema'],
    ]
    for (const [body, field] of cases) {
      let caught: unknown
      try {
        validateMessagesBody(body)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(RouterError)
      expect((caught as RouterError).status).toBe(400)
      expect((caught as RouterError).message).toContain(field)
    }
  })
})

describe('contentToChat (generateContent → chat)', () => {
  test('contents, systemInstruction, generationConfig, function declarations, calls and responses', () => {
    const chat = contentToChat(
      {
        systemInstruction: { parts: [{ text: 'Be brief.' }] },
        contents: [
          { role: 'user', parts: [{ text: 'What is in ' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] },
          { role: 'model', parts: [{ text: 'thinking…', thought: true }, { functionCall: { name: 'lookup', args: { q: 'cat' } } }] },
          { role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { result: 'a cat' } } }] },
        ],
        generationConfig: { temperature: 0.2, topP: 0.9, maxOutputTokens: 64, stopSequences: ['END'], thinkingConfig: { thinkingBudget: 128 } },
        tools: [{ functionDeclarations: [{ name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } } }] }],
        toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['lookup'] } },
        safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }],
      },
      'gemini-fx',
    )
    const callId = chat.messages[2].tool_calls[0].id
    expect(typeof callId).toBe('string')
    expect(chat).toEqual({
      model: 'gemini-fx',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'What is in ' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: callId, type: 'function', function: { name: 'lookup', arguments: '{"q":"cat"}' } }] },
        { role: 'tool', tool_call_id: callId, content: '{"result":"a cat"}' },
      ],
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 64,
      stop: ['END'],
      reasoning: { max_tokens: 128 },
      tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
      tool_choice: { type: 'function', function: { name: 'lookup' } },
    })
  })

  test('function calls and responses with ids keep them', () => {
    const chat = contentToChat(
      {
        contents: [
          { role: 'user', parts: [{ text: 'x' }] },
          { role: 'model', parts: [{ functionCall: { id: 'call_a', name: 'f', args: {} } }, { functionCall: { id: 'call_b', name: 'f', args: { n: 2 } } }] },
          { role: 'user', parts: [{ functionResponse: { id: 'call_b', name: 'f', response: { r: 2 } } }, { functionResponse: { id: 'call_a', name: 'f', response: { r: 1 } } }] },
        ],
      },
      'g',
    )
    expect(chat.messages.slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'call_b', content: '{"r":2}' },
      { role: 'tool', tool_call_id: 'call_a', content: '{"r":1}' },
    ])
  })
})

describe('responsesToChat and chatToResponses', () => {
  test('Responses → chat (translated mode): instructions, input items, function calls both ways; reasoning items and hosted tools dropped and named', () => {
    const { chat, dropped } = responsesToChat({
      model: 'deepseek/fx',
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo?' }] },
        { type: 'reasoning', id: 'rs_1', encrypted_content: 'gAAAA-BLOB', summary: [] },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '{"temp":-3}' },
      ],
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object' } }, { type: 'web_search_preview' }],
      max_output_tokens: 100,
      temperature: 0.3,
      stream: true,
      text: { format: { type: 'json_schema', name: 'w', schema: { type: 'object' }, strict: true } },
    })
    expect(chat).toEqual({
      model: 'deepseek/fx',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp":-3}' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 100,
      temperature: 0.3,
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object' } } }],
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' }, strict: true } },
    })
    expect(JSON.stringify(chat)).not.toContain('gAAAA-BLOB')
    expect(dropped).toEqual(['reasoning item', 'hosted tool web_search_preview'])
    expect(responsesToChat({ model: 'm', input: 'hi' }).chat.messages).toEqual([{ role: 'user', content: 'hi' }])
  })

  test('chat → Responses (responses-only kind): system → instructions, tool calls both ways, tools flattened, max_tokens → max_output_tokens unchanged', () => {
    const body = chatToResponses({
      model: 'openai/o3-pro',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp":-3}' },
        { role: 'user', content: [{ type: 'text', text: 'And this?' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] },
      ],
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 5,
      temperature: 0.1,
      stream: true,
    })
    expect(body).toEqual({
      model: 'openai/o3-pro',
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: 'Weather in Oslo?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '{"temp":-3}' },
        { role: 'user', content: [{ type: 'input_text', text: 'And this?' }, { type: 'input_image', image_url: 'https://example.com/a.png' }] },
      ],
      stream: true,
      max_output_tokens: 5,
      temperature: 0.1,
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object' } }],
      tool_choice: { type: 'function', name: 'get_weather' },
    })
  })
})

// =============================================================================================
// 5. count_tokens estimate (SPEC "POST /messages/count_tokens")

function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff
  for (const byte of bytes) {
    crc ^= byte
    for (let bit = 0; bit < 8; bit++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1))
  }
  return (crc ^ 0xffffffff) >>> 0
}

function concat(...arrays: (Uint8Array | number[])[]): Uint8Array {
  const parts = arrays.map((array) => (array instanceof Uint8Array ? array : Uint8Array.from(array)))
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

const u32be = (value: number) => [(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]
const u32le = (value: number) => [value & 255, (value >>> 8) & 255, (value >>> 16) & 255, (value >>> 24) & 255]
const u16be = (value: number) => [(value >>> 8) & 255, value & 255]
const u16le = (value: number) => [value & 255, (value >>> 8) & 255]
const ascii = (text: string) => [...text].map((character) => character.charCodeAt(0))

/** A complete, decodable 1-bit greyscale PNG of the given size (all black). */
function png(width: number, height: number): Uint8Array {
  const chunk = (type: string, payload: Uint8Array) => {
    const typed = concat(ascii(type), payload)
    return concat(u32be(payload.length), typed, u32be(crc32(typed)))
  }
  const rowBytes = Math.ceil(width / 8) + 1
  const raw = new Uint8Array(rowBytes * height) // filter byte 0 and zero pixels on every row
  return concat(
    [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
    chunk('IHDR', concat(u32be(width), u32be(height), [1, 0, 0, 0, 0])),
    chunk('IDAT', new Uint8Array(deflateSync(raw))),
    chunk('IEND', new Uint8Array()),
  )
}

/** A GIF89a whose logical screen is width × height, holding one 1×1 image (valid GIF). */
function gif(width: number, height: number): Uint8Array {
  return concat(
    ascii('GIF89a'),
    u16le(width),
    u16le(height),
    [0x80, 0x00, 0x00], // global colour table of 2 entries
    [0x00, 0x00, 0x00, 0xff, 0xff, 0xff],
    [0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0x00], // image descriptor 1×1
    [0x02, 0x02, 0x44, 0x01, 0x00], // LZW data
    [0x3b],
  )
}

/**
 * A baseline JPEG header walk: SOI, an APP1 segment whose payload contains FF C0 bytes (a naive
 * scan would read it as a frame), APP0 JFIF, DQT, then SOF0 with the real size, DHT, SOS, EOI.
 */
function jpeg(width: number, height: number): Uint8Array {
  const segment = (marker: number, payload: number[]) => [0xff, marker, ...u16be(payload.length + 2), ...payload]
  return concat(
    [0xff, 0xd8],
    segment(0xe1, [...ascii('Exif'), 0, 0, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x01, 0x00, 0x01]),
    segment(0xe0, [...ascii('JFIF'), 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]),
    segment(0xdb, [0x00, ...new Array(64).fill(1)]),
    segment(0xc0, [8, ...u16be(height), ...u16be(width), 1, 1, 0x11, 0]),
    segment(0xc4, [0x00, 1, ...new Array(15).fill(0), 0]),
    segment(0xda, [1, 1, 0x00, 0, 63, 0]),
    [0x00, 0xff, 0xd9],
  )
}

function webpVp8x(width: number, height: number): Uint8Array {
  const payload = [0x00, 0, 0, 0, ...u32le(width - 1).slice(0, 3), ...u32le(height - 1).slice(0, 3)]
  const body = concat(ascii('WEBP'), ascii('VP8X'), u32le(payload.length), payload)
  return concat(ascii('RIFF'), u32le(body.length), body)
}

function webpVp8l(width: number, height: number): Uint8Array {
  const bits = (width - 1) | ((height - 1) << 14)
  // The 5-byte header, then (stand-in) entropy-coded image data.
  const payload = [0x2f, ...u32le(bits >>> 0), ...new Array(11).fill(0)]
  const body = concat(ascii('WEBP'), ascii('VP8L'), u32le(payload.length), payload)
  return concat(ascii('RIFF'), u32le(body.length), body)
}

function webpVp8(width: number, height: number): Uint8Array {
  const payload = [0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, ...u16le(width), ...u16le(height), 0, 0, 0, 0]
  const body = concat(ascii('WEBP'), ascii('VP8 '), u32le(payload.length), payload)
  return concat(ascii('RIFF'), u32le(body.length), body)
}

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64')

describe('count_tokens estimate', () => {
  const countWith = (content: unknown[], extra: Record<string, unknown> = {}, steering?: string) =>
    estimateInputTokens({ model: 'm', messages: [{ role: 'user', content }], ...extra }, steering)
  const baseline = (extra: Record<string, unknown> = {}) => countWith([{ type: 'text', text: 'Look:' }], extra)
  const imageBlock = (mediaType: string, bytes: Uint8Array) => ({ type: 'image', source: { type: 'base64', media_type: mediaType, data: base64(bytes) } })
  const imageCost = (block: unknown) => countWith([{ type: 'text', text: 'Look:' }, block]) - baseline()

  test('the built images are what they claim (PNG checksums, GIF structure)', () => {
    const image = png(3, 2)
    expect(Buffer.from(image.subarray(12, 16)).toString('latin1')).toBe('IHDR')
    expect(gif(300, 200).at(-1)).toBe(0x3b)
  })

  test('text at about 4 characters per token', () => {
    const short = countWith([{ type: 'text', text: 'x' }])
    const long = countWith([{ type: 'text', text: 'x'.repeat(401) }])
    expect(long - short).toBeGreaterThanOrEqual(99)
    expect(long - short).toBeLessThanOrEqual(101)
    const system = estimateInputTokens({ model: 'm', system: 'y'.repeat(800), messages: [{ role: 'user', content: 'x' }] }, undefined)
    expect(system - countWith([{ type: 'text', text: 'x' }])).toBeGreaterThanOrEqual(200)
    expect(system - countWith([{ type: 'text', text: 'x' }])).toBeLessThanOrEqual(210)
  })

  test('a small per-message overhead', () => {
    const one = estimateInputTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, undefined)
    const three = estimateInputTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'x' }, { role: 'user', content: 'x' }] }, undefined)
    const perMessage = (three - one) / 2
    expect(perMessage).toBeGreaterThan(1) // more than the text alone
    expect(perMessage).toBeLessThanOrEqual(10)
  })

  test('images: width × height / 750 from PNG, JPEG, GIF and WebP bytes', () => {
    expect(imageCost(imageBlock('image/png', png(1000, 750)))).toBe(1000)
    expect(imageCost(imageBlock('image/jpeg', jpeg(600, 400)))).toBe(320)
    expect(imageCost(imageBlock('image/gif', gif(300, 200)))).toBe(80)
    expect(imageCost(imageBlock('image/webp', webpVp8x(750, 750)))).toBe(750)
    expect(imageCost(imageBlock('image/webp', webpVp8l(1500, 1000)))).toBe(2000)
    expect(imageCost(imageBlock('image/webp', webpVp8(300, 250)))).toBe(100)
    // The same PNG as a data URL source.
    expect(imageCost({ type: 'image', source: { type: 'url', url: `data:image/png;base64,${base64(png(1000, 750))}` } })).toBe(1000)
  })

  test('images past 1568 pixels on the long edge are counted at the downscaled size', () => {
    expect(imageCost(imageBlock('image/png', png(3136, 1500)))).toBe(1568) // → 1568 × 750
    expect(imageCost(imageBlock('image/png', png(1500, 3136)))).toBe(1568) // portrait
    expect(imageCost(imageBlock('image/jpeg', jpeg(6272, 3000)))).toBe(1568)
  })

  test('unreadable images count 1,600: garbage bytes, an http URL, a truncated header', () => {
    expect(imageCost(imageBlock('image/png', Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9])))).toBe(1600)
    expect(imageCost({ type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } })).toBe(1600)
    expect(imageCost(imageBlock('image/png', png(100, 100).subarray(0, 12)))).toBe(1600)
  })

  test('PDF documents count 1,600 each; a plain-text document counts as text', () => {
    const pdf = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: base64(concat(ascii('%PDF-1.4\n%%EOF\n'))) } }
    expect(imageCost(pdf)).toBe(1600)
    expect(countWith([{ type: 'text', text: 'Look:' }, pdf, pdf]) - baseline()).toBe(3200)
    expect(imageCost({ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } })).toBe(1600)
    const textDocument = imageCost({ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'z'.repeat(400) } })
    expect(textDocument).toBeGreaterThanOrEqual(100)
    expect(textDocument).toBeLessThanOrEqual(104)
  })

  test('tool definitions by their JSON length', () => {
    const tools = [{ name: 'get_weather', description: 'Weather for a city. '.repeat(20), input_schema: { type: 'object', properties: { city: { type: 'string' } } } }]
    const cost = baseline({ tools }) - baseline()
    const expected = JSON.stringify(tools).length / 4
    expect(cost).toBeGreaterThanOrEqual(Math.floor(expected) - 2)
    expect(cost).toBeLessThanOrEqual(Math.ceil(expected) + 4)
  })

  test("the key's steering message is included", () => {
    const steering = 's'.repeat(400)
    const cost = countWith([{ type: 'text', text: 'Look:' }], {}, steering) - baseline()
    expect(cost).toBeGreaterThanOrEqual(100)
    expect(cost).toBeLessThanOrEqual(110)
  })
})

// =============================================================================================
// 6. Ping after silence (SPEC: "Ping events are sent after 10 s of silence")

describe('messages stream pings', () => {
  test('the default silence is 10 s', () => {
    expect(pingAfterSilenceMs).toBe(10_000)
  })

  test('a ping follows each silence, again after further silence, and none after message_stop', async () => {
    const silenceMs = 40
    let input!: ReadableStreamDefaultController<StreamPart>
    const parts = new ReadableStream<StreamPart>({ start: (controller) => void (input = controller) })
    const reader = parts.pipeThrough(encodeMessagesStream('claude-fx', undefined, silenceMs)).getReader()
    const decoder = new TextDecoder()
    const next = async () => {
      const { value, done } = await reader.read()
      if (done) return undefined
      return parseClientSse(decoder.decode(value))
    }

    input.enqueue({ type: 'start', id: 'chatcmpl-p', model: 'm' })
    expect((await next())![0]!.event).toBe('message_start')
    let quietSince = performance.now()
    const firstPing = await next()
    expect(firstPing).toEqual([{ event: 'ping', data: { type: 'ping' } }])
    expect(performance.now() - quietSince).toBeGreaterThanOrEqual(silenceMs - 5)

    quietSince = performance.now()
    const secondPing = await next()
    expect(secondPing).toEqual([{ event: 'ping', data: { type: 'ping' } }])
    expect(performance.now() - quietSince).toBeGreaterThanOrEqual(silenceMs - 5)

    input.enqueue({ type: 'text-delta', delta: 'Hi' })
    const afterText = await next()
    expect(afterText![0]!.event).toBe('content_block_start')
    const delta = await next()
    expect(delta![0]!.event).toBe('content_block_delta')
    quietSince = performance.now()
    expect(await next()).toEqual([{ event: 'ping', data: { type: 'ping' } }])
    expect(performance.now() - quietSince).toBeGreaterThanOrEqual(silenceMs - 5)

    input.enqueue({ type: 'finish', reason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } })
    input.close()
    const rest: string[] = []
    for (let events = await next(); events; events = await next()) rest.push(...events.map((event) => event.event!))
    expect(rest).toEqual(['content_block_stop', 'message_delta', 'message_stop'])
  })
})
