/**
 * Reads a batch submit (SPEC "POST /batches") as it streams in, never as one string: the head
 * fields one by one, then the `requests` array one item at a time. Field order is checked as the
 * bytes arrive (`endpoint`, `model`, `provider`, `completion_window` before `requests`, nothing
 * after it), each item is held only until it is whole (at most 16 MB), and nothing is kept after it
 * was handed on, so a 100 MB submit costs one item of memory.
 *
 * The scanner follows JSON's structure (strings with escapes, nesting) to find where each value
 * ends; JSON.parse then judges each head value and each item, so what is accepted is JSON.
 */
import { Byte, isSpace } from '../dialects/json-scan'
import { RouterError } from '../errors/router-error'

export const batchItemLimit = 16 * 1024 * 1024
/** Head values are small (an endpoint, a model id, a provider filter). */
const headValueLimit = 64 * 1024

export const headFields = ['endpoint', 'model', 'provider', 'completion_window'] as const
export type HeadField = (typeof headFields)[number]
export type BatchHead = Partial<Record<HeadField, unknown>>

const utf8 = new TextDecoder('utf-8', { fatal: true })

const enum State {
  BeforeObject,
  BeforeKey,
  /** After a head value: `,` or the object's end. */
  AfterValue,
  InKey,
  BeforeColon,
  BeforeValue,
  InValue,
  BeforeArray,
  /** Inside `requests`: an item, or the array's end (after a comma: an item only). */
  BeforeItem,
  InItem,
  AfterItem,
  AfterRequests,
  End,
}

/**
 * Finds where one JSON value ends across chunks. Tracks nesting and strings only; the bytes are
 * collected for JSON.parse, which judges them.
 */
class ValueScanner {
  private depth = 0
  private inString = false
  private escaped = false
  /** A number or literal: it ends at the first delimiter, which is not part of it. */
  private scalar = false
  private started = false
  private chunks: Uint8Array[] = []
  size = 0

  constructor(private readonly limit: number, private readonly tooLarge: () => RouterError) {}

  /**
   * Scans `bytes` from `start`. Returns the index just past the value's end when it ended in this
   * chunk (for a scalar: the index of the delimiter), or -1 when it continues in the next.
   */
  feed(bytes: Uint8Array, start: number): number {
    let index = start
    if (!this.started) {
      this.started = true
      const first = bytes[index]!
      if (first === Byte.Quote) {
        this.inString = true
        index++
      } else if (first === Byte.OpenBrace || first === Byte.OpenBracket) {
        this.depth = 1
        index++
      } else this.scalar = true
    }
    const end = bytes.byteLength
    let done = -1
    while (index < end) {
      const byte = bytes[index]!
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false
          index++
          continue
        }
        // Skip to the next quote or backslash with native searches.
        const nextQuote = bytes.indexOf(Byte.Quote, index)
        const nextBackslash = bytes.indexOf(Byte.Backslash, index)
        if (nextQuote === -1 && nextBackslash === -1) {
          index = end
          break
        }
        if (nextBackslash !== -1 && (nextQuote === -1 || nextBackslash < nextQuote)) {
          this.escaped = true
          index = nextBackslash + 1
          continue
        }
        this.inString = false
        index = nextQuote + 1
        if (this.depth === 0) {
          done = index
          break
        }
        continue
      }
      if (this.scalar) {
        if (isSpace(byte) || byte === Byte.Comma || byte === Byte.CloseBrace || byte === Byte.CloseBracket) {
          done = index
          break
        }
        index++
        continue
      }
      if (byte === Byte.Quote) this.inString = true
      else if (byte === Byte.OpenBrace || byte === Byte.OpenBracket) this.depth++
      else if (byte === Byte.CloseBrace || byte === Byte.CloseBracket) {
        this.depth--
        if (this.depth === 0) {
          done = index + 1
          break
        }
      }
      index++
    }
    const upTo = done === -1 ? end : done
    this.size += upTo - start
    if (this.size > this.limit) throw this.tooLarge()
    // A view is enough when the value ends in this chunk; a value spanning chunks keeps copies
    // (the caller's chunk buffer may be reused).
    this.chunks.push(done === -1 ? bytes.slice(start, upTo) : bytes.subarray(start, upTo))
    return done
  }

  /** A scalar at the very end of the body has no delimiter after it. */
  get pendingScalar(): boolean {
    return this.started && this.scalar
  }

  bytes(): Uint8Array {
    if (this.chunks.length === 1) return this.chunks[0]!
    const joined = new Uint8Array(this.size)
    let offset = 0
    for (const chunk of this.chunks) {
      joined.set(chunk, offset)
      offset += chunk.byteLength
    }
    return joined
  }
}

