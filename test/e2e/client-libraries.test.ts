/**
 * Client libraries end to end: the Vercel AI SDK (openai chat and Responses, anthropic, google
 * providers) and LangChain (ChatOpenAI, ChatAnthropic) as real clients of the router, with the
 * mock gateways as upstreams. Per client: text with usage, stream with usage, a tool loop,
 * structured output and the library's own error class. SPEC "API shapes", "POST /chat/completions",
 * "POST /responses", "POST /messages", "POST /models/{modelPath}:generateContent", "Errors".
 *
 * The structured-output mocks answer the schema's JSON only when the upstream request carries a
 * json_schema `response_format` (or a forced tool call when the client asks for one), so a router
 * that drops the format fails these tests.
 */
import { beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { APICallError, generateText, Output, stepCountIs, streamText, tool } from 'ai'
import { createOpenAI } from '@ai-sdk/openai'
import { createAnthropic } from '@ai-sdk/anthropic'
import { createGoogleGenerativeAI } from '@ai-sdk/google'
import { ChatOpenAI } from '@langchain/openai'
import { ChatAnthropic } from '@langchain/anthropic'
import { AIMessageChunk, HumanMessage, type BaseMessage } from '@langchain/core/messages'
import { tool as langchainTool } from '@langchain/core/tools'
import OpenAI from 'openai'
import { z } from 'zod'
import type { RecordedRequest } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { chatTurn, scriptChat, structuredAnswer, toolLoopAnswer, usageOf, type ChatTurn } from '../harness/chat-script'
import { gatewayRoles } from '../harness/gateway-roles'

// ---------------------------------------------------------------------------------------------
// Environment: one server; a mock for a plain chat gateway and one for the gateway kind whose
// Responses endpoint is served by translation to chat (both picked by capability).

type Role = 'plain' | 'translated'
const roles: Role[] = ['plain', 'translated']

const env = gatewayRoles(roles, (usable) => ({
  plain: usable.find((gateway) => gateway.capabilities.responses === 'native' && !gateway.capabilities.chain && !gateway.capabilities.retrieve)?.id,
  translated: usable.find((gateway) => gateway.capabilities.responses === 'translated')?.id,
}))
const { mocks, providers } = env
let server: TestServer
beforeAll(() => {
  server = env.server
})

/** An inference key of `shape` routed to one mock, or (target null) with no routing: 402 no_route. */
async function createKey(shape: 'chat' | 'messages' | 'content', target: Role | null = 'plain'): Promise<string> {
  const routing = target ? { routing: { strategy: 'priority', targets: [{ provider_key_id: providers[target] }] } } : {}
  const created = await server.call('POST', '/api/v1/keys', { api_shape: shape, ...routing })
  expect(created.status).toBe(201)
  return created.body.data.key as string
}

const upstreamCalls = (role: Role = 'plain') => mocks[role].calls('/chat/completions')
const lastUpstream = (role: Role = 'plain'): RecordedRequest => {
  const calls = upstreamCalls(role)
  expect(calls.length).toBeGreaterThan(0)
  return calls.at(-1)!
}

/** A promise's outcome without throwing, so a test can check the upstream request before the answer. */
async function settle<T>(promise: PromiseLike<T>): Promise<{ value?: T; error?: any }> {
  try {
    return { value: await promise }
  } catch (error) {
    return { error }
  }
}

/** The upstream 429 the router relays (SPEC Errors: rate_limited, Retry-After forwarded). */
const rateLimited = () => ({ status: 429, headers: { 'retry-after': '7' }, json: { error: { message: 'slow down', type: 'rate_limit_error' } } })
/** The upstream 404 for a model it does not know (SPEC Errors: model_not_found, relayed). */
const unknownModel = () => ({ status: 404, json: { error: { message: 'The model `nope/missing` does not exist', type: 'invalid_request_error', code: 'model_not_found' } } })

// Scripted turns. Distinct token counts per turn so sums and mix-ups show.
const TEXT = 'Grüße aus Zürich! 👋'
const PIECES = ['Grüße ', 'aus ', 'Zürich! 👋']
const textTurn: ChatTurn = { content: TEXT, pieces: PIECES, usage: usageOf(23, 9) }
const toolTurn: ChatTurn = { toolCalls: [{ id: 'call_w1', name: 'get_weather', args: { city: 'Zürich' } }], usage: usageOf(41, 12) }
const FINAL = 'Snow in Zürich, −3 °C.'
const finalTurn: ChatTurn = { content: FINAL, usage: usageOf(67, 8) }
const WEATHER = { city: 'Zürich', forecast: 'snow', celsius: -3 }
const structuredValue = { city: 'Zürich', celsius: -3 }
const structuredUsage = usageOf(31, 11)
const weatherSchema = z.object({ city: z.string(), celsius: z.number() })

/** The upstream chat request of a tool loop's second turn carries the tool call and its result. */
function expectToolResultUpstream(second: RecordedRequest, callId?: string) {
  const messages = second.body.messages as any[]
  const assistant = messages.find((message) => message.role === 'assistant' && message.tool_calls?.length)
  expect(assistant).toBeDefined()
  expect(assistant.tool_calls[0].function.name).toBe('get_weather')
  expect(JSON.parse(assistant.tool_calls[0].function.arguments)).toEqual({ city: 'Zürich' })
  const toolMessage = messages.find((message) => message.role === 'tool')
  expect(toolMessage).toBeDefined()
  if (callId) expect(toolMessage.tool_call_id).toBe(callId)
  expect(toolMessage.tool_call_id).toBe(assistant.tool_calls[0].id)
  const content = typeof toolMessage.content === 'string' ? toolMessage.content : JSON.stringify(toolMessage.content)
  expect(content).toContain('snow')
}

/** The first upstream request of a tool loop declares the tool as a chat function. */
function expectToolDeclaredUpstream(first: RecordedRequest) {
  const tools = first.body.tools as any[]
  expect(tools).toHaveLength(1)
  expect(tools[0]).toMatchObject({ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } })
}

