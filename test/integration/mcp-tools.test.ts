/**
 * MCP tools on inference keys, run by the service (SPEC "MCP tools" and "POST /responses",
 * CONTRACT §7, SPEC "Request deadline"): the tools of the MCP servers attached to a key are offered
 * to the model beside the client's own; a turn that calls only those is run server-side and the
 * model is called again (at most 8 rounds); the client sees one answer (prose of every round,
 * usage summed, no server-run calls). A turn with a client tool goes to the client as it is.
 *
 * Real pieces on 127.0.0.1: the service (harness/server), a scripted model behind mock gateways
 * (harness/mock-gateway) and a real MCP server built with the official SDK (harness/mcp-server).
 * Clients are the official SDKs, plus raw fetch where the bytes matter.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI } from '@google/genai'
import OpenAI from 'openai'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import type { MockHandler, RecordedRequest } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { enrichmentOf } from '../harness/request-log'
import { bearerHeader, createInferenceKey, httpCall } from '../harness/api'
import { expectResponsesGrammar, parseClientSse } from '../harness/client-sse'
import { deadMcpUrl, startMcpServer, type McpTestServer } from '../harness/mcp-server'
import { addMcpServer } from '../../src/management/key-settings'
import { responseEvents, responseObject, responsesSse, type ResponsesTurn } from '../harness/responses-script'

// ---------------------------------------------------------------------------------------------
// Gateway kinds, by what they serve

/** Chat and native Responses (the body goes upstream to `/responses`). */
const NATIVE = 'groq'
/** Chat and native Responses: the failover target. */
const BACKUP = 'together'
/** Responses served by translation to chat upstream. */
const TRANSLATED = 'deepseek'

const MODEL = 'openai/gpt-4o-mini'
const SERVER_NAME = 'tools'

// ---------------------------------------------------------------------------------------------
// The scripted model

interface Turn {
  /** The round's prose ('' or absent: none). */
  text?: string
  /** Tool calls: `tool` is matched against the offered names ending `__<tool>`; otherwise used as-is (a client tool). */
  calls?: { tool: string; args: Record<string, unknown> }[]
  usage: { input: number; output: number }
}

const callId = (round: number, index: number) => `call_r${round}_${index}`

/** Which round a chat body is: one assistant message with tool calls per finished round. */
function chatRound(body: any): number {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : []
  return messages.filter((message) => message?.role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0).length
}

/** Which round a Responses body is: one run of `function_call` items per finished round. */
function responsesRound(body: any): number {
  const input: any[] = Array.isArray(body?.input) ? body.input : []
  let rounds = 0
  input.forEach((item, index) => {
    if (item?.type === 'function_call' && input[index - 1]?.type !== 'function_call') rounds++
  })
  return rounds
}

/** The function names a body offers (chat `function.name`, Responses `name`). */
function offeredNames(body: any): string[] {
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : []
  return tools.map((tool) => tool?.function?.name ?? tool?.name).filter((name): name is string => typeof name === 'string')
}

const offeredName = (body: any, tool: string) => offeredNames(body).find((name) => name.endsWith(`__${tool}`))

function resolvedCalls(body: any, round: number, turn: Turn) {
  return (turn.calls ?? []).map((call, index) => ({ id: callId(round, index), name: offeredName(body, call.tool) ?? call.tool, arguments: JSON.stringify(call.args) }))
}

/** Splits a string into two pieces (so streams carry fragments). */
const halves = (text: string): string[] => (text.length < 2 ? [text] : [text.slice(0, Math.ceil(text.length / 2)), text.slice(Math.ceil(text.length / 2))])

function chatTurnCompletion(body: any, round: number, turn: Turn) {
  const calls = resolvedCalls(body, round, turn)
  return {
    id: `chatcmpl-r${round}`,
    object: 'chat.completion',
    created: 1_700_000_000 + round,
    model: String(body?.model ?? MODEL),
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: turn.text ? turn.text : null,
          ...(calls.length > 0 ? { tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) } : {}),
        },
        finish_reason: calls.length > 0 ? 'tool_calls' : 'stop',
      },
    ],
    usage: { prompt_tokens: turn.usage.input, completion_tokens: turn.usage.output, total_tokens: turn.usage.input + turn.usage.output },
  }
}

function chatTurnChunks(body: any, round: number, turn: Turn): unknown[] {
  const calls = resolvedCalls(body, round, turn)
  const base = { id: `chatcmpl-r${round}`, object: 'chat.completion.chunk', created: 1_700_000_000 + round, model: String(body?.model ?? MODEL) }
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
  const chunks: unknown[] = [chunk({ role: 'assistant', content: '' })]
  for (const piece of turn.text ? halves(turn.text) : []) chunks.push(chunk({ content: piece }))
  calls.forEach((call, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
    for (const fragment of halves(call.arguments)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }))
  })
  chunks.push(chunk({}, calls.length > 0 ? 'tool_calls' : 'stop'))
  chunks.push({ ...base, choices: [], usage: { prompt_tokens: turn.usage.input, completion_tokens: turn.usage.output, total_tokens: turn.usage.input + turn.usage.output } })
  chunks.push('[DONE]')
  return chunks
}

/** A turn as the Responses script of the harness takes it (its ids tagged with the round: `resp_up_r0`, `msg_r0`, `fc_r0_0`). */
const responsesTurnOf = (body: any, round: number, turn: Turn): ResponsesTurn => ({
  text: turn.text,
  calls: resolvedCalls(body, round, turn).map((call) => ({ id: call.id, name: call.name, args: JSON.parse(call.arguments) })),
  usage: turn.usage,
})

