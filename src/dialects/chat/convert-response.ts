/** Chat completion objects ↔ the neutral AssistantResult (buffered). */
import { UntranslatableReply, type AssistantResult } from '../assistant-result'
import type { FinishReason, Usage } from '../stream-parts'

export function mapChatFinishReason(reason: unknown): FinishReason {
  switch (reason) {
    case 'length':
      return 'length'
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls'
    case 'content_filter':
      return 'content_filter'
    case 'refusal':
      return 'refusal'
    default:
      return 'stop'
  }
}

export function readChatUsage(usage: unknown): Usage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined
  const value = usage as {
    prompt_tokens?: number
    completion_tokens?: number
    completion_tokens_details?: { reasoning_tokens?: number } | null
    prompt_tokens_details?: { cached_tokens?: number } | null
  }
  return {
    inputTokens: value.prompt_tokens ?? 0,
    outputTokens: value.completion_tokens ?? 0,
    ...(value.completion_tokens_details?.reasoning_tokens !== undefined ? { reasoningTokens: value.completion_tokens_details.reasoning_tokens } : {}),
    ...(value.prompt_tokens_details?.cached_tokens !== undefined ? { cachedInputTokens: value.prompt_tokens_details.cached_tokens } : {}),
  }
}

export function writeChatUsage(usage: Usage) {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    ...(usage.cachedInputTokens !== undefined ? { prompt_tokens_details: { cached_tokens: usage.cachedInputTokens } } : {}),
    ...(usage.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: usage.reasoningTokens } } : {}),
  }
}

/** Reads the first choice of a chat completion. */
export function readChatCompletion(value: unknown): AssistantResult {
  if (typeof value !== 'object' || value === null) throw new UntranslatableReply('The gateway reply is not a JSON object.')
  const completion = value as {
    id?: string
    model?: string
    created?: number
    choices?: {
      message?: {
        content?: unknown
        reasoning_content?: unknown
        reasoning?: unknown
        reasoning_details?: { signature?: string }[]
        tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[]
        refusal?: unknown
      }
      finish_reason?: unknown
    }[]
    usage?: unknown
  }
  const choice = completion.choices?.[0]
  if (!Array.isArray(completion.choices) || !choice || typeof choice.message !== 'object' || choice.message === null) {
    throw new UntranslatableReply('The gateway reply has no choices[0].message.')
  }
  const message = choice.message
  // A field of the wrong type means the reply does not follow the dialect: refuse it (502) rather
  // than drop what it carried.
  if (message.tool_calls != null && !Array.isArray(message.tool_calls)) throw new UntranslatableReply('choices[0].message.tool_calls is not an array.')
  if (message.reasoning_details != null && !Array.isArray(message.reasoning_details)) {
    throw new UntranslatableReply('choices[0].message.reasoning_details is not an array.')
  }
  let text = ''
  if (typeof message.content === 'string') text = message.content
  else if (Array.isArray(message.content)) {
    text = message.content.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : '')).join('')
  }
  const reasoning = typeof message.reasoning_content === 'string' ? message.reasoning_content : typeof message.reasoning === 'string' ? message.reasoning : ''
  const details = Array.isArray(message.reasoning_details) ? message.reasoning_details : []
  const signature = details.find((detail) => typeof detail?.signature === 'string' && detail.signature)?.signature
  const refused = typeof message.refusal === 'string' && message.refusal !== ''
  return {
    id: completion.id ?? `chatcmpl-${crypto.randomUUID()}`,
    model: completion.model ?? '',
    created: completion.created ?? Math.floor(Date.now() / 1000),
    text: refused && !text ? (message.refusal as string) : text,
    reasoning,
    reasoningSignature: signature,
    toolCalls: (Array.isArray(message.tool_calls) ? message.tool_calls : []).map((call, index) => ({
      // A made-up id is unique: a tool loop sends several rounds' calls back in one conversation.
      id: typeof call?.id === 'string' ? call.id : `call_${crypto.randomUUID().slice(0, 8)}_${index}`,
      name: typeof call?.function?.name === 'string' ? call.function.name : '',
      arguments: typeof call?.function?.arguments === 'string' ? call.function.arguments : JSON.stringify(call?.function?.arguments ?? {}),
    })),
    finishReason: refused ? 'refusal' : mapChatFinishReason(choice.finish_reason),
    usage: readChatUsage(completion.usage),
  }
}

/** Writes a chat completion object (used when the upstream spoke another dialect). */
export function writeChatCompletion(result: AssistantResult) {
  return {
    id: result.id,
    object: 'chat.completion',
    created: result.created,
    model: result.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: result.text === '' && result.toolCalls.length > 0 ? null : result.text,
          ...(result.reasoning ? { reasoning_content: result.reasoning } : {}),
          ...(result.toolCalls.length
            ? { tool_calls: result.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) }
            : {}),
        },
        finish_reason: result.finishReason === 'refusal' ? 'content_filter' : result.finishReason,
      },
    ],
    ...(result.usage ? { usage: writeChatUsage(result.usage) } : {}),
  }
}
