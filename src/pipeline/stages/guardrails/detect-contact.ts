/**
 * The guardrail detectors of contact data: e-mail addresses and phone numbers (detectors.ts
 * dispatches; each function returns the spans sorted and non-overlapping).
 */
import { findPhoneNumbersInText, parsePhoneNumberFromString, PhoneNumber } from 'libphonenumber-js/max'
import { type Found, isDigit, isAlnum, at, disjoint, digitsAt } from './detect-text'

// email: a local part of up to 64 of [A-Za-z0-9._%+-] (not starting or ending with a dot), `@`,
// one or more DNS labels and a TLD of 2+ letters. `user@localhost`, `@mention`, `a@b` and
// `icon@2x.png` (a TLD that is a file extension, not a delegated TLD) are not addresses.

const isLocalChar = (code: number) => isAlnum(code) || code === 46 || code === 95 || code === 37 || code === 43 || code === 45
const emailDomain = /(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?![A-Za-z0-9-])/y
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
      emailDomain.lastIndex = atSign + 1
      const domain = emailDomain.exec(text)
      if (domain && !fileExtensions.has(domain[1]!.toLowerCase())) {
        next = atSign + 1 + domain[0].length
        found.push({ start, end: next })
        previousEnd = next
      }
    }
    atSign = text.indexOf('@', next)
  }
  return found
}

// phone: libphonenumber-js with its full ("max") metadata decides: a number is taken only when it
// is valid in its country's numbering plan (not merely of a possible length): international forms
// with `+` (`+14155552671`, `+44 20 7946 0958`) and the national forms of the default country, the
// US (`(415) 555-2671`, `415-555-2671`, `415.555.2671`, `415 555 2671`, `4155552671`, with or without
// a leading 1). Ordinary numbers (123456, 2024-01-15, 1.2.3, 1,234,567, ids) are not valid.
//
// Parsing with the library costs 20-50 µs a call on Bun, so it never sees the whole text: a regex
// finds runs of digits and phone punctuation, and within a run only two kinds of place are checked.
// Digits shaped as a NANP number (10 digits, or 3-3-4 groups, after an optional 1; area code and
// exchange [2-9]XX), not glued to a word, are validated as +1 numbers by the library's PhoneNumber
// (about 10 µs; a number the US plan refuses is then parsed in full, 30-40 µs, for Canada and the
// Caribbean). A `+` goes to the library's finder in a window of the 24 characters after it (and one
// character of context each side, which its boundary checks read). Answers are remembered
// (bounded; NANP ones per area code and exchange), so a conversation's history sent again, or
// another number of the same exchange, costs a map lookup.

const phoneRun = /\+?\(?\d[\d \t().\-/\u00a0\u2010-\u2015\u2212]{5,}\d/g
const phoneExtension = /[ \t]*[,;]?[ \t]*(?:ext\.?|extension|x)[ \t]*\d{1,7}/iy
const cacheSize = 2048
const internationalCache = new Map<string, readonly Found[]>()
const nanpCache = new Map<string, boolean>()
/** The most characters an international number with its punctuation takes after the `+`. */
const internationalSpan = 24

export function detectPhones(text: string): Found[] {
  let found: Found[] | undefined
  phoneRun.lastIndex = 0
  for (let run = phoneRun.exec(text); run; run = phoneRun.exec(text)) {
    const runStart = run.index
    const runEnd = runStart + run[0].length
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
        phoneExtension.lastIndex = end
        ;(found ??= []).push({ start, end: phoneExtension.test(text) ? phoneExtension.lastIndex : end })
      }
      i = end
    }
  }
  return found ? disjoint(found) : []
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
    phoneExtension.lastIndex = to
    if (phoneExtension.test(text)) windowEnd = phoneExtension.lastIndex + 1
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
