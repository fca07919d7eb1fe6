/**
 * Messages-dialect request → chat request (SPEC "POST /messages" translation table): system,
 * thinking budget → `reasoning.max_tokens`, history thinking stripped, document blocks as chat file
 * parts, server tools passed as sent (their earlier-turn blocks dropped), tool use and results
 * (images inside tool results follow as a user message), `disable_parallel_tool_use`, structured
 * output (`output_config.format`, or the beta's `output_format`) → `response_format`, effort
 * (`output_config.effort`) → `reasoning_effort`, system entries inside `messages` kept in place, and
 * the dropped fields `top_k`, `metadata`, `service_tier`, `cache_control`, `context_management`.
 * docs/DIALECT-FIELDS.md lists every field.
 */
import { RouterError } from '../../errors/router-error'

type Json = Record<string, any>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const invalid = (message: string) => new RouterError('invalid_request', message)

/** Field checks with messages naming the field (messages envelope, 400). */
export function validateMessagesBody(value: unknown): Json & { model: string; messages: Json[] } {
  if (!isObject(value)) throw invalid('The request body must be a JSON object.')
  if (typeof value.model !== 'string' || value.model === '') throw new RouterError('missing_model', 'model: Field required (a non-empty string).')
  if (value.model.length > 256) throw invalid('model: at most 256 characters.')
  if (!Array.isArray(value.messages) || value.messages.length === 0) throw new RouterError('missing_messages', 'messages: Field required (a non-empty array).')
  value.messages.forEach((message: unknown, index: number) => {
    if (!isObject(message)) throw invalid(`messages.${index}: expected an object.`)
    // 'system' inside the conversation: Claude Code sends one to a model that is not Claude.
    if (message.role !== 'user' && message.role !== 'assistant' && message.role !== 'system') throw invalid(`messages.${index}.role: expected 'user', 'assistant' or 'system'.`)
    if (typeof message.content !== 'string' && !Array.isArray(message.content)) throw invalid(`messages.${index}.content: expected a string or an array of content blocks.`)
    if (Array.isArray(message.content)) {
      message.content.forEach((block: unknown, blockIndex: number) => {
        if (!isObject(block) || typeof block.type !== 'string') throw invalid(`messages.${index}.content.${blockIndex}: expected a content block with a type.`)
        if (block.type === 'image' && isObject(block.source) && block.source.type === 'file') {
          throw invalid(`messages.${index}.content.${blockIndex}.source: an image by file_id cannot be sent to a chat gateway; send it as base64 or a URL.`)
        }
      })
    }
  })
  if (value.max_tokens !== undefined && (!Number.isInteger(value.max_tokens) || value.max_tokens < 1)) throw invalid('max_tokens: expected an integer of at least 1.')
  if (value.stream !== undefined && typeof value.stream !== 'boolean') throw invalid('stream: expected a boolean.')
  if (value.system !== undefined && typeof value.system !== 'string' && !Array.isArray(value.system)) throw invalid('system: expected a string or an array of text blocks.')
  if (value.tools !== undefined && !Array.isArray(value.tools)) throw invalid('tools: expected an array.')
  if (value.stop_sequences !== undefined && (!Array.isArray(value.stop_sequences) || !value.stop_sequences.every((item: unknown) => typeof item === 'string'))) {
    throw invalid('stop_sequences: expected an array of strings.')
  }
  if (value.thinking !== undefined && value.thinking !== null) {
    if (!isObject(value.thinking)) throw invalid('thinking: expected an object.')
    if (value.thinking.type !== 'enabled' && value.thinking.type !== 'disabled' && value.thinking.type !== 'adaptive') throw invalid("thinking.type: expected 'enabled', 'disabled' or 'adaptive'.")
    if (value.thinking.type === 'enabled' && (!Number.isInteger(value.thinking.budget_tokens) || value.thinking.budget_tokens < 1)) {
      throw invalid('thinking.budget_tokens: expected a positive integer when thinking is enabled.')
    }
  }
  if (value.output_config !== undefined && value.output_config !== null) {
    if (!isObject(value.output_config)) throw invalid('output_config: expected an object.')
    const { effort, format } = value.output_config
    if (effort !== undefined && effort !== null && !efforts.has(effort)) throw invalid(`output_config.effort: expected one of ${[...efforts].join(', ')}.`)
    if (format !== undefined && format !== null) checkFormat(format, 'output_config.format')
  }
  // The structured-outputs beta's spelling of the same format.
  if (value.output_format !== undefined && value.output_format !== null) checkFormat(value.output_format, 'output_format')
  if (value.tool_choice !== undefined && value.tool_choice !== null) {
    if (!isObject(value.tool_choice) || !['auto', 'any', 'none', 'tool'].includes(value.tool_choice.type)) throw invalid("tool_choice.type: expected 'auto', 'any', 'none' or 'tool'.")
    if (value.tool_choice.type === 'tool' && typeof value.tool_choice.name !== 'string') throw invalid('tool_choice.name: required when tool_choice.type is tool.')
  }
  // Remote MCP servers are run by Anthropic's API; a chat gateway cannot. Attach them to the key instead.
  if (Array.isArray(value.mcp_servers) && value.mcp_servers.length > 0) throw invalid("mcp_servers: remote MCP servers are not run on this shape; attach them to the key (the router runs their tools).")
  return value as Json & { model: string; messages: Json[] }
}

