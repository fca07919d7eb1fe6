/**
 * The shared stream vocabulary every dialect decodes into and encodes from:
 * text, reasoning, tool input, finish with usage, and error. Chat's finish reasons are the pivot.
 */
import type { UpstreamBody } from './upstream-body'

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'refusal'

export interface Usage {
  inputTokens: number
  outputTokens: number
  reasoningTokens?: number
  cachedInputTokens?: number
}

export type StreamPart =
  | { type: 'start'; id?: string; model?: string; created?: number }
  | { type: 'text-delta'; delta: string }
  | { type: 'reasoning-delta'; delta: string }
  /** A reasoning signature or an opaque redacted block, kept for dialects that carry them. */
  | { type: 'reasoning-signature'; signature: string }
  | { type: 'tool-input-start'; index: number; id: string; name: string }
  | { type: 'tool-input-delta'; index: number; delta: string }
  /** `extras`: fields enrichment stages attach to the answer (companion ads, keyterms), placed per dialect. */
  | { type: 'finish'; reason: FinishReason; usage: Usage | undefined; extras?: Record<string, unknown> }
  | { type: 'error'; message: string; code: string }

/** Marks an upstream body that broke off; decoders turn it into an `error` part. */
export const upstreamBroke = Symbol('upstream-broke')
/** Marks an upstream body cut by the stream idle limit (RT_STREAM_IDLE_MS); an `error` part too. */
export const upstreamStalled = Symbol('upstream-stalled')
export type ByteChunk = Uint8Array | typeof upstreamBroke | typeof upstreamStalled

/** The failure text of each end marker. */
export function brokenStreamMessage(marker: typeof upstreamBroke | typeof upstreamStalled): string {
  return marker === upstreamStalled ? 'The upstream sent nothing within the stream idle limit; the stream was ended.' : 'The upstream stream broke off.'
}

/**
 * Reads a started upstream body (its checked first chunks, then the rest) so that a read error
 * becomes one end marker instead of a thrown error, and stamps each chunk on the idle watch.
 */
export function breakSafe(body: UpstreamBody, onCancel?: () => void): ReadableStream<ByteChunk> {
  const { reader, head, watch } = body
  let replayed = 0
  return new ReadableStream<ByteChunk>({
    async pull(controller) {
      if (replayed < head.length) {
        controller.enqueue(head[replayed++]!)
        return
      }
      try {
        const { value, done } = await reader.read()
        if (done) {
          watch?.stop()
          controller.close()
        } else {
          if (watch) watch.lastByteAt = performance.now()
          controller.enqueue(value)
        }
      } catch {
        watch?.stop()
        controller.enqueue(watch?.stalled ? upstreamStalled : upstreamBroke)
        controller.close()
      }
    },
    cancel() {
      watch?.stop()
      onCancel?.()
      reader.cancel().catch(() => {})
    },
  })
}