/** A model that plays `turns` by round (the round read from the body, so failover targets agree). */
function scriptedModel(turns: Turn[]): MockHandler {
  return (request: RecordedRequest) => {
    const body = request.body
    if (request.path.endsWith('/chat/completions')) {
      const round = chatRound(body)
      const turn = turns[round]
      if (!turn) return { status: 400, json: { error: { message: `mock: no turn scripted for round ${round}`, type: 'invalid_request_error' } } }
      return body?.stream ? { sse: chatTurnChunks(body, round, turn) } : { json: chatTurnCompletion(body, round, turn) }
    }
    if (request.path.endsWith('/responses')) {
      const round = responsesRound(body)
      const turn = turns[round]
      if (!turn) return { status: 400, json: { error: { message: `mock: no turn scripted for round ${round}`, type: 'invalid_request_error' } } }
      const scripted = responsesTurnOf(body, round, turn)
      return body?.stream ? responsesSse(responseEvents(body, scripted, `r${round}`)) : { json: responseObject(body, scripted, `r${round}`) }
    }
    return undefined
  }
}

/** The common script: the model adds 2 and 3 with the server's tool, then answers. */
const U1 = { input: 11, output: 5 }
const U2 = { input: 23, output: 7 }
const U3 = { input: 37, output: 9 }
const addThenAnswer: Turn[] = [
  { text: 'Let me add.', calls: [{ tool: 'add', args: { a: 2, b: 3 } }], usage: U1 },
  { text: 'The sum is 5.', usage: U2 },
]
const mergedAnswer = 'Let me add.\n\nThe sum is 5.'
/** One turn calling a client tool and a server tool: it goes to the client as it is. */
const mixedTurn: Turn[] = [
  {
    text: 'Both.',
    calls: [
      { tool: 'get_weather', args: { city: 'Oslo' } },
      { tool: 'add', args: { a: 2, b: 3 } },
    ],
    usage: U1,
  },
]

// ---------------------------------------------------------------------------------------------
// Environment

interface Env extends AsyncDisposable {
  server: TestServer
  gateways: GatewaysEnv
  mcp: McpTestServer
}

/** The service with RT_WEBHOOK_ALLOW_PRIVATE (loopback MCP URLs) and a 500 ms tool limit, mocks per gateway kind, a live MCP server. */
async function startEnv(options: { gateways?: string[]; env?: Record<string, string> } = {}): Promise<Env> {
  const gateways = await startGateways(options.gateways ?? [NATIVE], { RT_WEBHOOK_ALLOW_PRIVATE: '1', RT_MCP_TOOL_TIMEOUT_MS: '500', ...options.env })
  const mcp = await startMcpServer()
  return {
    server: gateways.server,
    gateways,
    mcp,
    async [Symbol.asyncDispose]() {
      await mcp.close()
      await gateways[Symbol.asyncDispose]()
    },
  }
}

const mockOf = (env: Env, gateway = NATIVE) => env.gateways.mocks[gateway]!
const chatCalls = (env: Env, gateway = NATIVE) => mockOf(env, gateway).calls('/chat/completions')
const responsesCalls = (env: Env, gateway = NATIVE) => mockOf(env, gateway).calls('/responses')

interface ToolKey {
  id: string
  secret: string
  /** Attached server ids, by the name they were attached under. */
  serverIds: Record<string, string>
}

/**
 * An inference key of a shape routed (priority) to the gateways, with MCP servers attached
 * in-process (default: the env's live server as `tools`).
 */
async function toolKey(env: Env, shape: 'chat' | 'messages' | 'content', options: { gateways?: string[]; servers?: { url: string; name: string }[] } = {}): Promise<ToolKey> {
  const gateways = options.gateways ?? [NATIVE]
  const key = await createInferenceKey(env.server, {
    api_shape: shape,
    routing: { strategy: 'priority', targets: gateways.map((gateway) => ({ provider_key_id: env.gateways.providers[gateway] })) },
  })
  const serverIds: Record<string, string> = {}
  for (const attached of options.servers ?? [{ url: env.mcp.url, name: SERVER_NAME }]) {
    const listed = await addMcpServer(env.server.runtime, key.id, attached.url, attached.name)
    const row = listed.servers.find((entry) => entry.name === attached.name)
    expect(row).toBeDefined()
    serverIds[attached.name] = row!.id
  }
  return { id: key.id, secret: key.key, serverIds }
}

const openai = (env: Env, secret: string) => new OpenAI({ apiKey: secret, baseURL: env.server.baseUrl, maxRetries: 0 })
const anthropic = (env: Env, secret: string) => new Anthropic({ apiKey: secret, baseURL: env.server.rootUrl, maxRetries: 0 })
const genai = (env: Env, secret: string) => new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: env.server.rootUrl, apiVersion: 'v1' } })

/** A client tool, in chat form. */
const weatherChatTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}
/** The same client tool, in Responses form. */
const weatherResponsesTool = { type: 'function' as const, name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false }

/** The text of a Responses object: every output_text part of every message item. */
function responseText(response: any): string {
  return (response.output as any[])
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content as any[])
    .filter((part) => part.type === 'output_text')
    .map((part) => part.text as string)
    .join('')
}


/** The messages a round's body adds after the first round's (its finished rounds). */
const appended = (later: any, first: any) => (later.messages as any[]).slice((first.messages as any[]).length)

// =============================================================================================

describe('the MCP test server (harness)', () => {
  test('lists add/fails/throws/hang and answers through the official client as scripted', async () => {
    await using mcp = await startMcpServer()
    const tools = await mcp.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(['add', 'fails', 'throws', 'hang'])
    expect(tools[0]!.inputSchema).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] })
    expect(mcp.listCount).toBe(1)
    expect(mcp.calls).toEqual([])
    expect(await deadMcpUrl()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
  })
})

