/**
 * Mid-stream continuation (CONTRACT §16) as real clients read it: the official SDKs (openai chat
 * completions and Responses, @anthropic-ai/sdk messages) and the AI SDK (@ai-sdk/openai chat,
 * @ai-sdk/anthropic) read a continued stream as one clean stream, the text whole, no error, the
 * continuation's finish and usage. In each case the first target's stream is cut after a few text
 * chunks, and the plan's next target (a scripted upstream on 127.0.0.1) answers the rest.
 */
import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { streamText } from 'ai'
import { createOpenAI } from '@ai-sdk/openai'
import { createAnthropic } from '@ai-sdk/anthropic'
import type { TestServer } from '../harness/server'
import { createInferenceKey } from '../harness/api'
import { continueInstruction } from '../../src/pipeline/stages/continuation/request'
import { chatStream, responsesStream, useScriptedService, type ScriptGateway } from '../harness/script-gateway'

/** Gateway kinds that take no prefill (catalog data): the first target, and the one that continues it. */
const kinds = { first: 'together', second: 'fireworks' } as const
type Kind = keyof typeof kinds

let gateways: Record<Kind, ScriptGateway>
let providers: Record<Kind, string>
let server: TestServer
useScriptedService(kinds, (service) => void ({ server, gateways, providers } = service))

/** A key routed first → second with continuation on (one hop). */
async function continuedKey(shape: 'chat' | 'messages'): Promise<{ id: string; secret: string }> {
  const routing = { strategy: 'priority', targets: [{ provider_key_id: providers.first }, { provider_key_id: providers.second }] }
  const key = await createInferenceKey(server, { api_shape: shape, continuation: { max_hops: 1 }, routing })
  return { id: key.id, secret: key.key }
}

const MODEL = 'openai/gpt-4o-mini'
const QUESTION = 'Tell me about the sea.'
/** The first target's chunks before the cut, and the second target's rest: the client's text is both, whole. */
const HEAD = ['The sea ', 'is ', 'deep ']
const TAIL = ['and ', 'blue.']
const WHOLE = 'The sea is deep and blue.'
const USAGE = { prompt_tokens: 31, completion_tokens: 9 }

/**
 * The first target's stream breaks off after `pieces`: its body ends there, without the stream's end
 * (no finish, no [DONE], no response.completed), which the router reads as a cut (`mid_stream_cut`).
 * The body ends cleanly rather than with a reset connection (`then: 'cut'`): Bun's fetch drops the
 * bytes it holds but was not yet asked for when the connection resets, so on a busy machine a reset
 * a few milliseconds after the last piece can take pieces with it, and the client's text would
 * depend on timing. An ended body keeps every byte, so the text before the break is exact.
 */
const cutAfter = (pieces: string[]) => ({ pieces, then: 'end' as const })

/** The chat script: the first target is cut after HEAD, the second answers TAIL with USAGE. */
function scriptChat() {
  gateways.first.use(() => cutAfter(chatStream(HEAD, { id: 'chatcmpl-first' })))
  gateways.second.use(() => ({ pieces: chatStream(TAIL, { id: 'chatcmpl-second', finish: 'stop', usage: USAGE }) }))
}

/** The key's one request-log row (each test makes its key and one request; the stream is logged when it ended). */
async function onlyRow(key: { id: string }): Promise<any> {
  for (let tries = 0; tries < 200; tries++) {
    server.runtime.logQueue.flush()
    const rows = server.runtime.storage.sqlite.query('select * from request_logs where key_id = ?').all(key.id)
    if (rows.length > 0) {
      expect(rows).toHaveLength(1)
      return rows[0]
    }
    await Bun.sleep(10)
  }
  throw new Error('no log row')
}

/** Both targets were asked once; the second was asked for the rest with the partial turn (no prefill at fireworks). */
function expectOneContinuation(path: '/chat/completions' | '/responses') {
  expect(gateways.first.requests).toHaveLength(1)
  expect(gateways.second.requests).toHaveLength(1)
  expect(gateways.second.requests[0]!.path).toBe(`/v1${path}`)
  const body = gateways.second.requests[0]!.body
  const turns = path === '/responses' ? body.input : body.messages
  expect(turns.slice(-2)).toEqual([
    { role: 'assistant', content: HEAD.join('') },
    { role: 'user', content: continueInstruction },
  ])
}