export interface BatchItem {
  /** The item's bytes as sent. */
  raw: Uint8Array
  value: Record<string, unknown>
}

/** What one chunk gave: head fields completed, items completed, and whether the body ended well. */
export interface ReadEvents {
  /** Set once, when `requests` begins: the head is complete. */
  head?: BatchHead
  items: BatchItem[]
  finished: boolean
}

function invalidBody(detail: string) {
  return new RouterError('invalid_batch_body', `The batch body is invalid: ${detail}`)
}

function invalidJson(detail: string) {
  return new RouterError('invalid_json', `The batch body is not valid JSON: ${detail}`)
}

function parseValue(bytes: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(utf8.decode(bytes))
  } catch {
    throw invalidJson(`${what} is malformed.`)
  }
}

export class BatchBodyReader {
  private state = State.BeforeObject
  private readonly head: BatchHead = {}
  private readonly seen = new Set<string>()
  private keyScanner: ValueScanner | undefined
  private key = ''
  private valueScanner: ValueScanner | undefined
  private itemScanner: ValueScanner | undefined
  itemCount = 0
  bytesRead = 0

  /** Consumes one chunk; throws a RouterError for the first thing wrong. */
  feed(bytes: Uint8Array): ReadEvents {
    this.bytesRead += bytes.byteLength
    const events: ReadEvents = { items: [], finished: false }
    let index = 0
    const end = bytes.byteLength
    while (index < end) {
      const byte = bytes[index]!
      switch (this.state) {
        case State.BeforeObject:
          if (isSpace(byte)) break
          if (byte !== Byte.OpenBrace) throw invalidJson('a batch submit is a JSON object.')
          this.state = State.BeforeKey
          break
        case State.BeforeKey:
          if (isSpace(byte)) break
          if (byte === Byte.CloseBrace && this.seen.size === 0) throw invalidBody('`endpoint`, `model` and `requests` are required.')
          if (byte !== Byte.Quote) throw invalidJson('a field name was expected.')
          this.keyScanner = new ValueScanner(1024, () => invalidBody('a field name is too long.'))
          this.state = State.InKey
          continue
        case State.InKey: {
          const done = this.keyScanner!.feed(bytes, index)
          if (done === -1) return events
          this.key = parseValue(this.keyScanner!.bytes(), 'a field name') as string
          this.keyScanner = undefined
          index = done
          this.state = State.BeforeColon
          continue
        }
        case State.BeforeColon:
          if (isSpace(byte)) break
          if (byte !== Byte.Colon) throw invalidJson('a colon was expected after a field name.')
          this.state = this.checkKey()
          break
        case State.BeforeValue:
          if (isSpace(byte)) break
          this.valueScanner = new ValueScanner(headValueLimit, () => invalidBody(`\`${this.key}\` is too long.`))
          this.state = State.InValue
          continue
        case State.InValue: {
          const done = this.valueScanner!.feed(bytes, index)
          if (done === -1) return events
          this.finishHeadValue()
          index = done
          this.state = State.AfterValue
          continue
        }
        case State.AfterValue:
          if (isSpace(byte)) break
          if (byte === Byte.Comma) this.state = State.BeforeKey
          else if (byte === Byte.CloseBrace) throw invalidBody('`requests` is required, as the last field.')
          else throw invalidJson('a comma was expected between fields.')
          break
        case State.BeforeArray:
          if (isSpace(byte)) break
          if (byte !== Byte.OpenBracket) throw invalidBody('`requests` must be an array of {custom_id, body} items.')
          events.head = this.checkedHead()
          this.state = State.BeforeItem
          break
        case State.BeforeItem:
          if (isSpace(byte)) break
          if (byte === Byte.CloseBracket && this.itemCount === 0) {
            throw new RouterError('empty_requests', '`requests` is empty: give at least one {custom_id, body} item.')
          }
          if (byte !== Byte.OpenBrace) throw invalidBody(`requests[${this.itemCount}] must be an object {custom_id, body}.`)
          this.itemScanner = new ValueScanner(batchItemLimit, () => new RouterError('value_too_large', `requests[${this.itemCount}] is larger than 16 MB.`))
          this.state = State.InItem
          continue
        case State.InItem: {
          const done = this.itemScanner!.feed(bytes, index)
          if (done === -1) return events
          events.items.push(this.finishItem(this.itemScanner!.bytes()))
          this.itemScanner = undefined
          index = done
          this.state = State.AfterItem
          continue
        }
        case State.AfterItem:
          if (isSpace(byte)) break
          if (byte === Byte.Comma) this.state = State.BeforeItem
          else if (byte === Byte.CloseBracket) this.state = State.AfterRequests
          else throw invalidJson(`a comma was expected after requests[${this.itemCount - 1}].`)
          break
        case State.AfterRequests:
          if (isSpace(byte)) break
          if (byte === Byte.CloseBrace) this.state = State.End
          else if (byte === Byte.Comma) throw invalidBody('nothing may follow `requests`: it must be the last field.')
          else throw invalidJson('the object was expected to end after `requests`.')
          break
        case State.End:
          if (!isSpace(byte)) throw invalidJson('there are bytes after the end of the object.')
          break
      }
      index++
    }
    return events
  }