describe('offering the tools', () => {
  test('chat upstream: client tools first, then each MCP tool as a non-strict function tool named mcp__<server>__<tool> with its description and schema', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat')
    const listed = await env.mcp.listTools()
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: [weatherChatTool] })
    expect(completion.choices[0]!.message.content).toBe('Hello from the mock.')
    const body = chatCalls(env)[0]!.body
    expect(body.tools[0]).toEqual(weatherChatTool)
    expect(body.tools.slice(1)).toEqual(
      listed.map((tool) => ({ type: 'function', function: { name: `mcp__${SERVER_NAME}__${tool.name}`, description: tool.description, parameters: tool.inputSchema, strict: false } })),
    )
    expect(env.mcp.calls).toEqual([])
  })

  test('the tool list is cached: two requests, one tools/list', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat')
    const client = openai(env, key.secret)
    for (let index = 0; index < 2; index++) await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `hi ${index}` }] })
    const calls = chatCalls(env)
    expect(calls).toHaveLength(2)
    for (const call of calls) expect(offeredNames(call.body).filter((name) => name.startsWith('mcp__'))).toHaveLength(4)
    expect(env.mcp.listCount).toBe(1)
  })

  test('a dead server offers nothing; with no tools at all the body goes upstream byte for byte', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat', { servers: [{ url: await deadMcpUrl(), name: 'down' }] })
    const sent = `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', sent, bearerHeader(key.secret))
    expect(result.status).toBe(200)
    expect(result.json.choices[0].message.content).toBe('Hello from the mock.')
    const calls = chatCalls(env)
    expect(calls).toHaveLength(1)
    expect(calls[0]!.rawBody).toBe(sent)
    expect(calls[0]!.body.tools).toBeUndefined()
  })

  test('a dead server beside a live one: only the live server tools are offered, and they run', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat', { servers: [{ url: await deadMcpUrl(), name: 'down' }, { url: env.mcp.url, name: SERVER_NAME }] })
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    expect(completion.choices[0]!.message.content).toBe(mergedAnswer)
    const names = offeredNames(chatCalls(env)[0]!.body)
    expect(names).toHaveLength(4)
    for (const name of names) expect(name.startsWith(`mcp__${SERVER_NAME}__`)).toBe(true)
    expect(names.some((name) => name.includes('down'))).toBe(false)
    expect(env.mcp.callCount('add')).toBe(1)
  })

  test('a server that goes away after its tools were listed: the call is an error text for the model, the answer goes on, and its tools are no longer offered', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const client = openai(env, key.secret)
    expect((await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })).choices[0]!.message.content).toBe(mergedAnswer)
    await env.mcp.close()
    const broken = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    expect(broken.choices[0]!.message.content).toBe(mergedAnswer)
    const toolMessage = chatCalls(env).at(-1)!.body.messages.at(-1)
    expect(toolMessage.role).toBe('tool')
    expect(toolMessage.content).toStartWith('Error: the MCP server could not be reached')
    // The next request is served as a plain one: nothing offered, one upstream call.
    const before = chatCalls(env).length
    const plain = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
    expect(plain.choices[0]!.message.content).toBe('Let me add.')
    expect(chatCalls(env)).toHaveLength(before + 1)
    expect(chatCalls(env).at(-1)!.body.tools).toBeUndefined()
  })

  test('a key with tools, on Responses-native upstream: {type:function, name, description, parameters} after the client tools', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat')
    mockOf(env).handle(scriptedModel([{ text: 'No tools needed.', usage: U1 }]))
    const listed = await env.mcp.listTools()
    const response = await openai(env, key.secret).responses.create({ model: MODEL, input: [{ role: 'user', content: 'hi' }], tools: [weatherResponsesTool] })
    expect(responseText(response)).toBe('No tools needed.')
    const body = responsesCalls(env)[0]!.body
    expect(body.tools[0]).toEqual(weatherResponsesTool)
    expect(body.tools).toHaveLength(1 + listed.length)
    listed.forEach((tool, index) => {
      expect(body.tools[index + 1]).toMatchObject({ type: 'function', name: `mcp__${SERVER_NAME}__${tool.name}`, description: tool.description, parameters: tool.inputSchema })
    })
  })
})

// =============================================================================================

describe('/v1/chat/completions (chat key)', () => {
  test('buffered: the server tool runs, the model is called again with the results, the client gets one answer with usage summed', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    const choice = completion.choices[0]!
    expect(choice.message.content).toBe(mergedAnswer)
    expect(choice.message.tool_calls ?? []).toEqual([])
    expect(choice.finish_reason).toBe('stop')
    expect(completion.usage?.prompt_tokens).toBe(U1.input + U2.input)
    expect(completion.usage?.completion_tokens).toBe(U1.output + U2.output)

    expect(env.mcp.calls.map((call) => [call.name, call.args])).toEqual([['add', { a: 2, b: 3 }]])
    const [first, second] = chatCalls(env)
    expect(chatCalls(env)).toHaveLength(2)
    const addName = offeredName(first!.body, 'add')!
    expect(addName).toBe(`mcp__${SERVER_NAME}__add`)
    expect(second!.body.tools).toEqual(first!.body.tools)
    expect(second!.body.messages).toEqual([
      ...first!.body.messages,
      { role: 'assistant', content: 'Let me add.', tool_calls: [{ id: callId(0, 0), type: 'function', function: { name: addName, arguments: '{"a":2,"b":3}' } }] },
      { role: 'tool', tool_call_id: callId(0, 0), content: '5' },
    ])

    expect(await enrichmentOf(env.server, key.id)).toEqual({
      mcp: { rounds: 2, calls: [{ name: 'add', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: true }] },
    })
  })

  test('streamed: prose of both rounds in order, no tool-call deltas, finish stop, usage summed (SDK accumulator)', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const stream = openai(env, key.secret).chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }], stream_options: { include_usage: true } })
    const chunks: any[] = []
    for await (const chunk of stream) chunks.push(chunk)
    const final = await stream.finalChatCompletion()
    expect(final.choices[0]!.message.content).toBe(mergedAnswer)
    expect(final.choices[0]!.message.tool_calls ?? []).toEqual([])
    expect(final.choices[0]!.finish_reason).toBe('stop')
    expect(chunks.some((chunk) => chunk.choices?.some((choice: any) => choice.delta?.tool_calls))).toBe(false)
    expect(chunks.filter((chunk) => chunk.choices?.some((choice: any) => choice.finish_reason))).toHaveLength(1)
    const usage = chunks.findLast((chunk) => chunk.usage)?.usage
    expect(usage?.prompt_tokens).toBe(U1.input + U2.input)
    expect(usage?.completion_tokens).toBe(U1.output + U2.output)

    expect(env.mcp.callCount('add')).toBe(1)
    const calls = chatCalls(env)
    expect(calls).toHaveLength(2)
    expect(appended(calls[1]!.body, calls[0]!.body)).toEqual([
      { role: 'assistant', content: 'Let me add.', tool_calls: [{ id: callId(0, 0), type: 'function', function: { name: `mcp__${SERVER_NAME}__add`, arguments: '{"a":2,"b":3}' } }] },
      { role: 'tool', tool_call_id: callId(0, 0), content: '5' },
    ])
    const log = await enrichmentOf(env.server, key.id)
    expect(log.mcp.rounds).toBe(2)
    expect(log.mcp.calls).toEqual([{ name: 'add', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: true }])
  })

  test('three rounds, parallel calls, error results (isError, JSON-RPC error); empty prose skipped in the join', async () => {
    await using env = await startEnv()
    mockOf(env).handle(
      scriptedModel([
        {
          text: 'Let me check.',
          calls: [
            { tool: 'add', args: { a: 2, b: 3 } },
            { tool: 'fails', args: {} },
            { tool: 'throws', args: {} },
          ],
          usage: U1,
        },
        { text: '', calls: [{ tool: 'add', args: { a: 1, b: 1 } }], usage: U2 },
        { text: 'Done: 5 and 2.', usage: U3 },
      ]),
    )
    const key = await toolKey(env, 'chat')
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Go' }] })
    expect(completion.choices[0]!.message.content).toBe('Let me check.\n\nDone: 5 and 2.')
    expect(completion.choices[0]!.message.tool_calls ?? []).toEqual([])
    expect(completion.choices[0]!.finish_reason).toBe('stop')
    expect(completion.usage?.prompt_tokens).toBe(U1.input + U2.input + U3.input)
    expect(completion.usage?.completion_tokens).toBe(U1.output + U2.output + U3.output)

    const calls = chatCalls(env)
    expect(calls).toHaveLength(3)
    const round2 = appended(calls[1]!.body, calls[0]!.body)
    expect(round2[0]).toMatchObject({ role: 'assistant', content: 'Let me check.' })
    expect(round2[0].tool_calls.map((call: any) => call.id)).toEqual([callId(0, 0), callId(0, 1), callId(0, 2)])
    expect(round2.slice(1).map((message: any) => [message.role, message.tool_call_id])).toEqual([
      ['tool', callId(0, 0)],
      ['tool', callId(0, 1)],
      ['tool', callId(0, 2)],
    ])
    expect(round2[1].content).toBe('5')
    expect(round2[2].content).toBe('Error: boom')
    expect(round2[3].content).toStartWith('Error:')
    expect(round2[3].content).toContain('kaboom')
    const round3 = appended(calls[2]!.body, calls[0]!.body)
    expect(round3.slice(0, 4)).toEqual(round2)
    expect(round3[4].tool_calls).toEqual([{ id: callId(1, 0), type: 'function', function: { name: `mcp__${SERVER_NAME}__add`, arguments: '{"a":1,"b":1}' } }])
    expect(round3[5]).toEqual({ role: 'tool', tool_call_id: callId(1, 0), content: '2' })
    expect(round3).toHaveLength(6)

    expect(env.mcp.calls.filter((call) => call.name === 'add').map((call) => call.args)).toEqual([
      { a: 2, b: 3 },
      { a: 1, b: 1 },
    ])
    const log = await enrichmentOf(env.server, key.id)
    expect(log.mcp.rounds).toBe(3)
    const byName = (a: any, b: any) => a.name.localeCompare(b.name) || Number(a.ok) - Number(b.ok)
    expect([...log.mcp.calls].sort(byName)).toEqual(
      [
        { name: 'add', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: true },
        { name: 'add', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: true },
        { name: 'fails', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: false },
        { name: 'throws', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: false },
      ].sort(byName),
    )
  })

  test('one round calls run in parallel; a tool over RT_MCP_TOOL_TIMEOUT_MS is an Error: result and the request succeeds', async () => {
    await using env = await startEnv()
    mockOf(env).handle(
      scriptedModel([
        {
          text: 'Waiting.',
          calls: [
            { tool: 'hang', args: {} },
            { tool: 'hang', args: {} },
          ],
          usage: U1,
        },
        { text: 'Both timed out.', usage: U2 },
      ]),
    )
    const key = await toolKey(env, 'chat')
    const started = performance.now()
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Wait' }] })
    const elapsed = performance.now() - started
    expect(completion.choices[0]!.message.content).toBe('Waiting.\n\nBoth timed out.')
    // The 500 ms limit was waited for (once: both calls ran at the same time).
    expect(elapsed).toBeGreaterThan(450)
    expect(elapsed).toBeLessThan(5000)
    const hangs = env.mcp.calls.filter((call) => call.name === 'hang')
    expect(hangs).toHaveLength(2)
    expect(Math.abs(hangs[0]!.startedAt - hangs[1]!.startedAt)).toBeLessThan(300)
    const results = appended(chatCalls(env)[1]!.body, chatCalls(env)[0]!.body).filter((message: any) => message.role === 'tool')
    expect(results).toHaveLength(2)
    for (const result of results) expect(result.content).toStartWith('Error:')
    const log = await enrichmentOf(env.server, key.id)
    expect(log.mcp.calls.map((call: any) => [call.name, call.ok])).toEqual([
      ['hang', false],
      ['hang', false],
    ])
  })

  test('a turn calling only a client tool goes to the client as it is; nothing runs', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel([{ text: 'Checking.', calls: [{ tool: 'get_weather', args: { city: 'Oslo' } }], usage: U1 }]))
    const key = await toolKey(env, 'chat')
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools: [weatherChatTool] })
    const choice = completion.choices[0]!
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.message.content).toBe('Checking.')
    expect(choice.message.tool_calls?.map((call: any) => [call.id, call.function.name, call.function.arguments])).toEqual([[callId(0, 0), 'get_weather', '{"city":"Oslo"}']])
    expect(chatCalls(env)).toHaveLength(1)
    expect(env.mcp.calls).toEqual([])
  })

  test('a turn mixing a client tool and a server tool goes to the client whole, buffered and streamed; nothing runs', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(mixedTurn))
    const key = await toolKey(env, 'chat')
    const client = openai(env, key.secret)
    const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Weather and sum?' }], tools: [weatherChatTool] }

    const buffered = await client.chat.completions.create(request)
    expect(buffered.choices[0]!.finish_reason).toBe('tool_calls')
    expect(buffered.choices[0]!.message.content).toBe('Both.')
    expect(buffered.choices[0]!.message.tool_calls?.map((call: any) => [call.function.name, call.function.arguments])).toEqual([
      ['get_weather', '{"city":"Oslo"}'],
      [`mcp__${SERVER_NAME}__add`, '{"a":2,"b":3}'],
    ])

    const stream = client.chat.completions.stream(request)
    const final = await stream.finalChatCompletion()
    expect(final.choices[0]!.finish_reason).toBe('tool_calls')
    expect(final.choices[0]!.message.content).toBe('Both.')
    expect(final.choices[0]!.message.tool_calls?.map((call: any) => [call.id, call.function.name, call.function.arguments])).toEqual([
      [callId(0, 0), 'get_weather', '{"city":"Oslo"}'],
      [callId(0, 1), `mcp__${SERVER_NAME}__add`, '{"a":2,"b":3}'],
    ])

    expect(chatCalls(env)).toHaveLength(2)
    expect(env.mcp.calls).toEqual([])
  })

  test('a client tool called after a server round: the client gets the earlier prose and the client tool call', async () => {
    await using env = await startEnv()
    mockOf(env).handle(
      scriptedModel([
        { text: 'Let me add.', calls: [{ tool: 'add', args: { a: 2, b: 3 } }], usage: U1 },
        { text: 'Now the weather.', calls: [{ tool: 'get_weather', args: { city: 'Oslo' } }], usage: U2 },
      ]),
    )
    const key = await toolKey(env, 'chat')
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Sum, then weather' }], tools: [weatherChatTool] })
    const choice = completion.choices[0]!
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.message.content).toBe('Let me add.\n\nNow the weather.')
    expect(choice.message.tool_calls?.map((call: any) => call.function.name)).toEqual(['get_weather'])
    expect(completion.usage?.prompt_tokens).toBe(U1.input + U2.input)
    expect(completion.usage?.completion_tokens).toBe(U1.output + U2.output)
    expect(env.mcp.callCount('add')).toBe(1)
    expect(chatCalls(env)).toHaveLength(2)
  })

  test('at most 8 model rounds', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(Array.from({ length: 12 }, (_, round) => ({ text: `Round ${round}.`, calls: [{ tool: 'add', args: { a: round, b: 1 } }], usage: U1 }))))
    const key = await toolKey(env, 'chat')
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Loop' }] }, bearerHeader(key.secret))
    expect(result.status).toBe(200)
    expect(chatCalls(env)).toHaveLength(8)
    expect(env.mcp.callCount('add')).toBe(7)
    expect((await enrichmentOf(env.server, key.id)).mcp.rounds).toBe(8)
    // The eighth round is asked to answer in prose; a model that calls the server's tool anyway has
    // that call dropped: the client never sees a tool it did not offer.
    expect(chatCalls(env).map((call) => call.body.tool_choice)).toEqual([undefined, undefined, undefined, undefined, undefined, undefined, undefined, 'none'])
    const message = result.json.choices[0].message
    expect(message.tool_calls ?? []).toEqual([])
    expect(result.json.choices[0].finish_reason).toBe('stop')
    expect(message.content).toBe(Array.from({ length: 8 }, (_, round) => `Round ${round}.`).join('\n\n'))
    expect(result.json.usage.prompt_tokens).toBe(8 * U1.input)

    const streamed = await openai(env, key.secret).chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'Loop' }] }).finalChatCompletion()
    expect(streamed.choices[0]!.message.tool_calls ?? []).toEqual([])
    expect(streamed.choices[0]!.finish_reason).toBe('stop')
  })

  test('a first round without a server tool call is the upstream answer as it came (vendor fields kept)', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat')
    mockOf(env).handle((request) => (request.path.endsWith('/chat/completions') ? { json: { ...chatTurnCompletion(request.body, 0, { text: 'Plain.', usage: U1 }), system_fingerprint: 'fp_vendor' } } : undefined))
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(key.secret))
    expect(result.status).toBe(200)
    expect(result.json.system_fingerprint).toBe('fp_vendor')
    expect(result.json.choices[0].message.content).toBe('Plain.')
    expect(chatCalls(env)[0]!.body.tools.length).toBeGreaterThan(0)
  })

  test('a later round that fails: the answer is the failure, and the tokens of the rounds that ran are logged', async () => {
    await using env = await startEnv()
    const key = await toolKey(env, 'chat')
    mockOf(env).handle((request) => {
      if (!request.path.endsWith('/chat/completions')) return undefined
      if (chatRound(request.body) === 0) return { json: chatTurnCompletion(request.body, 0, addThenAnswer[0]!) }
      return { status: 400, json: { error: { message: 'context too long', type: 'invalid_request_error' } } }
    })
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] }, bearerHeader(key.secret))
    expect(result.status).toBe(400)
    expect(result.json.error.message).toBe('context too long')
    env.server.runtime.logQueue.flush()
    const database = new Database(join(env.server.dataDir, 'router.db'), { readonly: true })
    try {
      const row = database.query('select status, input_tokens, output_tokens, attempts from request_logs where key_id = ?').get(key.id) as Record<string, number>
      expect(row).toEqual({ status: 400, input_tokens: U1.input, output_tokens: U1.output, attempts: 2 })
    } finally {
      database.close()
    }
  })

  test('finished MCP requests are never cancelled after the fact (no notifications/cancelled once the answers are in)', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    expect(completion.choices[0]!.message.content).toBe(mergedAnswer)
    // Past the listing's 3 s limit: a timer left armed would fire now and cancel requests that finished.
    await Bun.sleep(3300)
    expect(env.mcp.methods).toContain('tools/call')
    expect(env.mcp.methods).not.toContain('notifications/cancelled')
  })

  test('failover per model call: round 2 fails over to the second target, and the tool is not run again', async () => {
    await using env = await startEnv({ gateways: [NATIVE, BACKUP] })
    const script = scriptedModel(addThenAnswer)
    mockOf(env, NATIVE).handle((request) => (chatRound(request.body) === 0 ? script(request) : { status: 500, json: { error: { message: 'mock: round 2 fails here', type: 'server_error' } } }))
    mockOf(env, BACKUP).handle(script)
    const key = await toolKey(env, 'chat', { gateways: [NATIVE, BACKUP] })
    const completion = await openai(env, key.secret).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    expect(completion.choices[0]!.message.content).toBe(mergedAnswer)
    expect(completion.usage?.prompt_tokens).toBe(U1.input + U2.input)
    expect(env.mcp.callCount('add')).toBe(1)
    expect(env.mcp.calls).toHaveLength(1)
    const native = chatCalls(env, NATIVE)
    const backup = chatCalls(env, BACKUP)
    expect(native.map((call) => chatRound(call.body))).toEqual([0, 1])
    expect(backup).toHaveLength(1)
    expect(appended(backup[0]!.body, native[0]!.body)).toEqual(appended(native[1]!.body, native[0]!.body))
    expect(appended(backup[0]!.body, native[0]!.body).at(-1)).toEqual({ role: 'tool', tool_call_id: callId(0, 0), content: '5' })
  })
})

// =============================================================================================

describe('/v1/responses (chat key)', () => {
  test('native upstream, buffered: function_call and function_call_output items go into round 2 input; one Response comes back', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const input = [{ role: 'user' as const, content: 'What is 2+3?' }]
    const response = await openai(env, key.secret).responses.create({ model: MODEL, input })
    expect(response.status).toBe('completed')
    expect(responseText(response)).toBe(mergedAnswer)
    expect(response.output.filter((item) => item.type === 'function_call')).toEqual([])
    expect(response.usage?.input_tokens).toBe(U1.input + U2.input)
    expect(response.usage?.output_tokens).toBe(U1.output + U2.output)

    const calls = responsesCalls(env)
    expect(calls).toHaveLength(2)
    expect(chatCalls(env)).toHaveLength(0)
    const addName = offeredName(calls[0]!.body, 'add')!
    expect(addName).toBe(`mcp__${SERVER_NAME}__add`)
    const second: any[] = calls[1]!.body.input
    expect(second.slice(0, input.length)).toEqual(input)
    const rest = second.slice(input.length)
    const callAt = rest.findIndex((item) => item.type === 'function_call')
    const outputAt = rest.findIndex((item) => item.type === 'function_call_output')
    expect(rest[callAt]).toMatchObject({ type: 'function_call', call_id: callId(0, 0), name: addName, arguments: '{"a":2,"b":3}' })
    expect(rest[outputAt]).toMatchObject({ type: 'function_call_output', call_id: callId(0, 0), output: '5' })
    expect(outputAt).toBeGreaterThan(callAt)
    expect(env.mcp.calls.map((call) => [call.name, call.args])).toEqual([['add', { a: 2, b: 3 }]])
    expect((await enrichmentOf(env.server, key.id)).mcp).toEqual({ rounds: 2, calls: [{ name: 'add', server: key.serverIds[SERVER_NAME], ms: expect.any(Number), ok: true }] })
  })

  test('native upstream, streamed: one Response stream with the prose of both rounds, no function_call items, usage summed', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat')
    const input = [{ role: 'user' as const, content: 'What is 2+3?' }]
    const stream = openai(env, key.secret).responses.stream({ model: MODEL, input })
    const types: string[] = []
    for await (const event of stream) types.push(event.type)
    const final = await stream.finalResponse()
    expect(final.status).toBe('completed')
    expect(responseText(final)).toBe(mergedAnswer)
    expect(final.output.filter((item) => item.type === 'function_call')).toEqual([])
    expect(final.usage?.input_tokens).toBe(U1.input + U2.input)
    expect(final.usage?.output_tokens).toBe(U1.output + U2.output)
    expect(types.filter((type) => type.startsWith('response.function_call_arguments'))).toEqual([])
    expect(types.filter((type) => type === 'response.created')).toHaveLength(1)
    expect(types.filter((type) => type === 'response.completed')).toHaveLength(1)
    expect(responsesCalls(env)).toHaveLength(2)
    expect(env.mcp.callCount('add')).toBe(1)

    // The same through raw fetch: the stream grammar holds across rounds.
    const raw = await fetch(`${env.server.baseUrl}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearerHeader(key.secret) },
      body: JSON.stringify({ model: MODEL, input, stream: true }),
    })
    expect(raw.status).toBe(200)
    const events = parseClientSse(await raw.text())
    expectResponsesGrammar(events)
    expect(events.some((event) => event.data.item?.type === 'function_call')).toBe(false)
    expect(events.at(-1)!.data.type).toBe('response.completed')
    expect(env.mcp.callCount('add')).toBe(2)
  })

  test('native upstream: a turn with a client tool and a server tool comes back as function_call items; nothing runs', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(mixedTurn))
    const key = await toolKey(env, 'chat')
    const response = await openai(env, key.secret).responses.create({ model: MODEL, input: [{ role: 'user', content: 'Weather and sum?' }], tools: [weatherResponsesTool] })
    const calls = response.output.filter((item) => item.type === 'function_call') as any[]
    expect(calls.map((item) => [item.call_id, item.name, item.arguments])).toEqual([
      [callId(0, 0), 'get_weather', '{"city":"Oslo"}'],
      [callId(0, 1), `mcp__${SERVER_NAME}__add`, '{"a":2,"b":3}'],
    ])
    expect(responsesCalls(env)).toHaveLength(1)
    expect(env.mcp.calls).toEqual([])
  })

  test('translated upstream (chat), buffered and streamed: tools offered in chat form, rounds appended as chat messages, one Response', async () => {
    await using env = await startEnv({ gateways: [TRANSLATED] })
    mockOf(env, TRANSLATED).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'chat', { gateways: [TRANSLATED] })
    const client = openai(env, key.secret)
    const input = [{ role: 'user' as const, content: 'What is 2+3?' }]

    const buffered = await client.responses.create({ model: MODEL, input })
    expect(responseText(buffered)).toBe(mergedAnswer)
    expect(buffered.output.filter((item) => item.type === 'function_call')).toEqual([])
    expect(buffered.usage?.input_tokens).toBe(U1.input + U2.input)
    expect(buffered.usage?.output_tokens).toBe(U1.output + U2.output)
    const calls = chatCalls(env, TRANSLATED)
    expect(calls).toHaveLength(2)
    expect(responsesCalls(env, TRANSLATED)).toHaveLength(0)
    expect(calls[0]!.body.tools.map((tool: any) => tool.function.name)).toEqual(['add', 'fails', 'throws', 'hang'].map((name) => `mcp__${SERVER_NAME}__${name}`))
    expect(appended(calls[1]!.body, calls[0]!.body).at(-1)).toEqual({ role: 'tool', tool_call_id: callId(0, 0), content: '5' })

    const final = await client.responses.stream({ model: MODEL, input }).finalResponse()
    expect(responseText(final)).toBe(mergedAnswer)
    expect(final.output.filter((item) => item.type === 'function_call')).toEqual([])
    expect(final.usage?.input_tokens).toBe(U1.input + U2.input)
    expect(final.usage?.output_tokens).toBe(U1.output + U2.output)
    expect(chatCalls(env, TRANSLATED)).toHaveLength(4)
    expect(env.mcp.callCount('add')).toBe(2)
  })
})