describe('openai SDK', () => {
  const client = (secret: string) => new OpenAI({ apiKey: secret, baseURL: server.baseUrl, maxRetries: 0 })

  test('chat.completions.create({stream: true}) with include_usage: the text whole, one id, one finish, the final usage; no error', async () => {
    const key = await continuedKey('chat')
    scriptChat()
    const stream = await client(key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: QUESTION }], stream: true, stream_options: { include_usage: true } })
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('')).toBe(WHOLE)
    expect(new Set(chunks.map((chunk) => chunk.id))).toEqual(new Set(['chatcmpl-first']))
    expect(chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.finish_reason)).filter((reason) => reason !== null)).toEqual(['stop'])
    // The usage chunk is the last one, the sum over the attempts (the cut one reported none).
    expect(chunks.at(-1)!.choices).toEqual([])
    expect(chunks.at(-1)!.usage).toEqual({ ...USAGE, total_tokens: USAGE.prompt_tokens + USAGE.completion_tokens })
    expect(chunks.filter((chunk) => chunk.usage)).toHaveLength(1)
    expectOneContinuation('/chat/completions')
    const row = await onlyRow(key)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.continued).toBe(1)
    expect(row.error_code).toBeNull()
  })

  test('chat.completions.stream(...).finalChatCompletion(): the message whole, finish stop', async () => {
    const key = await continuedKey('chat')
    scriptChat()
    const final = await client(key.secret).chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: QUESTION }] }).finalChatCompletion()
    expect(final.choices).toHaveLength(1)
    expect(final.choices[0]!.message.content).toBe(WHOLE)
    expect(final.choices[0]!.finish_reason).toBe('stop')
    expectOneContinuation('/chat/completions')
  })

  test('responses.create({stream: true}): the deltas and the completed response whole, one response, no error event', async () => {
    const key = await continuedKey('chat')
    gateways.first.use(() => cutAfter(responsesStream(HEAD, undefined, 'resp_first')))
    gateways.second.use(() => ({ pieces: responsesStream(TAIL, { input_tokens: 31, output_tokens: 9 }, 'resp_second') }))
    const stream = await client(key.secret).responses.create({ model: MODEL, input: QUESTION, stream: true })
    const events: OpenAI.Responses.ResponseStreamEvent[] = []
    for await (const event of stream) events.push(event)
    const types = events.map((event) => event.type)
    expect(types.filter((type) => type === 'response.created')).toHaveLength(1)
    expect(types.filter((type) => type === 'error' || type === 'response.failed' || type === 'response.incomplete')).toEqual([])
    expect(types.at(-1)).toBe('response.completed')
    const deltas = events.filter((event): event is OpenAI.Responses.ResponseTextDeltaEvent => event.type === 'response.output_text.delta')
    expect(deltas.map((event) => event.delta).join('')).toBe(WHOLE)
    // One output item throughout (the same content index and item), closed once.
    expect(new Set(deltas.map((event) => `${event.item_id}/${event.output_index}/${event.content_index}`)).size).toBe(1)
    expect(types.filter((type) => type === 'response.output_item.added')).toHaveLength(1)
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
    expect(completed.response.id).toBe((events[0] as OpenAI.Responses.ResponseCreatedEvent).response.id)
    expect(completed.response.status).toBe('completed')
    expect(completed.response.output).toMatchObject([{ type: 'message', content: [{ type: 'output_text', text: WHOLE }] }])
    expect(completed.response.usage).toMatchObject({ input_tokens: 31, output_tokens: 9, total_tokens: 40 })
    expectOneContinuation('/responses')
    const row = await onlyRow(key)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.continued).toBe(1)
  })

  test('responses.stream(...).finalResponse(): output_text whole', async () => {
    const key = await continuedKey('chat')
    gateways.first.use(() => cutAfter(responsesStream(HEAD, undefined, 'resp_first')))
    gateways.second.use(() => ({ pieces: responsesStream(TAIL, { input_tokens: 31, output_tokens: 9 }, 'resp_second') }))
    const final = await client(key.secret).responses.stream({ model: MODEL, input: QUESTION }).finalResponse()
    expect(final.output_text).toBe(WHOLE)
    expect(final.status).toBe('completed')
    expectOneContinuation('/responses')
  })
})

describe('@anthropic-ai/sdk', () => {
  test('messages.stream(...) on a messages key: text events whole, finalMessage() has one text block, stop_reason end_turn', async () => {
    const key = await continuedKey('messages')
    scriptChat()
    const client = new Anthropic({ apiKey: key.secret, baseURL: server.rootUrl, maxRetries: 0 })
    const stream = client.messages.stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: QUESTION }] })
    const texts: string[] = []
    const errors: unknown[] = []
    stream.on('text', (delta) => texts.push(delta))
    stream.on('error', (error) => errors.push(error))
    const final = await stream.finalMessage()
    expect(errors).toEqual([])
    expect(texts.join('')).toBe(WHOLE)
    expect(final.content).toHaveLength(1)
    expect(final.content[0]).toMatchObject({ type: 'text', text: WHOLE })
    expect(final.stop_reason).toBe('end_turn')
    expect(final.usage).toMatchObject({ input_tokens: 31, output_tokens: 9 })
    expectOneContinuation('/chat/completions')
    const row = await onlyRow(key)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.continued).toBe(1)
  })
})

describe('AI SDK streamText', () => {
  async function drain(result: ReturnType<typeof streamText>, errors: unknown[]) {
    let text = ''
    for await (const delta of result.textStream) text += delta
    const [usage, finishReason] = await Promise.all([result.usage, result.finishReason])
    return { text, usage, finishReason }
  }

  test('@ai-sdk/openai chat model: text whole, finishReason stop, usage from the continuation', async () => {
    const key = await continuedKey('chat')
    scriptChat()
    const errors: unknown[] = []
    const result = streamText({ model: createOpenAI({ apiKey: key.secret, baseURL: server.baseUrl }).chat(MODEL), prompt: QUESTION, maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text, usage, finishReason } = await drain(result, errors)
    expect(errors).toEqual([])
    expect(text).toBe(WHOLE)
    expect(finishReason).toBe('stop')
    expect(usage).toMatchObject({ inputTokens: 31, outputTokens: 9, totalTokens: 40 })
    expectOneContinuation('/chat/completions')
  })

  test('@ai-sdk/anthropic on a messages key: text whole, finishReason stop', async () => {
    const key = await continuedKey('messages')
    scriptChat()
    const errors: unknown[] = []
    const result = streamText({ model: createAnthropic({ apiKey: key.secret, baseURL: server.baseUrl })(MODEL), prompt: QUESTION, maxOutputTokens: 100, maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text, usage, finishReason } = await drain(result, errors)
    expect(errors).toEqual([])
    expect(text).toBe(WHOLE)
    expect(finishReason).toBe('stop')
    expect(usage).toMatchObject({ inputTokens: 31, outputTokens: 9 })
    expectOneContinuation('/chat/completions')
  })
})
