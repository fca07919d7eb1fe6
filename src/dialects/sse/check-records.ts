/**
 * The one reader of an SSE body relayed byte for byte (STYLE: same dialect in and out, the bytes
 * pass straight through, read only for what the log needs). It cuts the bytes into lines, checks
 * that every line is an SSE field and every `data:` record a JSON object (or `[DONE]`), and keeps
 * whether `[DONE]` came, which choices gave their finish reason (a stream whose every choice
 * finished is whole without `[DONE]`), the last `usage` object and whether the stream reported an
 * error (the break itself, SPEC "Stream events") or its own abort.
 * A line is let through only once it is whole and checked, so an unusable record never reaches the
 * client: the relay ends the stream with the dialect's failure instead (SPEC "Stream events").
 *
 * Chat gateways send one JSON value per `data:` line; a value spread over several `data:` lines is
 * refused like any other record that is not JSON.
 *
 * Lines are cut here by hand, not with eventsource-parser (STYLE 5 is about translators): the relay
 * must know which bytes belong to a whole, checked line to let them through untouched, which an
 * event parser does not say. The SSE line rules are kept (LF, CR and CRLF, a line split across any
 * chunk boundary); test/integration/upstream-faults.test.ts feeds a stream split at every byte.
 *
 * It works on the bytes as they came: a record is checked by dialects/json-scan.ts without being
 * decoded or built, and only a record that names `usage` or `error`, or a `finish_reason` that is
 * not null, is parsed, for what the log needs (chat streams carry usage in their last chunk) and
 * for the stream's end (a finish reason comes once per choice).
 */
import { JsonScan, scanJsonObject } from '../json-scan'

const decoder = new TextDecoder()
const empty = new Uint8Array(0)
const ascii = (text: string) => new TextEncoder().encode(text)
const dataField = ascii('data:')
const otherFields = [ascii('event:'), ascii('id:'), ascii('retry:')]
const doneValue = ascii('[DONE]')
const usageKey = Buffer.from('"usage"')
const errorKey = Buffer.from('"error"')
const finishKey = Buffer.from('"finish_reason"')
const nullValue = ascii('null')

function startsWith(bytes: Uint8Array, at: number, end: number, prefix: Uint8Array): boolean {
  if (end - at < prefix.length) return false
  for (let index = 0; index < prefix.length; index++) if (bytes[at + index] !== prefix[index]) return false
  return true
}

/** A line longer than this is not an event stream, and holding it back would hold it in memory. */
const maximumLineBytes = 16 * 1024 * 1024

const colon = 58
const lowerD = 100
const space = 32
const tab = 9
const lineFeed = 10
const carriageReturn = 13

/** The index of the first byte at or after `at` that is not JSON whitespace (or `end`). */
function skipSpace(bytes: Uint8Array, at: number, end: number): number {
  while (at < end) {
    const byte = bytes[at]
    if (byte !== space && byte !== tab && byte !== lineFeed && byte !== carriageReturn) break
    at++
  }
  return at
}

function concat(first: Uint8Array, second: Uint8Array): Uint8Array {
  const joined = new Uint8Array(first.byteLength + second.byteLength)
  joined.set(first)
  joined.set(second, first.byteLength)
  return joined
}

/** The index just after the last line end of `chunk` (LF, CR or CRLF), 0 when it has none. */
function lastLineEnd(chunk: Uint8Array): number {
  const length = chunk.byteLength
  if (length === 0) return 0
  const last = chunk[length - 1]
  // Gateways flush whole events, so a chunk nearly always ends a line: no scan.
  if (last === lineFeed || last === carriageReturn) return length
  const lineFeedAt = chunk.lastIndexOf(lineFeed)
  const carriageReturnAt = chunk.lastIndexOf(carriageReturn)
  return Math.max(lineFeedAt, carriageReturnAt) + 1
}

export class SseRecordCheck {
  /** `data: [DONE]` came. */
  sawDone = false
  /** The last `usage` object of a record (chat streams carry it in their last chunks). */
  usage: unknown = undefined
  /** A record `{error:{code:'stream_aborted'}}` came: the stream already ends with its own failure. */
  abortReported = false
  /** A record `{error: …}` came: the upstream reported a failure mid-stream, which ends the stream. */
  errorReported = false
  /** Why the stream is unusable, once a check failed. */
  problem: string | undefined = undefined
  /** The bytes of a line not yet ended, held back until it is whole. */
  private carry: Uint8Array | undefined = undefined
  private usageAt = -1
  private errorAt = -1
  private finishAt = -1
  /** The choice indexes whose finish reason came (created by the first one). */
  private finishedChoices: Set<number> | undefined = undefined

  /** Every one of `choices` choices gave its finish reason (n > 1: each of them): the answer is whole. */
  finished(choices: number): boolean {
    return this.finishedChoices !== undefined && this.finishedChoices.size >= choices
  }

  /**
   * The bytes that may go to the client now: the whole lines of `chunk` (after any held-back start
   * of the first one), checked. Empty when no line ended; undefined when a line is unusable.
   */
  feed(chunk: Uint8Array): Uint8Array | undefined {
    const lineEnd = lastLineEnd(chunk)
    if (lineEnd === 0) {
      const carried = this.carry ? concat(this.carry, chunk) : chunk
      if (carried.byteLength > maximumLineBytes) {
        this.problem = 'a line longer than 16 MB'
        return undefined
      }
      this.carry = carried
      return empty
    }
    let complete = lineEnd === chunk.byteLength ? chunk : chunk.subarray(0, lineEnd)
    if (this.carry) complete = concat(this.carry, complete)
    this.carry = lineEnd === chunk.byteLength ? undefined : chunk.subarray(lineEnd)
    return this.checkLines(complete) ? complete : undefined
  }

