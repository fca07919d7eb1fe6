/**
 * The guardrail detectors of contact data: e-mail addresses and phone numbers (detectors.ts
 * dispatches; each function returns the spans sorted and non-overlapping).
 */
import { findPhoneNumbersInText, parsePhoneNumberFromString, PhoneNumber } from 'libphonenumber-js/max'
import { type Found, isDigit, isAlnum, at, disjoint, digitsAt, digitRuns } from './detect-text'

// email: a local part of up to 64 of [A-Za-z0-9._%+-] (not starting or ending with a dot), `@`,
// one or more DNS labels and a TLD of 2+ letters. `user@localhost`, `@mention`, `a@b` and
// `icon@2x.png` (a TLD that is a file extension, not a delegated TLD) are not addresses.

const isLocalChar = (code: number) => isAlnum(code) || code === 46 || code === 95 || code === 37 || code === 43 || code === 45
const fileExtensions = new Set(['png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'ico', 'bmp', 'avif', 'css', 'js', 'mjs', 'cjs', 'ts', 'tsx', 'jsx', 'json', 'yaml', 'yml', 'txt', 'html', 'htm', 'xml', 'lock', 'map', 'wasm'])

export function detectEmails(text: string): Found[] {
  let atSign = text.indexOf('@')
  if (atSign < 0) return []
  const found: Found[] = []
  let previousEnd = 0
  while (atSign >= 0) {
    let next = atSign + 1
    let start = atSign
    while (start > previousEnd && atSign - start <= 64 && isLocalChar(at(text, start - 1))) start--
    // A local part longer than 64 characters is not an address's (nor is a piece of it).
    const tooLong = atSign - start > 64 || (start > previousEnd && isLocalChar(at(text, start - 1)))
    while (start < atSign && at(text, start) === 46) start++ // no leading dot
    if (!tooLong && start < atSign && at(text, atSign - 1) !== 46) {
      const end = domainEnd(text, atSign + 1)
      if (end > 0) {
        next = end
        found.push({ start, end })
        previousEnd = end
      }
    }
    atSign = text.indexOf('@', next)
  }
  return found
}

const isLabelChar = (code: number) => isAlnum(code) || code === 45

/**
 * Where the domain of an address starting at `from` ends, or -1: DNS labels (1-63 of [A-Za-z0-9-],
 * not starting or ending with `-`) each followed by a dot, then a TLD of 2-24 letters not followed
 * by a label character and not a file extension. The labels are taken as far as they go, then the
 * last of them after which a TLD stands is where the domain ends (`a@b.example.com2` is
 * `a@b.example`).
 */
function domainEnd(text: string, from: number): number {
  // Each label's end (a dot follows it), while the labels hold.
  let dots: number[] | undefined
  let i = from
  for (;;) {
    let end = i
    while (isLabelChar(at(text, end))) end++
    const length = end - i
    if (length === 0 || length > 63 || at(text, end) !== 46 || at(text, i) === 45 || at(text, end - 1) === 45) break
    ;(dots ??= []).push(end)
    i = end + 1
  }
  if (!dots) return -1
  for (let k = dots.length - 1; k >= 0; k--) {
    const tld = dots[k]! + 1
    let end = tld
    while (isLetter(at(text, end))) end++
    if (end - tld < 2 || end - tld > 24 || isLabelChar(at(text, end))) continue
    return fileExtensions.has(text.slice(tld, end).toLowerCase()) ? -1 : end
  }
  return -1
}

const isLetter = (code: number) => (code >= 65 && code <= 90) || (code >= 97 && code <= 122)

// phone: libphonenumber-js with its full ("max") metadata decides: a number is taken only when it
// is valid in its country's numbering plan (not merely of a possible length): international forms
// with `+` (`+14155552671`, `+44 20 7946 0958`) and the national forms of the default country, the
// US (`(415) 555-2671`, `415-555-2671`, `415.555.2671`, `415 555 2671`, `4155552671`, with or without
// a leading 1). Ordinary numbers (123456, 2024-01-15, 1.2.3, 1,234,567, ids) are not valid.
//
// Parsing with the library costs 20-50 µs a call on Bun, so it never sees the whole text: runs of
// digits and phone punctuation are found from the text's digit runs, and within a run only two
// kinds of place are checked.
// Digits shaped as a NANP number (10 digits, or 3-3-4 groups, after an optional 1; area code and
// exchange [2-9]XX), not glued to a word, are validated as +1 numbers by the library's PhoneNumber
// (about 10 µs; a number the US plan refuses is then parsed in full, 30-40 µs, for Canada and the
// Caribbean). A `+` goes to the library's finder in a window of the 24 characters after it (and one
// character of context each side, which its boundary checks read). Answers are remembered
// (bounded; NANP ones per area code and exchange), so a conversation's history sent again, or
// another number of the same exchange, costs a map lookup.

const cacheSize = 2048
const internationalCache = new Map<string, readonly Found[]>()
const nanpCache = new Map<string, boolean>()
/** The most characters an international number with its punctuation takes after the `+`. */
const internationalSpan = 24

export function detectPhones(text: string): Found[] {
  let found: Found[] | undefined
  const { count, starts, ends } = digitRuns(text)
  let r = 0
  while (r < count) {
    // A run: digit runs with only phone punctuation between them, 7 characters or more from the
    // first digit to the last, opened by a `+` (or `+(`) written right before it.
    const first = starts[r]!
    let last = r
    while (last + 1 < count && onlyPhonePunctuation(text, ends[last]!, starts[last + 1]!)) last++
    const runEnd = ends[last]!
    r = last + 1
    if (runEnd - first < 7) continue
    const runStart = at(text, first - 1) === 43 ? first - 1 : at(text, first - 1) === 40 && at(text, first - 2) === 43 ? first - 2 : first
    let i = runStart
    if (at(text, i) === 43) {
      const numbers = internationalAround(text, i, Math.min(runEnd, i + 1 + internationalSpan), runEnd)
      if (numbers.length > 0) (found ??= []).push(...numbers)
      i = numbers.length > 0 ? numbers[numbers.length - 1]!.end : i + 1
    }
    // Group by group: a date is skipped whole; a NANP shape is validated.
    while (i < runEnd) {
      if (!isDigit(at(text, i))) {
        i++
        continue
      }
      const length = digitsAt(text, i)
      const date = length === 1 || length === 2 || length === 4 ? dateEnd(text, i) : -1
      if (date > 0) {
        i = date
        continue
      }
      const end = length === 1 || length === 3 || length === 10 || length === 11 ? nanpEnd(text, i, runEnd) : -1
      if (end < 0) {
        i += length
        continue
      }
      const start = at(text, i - 1) === 40 ? i - 1 : i // the ( of (415)
      if (!gluedNumber(text, start, end) && validNanp(text, i, end)) {
        const extension = extensionEnd(text, end)
        ;(found ??= []).push({ start, end: extension > 0 ? extension : end })
      }
      i = end
    }
  }
  return found ? disjoint(found) : []
}

/** Whether a character may stand between a phone number's digits: space, tab, `().-/`, no-break space, dashes, minus. */
const isPhonePunctuation = (code: number) =>
  code === 32 || code === 9 || code === 40 || code === 41 || code === 46 || code === 45 || code === 47 || code === 0xa0 || (code >= 0x2010 && code <= 0x2015) || code === 0x2212

/** Whether [from, to) holds only phone punctuation. */
function onlyPhonePunctuation(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!isPhonePunctuation(text.charCodeAt(i))) return false
  return true
}

/** Whether the letters at `from` spell `word` (lower case), in any case. */
function spells(text: string, from: number, word: string): boolean {
  for (let k = 0; k < word.length; k++) if ((text.charCodeAt(from + k) | 32) !== word.charCodeAt(k)) return false
  return true
}

const skipBlanks = (text: string, from: number) => {
  let i = from
  while (at(text, i) === 32 || at(text, i) === 9) i++
  return i
}

/**
 * Where an extension written after a number ending at `from` ends (`, ext. 12`, ` x12`,
 * `; extension 7`: blanks, an optional `,` or `;`, `ext`, `ext.`, `extension` or `x` in any case,
 * blanks and 1-7 digits), or -1.
 */
function extensionEnd(text: string, from: number): number {
  let i = skipBlanks(text, from)
  if (at(text, i) === 44 || at(text, i) === 59) i++
  i = skipBlanks(text, i)
  const digitsAfter = (word: number) => {
    const digits = skipBlanks(text, word)
    const length = digitsAt(text, digits)
    return length > 0 ? digits + Math.min(length, 7) : -1
  }
  if (spells(text, i, 'ext')) {
    const end = digitsAfter(at(text, i + 3) === 46 ? i + 4 : i + 3)
    if (end > 0) return end
    return spells(text, i, 'extension') ? digitsAfter(i + 9) : -1
  }
  return (at(text, i) | 32) === 120 ? digitsAfter(i + 1) : -1
}

/** Whether a number is part of a longer token: a word or a dotted or dashed run of digits. */
function gluedNumber(text: string, start: number, end: number): boolean {
  const before = at(text, start - 1)
  const after = at(text, end)
  if (isAlnum(before) || before === 95 || isAlnum(after) || after === 95) return true
  const dotted = (code: number) => code === 46 || code === 45 || code === 47
  return (dotted(before) && isDigit(at(text, start - 2))) || (dotted(after) && isDigit(at(text, end + 1)))
}

/**
 * Whether the NANP number in [from, end) (a leading 1 skipped) is a valid +1 number. The plans of
 * the NANP countries in the metadata decide by area code and exchange, never by the last four
 * digits, so the answer is remembered per area code and exchange.
 */
function validNanp(text: string, from: number, end: number): boolean {
  let digits = ''
  for (let i = from; i < end; i++) if (isDigit(at(text, i))) digits += text[i]
  if (digits.length === 11) digits = digits.slice(1)
  const key = digits.slice(0, 6)
  let valid = nanpCache.get(key)
  if (valid === undefined) {
    const e164 = `+1${digits}`
    valid = new PhoneNumber(e164).isValid() || parsePhoneNumberFromString(e164)?.isValid() === true
    if (nanpCache.size >= cacheSize) nanpCache.clear()
    nanpCache.set(key, valid)
  }
  return valid
}

/** The library's numbers in the window [from - 1, to + 1), with an extension when `to` ends the run. */
function internationalAround(text: string, from: number, to: number, runEnd: number): Found[] {
  const windowStart = Math.max(0, from - 1)
  let windowEnd = to + 1
  if (to === runEnd) {
    const extension = extensionEnd(text, to)
    if (extension > 0) windowEnd = extension + 1
  }
  const window = text.slice(windowStart, windowEnd)
  let numbers = internationalCache.get(window)
  if (!numbers) {
    numbers = findPhoneNumbersInText(window, { defaultCountry: 'US' }).map((number) => ({ start: number.startsAt, end: number.endsAt }))
    if (internationalCache.size >= cacheSize) internationalCache.clear()
    internationalCache.set(window, numbers)
  }
  return numbers.map((number) => ({ start: windowStart + number.start, end: windowStart + number.end }))
}

/** Where a date starting at `from` ends (`2024-01-15`, `15/01/2024`, `1.2.24`), or -1. */
function dateEnd(text: string, from: number): number {
  const first = digitsAt(text, from)
  if (first !== 4 && first !== 1 && first !== 2) return -1
  let i = from + first
  const separator = text.charCodeAt(i)
  if (separator !== 45 && separator !== 47 && separator !== 46) return -1
  const second = digitsAt(text, i + 1)
  if (second < 1 || second > 2) return -1
  i += 1 + second
  if (text.charCodeAt(i) !== separator) return -1
  const third = digitsAt(text, i + 1)
  return (first === 4 ? third === 1 || third === 2 : third === 2 || third === 4) ? i + 1 + third : -1
}

/** Past 1-2 separators (space, tab, `().-/`) before the next group of digits, or -1. */
function pastSeparator(text: string, from: number, end: number): number {
  let i = from
  while (i < end && i - from < 2) {
    const code = text.charCodeAt(i)
    if (code === 32 || code === 9 || code === 40 || code === 41 || code === 46 || code === 45 || code === 47 || code === 0xa0 || (code >= 0x2010 && code <= 0x2015) || code === 0x2212) i++
    else break
  }
  return i > from && i < end && isDigit(text.charCodeAt(i)) ? i : -1
}

/**
 * Where a NANP-shaped number starting at `from` ends (before `end`), or -1: 10 digits, 1 and 10
 * digits, or groups of 3, 3 and 4 (after an optional 1), the area code and exchange starting 2-9.
 */
function nanpEnd(text: string, from: number, end: number): number {
  const first = digitsAt(text, from)
  const leadingOne = text.charCodeAt(from) === 49
  if (first === 10 || (first === 11 && leadingOne)) {
    const area = from + first - 10
    return text.charCodeAt(area) >= 50 && text.charCodeAt(area + 3) >= 50 ? from + first : -1
  }
  let area = from
  if (first === 1 && leadingOne) {
    area = pastSeparator(text, from + 1, end)
    if (area < 0) return -1
  }
  if (digitsAt(text, area) !== 3 || text.charCodeAt(area) < 50) return -1
  const exchange = pastSeparator(text, area + 3, end)
  if (exchange < 0 || digitsAt(text, exchange) !== 3 || text.charCodeAt(exchange) < 50) return -1
  const line = pastSeparator(text, exchange + 3, end)
  if (line < 0 || digitsAt(text, line) !== 4) return -1
  return line + 4
}
