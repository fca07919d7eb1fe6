/** Response objects ↔ the neutral AssistantResult (buffered). */
import { UntranslatableReply, type AssistantResult } from '../assistant-result'
import type { Usage } from '../stream-parts'

type Json = Record<string, unknown>

export function readResponsesUsage(usage: unknown): Usage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined
  const value = usage as { input_tokens?: number; output_tokens?: number; output_tokens_details?: { reasoning_tokens?: number }; input_tokens_details?: { cached_tokens?: number } }
  return {
    inputTokens: value.input_tokens ?? 0,
    outputTokens: value.output_tokens ?? 0,
    ...(value.output_tokens_details?.reasoning_tokens !== undefined ? { reasoningTokens: value.output_tokens_details.reasoning_tokens } : {}),
    ...(value.input_tokens_details?.cached_tokens !== undefined ? { cachedInputTokens: value.input_tokens_details.cached_tokens } : {}),
  }
}

export function writeResponsesUsage(usage: Usage) {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  }
}

/** A Response object → AssistantResult. Encrypted reasoning is dropped; summaries kept as reasoning text. */
export function readResponseObject(value: unknown): AssistantResult {
  if (typeof value !== 'object' || value === null || !Array.isArray((value as Json).output)) {
    throw new UntranslatableReply('The gateway reply is not a Response object with an output array.')
  }
  const response = value as { id?: string; model?: string; created_at?: number; status?: string; incomplete_details?: { reason?: string } | null; output: Json[]; usage?: unknown }
  let text = ''
  let reasoning = ''
  const toolCalls: AssistantResult['toolCalls'] = []
  let refused = false
  for (const item of response.output) {
    if (item.type === 'message' && Array.isArray(item.content)) {
      for (const part of item.content as Json[]) {
        if (part.type === 'output_text' && typeof part.text === 'string') text += part.text
        if (part.type === 'refusal' && typeof part.refusal === 'string') {
          text += part.refusal
          refused = true
        }
      }
    } else if (item.type === 'function_call') {
      toolCalls.push({ id: String(item.call_id ?? item.id ?? ''), name: String(item.name ?? ''), arguments: String(item.arguments ?? '') })
    } else if (item.type === 'reasoning' && Array.isArray(item.summary)) {
      reasoning += (item.summary as Json[]).map((part) => (typeof part.text === 'string' ? part.text : '')).join('\n')
    }
  }
  const incomplete = response.status === 'incomplete'
  return {
    id: response.id ?? '',
    model: response.model ?? '',
    created: response.created_at ?? Math.floor(Date.now() / 1000),
    text,
    reasoning,
    reasoningSignature: undefined,
    toolCalls,
    finishReason: refused
      ? 'refusal'
      : incomplete && response.incomplete_details?.reason === 'content_filter'
        ? 'content_filter'
        : incomplete
          ? 'length'
          : toolCalls.length
            ? 'tool_calls'
            : 'stop',
    usage: readResponsesUsage(response.usage),
  }
}

export interface ResponseShell {
  id: string
  model: string
  createdAt: number
  request: Json
  /** Unix seconds now, for `completed_at`; tests pass a fixed clock. */
  now?: () => number
}

const orNull = (value: unknown) => (value === undefined ? null : value)

/**
 * The tools a translated response echoes: the function tools that went upstream (hosted tools do
 * not survive translation), each with every field a Response carries. `strict` is what was sent, or
 * false: the real API defaults it to true because it enforces strict schemas, and a translated call
 * enforces nothing the client did not ask the chat gateway for.
 */
function echoedTools(tools: unknown): Json[] {
  if (!Array.isArray(tools)) return []
  return tools
    .filter((tool): tool is Json => typeof tool === 'object' && tool !== null && (tool as Json).type === 'function')
    .map((tool) => ({
      type: 'function',
      description: orNull(tool.description),
      name: tool.name,
      parameters: orNull(tool.parameters),
      strict: typeof tool.strict === 'boolean' ? tool.strict : false,
    }))
}