/** The upstream request carried the schema as a json_schema response_format. */
function expectResponseFormatUpstream(request: RecordedRequest) {
  expect(request.body.response_format).toMatchObject({ type: 'json_schema', json_schema: { schema: { type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'number' } } } } })
}

// =============================================================================================
// Vercel AI SDK

const aiOpenAI = (secret: string) => createOpenAI({ apiKey: secret, baseURL: server.baseUrl })
const aiAnthropic = (secret: string) => createAnthropic({ apiKey: secret, baseURL: server.baseUrl })
const aiGoogle = (secret: string) => createGoogleGenerativeAI({ apiKey: secret, baseURL: server.baseUrl })

const weatherTool = (seen: string[]) =>
  tool({
    description: 'Weather by city',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      seen.push(city)
      return WEATHER
    },
  })

/** A stream's text, usage, finish reason and any error parts. */
async function drain(result: ReturnType<typeof streamText>, errors: unknown[]) {
  let text = ''
  for await (const delta of result.textStream) text += delta
  const [usage, finishReason] = await Promise.all([result.usage, result.finishReason]).catch((error) => {
    errors.push(error)
    return [undefined, undefined] as const
  })
  return { text, usage, finishReason }
}

function expectAPICallError(error: unknown, status: number): APICallError {
  expect(error).toBeDefined()
  expect(APICallError.isInstance(error)).toBe(true)
  const apiError = error as APICallError
  expect(apiError.statusCode).toBe(status)
  expect(apiError.url.startsWith(server.rootUrl)).toBe(true)
  return apiError
}


/**
 * The AI SDK's tool loop on `model`: the mock calls get_weather, the SDK runs it and sends the result
 * back, the final text comes; two steps, usage summed, the tool declared upstream and its result
 * returned there (with `callId` when the shape carries call ids).
 */
async function expectAiSdkToolLoop(model: Parameters<typeof generateText>[0]['model'], call: Record<string, unknown>, options: { finishReason: boolean; role?: Role; callId?: string }) {
  const seen: string[] = []
  const result = await generateText({ model, prompt: 'Weather in Zürich?', tools: { get_weather: weatherTool(seen) }, stopWhen: stepCountIs(3), maxRetries: 0 })
  expect(seen).toEqual(['Zürich'])
  expect(result.steps).toHaveLength(2)
  expect(result.steps[0]!.toolCalls[0]).toMatchObject(call)
  if (options.finishReason) expect(result.steps[0]!.finishReason).toBe('tool-calls')
  expect(result.text).toBe(FINAL)
  expect(result.totalUsage).toMatchObject({ inputTokens: 41 + 67, outputTokens: 12 + 8 })
  const upstream = upstreamCalls(options.role)
  expect(upstream).toHaveLength(2)
  expectToolDeclaredUpstream(upstream[0]!)
  if (options.callId) expectToolResultUpstream(upstream[1]!, options.callId)
  else expectToolResultUpstream(upstream[1]!)
}

