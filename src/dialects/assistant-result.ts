/**
 * A buffered assistant reply in dialect-neutral form: what every buffered translation reads from
 * one dialect and writes into another (the buffered twin of the stream parts).
 */
import type { FinishReason, Usage } from './stream-parts'

export interface ToolCall {
  id: string
  name: string
  /** JSON text, as chat carries it. */
  arguments: string
}

export interface AssistantResult {
  id: string
  model: string
  created: number
  text: string
  reasoning: string
  reasoningSignature: string | undefined
  toolCalls: ToolCall[]
  finishReason: FinishReason
  usage: Usage | undefined
}

export function parseToolArguments(text: string): Record<string, unknown> {
  if (!text) return {}
  try {
    const parsed = JSON.parse(text)
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : { value: parsed }
  } catch {
    return {}
  }
}

/** Thrown when an upstream reply cannot be mapped into the client's dialect (answered 502). */
export class UntranslatableReply extends Error {}
