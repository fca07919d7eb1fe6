/** AssistantResult → generateContent-dialect response (candidates, finishReason, usageMetadata). */
import { parseToolArguments, type AssistantResult } from '../assistant-result'
import type { FinishReason } from '../stream-parts'

export function mapFinishReason(reason: FinishReason): string {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
      return 'STOP'
    case 'length':
      return 'MAX_TOKENS'
    case 'content_filter':
    case 'refusal':
      return 'SAFETY'
    default: {
      const exhaustive: never = reason
      return exhaustive
    }
  }
}

/** `hideThoughts`: the request's `includeThoughts: false`: no thought parts (their tokens are still counted). */
export function writeGenerateContentResponse(result: AssistantResult, requestedModel: string, hideThoughts = false) {
  const parts: Record<string, unknown>[] = []
  if (result.reasoning && !hideThoughts) parts.push({ text: result.reasoning, thought: true })
  if (result.text) parts.push({ text: result.text })
  for (const call of result.toolCalls) parts.push({ functionCall: { id: call.id, name: call.name, args: parseToolArguments(call.arguments) } })
  if (parts.length === 0) parts.push({ text: '' })
  const usage = result.usage
  return {
    candidates: [{ content: { role: 'model', parts }, finishReason: mapFinishReason(result.finishReason), index: 0 }],
    usageMetadata: usage
      ? {
          promptTokenCount: usage.inputTokens,
          candidatesTokenCount: Math.max(0, usage.outputTokens - (usage.reasoningTokens ?? 0)),
          totalTokenCount: usage.inputTokens + usage.outputTokens,
          ...(usage.reasoningTokens ? { thoughtsTokenCount: usage.reasoningTokens } : {}),
        }
      : { promptTokenCount: 0, candidatesTokenCount: 0, totalTokenCount: 0 },
    modelVersion: result.model || requestedModel,
    responseId: result.id,
  }
}