describe('AI SDK @ai-sdk/openai chat (openai.chat) on a chat key', () => {
  test('generateText: text and usage as the mock reported them; the body goes upstream as chat', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const result = await generateText({ model: aiOpenAI(secret).chat('openai/gpt-fx'), system: 'Be brief.', prompt: 'Say hello', maxRetries: 0 })
    expect(result.text).toBe(TEXT)
    expect(result.finishReason).toBe('stop')
    expect(result.usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe('openai/gpt-fx')
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello' },
    ])
    expect(upstream[0]!.headers.authorization).toBe('Bearer sk-plain-upstream')
  })

  test('streamText: deltas assembled, usage from the final chunk', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const errors: unknown[] = []
    const result = streamText({ model: aiOpenAI(secret).chat('openai/gpt-fx'), prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text, usage, finishReason } = await drain(result, errors)
    expect(errors).toEqual([])
    expect(text).toBe(TEXT)
    expect(finishReason).toBe('stop')
    expect(usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    expect(lastUpstream().body.stream).toBe(true)
  })

  test('tool loop (stopWhen: stepCountIs(3)): tool call, execute, tool result upstream, final text; totalUsage sums both steps', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, toolLoopAnswer(toolTurn, finalTurn))
    await expectAiSdkToolLoop(aiOpenAI(secret).chat('openai/gpt-fx'), { toolCallId: 'call_w1', toolName: 'get_weather', input: { city: 'Zürich' } }, { finishReason: true, callId: 'call_w1' })
  })

  test('structured output (Output.object): response_format json_schema goes upstream; the object is parsed', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(generateText({ model: aiOpenAI(secret).chat('openai/gpt-fx'), prompt: 'Weather in Zürich as JSON', output: Output.object({ schema: weatherSchema }), maxRetries: 0 }))
    expectResponseFormatUpstream(lastUpstream())
    expect(outcome.error).toBeUndefined()
    expect(outcome.value!.output).toEqual(structuredValue)
    expect(outcome.value!.usage).toMatchObject({ inputTokens: 31, outputTokens: 11 })
  })

  test('errors: APICallError with statusCode for a key with no targets (402) and a relayed upstream 429', async () => {
    const unrouted = await createKey('chat', null)
    const noRoute = expectAPICallError((await settle(generateText({ model: aiOpenAI(unrouted).chat('openai/gpt-fx'), prompt: 'Hi', maxRetries: 0 }))).error, 402)
    expect(JSON.parse(noRoute.responseBody!).error.code).toBe('no_route')
    expect(noRoute.responseHeaders?.['x-router-attempts']).toBe('0')

    const secret = await createKey('chat')
    scriptChat(mocks.plain, rateLimited)
    const limited = expectAPICallError((await settle(generateText({ model: aiOpenAI(secret).chat('openai/gpt-fx'), prompt: 'Hi', maxRetries: 0 }))).error, 429)
    expect(limited.isRetryable).toBe(true)
    expect(limited.responseHeaders?.['retry-after']).toBe('7')
    expect(JSON.parse(limited.responseBody!).error.code).toBe('rate_limited')
  })
})

