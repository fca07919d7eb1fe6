/**
 * Translated Response objects and stream events validate against the real ones (SPEC "POST
 * /responses": translation preserves reply shape and event sequence): every field a recorded OpenAI
 * Response or stream event has — completed_at, the penalties, top_logprobs, max_tool_calls,
 * background, service_tier, safety_identifier, prompt_cache_key, logprobs on output text, strict and
 * description on tools — is in ours with the same type. A mid-stream failure is `error` then
 * `response.failed`, as in the recorded failure.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readChatCompletion } from '../../src/dialects/chat/convert-response'
import { decodeChatStream } from '../../src/dialects/chat/decode-stream'
import { writeResponseObject, type ResponseShell } from '../../src/dialects/responses/convert-response'
import { encodeResponsesStream } from '../../src/dialects/responses/encode-stream'
import { expectResponsesGrammar, parseClientSse } from '../harness/client-sse'
import { eventKind, shapeMismatches } from '../harness/responses-shape'

const fixtures = join(import.meta.dir, '..', 'fixtures')
const recorded = join(import.meta.dir, '..', '..', '..', 'shared', 'fixtures', 'upstream', 'openai-responses')
const haveRecorded = existsSync(recorded)
if (!haveRecorded) console.log(`note: ${recorded} is absent; the recorded Response shape tests are skipped.`)

const ownJson = (path: string) => JSON.parse(readFileSync(join(fixtures, path), 'utf8'))
const realJson = (file: string) => JSON.parse(readFileSync(join(recorded, file), 'utf8'))

/** The `data:` payloads of a recorded stream (`.sse`) or its kept payloads (`.chunks.jsonl`). */
function realEvents(file: string): any[] {
  const text = readFileSync(join(recorded, file), 'utf8')
  const lines = file.endsWith('.chunks.jsonl') ? text.split('\n') : text.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim())
  return lines.filter((line) => line && line !== '[DONE]').map((line) => JSON.parse(line))
}

const weatherTool = { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }

function shell(request: Record<string, unknown>): ResponseShell {
  return { id: 'resp_rt_shape', model: 'acme/fx-1', createdAt: 1_700_000_200, now: () => 1_700_000_201, request: { model: 'acme/fx-1', input: 'hi', ...request } }
}

async function translatedStream(upstream: string, request: Record<string, unknown>) {
  const bytes = readFileSync(join(fixtures, upstream))
  const text = await new Response(new Response(bytes).body!.pipeThrough(decodeChatStream()).pipeThrough(encodeResponsesStream(shell({ stream: true, ...request })))).text()
  const events = parseClientSse(text)
  expectResponsesGrammar(events)
  return events.map((event) => event.data)
}

/** Each kind of event the real stream has (restricted by `only`) is in ours and has its shape. */
function expectEventsLike(ours: any[], real: any[], only: (kind: string) => boolean = () => true) {
  const problems: string[] = []
  const seen = new Set<string>()
  for (const realEvent of real) {
    const kind = eventKind(realEvent)
    if (!only(kind) || seen.has(kind)) continue
    seen.add(kind)
    const mine = ours.find((event) => eventKind(event) === kind)
    if (!mine) problems.push(`${kind}: not sent`)
    else problems.push(...shapeMismatches(mine, realEvent, kind))
  }
  expect(seen.size).toBeGreaterThan(0)
  expect(problems).toEqual([])
}

