/**
 * Scripted chat-completions answers for the mock gateway: one assistant turn (text and/or tool
 * calls) as a chat.completion object, or as chat.completion.chunk SSE when the request streams.
 * Used by the client-library tests, where real SDKs decide the request shape.
 */
import type { MockGateway, MockReply, RecordedRequest } from './mock-gateway'

export interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
}

export interface ScriptedToolCall {
  id: string
  name: string
  args: Record<string, unknown>
}

export interface ChatTurn {
  /** Assistant text; streamed as `pieces` when given, else as one piece. */
  content?: string
  pieces?: string[]
  toolCalls?: ScriptedToolCall[]
  usage: ChatUsage
}

export const usageOf = (prompt: number, completion: number): ChatUsage => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion })

/** One assistant turn, buffered or streamed as the request asks. */
export function chatTurn(request: RecordedRequest, turn: ChatTurn): MockReply {
  const model = String(request.body?.model ?? 'unknown')
  const finish = turn.toolCalls?.length ? 'tool_calls' : 'stop'
  const base = { id: 'chatcmpl-script', created: 1_700_000_000, model }
  if (!request.body?.stream) {
    const message: Record<string, unknown> = { role: 'assistant', content: turn.content ?? null }
    if (turn.toolCalls?.length) {
      message.tool_calls = turn.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } }))
    }
    return { json: { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage: turn.usage } }
  }
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  })
  const events: unknown[] = [chunk({ role: 'assistant', content: '' })]
  const pieces = turn.pieces ?? (turn.content ? [turn.content] : [])
  for (const piece of pieces) events.push(chunk({ content: piece }))
  turn.toolCalls?.forEach((call, index) => {
    const args = JSON.stringify(call.args)
    const cut = Math.ceil(args.length / 2)
    events.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
    events.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(0, cut) } }] }))
    events.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(cut) } }] }))
  })
  events.push(chunk({}, finish))
  events.push({ ...base, object: 'chat.completion.chunk', choices: [], usage: turn.usage })
  events.push('[DONE]')
  return { sse: events }
}

/** Answers POST …/chat/completions with `answer`; anything else gets the mock's defaults. */
export function scriptChat(mock: MockGateway, answer: (request: RecordedRequest) => MockReply) {
  mock.handle((request) => (request.path.endsWith('/chat/completions') ? answer(request) : undefined))
}

/** A tool loop: a tool call first, then (once a `tool` message comes back) the final text. */
export function toolLoopAnswer(first: ChatTurn, final: ChatTurn) {
  return (request: RecordedRequest) => {
    const messages: any[] = Array.isArray(request.body?.messages) ? request.body.messages : []
    return chatTurn(request, messages.some((message) => message?.role === 'tool') ? final : first)
  }
}

/**
 * Structured output: the JSON `value` as the answer ONLY IF the request carried a json_schema
 * `response_format` whose schema has every key of `value` (or a forced tool call when the request
 * forces a function with `tool_choice`, answered as that tool's arguments); free text otherwise,
 * so a router that drops the format makes the client fail to parse.
 */
export function structuredAnswer(value: Record<string, unknown>, usage: ChatUsage, freeText = 'Zürich is cold today, about minus three degrees.') {
  return (request: RecordedRequest) => {
    const format = request.body?.response_format
    const properties = format?.json_schema?.schema?.properties
    const schemaFits = format?.type === 'json_schema' && properties && Object.keys(value).every((name) => name in properties)
    if (schemaFits) return chatTurn(request, { content: JSON.stringify(value), usage })
    const forced = request.body?.tool_choice?.type === 'function' ? request.body.tool_choice.function?.name : undefined
    if (forced) return chatTurn(request, { toolCalls: [{ id: 'call_structured', name: forced, args: value }], usage })
    return chatTurn(request, { content: freeText, usage })
  }
}
