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
  /**
   * `extras`: fields enrichment stages attach to the answer (companion ads, keyterms), placed per
   * dialect. `lastUsage`: where the answer took several upstream attempts (a continued stream),
   * `usage` is their sum and this the last attempt's own (each attempt is priced at its target).
   */
  | { type: 'finish'; reason: FinishReason; usage: Usage | undefined; extras?: Record<string, unknown>; lastUsage?: Usage | undefined }
  /** `why`: what broke an upstream stream (decoders set it; a continuation reads it), and the usage it reported before (rarely any). */
  | { type: 'error'; message: string; code: string; why?: StreamBreak; usage?: Usage }
  /** An SSE comment line (`: text`), which every client ignores: the seam of a continued stream. */
  | { type: 'comment'; text: string }

/**
 * What broke an upstream stream after its first byte: it was cut (the connection broke, or the
 * body ended before the answer was whole), it stalled past the idle limit, it sent an error event,
 * or it sent a record that could not be read.
 */
export type StreamBreak = 'cut' | 'stalled' | 'error' | 'malformed'

/** Usage summed (a new object; unknown when neither side reported any): a tool loop's rounds, a continued stream's attempts. */
export function addUsage(sum: Usage | undefined, usage: Usage | undefined): Usage | undefined {
  if (!usage) return sum
  if (!sum) return { ...usage }
  return {
    inputTokens: sum.inputTokens + usage.inputTokens,
    outputTokens: sum.outputTokens + usage.outputTokens,
    ...(sum.reasoningTokens !== undefined || usage.reasoningTokens !== undefined ? { reasoningTokens: (sum.reasoningTokens ?? 0) + (usage.reasoningTokens ?? 0) } : {}),
    ...(sum.cachedInputTokens !== undefined || usage.cachedInputTokens !== undefined ? { cachedInputTokens: (sum.cachedInputTokens ?? 0) + (usage.cachedInputTokens ?? 0) } : {}),
  }
}

/** Marks an upstream body that broke off; decoders turn it into an `error` part. */
export const upstreamBroke = Symbol('upstream-broke')
/** Marks an upstream body cut by the stream idle limit (RT_STREAM_IDLE_MS); an `error` part too. */
export const upstreamStalled = Symbol('upstream-stalled')
export type ByteChunk = Uint8Array | typeof upstreamBroke | typeof upstreamStalled

/** What each end marker means. */
export function breakOf(marker: typeof upstreamBroke | typeof upstreamStalled): StreamBreak {
  return marker === upstreamStalled ? 'stalled' : 'cut'
}

/** The failure text of each end marker. */
export function brokenStreamMessage(marker: typeof upstreamBroke | typeof upstreamStalled): string {
  return marker === upstreamStalled ? 'The upstream sent nothing within the stream idle limit; the stream was ended.' : 'The upstream stream broke off.'
}

/**
 * How long an upstream whose answer is whole may keep a read waiting before it is let go, as if it
 * had ended its body. Whole: chat's every choice gave its finish reason (or `[DONE]` came), a
 * Responses stream sent its terminal event. An upstream that holds its connection open after that
 * (no `[DONE]`, no end of the body) would otherwise hold the client's stream to the idle limit; the
 * usage chunk and `[DONE]` a gateway sends after the finish come within milliseconds, and are still
 * read (the answer is ended at the upstream's own end, so its connection is kept for the next call).
 */
export const answeredStreamGraceMs = 2000

/**
 * What a decoder learns of its stream's end, for the reader of the stream's bytes (breakSafe): the
 * answer is whole (from then on each read waits at most `answeredStreamGraceMs`), or it ended on an
 * error part (SPEC "Stream events": the upstream's error event is the break itself), and the
 * upstream is let go at once rather than when it closes. Letting go ends the bytes as an end of the
 * body does: the decoder's flush runs, and no hang-up is reported.
 */
export class UpstreamEnding {
  /** The answer is whole. */
  answered = false
  /** A read of the body is waiting (the reader reads ahead of the decoder). */
  private reading = false
  private grace: ReturnType<typeof setTimeout> | undefined = undefined

  constructor(private readonly body: UpstreamBody) {}

  /** The decoder: the answer is whole. A read already waiting gets the grace too. */
  answer() {
    if (this.answered) return
    this.answered = true
    if (this.reading) this.grace = setTimeout(letGoAfterGrace, answeredStreamGraceMs, this)
  }

  /** The reader: a read begins (only a whole answer's reads are timed: a timer for the last read or two). */
  readBegins() {
    this.reading = true
    if (this.answered) this.grace = setTimeout(letGoAfterGrace, answeredStreamGraceMs, this)
  }

  /** The reader: the read came back (bytes, the end, or a failure). */
  readEnded() {
    this.reading = false
    if (this.grace !== undefined) clearTimeout(this.grace)
    this.grace = undefined
  }

  /** Lets the upstream go: its connection is closed and the bytes end (a waiting read gets the end). */
  letGo() {
    this.body.watch?.stop()
    this.body.reader.cancel().catch(ignore)
  }
}

const ignore = () => {}

/** The grace timer's callback (the ending as its argument: no closure per read). */
function letGoAfterGrace(ending: UpstreamEnding) {
  ending.letGo()
}

/**
 * Reads a started upstream body (its checked first chunks, then the rest) so that a read error
 * becomes one end marker instead of a thrown error, and stamps each chunk on the idle watch.
 * `ending`: what the decoder says of the stream's end (a whole answer's reads are given the grace).
 */
export function breakSafe(body: UpstreamBody, onCancel?: () => void, ending?: UpstreamEnding): ReadableStream<ByteChunk> {
  const { reader, head, watch } = body
  let replayed = 0
  return new ReadableStream<ByteChunk>({
    async pull(controller) {
      if (replayed < head.length) {
        controller.enqueue(head[replayed++]!)
        return
      }
      ending?.readBegins()
      try {
        const { value, done } = await reader.read()
        ending?.readEnded()
        if (done) {
          watch?.stop()
          controller.close()
        } else {
          if (watch) watch.lastByteAt = performance.now()
          controller.enqueue(value)
        }
      } catch {
        ending?.readEnded()
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
