/**
 * The shared stream vocabulary every dialect decodes into and encodes from (../shared/STYLE.md):
 * text, reasoning, tool input, finish with usage, and error. Chat's finish reasons are the pivot.
 */

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
  | { type: 'finish'; reason: FinishReason; usage: Usage | undefined }
  | { type: 'error'; message: string; code: string }

/** Marks an upstream body that broke off; decoders turn it into an `error` part. */
export const upstreamBroke = Symbol('upstream-broke')
export type ByteChunk = Uint8Array | typeof upstreamBroke

/** Wraps an upstream body so a read error becomes one `upstreamBroke` chunk instead of a thrown error. */
export function breakSafe(body: ReadableStream<Uint8Array>, onCancel?: () => void): ReadableStream<ByteChunk> {
  const reader = body.getReader()
  return new ReadableStream<ByteChunk>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read()
        if (done) controller.close()
        else controller.enqueue(value)
      } catch {
        controller.enqueue(upstreamBroke)
        controller.close()
      }
    },
    cancel() {
      onCancel?.()
      reader.cancel().catch(() => {})
    },
  })
}
