/** AssistantResult → messages-dialect message object (buffered). */
import { parseToolArguments, type AssistantResult } from '../assistant-result'
import { detectStopSequence, mapStopReason } from './map-stop-reason'

export function messageId(upstreamId: string | undefined): string {
  const base = (upstreamId ?? '').replace(/[^A-Za-z0-9]/g, '')
  return `msg_${base || crypto.randomUUID().replace(/-/g, '')}`
}

/** `omitThinking`: the request's `thinking.display: 'omitted'`: the thinking block stays, its text empty. */
export function writeMessage(result: AssistantResult, requestedModel: string, stopSequences: readonly string[] | undefined, omitThinking = false) {
  const content: Record<string, unknown>[] = []
  if (result.reasoning) content.push({ type: 'thinking', thinking: omitThinking ? '' : result.reasoning, signature: result.reasoningSignature ?? '' })
  const stopSequence = result.finishReason === 'stop' ? detectStopSequence(result.text, stopSequences) : undefined
  // The stop sequence itself is not part of the reply text in this dialect.
  const text = stopSequence && result.text.endsWith(stopSequence) ? result.text.slice(0, -stopSequence.length) : result.text
  if (text || result.toolCalls.length === 0) content.push({ type: 'text', text })
  for (const call of result.toolCalls) content.push({ type: 'tool_use', id: call.id, name: call.name, input: parseToolArguments(call.arguments) })
  return {
    id: messageId(result.id),
    type: 'message',
    role: 'assistant',
    model: requestedModel,
    content,
    stop_reason: mapStopReason(result.finishReason, stopSequence),
    stop_sequence: stopSequence ?? null,
    usage: {
      input_tokens: result.usage?.inputTokens ?? 0,
      output_tokens: result.usage?.outputTokens ?? 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: result.usage?.cachedInputTokens ?? 0,
    },
  }
}