describe('the shape check itself', () => {
  test('a missing field, a wrong type and a null where the real API has a value are each caught', () => {
    const real = { id: 'r', usage: { input_tokens: 1 }, output: [{ type: 'message', content: [{ type: 'output_text', text: '', logprobs: [] }] }], service_tier: 'default' }
    expect(shapeMismatches({ id: 'x', usage: { input_tokens: 2 }, output: [{ type: 'message', content: [{ type: 'output_text', text: 'a', logprobs: [] }] }], service_tier: 'auto' }, real)).toEqual([])
    expect(shapeMismatches({ id: 'x', usage: { input_tokens: 2 }, output: [{ type: 'message', content: [{ type: 'output_text', text: 'a' }] }], service_tier: 'auto' }, real)).toEqual([
      '$.output[0].content[0].logprobs: missing',
    ])
    expect(shapeMismatches({ id: 1, usage: null, output: [], service_tier: null }, real)).toEqual(['$.id: number where the real API sends string', '$.service_tier: null where the real API sends string'])
  })
})

describe.skipIf(!haveRecorded)('translated Response objects against recorded OpenAI ones', () => {
  test('a text reply has every field of response-text.json', () => {
    const ours = writeResponseObject(readChatCompletion(ownJson('chat/text.upstream.json')), shell({ instructions: 'You are a helpful assistant.' }))
    expect(shapeMismatches(ours, realJson('response-text.json'))).toEqual([])
    expect(ours.completed_at).toBe(1_700_000_201)
    // Not stored, so not retrievable: the object says so.
    expect(ours.store).toBe(false)
  })

  test('a function call, and the echoed tool with strict and description, as in response-function-call.json', () => {
    const ours = writeResponseObject(readChatCompletion(ownJson('chat/tool-calls.upstream.json')), shell({ tools: [weatherTool], tool_choice: { type: 'function', name: 'get_weather' } }))
    expect(shapeMismatches(ours, realJson('response-function-call.json'))).toEqual([])
    expect(ours.tools).toEqual([{ type: 'function', description: null, name: 'get_weather', parameters: weatherTool.parameters, strict: false }])
  })

  test('a reasoning summary, as in response-reasoning-summary.json (encrypted reasoning is dropped by translation)', () => {
    const ours = writeResponseObject(readChatCompletion(ownJson('chat/reasoning.upstream.json')), shell({ reasoning: { effort: 'high', summary: 'detailed' } }))
    expect(shapeMismatches(ours, realJson('response-reasoning-summary.json'))).toEqual([])
    expect(ours.reasoning).toEqual({ effort: 'high', summary: 'detailed' })
  })

  test('a text stream: every event of stream-text.sse, logprobs on output text parts', async () => {
    const ours = await translatedStream('chat/text.upstream.sse', {})
    expectEventsLike(ours, realEvents('stream-text.sse'))
    for (const event of ours.filter((event) => event.part?.type === 'output_text')) expect(event.part.logprobs).toEqual([])
    expect(ours.find((event) => event.type === 'response.output_text.done').logprobs).toEqual([])
    expect(ours.at(-1).response.completed_at).toBe(1_700_000_201)
    expect(ours[0].response.completed_at).toBeNull()
  })

  test('a function-call stream: the function_call events of stream-reasoning-item-function-call.sse', async () => {
    const ours = await translatedStream('chat/tool-calls.upstream.sse', { tools: [weatherTool] })
    expectEventsLike(ours, realEvents('stream-reasoning-item-function-call.sse'), (kind) => !kind.includes('(reasoning)'))
  })

  test('a stream that fails: error (nested, as the real API) then response.failed, like stream-error-insufficient-quota', async () => {
    const ours = await translatedStream('chat/error-record.upstream.sse', {})
    expect(ours.slice(-2).map((event) => event.type)).toEqual(['error', 'response.failed'])
    expectEventsLike(ours, realEvents('stream-error-insufficient-quota.chunks.jsonl'))
    const failed = ours.at(-1).response
    expect(failed.status).toBe('failed')
    expect(failed.error).toEqual({ code: 'stream_aborted', message: ours.at(-2).error.message })
    // What was streamed before the failure is in the failed response, unfinished.
    expect(failed.output).toEqual([expect.objectContaining({ type: 'message', status: 'incomplete', content: [expect.objectContaining({ text: 'Hello' })] })])
  })
})
