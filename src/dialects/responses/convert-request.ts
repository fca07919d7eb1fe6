/**
 * Responses request bodies ↔ chat request bodies: Responses → chat for the gateway kind served by
 * translation, chat → Responses for the kind that serves only the Responses endpoint. What a
 * translation cannot carry (hosted tools, encrypted reasoning) is dropped and named in `dropped`.
 */
import { RouterError } from '../../errors/router-error'

type Json = Record<string, unknown>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function contentPartToChat(part: Json): Json | undefined {
  switch (part.type) {
    case 'input_text':
    case 'output_text':
    case 'text':
      return { type: 'text', text: String(part.text ?? '') }
    case 'input_image': {
      const url = typeof part.image_url === 'string' ? part.image_url : undefined
      if (!url) throw new RouterError('invalid_request', 'input_image.file_id: an image by file id cannot be sent to a chat gateway; send image_url (a URL or a data URL).')
      return { type: 'image_url', image_url: { url, ...(part.detail ? { detail: part.detail } : {}) } }
    }
    case 'input_file':
      return {
        type: 'file',
        file: {
          ...(part.file_id ? { file_id: part.file_id } : {}),
          ...(part.file_data ? { file_data: part.file_data } : {}),
          ...(part.file_url ? { file_data: part.file_url } : {}),
          ...(part.filename ? { filename: part.filename } : {}),
        },
      }
    default:
      return undefined
  }
}

function messageContentToChat(content: unknown): unknown {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  const parts = content.filter(isObject).map(contentPartToChat).filter((part): part is Json => part !== undefined)
  if (parts.every((part) => part.type === 'text')) return parts.map((part) => part.text).join('')
  return parts
}

