/**
 * Answering the client: headers every /v1 response carries, error envelopes, and the piped
 * same-dialect stream (bytes pass through record by record once checked; a break, a stall past the
 * idle limit or an unusable record ends it with one stream_aborted record, no [DONE]).
 */
import { brokenStreamMessage, upstreamBroke, upstreamStalled } from '../../dialects/stream-parts'
import type { UpstreamBody } from '../../dialects/upstream-body'
import { copyRateLimitHeaders } from '../../gateways/client'
import type { RequestContext } from '../request/context'
import { failoverHeader } from '../routing/run-attempts'
import type { FailedAttempt } from '../routing/classify-failure'

/**
 * X-Router-Provider, X-Router-Failover and the gateway's rate-limit headers (X-Router-Attempts is
 * set with the answer). `secret`: the serving provider's, scrubbed from the copied values.
 */
export function setRoutingHeaders(context: RequestContext, gateway: string | undefined, failures: readonly FailedAttempt[], upstreamHeaders: Headers | undefined, secret: string | undefined) {
  if (gateway) context.headers['x-router-provider'] = gateway
  if (failures.length > 0) context.headers['x-router-failover'] = failoverHeader(failures)
  if (upstreamHeaders) copyRateLimitHeaders(upstreamHeaders, context.headers, secret)
}

/** A token count as the log keeps it: a whole number, else nothing. */
const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)

/** Token counts from an answer's `usage` object (chat's names, or the Responses names some gateways use). */
export function readUsage(usage: unknown, context: RequestContext) {
  if (typeof usage !== 'object' || usage === null) return
  const counts = usage as Record<string, unknown>
  const input = tokenCount(counts.prompt_tokens) ?? tokenCount(counts.input_tokens)
  const output = tokenCount(counts.completion_tokens) ?? tokenCount(counts.output_tokens)
  if (input !== undefined) context.inputTokens = input
  if (output !== undefined) context.outputTokens = output
  const details = (counts.prompt_tokens_details ?? counts.input_tokens_details) as { cached_tokens?: unknown } | null | undefined
  const cached = typeof details === 'object' && details !== null ? tokenCount(details.cached_tokens) : undefined
  if (cached !== undefined) context.cachedInputTokens = cached
}

const usageKey = Buffer.from('"usage"')
const tailDecoder = new TextDecoder()

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

/**
 * Token counts of a relayed buffered answer, read from its last `usage` object without parsing the
 * body (usage sits at the end of a chat completion or embeddings list; only that tail is decoded).
 */
export function readUsageFromBody(body: ArrayBuffer, context: RequestContext) {
  const bytes = Buffer.from(body)
  const start = bytes.lastIndexOf(usageKey)
  if (start === -1) return
  const tail = tailDecoder.decode(bytes.subarray(start, Math.min(bytes.length, start + 1024)))
  const input = countAfter(tail, 0, '"prompt_tokens"') ?? countAfter(tail, 0, '"input_tokens"')
  const output = countAfter(tail, 0, '"completion_tokens"') ?? countAfter(tail, 0, '"output_tokens"')
  if (input !== undefined) context.inputTokens = input
  if (output !== undefined) context.outputTokens = output
  const cached = countAfter(tail, 0, '"cached_tokens"')
  if (cached !== undefined) context.cachedInputTokens = cached
}

const encoder = new TextEncoder()

