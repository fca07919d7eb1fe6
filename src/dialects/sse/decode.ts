/** SSE decoding with eventsource-parser (never by splitting lines by hand). */
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { upstreamBroke, type ByteChunk } from '../stream-parts'

export interface SseEvents {
  /** Feeds bytes; calls `onEvent` for every complete event. Returns false after a break marker. */
  feed(chunk: ByteChunk): boolean
}

export function createSseDecoder(onEvent: (event: EventSourceMessage) => void): SseEvents {
  const decoder = new TextDecoder()
  const parser = createParser({ onEvent })
  return {
    feed(chunk) {
      if (chunk === upstreamBroke) return false
      parser.feed(decoder.decode(chunk, { stream: true }))
      return true
    },
  }
}

export function parseJson(data: string): unknown {
  try {
    return JSON.parse(data)
  } catch {
    return undefined
  }
}