describe('AI SDK @ai-sdk/openai Responses (openai.responses) on a chat key, translated gateway kind', () => {
  test('generateText: text and usage; translated to chat upstream', async () => {
    const secret = await createKey('chat', 'translated')
    scriptChat(mocks.translated, (request) => chatTurn(request, textTurn))
    const result = await generateText({ model: aiOpenAI(secret).responses('deepseek/fx'), system: 'Be brief.', prompt: 'Say hello', maxRetries: 0 })
    expect(result.text).toBe(TEXT)
    expect(result.finishReason).toBe('stop')
    expect(result.usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    expect(result.response.id).toMatch(/^resp_rt_/)
    const upstream = upstreamCalls('translated')
    expect(upstream).toHaveLength(1)
    expect(mocks.translated.calls('/responses')).toHaveLength(0)
    expect(upstream[0]!.body.model).toBe('deepseek/fx')
    expect(upstream[0]!.body.messages.at(-1)).toEqual({ role: 'user', content: 'Say hello' })
  })

  test('streamText: deltas assembled, usage from response.completed', async () => {
    const secret = await createKey('chat', 'translated')
    scriptChat(mocks.translated, (request) => chatTurn(request, textTurn))
    const errors: unknown[] = []
    const result = streamText({ model: aiOpenAI(secret).responses('deepseek/fx'), prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text, usage, finishReason } = await drain(result, errors)
    expect(errors).toEqual([])
    expect(text).toBe(TEXT)
    expect(finishReason).toBe('stop')
    expect(usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    expect(lastUpstream('translated').body.stream).toBe(true)
  })

  test('tool loop (stopWhen: stepCountIs(3)): function_call out, function_call_output back as a tool message, final text', async () => {
    const secret = await createKey('chat', 'translated')
    scriptChat(mocks.translated, toolLoopAnswer(toolTurn, finalTurn))
    await expectAiSdkToolLoop(aiOpenAI(secret).responses('deepseek/fx'), { toolCallId: 'call_w1', toolName: 'get_weather', input: { city: 'Zürich' } }, { finishReason: false, role: 'translated', callId: 'call_w1' })
  })

  test('structured output (Output.object): text.format json_schema becomes response_format upstream; the object is parsed', async () => {
    const secret = await createKey('chat', 'translated')
    scriptChat(mocks.translated, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(generateText({ model: aiOpenAI(secret).responses('deepseek/fx'), prompt: 'Weather in Zürich as JSON', output: Output.object({ schema: weatherSchema }), maxRetries: 0 }))
    expectResponseFormatUpstream(lastUpstream('translated'))
    expect(outcome.error).toBeUndefined()
    expect(outcome.value!.output).toEqual(structuredValue)
    expect(outcome.value!.usage).toMatchObject({ inputTokens: 31, outputTokens: 11 })
  })

  test('errors: APICallError with statusCode for a key with no targets (402) and an unknown model (404)', async () => {
    const unrouted = await createKey('chat', null)
    const noRoute = expectAPICallError((await settle(generateText({ model: aiOpenAI(unrouted).responses('deepseek/fx'), prompt: 'Hi', maxRetries: 0 }))).error, 402)
    expect(JSON.parse(noRoute.responseBody!).error.code).toBe('no_route')

    const secret = await createKey('chat', 'translated')
    scriptChat(mocks.translated, unknownModel)
    const missing = expectAPICallError((await settle(generateText({ model: aiOpenAI(secret).responses('nope/missing'), prompt: 'Hi', maxRetries: 0 }))).error, 404)
    expect(missing.isRetryable).toBe(false)
    expect(JSON.parse(missing.responseBody!).error.code).toBe('model_not_found')
    expect(missing.message).toContain('does not exist')
  })

  test('a native gateway kind: generateText and streamText pass through (body verbatim, text.format included), usage from the gateway', async () => {
    const secret = await createKey('chat', 'plain')
    const fixture = (name: string) => readFileSync(join(import.meta.dir, '..', 'fixtures', 'responses', name), 'utf8')
    mocks.plain.handle((request) => {
      if (!request.path.endsWith('/responses')) return undefined
      if (request.body?.stream) return new Response(fixture('text.upstream.sse'), { headers: { 'content-type': 'text/event-stream' } })
      return { json: JSON.parse(fixture('text.upstream.json')) }
    })
    const model = aiOpenAI(secret).responses('openai/gpt-fx')
    const buffered = await generateText({ model, prompt: 'Say hello', maxRetries: 0 })
    expect(buffered.text).toBe('Bonjour à tous ✨')
    expect(buffered.usage).toMatchObject({ inputTokens: 8, outputTokens: 4, totalTokens: 12 })
    expect(buffered.response.id).toMatch(/^resp_rt_/)
    expect(buffered.response.headers?.['x-router-responses-mode']).toBe('native')

    const errors: unknown[] = []
    const { text, usage } = await drain(streamText({ model, prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => void errors.push(error) }), errors)
    expect(errors).toEqual([])
    expect(text).toBe('Bonjour à tous ✨')
    expect(usage).toMatchObject({ inputTokens: 8, outputTokens: 4, totalTokens: 12 })

    // Structured output on a native target: the Responses body (text.format) goes upstream as sent.
    await settle(generateText({ model, prompt: 'Weather in Zürich as JSON', output: Output.object({ schema: weatherSchema }), maxRetries: 0 }))
    const sent = mocks.plain.calls('/responses')
    expect(sent).toHaveLength(3)
    expect(sent[2]!.body.text.format).toMatchObject({ type: 'json_schema', schema: { properties: { city: { type: 'string' }, celsius: { type: 'number' } } } })
    expect(upstreamCalls('plain')).toHaveLength(0)
  })
})

describe('AI SDK @ai-sdk/anthropic on a messages key', () => {
  // A model id the provider treats as a current Claude: native structured output (output_config.format).
  const MODEL = 'anthropic/claude-sonnet-4-6'

  test('generateText: text and usage; x-api-key auth; translated to chat upstream', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const result = await generateText({ model: aiAnthropic(secret)(MODEL), system: 'Be brief.', prompt: 'Say hello', maxRetries: 0 })
    expect(result.text).toBe(TEXT)
    expect(result.finishReason).toBe('stop')
    expect(result.usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe(MODEL)
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello' },
    ])
  })

  test('streamText: deltas assembled; usage (message_delta carries the real counts)', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const errors: unknown[] = []
    const result = streamText({ model: aiAnthropic(secret)(MODEL), prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text, usage, finishReason } = await drain(result, errors)
    expect(errors).toEqual([])
    expect(text).toBe(TEXT)
    expect(finishReason).toBe('stop')
    expect(usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    expect(lastUpstream().body.stream).toBe(true)
  })

  test('tool loop (stopWhen: stepCountIs(3)): tool_use out, tool_result back as a tool message, final text', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, toolLoopAnswer(toolTurn, finalTurn))
    await expectAiSdkToolLoop(aiAnthropic(secret)(MODEL), { toolCallId: 'call_w1', toolName: 'get_weather', input: { city: 'Zürich' } }, { finishReason: true, callId: 'call_w1' })
  })

  test('structured output (Output.object): output_config.format becomes response_format upstream; the object is parsed', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(generateText({ model: aiAnthropic(secret)(MODEL), prompt: 'Weather in Zürich as JSON', output: Output.object({ schema: weatherSchema }), maxRetries: 0 }))
    expectResponseFormatUpstream(lastUpstream())
    expect(outcome.error).toBeUndefined()
    expect(outcome.value!.output).toEqual(structuredValue)
    expect(outcome.value!.usage).toMatchObject({ inputTokens: 31, outputTokens: 11 })
  })

  test('errors: APICallError with statusCode and the messages envelope for no targets (402) and an unknown model (404)', async () => {
    const unrouted = await createKey('messages', null)
    const noRoute = expectAPICallError((await settle(generateText({ model: aiAnthropic(unrouted)(MODEL), prompt: 'Hi', maxRetries: 0 }))).error, 402)
    expect(JSON.parse(noRoute.responseBody!)).toEqual({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } })

    const secret = await createKey('messages')
    scriptChat(mocks.plain, unknownModel)
    const missing = expectAPICallError((await settle(generateText({ model: aiAnthropic(secret)('nope/missing'), prompt: 'Hi', maxRetries: 0 }))).error, 404)
    expect(JSON.parse(missing.responseBody!)).toEqual({ type: 'error', error: { type: 'not_found_error', message: expect.any(String) } })
    expect(missing.isRetryable).toBe(false)
  })
})