// =============================================================================================

describe('/v1/messages (messages key)', () => {
  const textOf = (message: Anthropic.Message) =>
    message.content
      .filter((block) => block.type === 'text')
      .map((block) => (block as Anthropic.TextBlock).text)
      .join('')

  test('buffered: one message with the prose of both rounds, end_turn, usage summed', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'messages')
    const message = await anthropic(env, key.secret).messages.create({ model: 'anthropic/claude-fx', max_tokens: 100, messages: [{ role: 'user', content: 'What is 2+3?' }] })
    expect(textOf(message)).toBe(mergedAnswer)
    expect(message.content.filter((block) => block.type === 'tool_use')).toEqual([])
    expect(message.stop_reason).toBe('end_turn')
    expect(message.usage.input_tokens).toBe(U1.input + U2.input)
    expect(message.usage.output_tokens).toBe(U1.output + U2.output)
    const calls = chatCalls(env)
    expect(calls).toHaveLength(2)
    expect(offeredName(calls[0]!.body, 'add')).toBe(`mcp__${SERVER_NAME}__add`)
    expect(appended(calls[1]!.body, calls[0]!.body)).toEqual([
      { role: 'assistant', content: 'Let me add.', tool_calls: [{ id: callId(0, 0), type: 'function', function: { name: `mcp__${SERVER_NAME}__add`, arguments: '{"a":2,"b":3}' } }] },
      { role: 'tool', tool_call_id: callId(0, 0), content: '5' },
    ])
    expect(env.mcp.callCount('add')).toBe(1)
  })

  test('streamed: finalMessage has the prose of both rounds, no tool_use, usage summed', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'messages')
    const message = await anthropic(env, key.secret).messages.stream({ model: 'anthropic/claude-fx', max_tokens: 100, messages: [{ role: 'user', content: 'What is 2+3?' }] }).finalMessage()
    expect(textOf(message)).toBe(mergedAnswer)
    expect(message.content.filter((block) => block.type === 'tool_use')).toEqual([])
    expect(message.stop_reason).toBe('end_turn')
    expect(message.usage.input_tokens).toBe(U1.input + U2.input)
    expect(message.usage.output_tokens).toBe(U1.output + U2.output)
    expect(chatCalls(env)).toHaveLength(2)
    expect(env.mcp.callCount('add')).toBe(1)
  })

  test('a turn with a client tool and a server tool comes back as tool_use blocks, stop_reason tool_use; nothing runs', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(mixedTurn))
    const key = await toolKey(env, 'messages')
    const message = await anthropic(env, key.secret).messages.create({
      model: 'anthropic/claude-fx',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Weather and sum?' }],
      tools: [{ name: 'get_weather', description: 'Weather by city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }],
    })
    expect(message.stop_reason).toBe('tool_use')
    expect(textOf(message)).toBe('Both.')
    expect(message.content.filter((block) => block.type === 'tool_use').map((block: any) => [block.name, block.input])).toEqual([
      ['get_weather', { city: 'Oslo' }],
      [`mcp__${SERVER_NAME}__add`, { a: 2, b: 3 }],
    ])
    const body = chatCalls(env)[0]!.body
    expect(offeredNames(body)[0]).toBe('get_weather')
    expect(offeredNames(body).slice(1)).toEqual(['add', 'fails', 'throws', 'hang'].map((name) => `mcp__${SERVER_NAME}__${name}`))
    expect(chatCalls(env)).toHaveLength(1)
    expect(env.mcp.calls).toEqual([])
  })
})

