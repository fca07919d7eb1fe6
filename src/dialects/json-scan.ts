/**
 * Whether bytes hold one JSON object, judged without building it: for answers relayed as they are
 * (a buffered chat reply, the records of a chat stream), where a parse would make garbage for nothing.
 * Brackets balanced and closed at the last byte, strings closed, and between strings only brackets,
 * commas, colons, numbers and the three literals. Strings are skipped whole with a native search for
 * their closing quote; UTF-8 never puts a quote or bracket byte inside a multi-byte character. It
 * catches what goes wrong in practice (a body cut short, an HTML page, a bare word, an empty body)
 * without the grammar's finer points (a missing comma), which the client's own parser still meets.
 */

export const enum JsonScan {
  Object,
  Empty,
  NotJson,
  /** Valid-looking JSON that is not an object (an array). */
  NotObject,
  /** An object without the list field asked for at its top level. */
  NoListField,
}

/** The bytes of JSON's structure (shared with the batch submit reader, batch/body-reader.ts). */
export const enum Byte {
  Quote = 0x22,
  Backslash = 0x5c,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
  OpenBracket = 0x5b,
  CloseBracket = 0x5d,
  Comma = 0x2c,
  Colon = 0x3a,
  Minus = 0x2d,
}

export const isSpace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
const isDigit = (byte: number) => byte >= 0x30 && byte <= 0x39
/** Bytes a JSON number is made of after its first: digits, sign, point and exponent. */
const isNumberPart = (byte: number) => isDigit(byte) || byte === Byte.Minus || byte === 0x2b || byte === 0x2e || byte === 0x65 || byte === 0x45
const literals = ['true', 'false', 'null'].map((word) => new TextEncoder().encode(word))

/** The length of the literal (true, false, null) at `at` before `end`, or 0 when none is there. */
function literalAt(bytes: Uint8Array, at: number, end: number): number {
  for (const literal of literals) {
    if (at + literal.length > end) continue
    let index = 0
    while (index < literal.length && bytes[at + index] === literal[index]) index++
    if (index === literal.length) return index
  }
  return 0
}

/** The index of the quote that closes the string opened at `open`, before `end` (-1 when there is none). */
function closingQuote(bytes: Uint8Array, open: number, end: number): number {
  let at = bytes.indexOf(Byte.Quote, open + 1)
  while (at !== -1 && at < end) {
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
 * Scans `bytes[start, end)`. With `listField` (a key's bytes), an object must also have that key at
 * its top level with an array value.
 */
export function scanJsonObject(bytes: Uint8Array, start: number, end: number, listField?: Uint8Array): JsonScan {
  let index = start
  while (index < end && isSpace(bytes[index]!)) index++
  if (index === end) return JsonScan.Empty
  if (bytes[index] !== Byte.OpenBrace) return bytes[index] === Byte.OpenBracket ? JsonScan.NotObject : JsonScan.NotJson
  let depth = 0
  let expectingKey = false
  let keyMatched = false
  let hasList = false
  for (; index < end; index++) {
    const byte = bytes[index]!
    if (byte === Byte.Quote) {
      const close = closingQuote(bytes, index, end)
      if (close === -1) return JsonScan.NotJson
      if (listField && depth === 1 && expectingKey) keyMatched = keyIs(bytes, index, close, listField)
      index = close
    } else if (byte === Byte.OpenBrace || byte === Byte.OpenBracket) {
      depth++
      if (depth === 1) expectingKey = true
    } else if (byte === Byte.CloseBrace || byte === Byte.CloseBracket) {
      depth--
      if (depth === 0) break
      if (depth < 0) return JsonScan.NotJson
    } else if (byte === Byte.Comma) {
      if (depth === 1) expectingKey = true
    } else if (byte === Byte.Colon) {
      if (depth === 1) {
        expectingKey = false
        if (keyMatched) {
          let next = index + 1
          while (next < end && isSpace(bytes[next]!)) next++
          hasList = bytes[next] === Byte.OpenBracket
          keyMatched = false
        }
      }
    } else if (isDigit(byte) || byte === Byte.Minus) {
      while (index + 1 < end && isNumberPart(bytes[index + 1]!)) index++
    } else if (!isSpace(byte)) {
      // Outside strings only literals are words: anything else is not JSON.
      const length = literalAt(bytes, index, end)
      if (length === 0) return JsonScan.NotJson
      index += length - 1
    }
  }
  if (depth !== 0) return JsonScan.NotJson
  for (index++; index < end; index++) if (!isSpace(bytes[index]!)) return JsonScan.NotJson
  return listField && !hasList ? JsonScan.NoListField : JsonScan.Object
}
