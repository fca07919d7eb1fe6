/**
 * Mid-stream continuation (CONTRACT §16) in the messages and Responses shapes: a messages client on
 * a chat upstream, a Responses client on a chat upstream and on a native Responses upstream (whose
 * continuation request carries the partial turn as input items). The client sees one stream in its
 * own grammar: one start, one text block or output item whose text is whole, one seam comment, one
 * end with the last attempt's usage; breaks in a tool call or reasoning end as without the setting.
 */
import { describe, expect, test } from 'bun:test'
import type { TestServer } from '../harness/server'
import { logRowOf } from '../harness/request-log'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { expectResponsesGrammar, parseClientSse } from '../harness/client-sse'
import { continueInstruction } from '../../src/pipeline/stages/continuation/request'
import { chatStream, responsesStream, sseRecord, useScriptedService, withoutComments, type ScriptGateway } from '../harness/script-gateway'

/** `translated`: a gateway that serves Responses by translation to chat (a Responses client on a chat upstream). */
const kinds = { first: 'together', second: 'fireworks', translated: 'deepseek' } as const
type Kind = keyof typeof kinds

let gateways: Record<Kind, ScriptGateway>
let providers: Record<Kind, string>
let server: TestServer
useScriptedService(kinds, (service) => void ({ server, gateways, providers } = service), { RT_STREAM_IDLE_MS: '1000' })

async function keyFor(shape: string, targets: Kind[] = ['first', 'second']): Promise<string> {
  const key = await createInferenceKey(server, { api_shape: shape, continuation: { max_hops: 1 }, routing: { strategy: 'priority', targets: targets.map((kind) => ({ provider_key_id: providers[kind] })) } })
  return key.key as string
}

const messages = (secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 200, stream: true, messages: [{ role: 'user', content: 'Tell me about the sea.' }], ...extra }, { 'x-api-key': secret })
const responses = (secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/responses', { model: 'openai/gpt-4o-mini', input: 'Tell me about the sea.', stream: true, ...extra }, bearerHeader(secret))

const chatBroken = (texts: string[]) => ({ pieces: chatStream(texts, { id: 'chatcmpl-first' }), then: 'cut' as const })
const chatWhole = (texts: string[]) => ({ pieces: chatStream(texts, { id: 'chatcmpl-second', finish: 'stop', usage: { prompt_tokens: 40, completion_tokens: 9 } }) })

describe('messages', () => {
  test('a break in text: one message, one text block with the whole text, the seam comment, the last attempt’s usage and stop reason', async () => {
    const secret = await keyFor('messages')
    gateways.first.use(() => chatBroken(['The sea ', 'is ']))
    gateways.second.use(() => chatWhole(['deep.']))
    const result = await messages(secret)
    expect(result.status).toBe(200)
    const { text, comments } = withoutComments(result.text)
    expect(comments).toEqual([': router-continued 1 together fireworks'])
    const events = parseClientSse(text)
    expect(events.map((event) => event.event)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ])
    const deltas = events.filter((event) => event.event === 'content_block_delta')
    expect(deltas.map((event) => event.data.index)).toEqual([0, 0, 0])
    expect(deltas.map((event) => event.data.delta.text).join('')).toBe('The sea is deep.')
    const delta = events.find((event) => event.event === 'message_delta')!.data
    expect(delta.delta.stop_reason).toBe('end_turn')
    expect(delta.usage).toEqual({ input_tokens: 40, output_tokens: 9 })
    // The seam comes right after the last text the broken attempt sent.
    expect(result.text.indexOf(': router-continued')).toBeGreaterThan(result.text.indexOf('is '))
    expect(result.text.indexOf(': router-continued')).toBeLessThan(result.text.indexOf('deep.'))
    expect(gateways.second.requests[0]!.body.messages.slice(-2)).toEqual([
      { role: 'assistant', content: 'The sea is ' },
      { role: 'user', content: continueInstruction },
    ])
    const row = await logRowOf(server, result)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.continued).toBe(1)
    expect(row.error_code).toBeNull()
  })

  test('a break inside a thinking block: event: error as without the setting', async () => {
    const secret = await keyFor('messages')
    gateways.first.use(() => ({ pieces: chatStream([], { id: 'chatcmpl-first', reasoning: ['Let me think'] }), then: 'cut' }))
    gateways.second.use(() => chatWhole(['never']))
    const result = await messages(secret)
    const events = parseClientSse(withoutComments(result.text).text)
    expect(events.at(-1)!.event).toBe('error')
    expect(events.some((event) => event.event === 'message_stop')).toBe(false)
    expect(gateways.second.requests).toHaveLength(0)
  })
})

