/**
 * A tool loop's edits to an upstream request, per upstream dialect: the offered tools added beside
 * the client's own, and each finished round (the model's prose and tool calls, then the tools'
 * results) appended to the conversation — as chat messages on `/chat/completions`, as input items on
 * `/responses`. The client's own body is never changed; a new body is made per attempt.
 */
type Json = Record<string, unknown>

export interface ToolSpec {
  name: string
  description: string | undefined
  parameters: Record<string, unknown>
}

/** One finished round: what the model said, the calls it made and each call's result text. */
export interface FinishedRound {
  text: string
  calls: readonly { id: string; name: string; arguments: string; result: string }[]
}

/** Function names the client's own tools use, in either body form (chat's `function.name`, or Responses' `name`). */
export function clientToolNames(body: Json): Set<string> {
  const names = new Set<string>()
  if (!Array.isArray(body.tools)) return names
  for (const tool of body.tools as Json[]) {
    if (typeof tool !== 'object' || tool === null) continue
    const fn = tool.function as Json | undefined
    if (typeof fn?.name === 'string') names.add(fn.name)
    else if (typeof tool.name === 'string') names.add(tool.name)
  }
  return names
}

function chatTool(tool: ToolSpec): Json {
  // Not strict: MCP schemas are not written for strict mode (optional fields, open objects).
  return { type: 'function', function: { name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), parameters: tool.parameters, strict: false } }
}

function responsesTool(tool: ToolSpec): Json {
  return { type: 'function', name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), parameters: tool.parameters, strict: false }
}

/**
 * A chat body with the tools offered and the finished rounds appended. `last`: the last round the
 * loop allows, where the model must answer in prose (`tool_choice: none`). A stream asks for usage,
 * which the loop sums over rounds.
 */
export function extendChatBody(body: Json, tools: readonly ToolSpec[], rounds: readonly FinishedRound[], last: boolean): Json {
  const extended: Json = { ...body, tools: [...(Array.isArray(body.tools) ? body.tools : []), ...tools.map(chatTool)] }
  if (last) extended.tool_choice = 'none'
  if (body.stream === true) extended.stream_options = { ...(typeof body.stream_options === 'object' && body.stream_options !== null ? body.stream_options : {}), include_usage: true }
  if (rounds.length > 0) {
    const messages = [...(body.messages as unknown[])]
    for (const round of rounds) {
      messages.push({
        role: 'assistant',
        content: round.text === '' ? null : round.text,
        tool_calls: round.calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
      })
      for (const call of round.calls) messages.push({ role: 'tool', tool_call_id: call.id, content: call.result })
    }
    extended.messages = messages
  }
  return extended
}

/** A Responses body with the tools offered and the finished rounds appended as input items (`last` as for chat). */
export function extendResponsesBody(body: Json, tools: readonly ToolSpec[], rounds: readonly FinishedRound[], last: boolean): Json {
  const extended: Json = { ...body, tools: [...(Array.isArray(body.tools) ? body.tools : []), ...tools.map(responsesTool)] }
  if (last) extended.tool_choice = 'none'
  if (rounds.length > 0) {
    const input: unknown[] = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : [...(body.input as unknown[])]
    for (const round of rounds) {
      if (round.text !== '') input.push({ role: 'assistant', content: round.text })
      for (const call of round.calls) input.push({ type: 'function_call', call_id: call.id, name: call.name, arguments: call.arguments })
      for (const call of round.calls) input.push({ type: 'function_call_output', call_id: call.id, output: call.result })
    }
    extended.input = input
  }
  return extended
}
