/**
 * Answering the client: headers every /v1 response carries, error envelopes, and the piped
 * same-dialect stream (bytes pass through; a break ends with one stream_aborted record, no [DONE]).
 */
import { errorResponse } from '../errors/render'
import type { RouterError } from '../errors/router-error'
import { copyRateLimitHeaders } from '../gateways/upstream'
import type { RequestContext } from './context'
import { failoverHeader } from './run-attempts'
import type { FailedAttempt } from './classify-failure'

/** X-Router-Provider, X-Router-Failover and the gateway's rate-limit headers (X-Router-Attempts is set with the answer). */
export function setRoutingHeaders(context: RequestContext, gateway: string | undefined, failures: readonly FailedAttempt[], upstreamHeaders?: Headers) {
  if (gateway) context.headers['x-router-provider'] = gateway
  if (failures.length > 0) context.headers['x-router-failover'] = failoverHeader(failures)
  if (upstreamHeaders) copyRateLimitHeaders(upstreamHeaders, context.headers)
}

export function renderError(context: RequestContext, error: RouterError): Response {
  return errorResponse(context.envelope, error, context.responseHeaders())
}

const tailDecoder = new TextDecoder()
const usageKey = Buffer.from('"usage"')

/** The usage object of a buffered body as text ('' when there is none), found without decoding the body. */
export function usageText(body: ArrayBuffer): string {
  const bytes = Buffer.from(body)
  const start = bytes.lastIndexOf(usageKey)
  if (start === -1) return ''
  return tailDecoder.decode(bytes.subarray(start, Math.min(bytes.length, start + 400)))
}

/** The integer after `"name":` at or after `from` (undefined when absent or not a number). */
function countAfter(text: string, from: number, quotedName: string): number | undefined {
  const at = text.indexOf(quotedName, from)
  if (at === -1) return undefined
  let index = at + quotedName.length
  let code = text.charCodeAt(index)
  while (code === 32 || code === 9 || code === 10 || code === 13 || code === 58) code = text.charCodeAt(++index)
  let value = 0
  let digits = 0
  while (code >= 48 && code <= 57) {
    value = value * 10 + (code - 48)
    digits++
    code = text.charCodeAt(++index)
  }
  return digits > 0 ? value : undefined
}

/** Token counts from the tail of a chat body or stream (the last usage object wins). */
export function readUsage(tail: string, context: RequestContext) {
  const start = tail.lastIndexOf('"usage"')
  if (start === -1) return
  const input = countAfter(tail, start, '"prompt_tokens"') ?? countAfter(tail, start, '"input_tokens"')
  const output = countAfter(tail, start, '"completion_tokens"') ?? countAfter(tail, start, '"output_tokens"')
  if (input !== undefined) context.inputTokens = input
  if (output !== undefined) context.outputTokens = output
}

const encoder = new TextEncoder()

export function streamAbortedRecord(message: string): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify({ error: { message, type: 'api_error', code: 'stream_aborted' } })}\n\n`)
}

export interface StreamEnd {
  /** true when the upstream ended cleanly with `data: [DONE]`. */
  complete: boolean
  clientClosed: boolean
  tail: string
}

/**
 * Pipes an upstream SSE body to the client unchanged, watching only the tail for `[DONE]` and
 * usage. A broken or truncated upstream ends with one stream_aborted record; a client hang-up
 * aborts the upstream through `controller`.
 */
export function relayChatStream(upstream: ReadableStream<Uint8Array>, controller: AbortController, onEnd: (end: StreamEnd) => void): ReadableStream<Uint8Array> {
  const reader = upstream.getReader()
  // The last few chunks, kept as bytes and decoded once at the end (usage and [DONE] come last).
  const recent: Uint8Array[] = []
  let recentBytes = 0
  let ended = false
  const tail = () => tailDecoder.decode(Buffer.concat(recent))
  const finish = (end: Omit<StreamEnd, 'tail'>, text: string) => {
    if (ended) return
    ended = true
    onEnd({ ...end, tail: text })
  }
  // A direct stream: Bun hands the sink to one pull() that loops, so each chunk is one write
  // with no intermediate queue (lower first-byte time and CPU than a queued ReadableStream).
  return new ReadableStream<Uint8Array>({
    type: 'direct',
    async pull(sink: { write(chunk: Uint8Array): unknown; flush(): unknown; close(): unknown }) {
      try {
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          sink.write(value)
          // flush() answers a promise only under back-pressure: awaiting a plain number would cost a
          // microtask per chunk for nothing.
          const flushed = sink.flush()
          if (flushed instanceof Promise) await flushed
          recent.push(value)
          recentBytes += value.byteLength
          while (recent.length > 1 && recentBytes - recent[0]!.byteLength >= 4096) recentBytes -= recent.shift()!.byteLength
        }
      } catch {
        if (ended) return
        sink.write(streamAbortedRecord('The upstream stream broke off.'))
        sink.close()
        finish({ complete: false, clientClosed: false }, tail())
        return
      }
      if (ended) return
      const text = tail()
      const complete = /data:\s*\[DONE\]/.test(text)
      // A translating adapter upstream of here may already have ended with its own record.
      const alreadyReported = !complete && text.includes('"code":"stream_aborted"')
      if (!complete && !alreadyReported) sink.write(streamAbortedRecord('The upstream stream ended before it was complete.'))
      sink.close()
      finish({ complete, clientClosed: false }, text)
    },
    cancel() {
      controller.abort('client-closed')
      reader.cancel().catch(() => {})
      finish({ complete: false, clientClosed: true }, tail())
    },
  } as unknown as UnderlyingDefaultSource<Uint8Array>)
}
