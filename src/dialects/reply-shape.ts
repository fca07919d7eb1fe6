/**
 * Whether a buffered 2xx answer is the shape its call expects (issue 11: a 200 with an unusable body
 * is a failed attempt, never a success): a JSON object with `choices` for chat, `data` for
 * embeddings, `output` for a Response. Only the kind is checked here; what a translator needs
 * beyond it is the translator's own check.
 */

export type ReplyKind = 'chat' | 'embeddings' | 'response'

/** A 2xx answer that cannot be used: the attempt failed and the next target is tried. */
export class UnusableReply extends Error {}

const decoder = new TextDecoder()
const notJson = 'the body is not JSON (cut short, malformed or a page)'

/** The list field each kind of answer must carry. */
const listField: Record<ReplyKind, string> = { chat: 'choices', embeddings: 'data', response: 'output' }
const kindName: Record<ReplyKind, string> = { chat: 'a chat completion', embeddings: 'an embeddings list', response: 'a Response object' }

/** Checks a parsed answer; throws UnusableReply naming what is wrong. */
export function checkReply(kind: ReplyKind, value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UnusableReply(`the body is not a JSON object (${kindName[kind]} was expected)`)
  if (!Array.isArray((value as Record<string, unknown>)[listField[kind]])) throw new UnusableReply(`the body is not ${kindName[kind]}: it has no \`${listField[kind]}\` array`)
}

const enum Byte {
  Quote = 0x22,
  Backslash = 0x5c,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
  OpenBracket = 0x5b,
  CloseBracket = 0x5d,
  Comma = 0x2c,
  Colon = 0x3a,
}

const isSpace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
const isDigit = (byte: number) => byte >= 0x30 && byte <= 0x39
/** Bytes a JSON number is made of after its first: digits, sign, point and exponent. */
const isNumberPart = (byte: number) => isDigit(byte) || byte === 0x2d || byte === 0x2b || byte === 0x2e || byte === 0x65 || byte === 0x45
const literals = ['true', 'false', 'null'].map((word) => new TextEncoder().encode(word))

/** The length of the literal (true, false, null) at `at`, or 0 when none is there. */
function literalAt(bytes: Uint8Array, at: number): number {
  for (const literal of literals) {
    let index = 0
    while (index < literal.length && bytes[at + index] === literal[index]) index++
    if (index === literal.length) return index
  }
  return 0
}

/** The list-field names as bytes, for comparing keys without decoding them. */
const listFieldBytes: Record<ReplyKind, Uint8Array> = {
  chat: new TextEncoder().encode(listField.chat),
  embeddings: new TextEncoder().encode(listField.embeddings),
  response: new TextEncoder().encode(listField.response),
}

/** The index of the quote that closes the string opened at `open` (-1 when the body ends first). */
function closingQuote(bytes: Uint8Array, open: number): number {
  let at = bytes.indexOf(Byte.Quote, open + 1)
  while (at !== -1) {
    let backslashes = 0
    while (bytes[at - 1 - backslashes] === Byte.Backslash) backslashes++
    if (backslashes % 2 === 0) return at
    at = bytes.indexOf(Byte.Quote, at + 1)
  }
  return -1
}

function keyIs(bytes: Uint8Array, open: number, close: number, name: Uint8Array): boolean {
  if (close - open - 1 !== name.length) return false
  for (let index = 0; index < name.length; index++) if (bytes[open + 1 + index] !== name[index]) return false
  return true
}

/**
 * Checks a buffered 2xx body without building it (the plain path relays these bytes as they are,
 * so a parse would be garbage made for nothing): one JSON object, its brackets balanced and closed at
 * its last byte, strings closed, the kind's list field an array at its top level. Strings are skipped
 * whole with a native search for their closing quote; UTF-8 never puts a quote or bracket byte
 * inside a multi-byte character; between strings only brackets, commas, colons, numbers and the
 * three literals may stand. It catches what goes wrong in practice (a body cut short, an HTML page,
 * a bare word, an error object, an empty body) without the grammar's finer points (a missing comma),
 * which the client's own parser still meets; the translators, which parse the body, refuse those too.
 */
export function scanReply(kind: ReplyKind, body: ArrayBuffer): void {
  const bytes = new Uint8Array(body)
  let index = 0
  while (index < bytes.length && isSpace(bytes[index]!)) index++
  if (index === bytes.length) throw new UnusableReply('the body is empty')
  if (bytes[index] !== Byte.OpenBrace) {
    throw new UnusableReply(bytes[index] === Byte.OpenBracket ? `the body is not a JSON object (${kindName[kind]} was expected)` : notJson)
  }
  const field = listFieldBytes[kind]
  let depth = 0
  let expectingKey = false
  let keyMatched = false
  let hasList = false
  for (; index < bytes.length; index++) {
    const byte = bytes[index]!
    if (byte === Byte.Quote) {
      const close = closingQuote(bytes, index)
      if (close === -1) throw new UnusableReply(notJson)
      if (depth === 1 && expectingKey) keyMatched = keyIs(bytes, index, close, field)
      index = close
    } else if (byte === Byte.OpenBrace || byte === Byte.OpenBracket) {
      depth++
      if (depth === 1) expectingKey = true
    } else if (byte === Byte.CloseBrace || byte === Byte.CloseBracket) {
      depth--
      if (depth === 0) break
      if (depth < 0) throw new UnusableReply(notJson)
    } else if (byte === Byte.Comma) {
      if (depth === 1) expectingKey = true
    } else if (byte === Byte.Colon) {
      if (depth === 1) {
        expectingKey = false
        if (keyMatched) {
          let next = index + 1
          while (next < bytes.length && isSpace(bytes[next]!)) next++
          hasList = bytes[next] === Byte.OpenBracket
          keyMatched = false
        }
      }
    } else if (isDigit(byte) || byte === 0x2d) {
      while (index + 1 < bytes.length && isNumberPart(bytes[index + 1]!)) index++
    } else if (!isSpace(byte)) {
      // Outside strings only literals are words: anything else is not JSON.
      const length = literalAt(bytes, index)
      if (length === 0) throw new UnusableReply(notJson)
      index += length - 1
    }
  }
  if (depth !== 0) throw new UnusableReply(notJson)
  for (index++; index < bytes.length; index++) if (!isSpace(bytes[index]!)) throw new UnusableReply(notJson)
  if (!hasList) throw new UnusableReply(`the body is not ${kindName[kind]}: it has no \`${listField[kind]}\` array`)
}

/** The parsed answer of a buffered body, checked; throws UnusableReply when it cannot be used. */
export function readReply(kind: ReplyKind, body: ArrayBuffer): unknown {
  let value: unknown
  try {
    value = JSON.parse(decoder.decode(body))
  } catch {
    throw new UnusableReply(body.byteLength === 0 ? 'the body is empty' : notJson)
  }
  checkReply(kind, value)
  return value
}