export function streamAbortedRecord(message: string): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify({ error: { message, type: 'api_error', code: 'stream_aborted' } })}\n\n`)
}

export interface StreamEnd {
  /** true when the upstream ended cleanly with `data: [DONE]`. */
  complete: boolean
  clientClosed: boolean
}

/** The direct-stream sink Bun hands to pull(). */
interface DirectSink {
  write(chunk: Uint8Array): unknown
  flush(): unknown
  close(): unknown
}

/**
 * Pipes a begun upstream SSE body to the client unchanged, line by line once each line is whole
 * and checked (the record check also reads `[DONE]` and usage). A broken, stalled or unusable
 * upstream ends with one stream_aborted record and the upstream request aborted; a client hang-up
 * aborts the upstream through `controller`. The idle watch is stamped on each chunk.
 */
/** A line of a chat stream that is only the usage chunk: `data: {…, "choices": [], "usage": {…}}`. */
function isUsageOnly(line: string): boolean {
  if (!line.startsWith('data:') || !line.includes('"usage"')) return false
  try {
    const value = JSON.parse(line.slice(5)) as { choices?: unknown; usage?: unknown } | null
    return typeof value === 'object' && value !== null && Array.isArray(value.choices) && value.choices.length === 0 && typeof value.usage === 'object' && value.usage !== null
  } catch {
    return false
  }
}

const chunkDecoder = new TextDecoder()

/**
 * Whole, checked lines without the usage-only chunk (and the blank line ending its record): the
 * usage the router asked the upstream for on a limited key's stream, which the client did not ask
 * for (CONTRACT §11). Lines are only looked at in a chunk that names `"usage"`.
 */
export function withoutUsageChunk(chunk: Uint8Array): Uint8Array {
  if (Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).indexOf(usageKey) === -1) return chunk
  const text = chunkDecoder.decode(chunk)
  let kept = ''
  let removed = false
  let skipBlank = false
  for (const match of text.matchAll(/([^\r\n]*)(\r\n|\r|\n|$)/g)) {
    const [, line, end] = match
    if (line === '' && end === '') break
    if (skipBlank && line === '') {
      skipBlank = false
      continue
    }
    skipBlank = false
    if (isUsageOnly(line!)) {
      removed = true
      skipBlank = true
      continue
    }
    kept += line! + end!
  }
  return removed ? encoder.encode(kept) : chunk
}

export function relayChatStream(upstream: UpstreamBody, controller: AbortController, onEnd: (end: StreamEnd) => void, hideUsage = false): ReadableStream<Uint8Array> {
  const { reader, records, watch } = upstream
  let ended = false
  const finish = (complete: boolean, clientClosed: boolean) => {
    if (ended) return
    ended = true
    watch?.stop()
    onEnd({ complete, clientClosed })
  }
  // A direct stream: Bun hands the sink to one pull() that loops, so each chunk is one write
  // with no intermediate queue (lower first-byte time and CPU than a queued ReadableStream).
  return new ReadableStream<Uint8Array>({
    type: 'direct',
    async pull(sink: DirectSink) {
      let failure: string | undefined
      try {
        let checked = hideUsage ? withoutUsageChunk(upstream.checkedHead) : upstream.checkedHead
        for (;;) {
          if (checked.byteLength > 0) {
            sink.write(checked)
            // flush() answers a promise only under back-pressure: awaiting a plain number would cost a
            // microtask per chunk for nothing.
            const flushed = sink.flush()
            if (flushed instanceof Promise) await flushed
          }
          const { value, done } = await reader.read()
          if (done) break
          if (watch) watch.lastByteAt = performance.now()
          const next = records.feed(value)
          if (next === undefined) {
            failure = `The upstream sent ${records.problem}.`
            break
          }
          checked = hideUsage ? withoutUsageChunk(next) : next
        }
        if (failure === undefined && !ended) {
          const last = records.end()
          if (last === undefined) failure = `The upstream sent ${records.problem}.`
          else if (last.byteLength > 0) sink.write(hideUsage ? withoutUsageChunk(last) : last)
        }
      } catch {
        if (ended) return
        failure = brokenStreamMessage(watch?.stalled ? upstreamStalled : upstreamBroke)
      }
      if (ended) return
      if (failure !== undefined) {
        // The records checked so far went out; the unusable one and whatever follows do not. After
        // `[DONE]` the answer was whole: what broke after it (an upstream that kept the connection
        // open until the idle limit, bytes after the end) is not the client's concern.
        controller.abort('unusable')
        reader.cancel().catch(() => {})
        if (!records.sawDone) sink.write(streamAbortedRecord(failure))
        sink.close()
        finish(records.sawDone, false)
        return
      }
      const complete = records.sawDone
      // A translating adapter upstream of here may already have ended with its own record.
      if (!complete && !records.abortReported) sink.write(streamAbortedRecord('The upstream stream ended before it was complete.'))
      sink.close()
      finish(complete, false)
    },
    cancel() {
      controller.abort('client-closed')
      reader.cancel().catch(() => {})
      finish(false, true)
    },
  } as unknown as UnderlyingDefaultSource<Uint8Array>)
}