/**
 * The fields a Response object repeats from its request, with the values the real API reports
 * (the vendor's recorded text response), in its key order. A translated
 * response is not stored (it cannot be retrieved, SPEC "POST /responses"), runs in the foreground, and
 * carries no logprobs.
 */
export function responseEnvelope(shell: ResponseShell, status: string) {
  const request = shell.request
  const reasoning = typeof request.reasoning === 'object' && request.reasoning !== null ? (request.reasoning as Json) : {}
  const text = typeof request.text === 'object' && request.text !== null ? (request.text as Json) : {}
  return {
    id: shell.id,
    object: 'response',
    created_at: shell.createdAt,
    status,
    background: false,
    completed_at: status === 'completed' ? (shell.now?.() ?? Math.floor(Date.now() / 1000)) : null,
    error: null as { code: string; message: string } | null,
    frequency_penalty: typeof request.frequency_penalty === 'number' ? request.frequency_penalty : 0,
    incomplete_details: null as { reason: string } | null,
    instructions: orNull(request.instructions),
    max_output_tokens: orNull(request.max_output_tokens),
    max_tool_calls: orNull(request.max_tool_calls),
    model: shell.model,
    output: [] as Json[],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    presence_penalty: typeof request.presence_penalty === 'number' ? request.presence_penalty : 0,
    previous_response_id: orNull(request.previous_response_id),
    prompt_cache_key: orNull(request.prompt_cache_key),
    prompt_cache_retention: orNull(request.prompt_cache_retention),
    reasoning: { ...reasoning, effort: orNull(reasoning.effort), summary: orNull(reasoning.summary) },
    safety_identifier: orNull(request.safety_identifier),
    service_tier: 'default',
    store: false,
    temperature: request.temperature ?? 1,
    text: { format: { type: 'text' }, verbosity: 'medium', ...text },
    tool_choice: request.tool_choice ?? 'auto',
    tools: echoedTools(request.tools),
    top_logprobs: 0,
    top_p: request.top_p ?? 1,
    truncation: 'disabled',
    usage: null as ReturnType<typeof writeResponsesUsage> | null,
    user: orNull(request.user),
    metadata: request.metadata ?? {},
  }
}

/** An `output_text` content part as the real API writes it (logprobs only survive native targets). */
export function outputText(text: string) {
  return { type: 'output_text', annotations: [], logprobs: [], text }
}

export function outputItemIds() {
  const suffix = () => crypto.randomUUID().replace(/-/g, '')
  return { message: `msg_${suffix()}`, reasoning: `rs_${suffix()}`, functionCall: () => `fc_${suffix()}` }
}

/** AssistantResult → Response object (translated mode). */
export function writeResponseObject(result: AssistantResult, shell: ResponseShell) {
  const incomplete = result.finishReason === 'length' || result.finishReason === 'content_filter'
  const response = responseEnvelope(shell, incomplete ? 'incomplete' : 'completed')
  if (incomplete) response.incomplete_details = { reason: result.finishReason === 'length' ? 'max_output_tokens' : 'content_filter' }
  const ids = outputItemIds()
  if (result.reasoning) response.output.push({ id: ids.reasoning, type: 'reasoning', summary: [{ type: 'summary_text', text: result.reasoning }] })
  if (result.text || result.toolCalls.length === 0) {
    response.output.push({ id: ids.message, type: 'message', status: incomplete ? 'incomplete' : 'completed', content: [outputText(result.text)], role: 'assistant' })
  }
  for (const call of result.toolCalls) {
    response.output.push({ id: ids.functionCall(), type: 'function_call', status: 'completed', arguments: call.arguments, call_id: call.id, name: call.name })
  }
  if (result.usage) response.usage = writeResponsesUsage(result.usage)
  return response
}
