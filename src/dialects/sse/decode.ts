/** SSE decoding with eventsource-parser (never by splitting lines by hand). */
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { breakOf, brokenStreamMessage, type ByteChunk, type StreamBreak } from '../stream-parts'

export interface SseHandlers<Out> {
  /** Receives the stream's output when the stream starts. */
  start(output: TransformStreamDefaultController<Out>): void
  /** A complete event. */
  event(event: EventSourceMessage): void
  /** The upstream broke off or went silent past the idle limit (an end marker), with the failure text and what it was. */
  broke(message: string, why: StreamBreak): void
  /** The bytes ended. */
  end(): void
  /** Work an event started that the stream waits for before reading on (an event held for fields to attach). */
  pending?(): Promise<void> | undefined
}

/** SSE bytes → `Out` chunks, chunk by chunk: every upstream SSE reader is one of these. */
export function decodeSse<Out>(handlers: SseHandlers<Out>): TransformStream<ByteChunk, Out> {
  const decoder = new TextDecoder()
  const parser = createParser({ onEvent: handlers.event })
  return new TransformStream<ByteChunk, Out>({
    start(controller) {
      handlers.start(controller)
    },
    transform(chunk) {
      if (typeof chunk === 'symbol') handlers.broke(brokenStreamMessage(chunk), breakOf(chunk))
      else parser.feed(decoder.decode(chunk, { stream: true }))
      return handlers.pending?.()
    },
    async flush() {
      await handlers.pending?.()
      handlers.end()
    },
  })
}

export function parseJson(data: string): unknown {
  try {
    return JSON.parse(data)
  } catch {
    return undefined
  }
}