describe('AI SDK @ai-sdk/google on a content key', () => {
  // The provider takes an id with a slash as the whole path after baseURL, so a router model id
  // `google/gemini-fx` is written as `models/google/gemini-fx` (→ /v1/models/google/gemini-fx:generateContent).
  const MODEL = 'models/google/gemini-fx'

  test('generateText: text and usage; translated to chat upstream', async () => {
    const secret = await createKey('content')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const result = await generateText({ model: aiGoogle(secret)(MODEL), system: 'Be brief.', prompt: 'Say hello', maxRetries: 0 })
    expect(result.text).toBe(TEXT)
    expect(result.finishReason).toBe('stop')
    expect(result.usage).toMatchObject({ inputTokens: 23, outputTokens: 9, totalTokens: 32 })
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe('google/gemini-fx')
    expect(upstream[0]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello' },
    ])
  })

  test('streamText: :streamGenerateContent is refused with 400 in the content envelope (SPEC), surfaced as an APICallError; nothing goes upstream', async () => {
    const secret = await createKey('content')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const errors: unknown[] = []
    const result = streamText({ model: aiGoogle(secret)(MODEL), prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => void errors.push(error) })
    const { text } = await drain(result, errors)
    expect(text).toBe('')
    const apiError = expectAPICallError(errors.find((error) => APICallError.isInstance(error)), 400)
    expect(apiError.url).toContain(':streamGenerateContent')
    expect(JSON.parse(apiError.responseBody!)).toEqual({ error: { code: 400, message: expect.any(String), status: 'INVALID_ARGUMENT' } })
    expect(mocks.plain.requests).toHaveLength(0)
  })

  test('tool loop (stopWhen: stepCountIs(3)): functionCall out, functionResponse back as a tool message, final text', async () => {
    const secret = await createKey('content')
    scriptChat(mocks.plain, toolLoopAnswer(toolTurn, finalTurn))
    await expectAiSdkToolLoop(aiGoogle(secret)(MODEL), { toolName: 'get_weather', input: { city: 'Zürich' } }, { finishReason: true })
  })

  test('structured output (Output.object): responseJsonSchema becomes response_format upstream; the object is parsed', async () => {
    const secret = await createKey('content')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(generateText({ model: aiGoogle(secret)(MODEL), prompt: 'Weather in Zürich as JSON', output: Output.object({ schema: weatherSchema }), maxRetries: 0 }))
    expectResponseFormatUpstream(lastUpstream())
    expect(outcome.error).toBeUndefined()
    expect(outcome.value!.output).toEqual(structuredValue)
    expect(outcome.value!.usage).toMatchObject({ inputTokens: 31, outputTokens: 11 })
  })

  test('errors: APICallError with statusCode and the content envelope for no targets (402) and a relayed upstream 429', async () => {
    const unrouted = await createKey('content', null)
    const noRoute = expectAPICallError((await settle(generateText({ model: aiGoogle(unrouted)(MODEL), prompt: 'Hi', maxRetries: 0 }))).error, 402)
    expect(JSON.parse(noRoute.responseBody!)).toEqual({ error: { code: 402, message: expect.any(String), status: expect.any(String) } })

    const secret = await createKey('content')
    scriptChat(mocks.plain, rateLimited)
    const limited = expectAPICallError((await settle(generateText({ model: aiGoogle(secret)(MODEL), prompt: 'Hi', maxRetries: 0 }))).error, 429)
    expect(limited.isRetryable).toBe(true)
    expect(limited.responseHeaders?.['retry-after']).toBe('7')
    expect(JSON.parse(limited.responseBody!)).toEqual({ error: { code: 429, message: expect.any(String), status: expect.any(String) } })
  })
})

