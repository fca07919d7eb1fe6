/**
 * Answering the client: headers every /v1 response carries, error envelopes, and the piped
 * same-dialect stream (bytes pass through record by record once checked; a break, a stall past the
 * idle limit, an unusable record or an error record before the answer is whole ends it with one
 * stream_aborted record, no [DONE]; a whole answer without [DONE] gets one).
 */
import { answeredStreamGraceMs, brokenStreamMessage, upstreamBroke, upstreamStalled } from '../../dialects/stream-parts'
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

/**
 * The model an answer names (`model` of a completion, a chunk, a Response), for the request's span
 * (`gen_ai.response.model`): kept only while the request is traced, and only the first one named.
 */
export function noteResponseModel(context: RequestContext, model: unknown) {
  if (context.span && context.responseModel === undefined && typeof model === 'string' && model !== '') context.responseModel = model
}

const modelField = /"model"\s*:\s*("(?:[^"\\]|\\.)*")/
const headDecoder = new TextDecoder()

/** The model named near the start of an answer's bytes (a completion's, a stream's first chunk), read only while traced. */
export function noteResponseModelIn(context: RequestContext, bytes: Uint8Array | ArrayBuffer | undefined) {
  if (!context.span || context.responseModel !== undefined || !bytes) return
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)
  const match = modelField.exec(headDecoder.decode(view.subarray(0, 2048)))
  if (!match) return
  try {
    noteResponseModel(context, JSON.parse(match[1]!))
  } catch {}
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

const doneRecord = encoder.encode('data: [DONE]\n\n')

export interface StreamEnd {
  /** true when the answer was whole: `data: [DONE]` came, or every choice gave its finish reason. */
  complete: boolean
  clientClosed: boolean
}

/** The direct-stream sink Bun hands to pull(). */
interface DirectSink {
  write(chunk: Uint8Array): unknown
  flush(): unknown
  close(): unknown
}

const newLine = encoder.encode('\n')
const blankLine = encoder.encode('\n\n')

/**
 * What must be written after `last` (the bytes the client got last) for a record appended by the
 * relay to be a record of its own: nothing after a blank line, else the line ends it lacks (an
 * upstream may end its body without the blank line after its last record, or mid-line).
 */
function recordBreak(last: Uint8Array): Uint8Array | undefined {
  let at = last.byteLength - 1
  let lineEnds = 0
  while (at >= 0 && lineEnds < 2) {
    const byte = last[at]
    if (byte === 10) {
      lineEnds++
      at--
      if (at >= 0 && last[at] === 13) at--
    } else if (byte === 13) {
      lineEnds++
      at--
    } else break
  }
  if (lineEnds >= 2 || last.byteLength === 0) return undefined
  return lineEnds === 1 ? newLine : blankLine
}

/** The grace timer's callback: the reader as its argument (no closure per read). */
function letGoAfterGrace(reader: ReadableStreamDefaultReader<Uint8Array>) {
  reader.cancel().catch(() => {})
}

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

/**
 * Pipes a begun upstream SSE body to the client unchanged, line by line once each line is whole
 * and checked (the record check also reads `[DONE]`, the finish reasons, usage and error records).
 * The answer is whole on `[DONE]`, or once each of the `choices` choices gave its finish reason
 * (usage may follow in a chunk of its own): the upstream's end then ends the stream as complete,
 * with a `[DONE]` of ours when it sent none, and so does a break or an upstream that keeps the
 * connection open past the grace (answeredStreamGraceMs, counted only while a read waits).
 * A broken or stalled upstream before the answer is whole, or a record that is not usable before
 * `[DONE]`, ends with one stream_aborted record and the upstream request aborted. An error record is
 * the break itself (SPEC "Stream
 * events"): relayed as it came, then the stream_aborted record at once, the upstream let go. A
 * client hang-up aborts the upstream through `controller`. The idle watch is stamped on each chunk.
 */
export function relayChatStream(upstream: UpstreamBody, controller: AbortController, onEnd: (end: StreamEnd) => void, hideUsage = false, choices = 1): ReadableStream<Uint8Array> {
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
      /** The failure is a record that is not usable (not a break of the connection). */
      let unusable = false
      let grace: ReturnType<typeof setTimeout> | undefined
      /** The bytes the client got last (a record of ours after them must start a record of its own). */
      let last = upstream.checkedHead
      try {
        let checked = hideUsage ? withoutUsageChunk(upstream.checkedHead) : upstream.checkedHead
        for (;;) {
          if (checked.byteLength > 0) {
            sink.write(checked)
            last = checked
            // flush() answers a promise only under back-pressure: awaiting a plain number would cost a
            // microtask per chunk for nothing.
            const flushed = sink.flush()
            if (flushed instanceof Promise) await flushed
          }
          if (records.errorReported) break
          // Once the answer is whole, a read the upstream keeps waiting past the grace ends the stream
          // as its end would: a timer for the last read or two of a stream, none before.
          if (records.sawDone || records.finished(choices)) grace = setTimeout(letGoAfterGrace, answeredStreamGraceMs, reader)
          const { value, done } = await reader.read()
          if (grace !== undefined) clearTimeout(grace)
          if (done) break
          if (watch) watch.lastByteAt = performance.now()
          const next = records.feed(value)
          if (next === undefined) {
            failure = `The upstream sent ${records.problem}.`
            unusable = true
            break
          }
          checked = hideUsage ? withoutUsageChunk(next) : next
        }
        if (failure === undefined && !ended && !records.errorReported) {
          const tail = records.end()
          if (tail === undefined) {
            failure = `The upstream sent ${records.problem}.`
            unusable = true
          } else if (tail.byteLength > 0) {
            const kept = hideUsage ? withoutUsageChunk(tail) : tail
            if (kept.byteLength > 0) {
              sink.write(kept)
              last = kept
            }
          }
        }
      } catch {
        if (grace !== undefined) clearTimeout(grace)
        if (ended) return
        failure = brokenStreamMessage(watch?.stalled ? upstreamStalled : upstreamBroke)
      }
      if (ended) return
      // What breaks after a whole answer (a connection cut or held open after the last choice's
      // finish, anything after [DONE]) is not the client's concern; an error record is the break
      // whatever came before it, and so is a record that is not usable in place of [DONE].
      const complete = !records.errorReported && (records.sawDone || (!unusable && records.finished(choices)))
      if (failure !== undefined || records.errorReported) {
        // The records checked so far went out; an unusable one and whatever follows do not.
        controller.abort(records.errorReported ? 'upstream-error' : 'unusable')
        reader.cancel().catch(() => {})
      }
      if (complete) {
        if (!records.sawDone) writeRecord(sink, last, doneRecord)
      } else if (!records.abortReported && !records.sawDone) {
        // Not after a record of the upstream's own abort (a translating adapter upstream of here), nor after [DONE].
        const message = records.errorReported ? 'The upstream reported an error mid-stream.' : (failure ?? 'The upstream stream ended before it was complete.')
        writeRecord(sink, last, streamAbortedRecord(message))
      }
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

/** A record of the relay's own after the upstream's bytes, as a record of its own. */
function writeRecord(sink: DirectSink, last: Uint8Array, record: Uint8Array) {
  const lineEnds = recordBreak(last)
  if (lineEnds) sink.write(lineEnds)
  sink.write(record)
}