  /** At the end of the body: whether it was whole. */
  finish(): void {
    if (this.state === State.InValue && this.valueScanner?.pendingScalar) throw invalidJson('the body ends inside a value.')
    if (this.state === State.End) return
    if (this.state === State.BeforeObject) throw invalidJson('the body is empty.')
    throw invalidJson('the body ends before the object does (cut short).')
  }

  get ended(): boolean {
    return this.state === State.End
  }

  private checkKey(): State {
    const key = this.key
    if (this.seen.has(key)) throw invalidJson(`the field \`${key.slice(0, 100)}\` appears more than once.`)
    this.seen.add(key)
    if (key === 'requests') return State.BeforeArray
    if (!(headFields as readonly string[]).includes(key)) {
      throw invalidBody(`unknown field \`${key.slice(0, 100)}\`: a batch submit has ${headFields.map((field) => `\`${field}\``).join(', ')} and \`requests\`, in that order.`)
    }
    return State.BeforeValue
  }

  private finishHeadValue() {
    this.head[this.key as HeadField] = parseValue(this.valueScanner!.bytes(), `\`${this.key}\``)
    this.valueScanner = undefined
  }

  private checkedHead(): BatchHead {
    const missing = (['endpoint', 'model'] as const).filter((field) => this.head[field] === undefined)
    if (missing.length) throw invalidBody(`${missing.map((field) => `\`${field}\``).join(' and ')} must come before \`requests\`.`)
    return this.head
  }

  private finishItem(raw: Uint8Array): BatchItem {
    const position = this.itemCount++
    const value = parseValue(raw, `requests[${position}]`)
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidBody(`requests[${position}] must be an object {custom_id, body}.`)
    const item = value as Record<string, unknown>
    if (typeof item.custom_id !== 'string' || item.custom_id.length === 0) throw new RouterError('invalid_request', `requests[${position}].custom_id must be a non-empty string.`)
    if (typeof item.body !== 'object' || item.body === null || Array.isArray(item.body)) throw new RouterError('invalid_request', `requests[${position}].body must be the JSON object the endpoint takes.`)
    return { raw, value: item }
  }
}