// =============================================================================================
// LangChain

const chatOpenAI = (secret: string, model = 'openai/gpt-fx') => new ChatOpenAI({ model, apiKey: secret, configuration: { baseURL: server.baseUrl }, maxRetries: 0 })
const chatAnthropic = (secret: string, model = 'anthropic/claude-sonnet-4-6') => new ChatAnthropic({ model, apiKey: secret, anthropicApiUrl: server.rootUrl, maxRetries: 0, maxTokens: 256 })

const weatherLangchainTool = (seen: string[]) =>
  langchainTool(
    async ({ city }: { city: string }) => {
      seen.push(city)
      return JSON.stringify(WEATHER)
    },
    { name: 'get_weather', description: 'Weather by city', schema: z.object({ city: z.string() }) },
  )

/** Runs a LangChain stream to its end and concatenates the chunks. */
async function collect(stream: AsyncIterable<AIMessageChunk>): Promise<AIMessageChunk> {
  let full: AIMessageChunk | undefined
  const deltas: string[] = []
  for await (const chunk of stream) {
    if (typeof chunk.content === 'string' && chunk.content) deltas.push(chunk.content)
    full = full ? full.concat(chunk) : chunk
  }
  expect(deltas.length).toBeGreaterThan(1)
  return full!
}

/** The text of a message whose content may be a string or content blocks. */
const textOf = (message: BaseMessage) =>
  typeof message.content === 'string' ? message.content : message.content.map((block: any) => (block.type === 'text' ? block.text : '')).join('')