describe('Responses', () => {
  test('on a chat upstream: one response, one message item whose text is whole, one response.completed', async () => {
    const secret = await keyFor('chat', ['translated', 'second'])
    gateways.translated.use(() => chatBroken(['The sea ', 'is ']))
    gateways.second.use((request) => (request.path.endsWith('/responses') ? { pieces: responsesStream(['wide.'], { input_tokens: 40, output_tokens: 9 }, 'resp_second') } : chatWhole(['wide.'])))
    const result = await responses(secret)
    expect(result.status).toBe(200)
    const { text, comments } = withoutComments(result.text)
    expect(comments).toEqual([': router-continued 1 deepseek fireworks'])
    expect(gateways.translated.requests[0]!.path).toEndWith('/chat/completions')
    const events = parseClientSse(text)
    expectResponsesGrammar(events)
    expect(events.filter((event) => event.event === 'response.created')).toHaveLength(1)
    expect(events.filter((event) => event.event === 'response.output_item.added')).toHaveLength(1)
    const completed = events.at(-1)!
    expect(completed.event).toBe('response.completed')
    expect(completed.data.response.id).toBe(events[0]!.data.response.id)
    expect(completed.data.response.output).toHaveLength(1)
    expect(completed.data.response.output[0].content[0].text).toBe('The sea is wide.')
    expect(completed.data.response.usage).toMatchObject({ input_tokens: 40, output_tokens: 9 })
  })

  test('on a native Responses upstream: the continuation request carries the partial turn as input items', async () => {
    const secret = await keyFor('chat')
    gateways.first.use((request) => (request.path.endsWith('/responses') ? { pieces: responsesStream(['The sea ', 'is '], undefined, 'resp_first'), then: 'cut' } : { status: 500, json: {} }))
    gateways.second.use((request) => (request.path.endsWith('/responses') ? { pieces: responsesStream(['calm.'], { input_tokens: 50, output_tokens: 4 }, 'resp_second') } : { status: 500, json: {} }))
    const result = await responses(secret, { input: [{ role: 'user', content: 'Tell me about the sea.' }] })
    const events = parseClientSse(withoutComments(result.text).text)
    expectResponsesGrammar(events)
    const completed = events.at(-1)!
    expect(completed.event).toBe('response.completed')
    expect(completed.data.response.output[0].content[0].text).toBe('The sea is calm.')
    const sent = gateways.second.requests[0]!
    expect(sent.path).toEndWith('/responses')
    expect(sent.body.input).toEqual([
      { role: 'user', content: 'Tell me about the sea.' },
      { role: 'assistant', content: 'The sea is ' },
      { role: 'user', content: continueInstruction },
    ])
    expect((await logRowOf(server, result)).attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
  })

  test('an error event of a native Responses upstream is a break; a string input becomes an item list', async () => {
    const secret = await keyFor('chat')
    const failed = `event: response.failed\ndata: ${JSON.stringify({ type: 'response.failed', response: { id: 'resp_first', status: 'failed', error: { code: 'server_error', message: 'overloaded' } } })}\n\n`
    gateways.first.use(() => ({ pieces: [...responsesStream(['The sea '], undefined, 'resp_first'), failed], then: 'hold' }))
    gateways.second.use(() => ({ pieces: responsesStream(['is blue.'], { input_tokens: 50, output_tokens: 4 }, 'resp_second') }))
    const result = await responses(secret)
    const events = parseClientSse(withoutComments(result.text).text)
    expect(events.at(-1)!.data.response.output[0].content[0].text).toBe('The sea is blue.')
    expect(gateways.second.requests[0]!.body.input[0]).toEqual({ role: 'user', content: 'Tell me about the sea.' })
    expect((await logRowOf(server, result)).attempt_path).toBe('together:mid_stream_error>fireworks:ok')
  })

  test('a break inside a function call’s arguments: error and response.failed as without the setting', async () => {
    const secret = await keyFor('chat')
    const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
    gateways.first.use(() => ({
      pieces: [
        responsesStream([], undefined, 'resp_first')[0]!,
        event('response.output_item.added', { output_index: 0, item: { id: 'fc_1', type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '' } }),
        event('response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 0, delta: '{"q": "se' }),
      ],
      then: 'cut',
    }))
    gateways.second.use(() => ({ pieces: responsesStream(['never'], { input_tokens: 1, output_tokens: 1 }) }))
    const result = await responses(secret, { tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }] })
    const events = parseClientSse(withoutComments(result.text).text)
    expect(events.at(-1)!.event).toBe('response.failed')
    expect(gateways.second.requests).toHaveLength(0)
  })
})

describe('every kind of break, in each shape', () => {
  const utf8Split = () => {
    const record = new TextEncoder().encode(chatStream(['Grüß'], { id: 'chatcmpl-first' })[1]!)
    const cut = record.indexOf(0xc3, record.indexOf(0xc3) + 1) + 1
    return { pieces: [chatStream([], { id: 'chatcmpl-first' })[0]!, chatStream(['Hallo '])[1]!, record.slice(0, cut)], then: 'cut' as const }
  }
  const breaks = {
    cut: () => chatBroken(['Hallo ']),
    error: () => ({ pieces: [...chatStream(['Hallo '], { id: 'chatcmpl-first' }), sseRecord({ error: { message: 'overloaded' } })], then: 'hold' as const }),
    stalled: () => ({ pieces: chatStream(['Hallo '], { id: 'chatcmpl-first' }), then: 'hold' as const }),
    malformed: () => ({ pieces: [...chatStream(['Hallo '], { id: 'chatcmpl-first' }), 'data: {"choices": [ not json\n\n'], then: 'hold' as const }),
    utf8: utf8Split,
  }
  const textOf = {
    messages: (result: CallResult) =>
      parseClientSse(withoutComments(result.text).text)
        .filter((event) => event.event === 'content_block_delta')
        .map((event) => event.data.delta.text)
        .join(''),
    responses: (result: CallResult) => parseClientSse(withoutComments(result.text).text).at(-1)!.data.response.output[0].content[0].text,
  }
  for (const shape of ['messages', 'responses'] as const) {
    for (const [why, script] of Object.entries(breaks)) {
      test(`${shape}: ${why}`, async () => {
        const secret = await keyFor(shape === 'messages' ? 'messages' : 'chat', ['translated', 'second'])
        gateways.translated.use(script)
        gateways.second.use((request) => (request.path.endsWith('/responses') ? { pieces: responsesStream(['Grüße!'], { input_tokens: 40, output_tokens: 9 }) } : chatWhole(['Grüße!'])))
        const result = shape === 'messages' ? await messages(secret) : await responses(secret)
        expect(result.text).not.toContain('\ufffd')
        expect(textOf[shape](result)).toBe('Hallo Grüße!')
        expect(withoutComments(result.text).comments).toEqual([': router-continued 1 deepseek fireworks'])
        expect((await logRowOf(server, result)).attempt_path).toBe(`deepseek:mid_stream_${why === 'utf8' ? 'cut' : why}>fireworks:ok`)
      })
    }
  }
})