/** `output_config.effort` (Messages) → chat `reasoning_effort` ('max' is chat's 'xhigh', its highest). */
const efforts = new Map<unknown, string>([
  ['low', 'low'],
  ['medium', 'medium'],
  ['high', 'high'],
  ['xhigh', 'xhigh'],
  ['max', 'xhigh'],
])

function checkFormat(format: unknown, name: string) {
  if (!isObject(format) || format.type !== 'json_schema') throw invalid(`${name}.type: expected 'json_schema'.`)
  if (!isObject(format.schema)) throw invalid(`${name}.schema: expected a JSON Schema object.`)
}

function imagePart(source: Json): Json | undefined {
  if (source.type === 'base64' && typeof source.data === 'string') {
    return { type: 'image_url', image_url: { url: `data:${source.media_type ?? 'image/png'};base64,${source.data}` } }
  }
  if (source.type === 'url' && typeof source.url === 'string') return { type: 'image_url', image_url: { url: source.url } }
  return undefined
}

function documentPart(block: Json): Json | undefined {
  const source = isObject(block.source) ? block.source : {}
  const filename = typeof block.title === 'string' ? block.title : undefined
  switch (source.type) {
    case 'base64':
      return { type: 'file', file: { ...(filename ? { filename } : { filename: 'document.pdf' }), file_data: `data:${source.media_type ?? 'application/pdf'};base64,${source.data}` } }
    case 'url':
      return { type: 'file', file: { ...(filename ? { filename } : {}), file_data: source.url } }
    case 'file':
      return { type: 'file', file: { file_id: source.file_id } }
    case 'text':
      // Plain-text sources ride inline.
      return { type: 'text', text: String(source.data ?? '') }
    case 'content':
      return {
        type: 'text',
        text: Array.isArray(source.content) ? source.content.map((item: Json) => (typeof item?.text === 'string' ? item.text : '')).join('\n') : String(source.content ?? ''),
      }
    default:
      return undefined
  }
}

/** A tool's description, with its input examples (prompt content the model is meant to see) after it. */
function describe(tool: Json): string {
  const description = typeof tool.description === 'string' ? tool.description : ''
  if (!Array.isArray(tool.input_examples) || tool.input_examples.length === 0) return description
  return `${description}${description ? '\n\n' : ''}Examples of input:\n${tool.input_examples.map((example: unknown) => JSON.stringify(example)).join('\n')}`
}

/** Joined text of a chat content array when every part is text (then a plain string is sent). */
function simplify(parts: Json[]): string | Json[] {
  return parts.every((part) => part.type === 'text') ? parts.map((part) => part.text).join('') : parts
}

function searchResultText(block: Json): string {
  const texts = Array.isArray(block.content) ? block.content.filter(isObject).map((item: Json) => String(item.text ?? '')) : []
  return [block.title, block.source, ...texts].filter((item) => typeof item === 'string' && item !== '').join('\n')
}

/** A tool result's text, and the parts chat cannot put in a tool message (images, files), which follow it as a user message. */
function toolResultContent(block: Json): { text: string; images: Json[] } {
  if (typeof block.content === 'string') return { text: block.content, images: [] }
  const texts: string[] = []
  const images: Json[] = []
  for (const item of Array.isArray(block.content) ? block.content : []) {
    if (!isObject(item)) continue
    if (item.type === 'text') texts.push(String(item.text ?? ''))
    else if (item.type === 'image' && isObject(item.source)) {
      const image = imagePart(item.source)
      if (image) images.push(image)
    } else if (item.type === 'document') {
      const document = documentPart(item)
      if (document?.type === 'text') texts.push(document.text)
      else if (document) images.push(document)
    } else if (item.type === 'search_result') texts.push(searchResultText(item))
  }
  return { text: texts.join('\n'), images }
}