/** A LangChain round with bindTools: a tool call, the tool run, then the ToolMessage back and the final answer. */
async function langchainToolRound(model: ChatOpenAI | ChatAnthropic) {
  const seen: string[] = []
  const weather = weatherLangchainTool(seen)
  const bound = model.bindTools([weather])
  const history: BaseMessage[] = [new HumanMessage('Weather in Zürich?')]
  const first = await bound.invoke(history)
  expect(first.tool_calls).toHaveLength(1)
  expect(first.tool_calls![0]).toMatchObject({ id: 'call_w1', name: 'get_weather', args: { city: 'Zürich' } })
  expect(first.usage_metadata).toMatchObject({ input_tokens: 41, output_tokens: 12 })
  const toolMessage = await weather.invoke({ ...first.tool_calls![0]!, type: 'tool_call' as const })
  expect(seen).toEqual(['Zürich'])
  history.push(first, toolMessage)
  const second = await bound.invoke(history)
  expect(textOf(second)).toBe(FINAL)
  expect(second.tool_calls ?? []).toHaveLength(0)
  expect(second.usage_metadata).toMatchObject({ input_tokens: 67, output_tokens: 8 })
}

describe('LangChain ChatOpenAI on a chat key', () => {
  test('invoke: text and usage_metadata as the mock reported them', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const message = await chatOpenAI(secret).invoke([new HumanMessage('Say hello')])
    expect(message.content).toBe(TEXT)
    expect(message.usage_metadata).toMatchObject({ input_tokens: 23, output_tokens: 9, total_tokens: 32 })
    expect(message.response_metadata.finish_reason).toBe('stop')
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.model).toBe('openai/gpt-fx')
    expect(upstream[0]!.body.messages).toEqual([{ role: 'user', content: 'Say hello' }])
  })

  test('stream: chunks concatenated to the text; usage_metadata from the usage chunk', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const full = await collect(await chatOpenAI(secret).stream('Say hello'))
    expect(full.content).toBe(TEXT)
    expect(full.usage_metadata).toMatchObject({ input_tokens: 23, output_tokens: 9, total_tokens: 32 })
    const upstream = lastUpstream()
    expect(upstream.body.stream).toBe(true)
    expect(upstream.body.stream_options).toEqual({ include_usage: true })
  })

  test('bindTools: one round — tool_calls out, ToolMessage back as a tool message, final text', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, toolLoopAnswer(toolTurn, finalTurn))
    await langchainToolRound(chatOpenAI(secret))
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(2)
    expectToolDeclaredUpstream(upstream[0]!)
    expectToolResultUpstream(upstream[1]!, 'call_w1')
  })

  test('withStructuredOutput (default method: jsonSchema): response_format json_schema goes upstream; the object is parsed', async () => {
    const secret = await createKey('chat')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(chatOpenAI(secret).withStructuredOutput(weatherSchema).invoke('Weather in Zürich as JSON'))
    expectResponseFormatUpstream(lastUpstream())
    expect(outcome.error).toBeUndefined()
    expect(outcome.value).toEqual(structuredValue)
  })

  test('errors: the openai SDK error classes with status and lc_error_code, for no targets (402) and a relayed upstream 429', async () => {
    const unrouted = await createKey('chat', null)
    const noRoute = (await settle(chatOpenAI(unrouted).invoke('Hi'))).error
    expect(noRoute).toBeInstanceOf(OpenAI.APIError)
    expect(noRoute.status).toBe(402)
    expect(noRoute.code).toBe('no_route')

    const secret = await createKey('chat')
    scriptChat(mocks.plain, rateLimited)
    const limited = (await settle(chatOpenAI(secret).invoke('Hi'))).error
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError)
    expect(limited.status).toBe(429)
    expect(limited.lc_error_code).toBe('MODEL_RATE_LIMIT')
    expect(limited.headers.get('retry-after')).toBe('7')
    expect(upstreamCalls()).toHaveLength(1)
  })
})