/** POST /responses body → chat body (translated mode). */
export function responsesToChat(body: Json): { chat: Json; dropped: string[] } {
  // A stored prompt template lives at the vendor: a gateway that translates to chat cannot expand it.
  if (body.prompt !== undefined && body.prompt !== null) {
    throw new RouterError('invalid_request', 'prompt: stored prompts are served only by gateways that keep Responses natively; send the instructions and input instead.')
  }
  const dropped: string[] = []
  const messages: Json[] = []
  if (typeof body.instructions === 'string' && body.instructions) messages.push({ role: 'system', content: body.instructions })
  const input = body.input
  if (typeof input === 'string') messages.push({ role: 'user', content: input })
  else if (Array.isArray(input)) {
    for (const item of input) {
      if (!isObject(item)) continue
      const type = item.type ?? 'message'
      if (type === 'message') {
        const role = item.role === 'developer' ? 'system' : String(item.role ?? 'user')
        messages.push({ role, content: messageContentToChat(item.content) })
      } else if (type === 'function_call') {
        const call = { id: String(item.call_id ?? item.id ?? ''), type: 'function', function: { name: String(item.name ?? ''), arguments: String(item.arguments ?? '') } }
        const previous = messages[messages.length - 1]
        if (previous && previous.role === 'assistant' && Array.isArray(previous.tool_calls)) (previous.tool_calls as Json[]).push(call)
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] })
      } else if (type === 'function_call_output') {
        messages.push({ role: 'tool', tool_call_id: String(item.call_id ?? ''), content: typeof item.output === 'string' ? item.output : JSON.stringify(item.output) })
      } else if (type === 'reasoning') {
        dropped.push('reasoning item')
      } else if (type === 'compaction' || type === 'item_reference' || type === 'custom_tool_call' || type === 'custom_tool_call_output' || type === 'additional_tools' || type === 'program' || type === 'program_output' || type === 'compaction_trigger') {
        // Earlier context only the vendor can expand, or client-tool history chat cannot hold: refused, not lost.
        throw new RouterError('invalid_request', `input item ${String(type)}: not served by a gateway that translates Responses to chat; send the conversation as messages and function calls.`)
      } else {
        dropped.push(`input item ${String(type)}`)
      }
    }
  }
  if (messages.length === 0) throw new RouterError('invalid_request', 'Invalid input: expected a string or a non-empty array of input items.')
  const chat: Json = { model: body.model, messages }
  if (body.stream === true) {
    chat.stream = true
    chat.stream_options = { include_usage: true }
  }
  if (typeof body.max_output_tokens === 'number') chat.max_tokens = body.max_output_tokens
  for (const name of ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty', 'parallel_tool_calls', 'user'] as const) if (body[name] !== undefined) chat[name] = body[name]
  if (Array.isArray(body.tools)) {
    const tools: Json[] = []
    // A namespace groups client functions: they are offered one by one (their names are the model's to call).
    const flattened = (body.tools as unknown[]).flatMap((tool) => (isObject(tool) && tool.type === 'namespace' && Array.isArray(tool.tools) ? tool.tools : [tool]))
    for (const tool of flattened) {
      if (isObject(tool) && tool.type === 'function') {
        tools.push({
          type: 'function',
          function: {
            name: tool.name,
            ...(tool.description !== undefined ? { description: tool.description } : {}),
            ...(tool.parameters !== undefined ? { parameters: tool.parameters } : {}),
            ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
          },
        })
      } else if (isObject(tool) && tool.type === 'custom') {
        // A client tool with free-form input: chat gateways of this router take functions only.
        throw new RouterError('invalid_request', `tools: the custom tool ${String(tool.name)} is not served by a gateway that translates Responses to chat; declare it as a function.`)
      } else if (isObject(tool)) dropped.push(`hosted tool ${String(tool.type)}`)
    }
    if (tools.length) chat.tools = tools
  }
  const choice = body.tool_choice
  if (typeof choice === 'string') chat.tool_choice = choice
  else if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string') chat.tool_choice = { type: 'function', function: { name: choice.name } }
  else if (isObject(choice) && choice.type === 'custom') throw new RouterError('invalid_request', 'tool_choice: a custom tool is not served by a gateway that translates Responses to chat.')
  else if (isObject(choice) && choice.type === 'allowed_tools' && Array.isArray(choice.tools)) {
    // Chat's own allowed_tools: the model may call only these, as `mode` says.
    chat.tool_choice = {
      type: 'allowed_tools',
      allowed_tools: {
        mode: choice.mode === 'required' ? 'required' : 'auto',
        tools: choice.tools.filter(isObject).map((tool: Json) => (tool.type === 'function' ? { type: 'function', function: { name: tool.name } } : tool)),
      },
    }
  }
  // Output length guidance: chat takes it as `verbosity`.
  if (isObject(body.text) && typeof body.text.verbosity === 'string') chat.verbosity = body.text.verbosity
  const format = isObject(body.text) ? (body.text.format as Json | undefined) : undefined
  if (isObject(format)) {
    if (format.type === 'json_schema') {
      chat.response_format = {
        type: 'json_schema',
        json_schema: { name: format.name ?? 'response', schema: format.schema, ...(format.strict !== undefined ? { strict: format.strict } : {}) },
      }
    } else if (format.type === 'json_object') chat.response_format = { type: 'json_object' }
  }
  if (isObject(body.reasoning) && typeof body.reasoning.effort === 'string') chat.reasoning_effort = body.reasoning.effort
  if (isObject(body.reasoning) && body.reasoning.mode !== undefined && body.reasoning.mode !== 'standard') {
    throw new RouterError('invalid_request', `reasoning.mode: '${String(body.reasoning.mode)}' is not served by a gateway that translates Responses to chat.`)
  }
  return { chat, dropped }
}

/** Chat message content → Responses input content. */
function chatContentToResponses(content: unknown, role: string): unknown {
  if (typeof content === 'string' || content === null || content === undefined) return content ?? ''
  if (!Array.isArray(content)) return ''
  const textType = role === 'assistant' ? 'output_text' : 'input_text'
  return content.filter(isObject).flatMap((part): Json[] => {
    if (part.type === 'text') return [{ type: textType, text: part.text }]
    if (part.type === 'image_url' && isObject(part.image_url)) return [{ type: 'input_image', image_url: part.image_url.url, ...(part.image_url.detail ? { detail: part.image_url.detail } : {}) }]
    if (part.type === 'file' && isObject(part.file)) {
      return [{ type: 'input_file', ...(part.file.file_id ? { file_id: part.file.file_id } : {}), ...(part.file.file_data ? { file_data: part.file.file_data } : {}), ...(part.file.filename ? { filename: part.file.filename } : {}) }]
    }
    return []
  })
}

/** Chat body → POST /responses body (the responses-only gateway kind). */
/** Chat fields the Responses API has no place for, which change the answer: refused, naming the field, rather than lost. */
const noResponsesEquivalent = ['stop', 'seed', 'presence_penalty', 'frequency_penalty', 'logit_bias'] as const

/** A thinking budget as a Responses effort: the Responses API takes no token budget. */
function effortForBudget(tokens: number): string {
  return tokens <= 2048 ? 'low' : tokens <= 8192 ? 'medium' : 'high'
}