/** Translates the validated body; `stream` gains `stream_options.include_usage` for real token counts. */
export function messagesToChat(body: Json): Json {
  const messages: Json[] = []
  if (typeof body.system === 'string' && body.system) messages.push({ role: 'system', content: body.system })
  else if (Array.isArray(body.system)) {
    const text = body.system.filter(isObject).map((block: Json) => String(block.text ?? '')).join('\n')
    if (text) messages.push({ role: 'system', content: text })
  }
  for (const message of body.messages as Json[]) {
    const blocks: Json[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content
    if (message.role === 'system') {
      // A system entry inside the conversation stays where it is, as a chat system message.
      const text = blocks.filter((block) => block.type === 'text').map((block) => String(block.text ?? '')).join('\n')
      if (text) messages.push({ role: 'system', content: text })
      continue
    }
    if (message.role === 'assistant') {
      let text = ''
      const toolCalls: Json[] = []
      for (const block of blocks) {
        if (block.type === 'text') text += String(block.text ?? '')
        else if (block.type === 'tool_use') {
          toolCalls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } })
        }
        // thinking, redacted_thinking, server_tool_use and *_tool_result blocks are stripped from history.
      }
      if (!text && toolCalls.length === 0) continue
      messages.push({ role: 'assistant', content: toolCalls.length && !text ? null : text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) })
      continue
    }
    const parts: Json[] = []
    const toolMessages: Json[] = []
    const toolImages: Json[] = []
    for (const block of blocks) {
      switch (block.type) {
        case 'text':
          parts.push({ type: 'text', text: String(block.text ?? '') })
          break
        case 'image': {
          const image = isObject(block.source) ? imagePart(block.source) : undefined
          if (image) parts.push(image)
          break
        }
        case 'document': {
          // Its `context` is text about the document the model is meant to read with it.
          if (typeof block.context === 'string' && block.context) parts.push({ type: 'text', text: `${block.context}\n` })
          const document = documentPart(block)
          if (document) parts.push(document)
          break
        }
        case 'search_result':
          // A search result the client supplies: its title, source and text, inline.
          parts.push({ type: 'text', text: searchResultText(block) })
          break
        case 'tool_result': {
          const { text, images } = toolResultContent(block)
          toolMessages.push({ role: 'tool', tool_call_id: String(block.tool_use_id), content: block.is_error ? `Error: ${text}` : text })
          toolImages.push(...images)
          break
        }
        default:
          // Server-tool results from earlier turns (`*_tool_result`) and block types chat cannot
          // express are dropped.
          break
      }
    }
    messages.push(...toolMessages)
    // An image or a file inside a tool_result follows the tool messages as a user message.
    if (toolImages.length) messages.push({ role: 'user', content: toolImages })
    if (parts.length) messages.push({ role: 'user', content: simplify(parts) })
  }

  const chat: Json = { model: body.model, messages }
  if (body.max_tokens !== undefined) chat.max_tokens = body.max_tokens
  if (body.temperature !== undefined) chat.temperature = body.temperature
  if (body.top_p !== undefined) chat.top_p = body.top_p
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length) chat.stop = body.stop_sequences
  if (body.stream === true) {
    chat.stream = true
    chat.stream_options = { include_usage: true }
  }
  if (isObject(body.thinking) && body.thinking.type === 'enabled') chat.reasoning = { max_tokens: body.thinking.budget_tokens }
  // Adaptive thinking with an effort (what Claude Code sends): chat's reasoning effort. Without one
  // the model's own default stands, as adaptive thinking means.
  const effort = isObject(body.output_config) ? efforts.get(body.output_config.effort) : undefined
  if (effort !== undefined && !(isObject(body.thinking) && body.thinking.type === 'disabled')) chat.reasoning_effort = effort
  // Structured output: the JSON schema the answer must follow, as chat's response_format.
  const format = (isObject(body.output_config) && isObject(body.output_config.format) ? body.output_config.format : undefined) ?? (isObject(body.output_format) ? body.output_format : undefined)
  if (format) {
    chat.response_format = {
      type: 'json_schema',
      json_schema: { name: typeof format.name === 'string' && /^[a-zA-Z0-9_-]{1,64}$/.test(format.name) ? format.name : 'response', schema: format.schema },
    }
  }
  if (Array.isArray(body.tools) && body.tools.length) {
    chat.tools = body.tools.filter(isObject).map((tool: Json) =>
      tool.input_schema !== undefined || tool.type === 'custom' || tool.type === undefined
        ? {
            type: 'function',
            function: {
              name: tool.name,
              ...(tool.description !== undefined || Array.isArray(tool.input_examples) ? { description: describe(tool) } : {}),
              parameters: tool.input_schema ?? { type: 'object', properties: {} },
              ...(typeof tool.strict === 'boolean' ? { strict: tool.strict } : {}),
            },
          }
        : // Server tools (web search, code execution, …) are passed as sent.
          tool,
    )
  }
  const choice = body.tool_choice
  if (isObject(choice)) {
    if (choice.type === 'auto') chat.tool_choice = 'auto'
    else if (choice.type === 'any') chat.tool_choice = 'required'
    else if (choice.type === 'none') chat.tool_choice = 'none'
    else if (choice.type === 'tool' && typeof choice.name === 'string') chat.tool_choice = { type: 'function', function: { name: choice.name } }
    if (choice.disable_parallel_tool_use === true) chat.parallel_tool_calls = false
  }
  return chat
}