// =============================================================================================

describe(':generateContent (content key)', () => {
  test('buffered: one candidate with the prose of both rounds, no function calls, usage summed', async () => {
    await using env = await startEnv()
    mockOf(env).handle(scriptedModel(addThenAnswer))
    const key = await toolKey(env, 'content')
    const response = await genai(env, key.secret).models.generateContent({ model: 'google/gemini-fx', contents: 'What is 2+3?' })
    expect(response.text).toBe(mergedAnswer)
    expect(response.functionCalls ?? []).toEqual([])
    expect(response.candidates?.[0]?.finishReason).toBe('STOP' as any)
    expect(response.usageMetadata?.promptTokenCount).toBe(U1.input + U2.input)
    expect(response.usageMetadata?.candidatesTokenCount).toBe(U1.output + U2.output)
    const calls = chatCalls(env)
    expect(calls).toHaveLength(2)
    expect(offeredName(calls[0]!.body, 'add')).toBe(`mcp__${SERVER_NAME}__add`)
    expect(appended(calls[1]!.body, calls[0]!.body).at(-1)).toEqual({ role: 'tool', tool_call_id: callId(0, 0), content: '5' })
    expect(env.mcp.calls.map((call) => [call.name, call.args])).toEqual([['add', { a: 2, b: 3 }]])
  })
})