export function chatToResponses(chat: Json): Json {
  for (const name of noResponsesEquivalent) {
    const value = chat[name]
    if (value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0)) {
      throw new RouterError('invalid_request', `${name}: the responses-only gateway kind has no ${name}; route this request to a chat gateway.`)
    }
  }
  if (typeof chat.n === 'number' && chat.n > 1) throw new RouterError('invalid_request', 'n: the responses-only gateway kind answers one choice.')
  const instructions: string[] = []
  const input: Json[] = []
  const messages = Array.isArray(chat.messages) ? chat.messages.filter(isObject) : []
  messages.forEach((message, index) => {
    const role = String(message.role ?? 'user')
    if ((role === 'system' || role === 'developer') && index === 0 && typeof message.content === 'string') {
      instructions.push(message.content)
      return
    }
    if (role === 'tool') {
      input.push({ type: 'function_call_output', call_id: String(message.tool_call_id ?? ''), output: typeof message.content === 'string' ? message.content : JSON.stringify(message.content) })
      return
    }
    if (role === 'assistant') {
      const text = chatContentToResponses(message.content, role)
      if ((typeof text === 'string' && text) || (Array.isArray(text) && text.length)) input.push({ role: 'assistant', content: text })
      for (const call of Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : []) {
        const fn = isObject(call.function) ? call.function : {}
        input.push({ type: 'function_call', call_id: String(call.id ?? ''), name: String(fn.name ?? ''), arguments: String(fn.arguments ?? '') })
      }
      return
    }
    input.push({ role: role === 'system' ? 'developer' : role, content: chatContentToResponses(message.content, role) })
  })
  const body: Json = { model: chat.model, input }
  if (instructions.length) body.instructions = instructions.join('\n\n')
  if (chat.stream === true) body.stream = true
  const maxTokens = chat.max_completion_tokens ?? chat.max_tokens
  if (typeof maxTokens === 'number') body.max_output_tokens = maxTokens
  for (const name of ['temperature', 'top_p', 'parallel_tool_calls', 'user', 'metadata', 'store'] as const) if (chat[name] !== undefined) body[name] = chat[name]
  if (Array.isArray(chat.tools)) {
    body.tools = chat.tools.filter(isObject).map((tool) => {
      if (tool.type !== 'function' || !isObject(tool.function)) return tool
      const fn = tool.function
      return {
        type: 'function',
        name: fn.name,
        ...(fn.description !== undefined ? { description: fn.description } : {}),
        ...(fn.parameters !== undefined ? { parameters: fn.parameters } : {}),
        ...(fn.strict !== undefined ? { strict: fn.strict } : {}),
      }
    })
  }
  const choice = chat.tool_choice
  if (typeof choice === 'string') body.tool_choice = choice
  else if (isObject(choice) && isObject(choice.function)) body.tool_choice = { type: 'function', name: choice.function.name }
  else if (isObject(choice) && choice.type === 'allowed_tools' && isObject(choice.allowed_tools)) {
    const allowed = choice.allowed_tools
    body.tool_choice = {
      type: 'allowed_tools',
      mode: allowed.mode === 'required' ? 'required' : 'auto',
      tools: (Array.isArray(allowed.tools) ? allowed.tools.filter(isObject) : []).map((tool) => (isObject(tool.function) ? { type: 'function', name: tool.function.name } : tool)),
    }
  }
  if (typeof chat.verbosity === 'string') body.text = { ...(isObject(body.text) ? body.text : {}), verbosity: chat.verbosity }
  if (chat.logprobs === true) {
    body.include = ['message.output_text.logprobs']
    if (typeof chat.top_logprobs === 'number') body.top_logprobs = chat.top_logprobs
  }
  const format = chat.response_format
  if (isObject(format)) {
    if (format.type === 'json_schema' && isObject(format.json_schema)) {
      const schema = format.json_schema
      body.text = { ...(isObject(body.text) ? body.text : {}), format: { type: 'json_schema', name: schema.name ?? 'response', schema: schema.schema, ...(schema.strict !== undefined ? { strict: schema.strict } : {}) } }
    } else if (format.type === 'json_object') body.text = { ...(isObject(body.text) ? body.text : {}), format: { type: 'json_object' } }
  }
  if (typeof chat.reasoning_effort === 'string') body.reasoning = { effort: chat.reasoning_effort }
  else if (isObject(chat.reasoning) && typeof chat.reasoning.max_tokens === 'number') body.reasoning = { effort: effortForBudget(chat.reasoning.max_tokens) }
  return body
}