describe('LangChain ChatAnthropic on a messages key', () => {
  test('invoke: text and usage_metadata as the mock reported them', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const message = await chatAnthropic(secret).invoke([new HumanMessage('Say hello')])
    expect(textOf(message)).toBe(TEXT)
    expect(message.usage_metadata).toMatchObject({ input_tokens: 23, output_tokens: 9, total_tokens: 32 })
    expect(message.response_metadata.stop_reason).toBe('end_turn')
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body.messages).toEqual([{ role: 'user', content: 'Say hello' }])
    expect(upstream[0]!.body.max_tokens).toBe(256)
  })

  test('stream: chunks concatenated to the text; usage_metadata with output tokens and a non-zero input count', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, (request) => chatTurn(request, textTurn))
    const full = await collect(await chatAnthropic(secret).stream('Say hello'))
    expect(textOf(full)).toBe(TEXT)
    expect(full.usage_metadata?.output_tokens).toBe(9)
    // LangChain takes input_tokens from message_start, before the upstream has reported usage;
    // the router puts its count_tokens estimate there, so it is not 0 (not the exact upstream count).
    expect(full.usage_metadata?.input_tokens).toBeGreaterThan(0)
    expect(lastUpstream().body.stream).toBe(true)
  })

  test('bindTools: one round — tool_use out, tool_result back as a tool message, final text', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, toolLoopAnswer(toolTurn, finalTurn))
    await langchainToolRound(chatAnthropic(secret))
    const upstream = upstreamCalls()
    expect(upstream).toHaveLength(2)
    expectToolDeclaredUpstream(upstream[0]!)
    expectToolResultUpstream(upstream[1]!, 'call_w1')
  })

  test('withStructuredOutput (default method: functionCalling): the forced tool_choice goes upstream; the tool input is parsed', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(chatAnthropic(secret).withStructuredOutput(weatherSchema).invoke('Weather in Zürich as JSON'))
    const upstream = lastUpstream()
    expect(upstream.body.tool_choice).toEqual({ type: 'function', function: { name: 'extract' } })
    expect(upstream.body.tools[0]).toMatchObject({ type: 'function', function: { name: 'extract', parameters: { properties: { city: { type: 'string' }, celsius: { type: 'number' } } } } })
    expect(outcome.error).toBeUndefined()
    expect(outcome.value).toEqual(structuredValue)
  })

  test('withStructuredOutput (method: jsonSchema): output_config.format becomes response_format upstream; the object is parsed', async () => {
    const secret = await createKey('messages')
    scriptChat(mocks.plain, structuredAnswer(structuredValue, structuredUsage))
    const outcome = await settle(chatAnthropic(secret).withStructuredOutput(weatherSchema, { method: 'jsonSchema' }).invoke('Weather in Zürich as JSON'))
    expectResponseFormatUpstream(lastUpstream())
    expect(outcome.error).toBeUndefined()
    expect(outcome.value).toEqual(structuredValue)
  })

  test('errors: the Anthropic SDK error classes with status, lc_error_code and the messages envelope, for no targets (402) and an unknown model (404)', async () => {
    const unrouted = await createKey('messages', null)
    const noRoute = (await settle(chatAnthropic(unrouted).invoke('Hi'))).error
    expect(noRoute?.constructor?.name).toBe('APIError')
    expect(noRoute.status).toBe(402)
    expect(noRoute.error).toEqual({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } })

    const secret = await createKey('messages')
    scriptChat(mocks.plain, unknownModel)
    const missing = (await settle(chatAnthropic(secret, 'nope/missing').invoke('Hi'))).error
    expect(missing?.constructor?.name).toBe('NotFoundError')
    expect(missing.status).toBe(404)
    expect(missing.lc_error_code).toBe('MODEL_NOT_FOUND')
    expect(missing.error).toEqual({ type: 'error', error: { type: 'not_found_error', message: expect.any(String) } })
    expect(missing.requestID).toBe(missing.headers.get('x-router-request-id'))
  })
})
