/** Chat finish reasons → messages-dialect `stop_reason` (SPEC "POST /messages": stop_reason row). */
import type { FinishReason } from '../stream-parts'

export type StopReason = 'end_turn' | 'max_tokens' | 'tool_use' | 'refusal' | 'stop_sequence'

/** A stop sequence the text ends with, when the request set any. */
export function detectStopSequence(text: string, stopSequences: readonly string[] | undefined): string | undefined {
  if (!stopSequences?.length) return undefined
  const tail = text.trimEnd()
  return stopSequences.find((sequence) => sequence && (text.endsWith(sequence) || tail.endsWith(sequence)))
}

export function mapStopReason(reason: FinishReason, stopSequence: string | undefined): StopReason {
  switch (reason) {
    case 'length':
      return 'max_tokens'
    case 'tool_calls':
      return 'tool_use'
    case 'content_filter':
    case 'refusal':
      return 'refusal'
    case 'stop':
      return stopSequence ? 'stop_sequence' : 'end_turn'
    default: {
      const exhaustive: never = reason
      return exhaustive
    }
  }
}