  /** At the end of the body: a last line without its line end, checked (empty when there is none). */
  end(): Uint8Array | undefined {
    const last = this.carry
    if (!last) return empty
    this.carry = undefined
    return this.checkLines(last) ? last : undefined
  }

  private checkLines(chunk: Uint8Array): boolean {
    // One Buffer view per chunk, for its native multi-byte search.
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    const length = bytes.byteLength
    // Where the next `"usage"`, `"error"` and `"finish_reason"` are, searched once per chunk and again only when passed.
    this.usageAt = bytes.indexOf(usageKey)
    this.errorAt = bytes.indexOf(errorKey)
    this.finishAt = bytes.indexOf(finishKey)
    let start = 0
    let lineFeedAt = bytes.indexOf(lineFeed)
    let carriageReturnAt = bytes.indexOf(carriageReturn)
    while (start < length) {
      if (lineFeedAt !== -1 && lineFeedAt < start) lineFeedAt = bytes.indexOf(lineFeed, start)
      if (carriageReturnAt !== -1 && carriageReturnAt < start) carriageReturnAt = bytes.indexOf(carriageReturn, start)
      const end =
        lineFeedAt === -1
          ? carriageReturnAt === -1
            ? length
            : carriageReturnAt
          : carriageReturnAt === -1 || lineFeedAt < carriageReturnAt
            ? lineFeedAt
            : carriageReturnAt
      if (end > start && !this.checkLine(bytes, start, end)) return false
      start = end + 1
    }
    return true
  }

  private checkLine(bytes: Buffer, start: number, end: number): boolean {
    // A comment: the keep-alives several gateways send while a model thinks.
    if (bytes[start] === colon) return true
    if (startsWith(bytes, start, end, dataField)) {
      const valueStart = start + 5 + (bytes[start + 5] === space ? 1 : 0)
      return this.checkData(bytes, Math.min(valueStart, end), end)
    }
    for (const field of otherFields) if (startsWith(bytes, start, end, field)) return true
    this.problem = 'a line that is not part of an event stream'
    return false
  }

  private checkData(bytes: Buffer, start: number, end: number): boolean {
    if (end - start === doneValue.length && startsWith(bytes, start, end, doneValue)) {
      this.sawDone = true
      return true
    }
    // An empty data line carries nothing (no JSON to check).
    if (start === end) return true
    const scan = scanJsonObject(bytes, start, end)
    if (scan !== JsonScan.Object) {
      this.problem = scan === JsonScan.NotObject ? 'a data record that is not a JSON object' : 'a data record that is not JSON'
      return false
    }
    // Only a record that names usage or an error, or gives a finish reason, is read.
    if (this.usageAt !== -1 && this.usageAt < start) this.usageAt = bytes.indexOf(usageKey, start)
    if (this.errorAt !== -1 && this.errorAt < start) this.errorAt = bytes.indexOf(errorKey, start)
    if (this.finishAt !== -1 && this.finishAt < start) this.finishAt = bytes.indexOf(finishKey, start)
    const finishes = this.finishAt !== -1 && this.finishAt < end && (this.finishAt = nonNullAt(bytes, this.finishAt, finishKey, end)) !== -1 && this.finishAt < end
    // `"usage":null` rides on every chunk of a stream asked for usage: only a usage that is one is read.
    if (this.usageAt !== -1 && this.usageAt < end) this.usageAt = nonNullAt(bytes, this.usageAt, usageKey, end)
    if (!finishes && (this.usageAt === -1 || this.usageAt >= end) && (this.errorAt === -1 || this.errorAt >= end)) return true
    let value: unknown
    try {
      value = JSON.parse(decoder.decode(bytes.subarray(start, end)))
    } catch {
      this.problem = 'a data record that is not JSON'
      return false
    }
    const { usage, error, choices } = value as { usage?: unknown; error?: { code?: unknown } | string | null; choices?: unknown }
    if (usage !== undefined && usage !== null) this.usage = usage
    if ((typeof error === 'object' && error !== null) || (typeof error === 'string' && error !== '')) {
      this.errorReported = true
      if (typeof error === 'object' && error.code === 'stream_aborted') this.abortReported = true
    }
    if (finishes && Array.isArray(choices)) {
      for (let position = 0; position < choices.length; position++) {
        const choice = choices[position] as { index?: unknown; finish_reason?: unknown } | null
        // OpenRouter's `finish_reason: 'error'` comes with an error record: not an end.
        if (typeof choice !== 'object' || choice === null || typeof choice.finish_reason !== 'string' || choice.finish_reason === 'error') continue
        ;(this.finishedChoices ??= new Set()).add(typeof choice.index === 'number' ? choice.index : position)
      }
    }
    return true
  }

}

/**
 * The first `key` from `at` on whose value, before `end`, is not null; else the next `key` at or after
 * `end` (-1: none). Chat sends `"finish_reason":null` in nearly every chunk, and `"usage":null` too
 * when usage is asked for: only the bytes after the name are looked at, and a record is parsed only
 * for a real value.
 */
function nonNullAt(bytes: Buffer, at: number, key: Buffer, end: number): number {
  while (at !== -1 && at < end) {
    let value = skipSpace(bytes, at + key.length, end)
    if (bytes[value] === colon) value = skipSpace(bytes, value + 1, end)
    if (!startsWith(bytes, value, end, nullValue)) return at
    at = bytes.indexOf(key, value)
  }
  return at
}