// =============================================================================================

describe('request deadline across MCP rounds', () => {
  /** A 1.5 s deadline and a tool limit above it: the hanging tool uses up the request's time. */
  const deadlineEnv = () => startEnv({ env: { RT_DEADLINE_MS: '1500', RT_MCP_TOOL_TIMEOUT_MS: '5000' } })
  const hangScript: Turn[] = [
    { text: 'Waiting.', calls: [{ tool: 'hang', args: {} }], usage: U1 },
    { text: 'Never said.', usage: U2 },
  ]
  /**
   * The hanging tool is cut at the deadline; a second model call may still just start with the
   * last milliseconds (its timer cut to the time left), so round 2 answers late to be sure it
   * cannot beat the deadline.
   */
  const lateSecondRound = (): MockHandler => {
    const script = scriptedModel(hangScript)
    return async (request) => {
      const reply = await script(request)
      return chatRound(request.body) > 0 && reply && !(reply instanceof Response) ? { ...reply, delayMs: 1500 } : reply
    }
  }

  test('streamed: a stream whose next round cannot start ends with an error record deadline_exceeded', async () => {
    await using env = await deadlineEnv()
    mockOf(env).handle(lateSecondRound())
    const key = await toolKey(env, 'chat')
    const started = performance.now()
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Wait' }], stream: true }, bearerHeader(key.secret))
    expect(performance.now() - started).toBeLessThan(4500)
    expect(result.status).toBe(200)
    const events = parseClientSse(result.text)
    const prose = events
      .filter((event) => event.data !== '[DONE]')
      .map((event) => event.data.choices?.[0]?.delta?.content ?? '')
      .join('')
    expect(prose).toBe('Waiting.')
    const last = events.filter((event) => event.data !== '[DONE]').at(-1)!
    expect(last.data.error?.code).toBe('deadline_exceeded')
    expect(chatCalls(env).length).toBeLessThanOrEqual(2)
    expect(env.mcp.callCount('hang')).toBe(1)
  })

  test('buffered: 504 deadline_exceeded', async () => {
    await using env = await deadlineEnv()
    mockOf(env).handle(lateSecondRound())
    const key = await toolKey(env, 'chat')
    const started = performance.now()
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Wait' }] }, bearerHeader(key.secret))
    expect(performance.now() - started).toBeLessThan(4500)
    expect(result.status).toBe(504)
    expect(result.json?.error?.code).toBe('deadline_exceeded')
    expect(chatCalls(env).length).toBeLessThanOrEqual(2)
    expect(env.mcp.callCount('hang')).toBe(1)
  })
})
