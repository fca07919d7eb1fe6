/**
 * The one reader of an SSE body relayed byte for byte (STYLE: same dialect in and out, the bytes
 * pass straight through, read only for what the log needs). It cuts the bytes into lines, checks
 * that every line is an SSE field and every `data:` record a JSON object (or `[DONE]`), and keeps
 * whether `[DONE]` came, the last `usage` object and whether the stream reported its own abort.
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
 */

const decoder = new TextDecoder()
const empty = new Uint8Array(0)

/** A line longer than this is not an event stream, and holding it back would hold it in memory. */
const maximumLineBytes = 16 * 1024 * 1024

const colon = 58
const lowerD = 100
const space = 32
const lineFeed = 10
const carriageReturn = 13

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
  /** Why the stream is unusable, once a check failed. */
  problem: string | undefined = undefined
  /** The bytes of a line not yet ended, held back until it is whole. */
  private carry: Uint8Array | undefined = undefined

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
    return this.checkLines(decoder.decode(complete)) ? complete : undefined
  }

  /** At the end of the body: a last line without its line end, checked (empty when there is none). */
  end(): Uint8Array | undefined {
    const last = this.carry
    if (!last) return empty
    this.carry = undefined
    return this.checkLines(decoder.decode(last)) ? last : undefined
  }

  private checkLines(text: string): boolean {
    const length = text.length
    let start = 0
    let lineFeedAt = text.indexOf('\n')
    let carriageReturnAt = text.indexOf('\r')
    while (start < length) {
      if (lineFeedAt !== -1 && lineFeedAt < start) lineFeedAt = text.indexOf('\n', start)
      if (carriageReturnAt !== -1 && carriageReturnAt < start) carriageReturnAt = text.indexOf('\r', start)
      const end =
        lineFeedAt === -1
          ? carriageReturnAt === -1
            ? length
            : carriageReturnAt
          : carriageReturnAt === -1 || lineFeedAt < carriageReturnAt
            ? lineFeedAt
            : carriageReturnAt
      if (end > start && !this.checkLine(text, start, end)) return false
      start = end + 1
    }
    return true
  }

  private checkLine(text: string, start: number, end: number): boolean {
    const first = text.charCodeAt(start)
    // A comment: the keep-alives several gateways send while a model thinks.
    if (first === colon) return true
    if (first === lowerD && text.startsWith('data:', start)) {
      return this.checkData(text.slice(text.charCodeAt(start + 5) === space ? start + 6 : start + 5, end))
    }
    if (text.startsWith('event:', start) || text.startsWith('id:', start) || text.startsWith('retry:', start)) return true
    this.problem = 'a line that is not part of an event stream'
    return false
  }

  private checkData(value: string): boolean {
    if (value === '[DONE]') {
      this.sawDone = true
      return true
    }
    // An empty data line carries nothing (no JSON to check).
    if (value === '') return true
    let record: unknown
    try {
      record = JSON.parse(value)
    } catch {
      this.problem = 'a data record that is not JSON'
      return false
    }
    if (typeof record !== 'object' || record === null || Array.isArray(record)) {
      this.problem = 'a data record that is not a JSON object'
      return false
    }
    const { usage, error } = record as { usage?: unknown; error?: { code?: unknown } | null }
    if (usage !== undefined && usage !== null) this.usage = usage
    if (typeof error === 'object' && error !== null && error.code === 'stream_aborted') this.abortReported = true
    return true
  }
}
