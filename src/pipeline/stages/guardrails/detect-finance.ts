/**
 * The guardrail detectors of financial and identity numbers: payment cards (Luhn and issuer),
 * IBANs (country format and mod-97) and US social security numbers.
 */
import { getCountrySpecifications, isValidIBAN } from 'ibantools'
import { type Found, isDigit, isUpper, isAlnum, isWord, at, digitRuns } from './detect-text'

// credit_card: 13-19 digits, in one run or printed in groups (4-4-4-4, 4-4-4-4-3, 4-6-5, 4-6-4)
// separated by single spaces or single dashes (one kind per number), passing Luhn, with a known
// issuer prefix and length. A run glued to a letter, to a longer digit run or to a decimal point is
// not a card.

export function detectCards(text: string): Found[] {
  const found: Found[] = []
  const { count, starts, ends } = digitRuns(text)
  // A span: digit runs with only spaces and dashes between them (what `\d[\d -]{11,}\d` takes),
  // 13 characters or more holding 13 digits or more.
  let r = 0
  while (r < count) {
    const from = starts[r]!
    let digits = ends[r]! - from
    let last = r
    while (last + 1 < count && onlySeparators(text, ends[last]!, starts[last + 1]!)) {
      last++
      digits += ends[last]! - starts[last]!
    }
    const to = ends[last]!
    if (digits >= 13 && to - from >= 13) scanCardSpan(text, from, to, found)
    r = last + 1
  }
  return found
}

/** Whether [from, to) holds only spaces and dashes. */
function onlySeparators(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i)
    if (code !== 32 && code !== 45) return false
  }
  return true
}

/** The groups of digits in [from, to), split where the separator is not a single space or dash. */
function scanCardSpan(text: string, from: number, to: number, found: Found[]): void {
  // groups: [start, end) of each digit run; seps: the separator before each group (0 = none).
  let groups: number[] = []
  let seps: number[] = []
  const flush = () => {
    if (groups.length > 0) matchCardGroups(text, groups, seps, found)
    groups = []
    seps = []
  }
  let i = from
  while (i < to) {
    const groupStart = i
    while (i < to && isDigit(at(text, i))) i++
    groups.push(groupStart, i)
    seps.push(groupStart === from ? 0 : at(text, groupStart - 1))
    if (i >= to) break
    // One separator then a digit continues the number; anything longer ends this one.
    if (isDigit(at(text, i + 1))) {
      i++
      continue
    }
    flush()
    while (i < to && !isDigit(at(text, i))) i++
  }
  flush()
}

function matchCardGroups(text: string, groups: number[], seps: number[], found: Found[]): void {
  let first = 0
  let last = seps.length - 1
  // A first group glued on its left to a word, a decimal point or a longer token is not a card's.
  const before = at(text, groups[0]! - 1)
  if (isWord(before) || ((before === 46 || before === 44 || before === 45 || before === 47) && isAlnum(at(text, groups[0]! - 2)))) first = 1
  const after = at(text, groups[2 * last + 1]!)
  if (isWord(after) || ((after === 46 || after === 44 || after === 45 || after === 47) && isAlnum(at(text, groups[2 * last + 1]! + 1)))) last--
  let s = first
  while (s <= last) {
    const end = cardAt(text, groups, seps, s, last)
    if (end >= 0) {
      found.push({ start: groups[2 * s]!, end: groups[2 * end + 1]! })
      s = end + 1
    } else s++
  }
}

/** The length of group `k` (groups holds each group's start and end). */
const groupLength = (groups: number[], k: number) => groups[2 * k + 1]! - groups[2 * k]!

/**
 * The last group of a card number starting at group `s`, or -1: one run of 13-19 digits, groups
 * of four (the last of 1-4: 4-4-4-4, 4-4-4-4-3), or American Express's and Diners Club's 4-6-5 and
 * 4-6-4; the separators all the same; the longest that passes.
 */
function cardAt(text: string, groups: number[], seps: number[], s: number, last: number): number {
  const firstLength = groupLength(groups, s)
  if (firstLength >= 13) return firstLength <= 19 && isCardNumber(text, groups, s, s, firstLength) ? s : -1
  if (firstLength !== 4 || s === last) return -1
  const separator = seps[s + 1]
  if (s + 2 <= last && groupLength(groups, s + 1) === 6 && seps[s + 2] === separator) {
    const third = groupLength(groups, s + 2)
    if ((third === 5 || third === 4) && isCardNumber(text, groups, s, s + 2, 10 + third)) return s + 2
  }
  let digits = firstLength
  let best = -1
  for (let e = s + 1; e <= last && e - s <= 4 && seps[e] === separator; e++) {
    const size = groupLength(groups, e)
    if (size > 4) break
    digits += size
    if (digits >= 13 && isCardNumber(text, groups, s, e, digits)) best = e
    if (size !== 4) break
  }
  return best
}

/** Whether the `length` digits of groups s..e (the first of four digits or more) are a card's number. */
function isCardNumber(text: string, groups: number[], s: number, e: number, length: number): boolean {
  return issuerAccepts(text, groups[2 * s]!, length) && luhn(text, groups, s, e)
}

/** Whether a known issuer (IIN ranges) issues numbers of length `n` whose first four digits are at `from`. */
function issuerAccepts(text: string, from: number, n: number): boolean {
  // The prefixes as numbers, from the character codes (no slices on the serving thread's path).
  const p2 = (text.charCodeAt(from) - 48) * 10 + (text.charCodeAt(from + 1) - 48)
  const p3 = p2 * 10 + (text.charCodeAt(from + 2) - 48)
  const p4 = p3 * 10 + (text.charCodeAt(from + 3) - 48)
  if (p2 >= 40 && p2 <= 49) return n === 13 || n === 16 || n === 19 // Visa
  if ((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) return n === 16 // Mastercard
  if (p2 === 34 || p2 === 37) return n === 15 // American Express
  if (p4 === 6011 || p2 === 65 || (p3 >= 644 && p3 <= 649)) return n >= 16 && n <= 19 // Discover
  if (p4 >= 3528 && p4 <= 3589) return n >= 16 && n <= 19 // JCB
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return n >= 14 && n <= 19 // Diners Club
  if (p2 === 62) return n >= 16 && n <= 19 // UnionPay
  if (p4 >= 2200 && p4 <= 2204) return n >= 16 && n <= 19 // Mir
  if (p4 === 5018 || p4 === 5020 || p4 === 5038 || p4 === 5893 || p4 === 6304 || p4 === 6759 || (p4 >= 6761 && p4 <= 6763)) return n >= 13 && n <= 19 // Maestro
  return false
}

/** The Luhn check over the digits of groups s..e, read from the last. */
function luhn(text: string, groups: number[], s: number, e: number): boolean {
  let sum = 0
  let double = false
  for (let k = e; k >= s; k--) {
    for (let i = groups[2 * k + 1]! - 1; i >= groups[2 * k]!; i--) {
      let digit = text.charCodeAt(i) - 48
      if (double) {
        digit *= 2
        if (digit > 9) digit -= 9
      }
      sum += digit
      double = !double
    }
  }
  return sum % 10 === 0
}

// iban: country code, 2 check digits and the BBAN, electronic (`DE89370400440532013000`) or printed
// in groups of four separated by single spaces (`DE89 3704 0044 0532 0130 00`), exactly as long as
// the country's IBAN; ibantools then checks the country's BBAN format, its national check digits
// where it knows them, and the mod-97 checksum (a bad checksum is not an IBAN). Upper case only.

/** The IBAN length of each country (by its two letters' index, 26 × first + second), 0 where there is none. */
const ibanLengths = new Uint8Array(26 * 26)
for (const [code, spec] of Object.entries(getCountrySpecifications())) {
  if (spec.chars && spec.bban_regexp && /^[A-Z]{2}$/.test(code)) ibanLengths[(code.charCodeAt(0) - 65) * 26 + code.charCodeAt(1) - 65] = spec.chars
}

export function detectIbans(text: string): Found[] {
  const found: Found[] = []
  const { count, starts, ends } = digitRuns(text)
  // A country code's two capitals then the run of digits the check digits open.
  for (let r = 0; r < count; r++) {
    const digits = starts[r]!
    const start = digits - 2
    if (ends[r]! - digits < 2 || start < 0 || (found.length > 0 && start < found[found.length - 1]!.end)) continue
    const first = at(text, start)
    const second = at(text, start + 1)
    if (!isUpper(first) || !isUpper(second) || isAlnum(at(text, start - 1))) continue
    const length = ibanLengths[(first - 65) * 26 + second - 65]!
    if (length === 0) continue
    const end = ibanEnd(text, start, length)
    if (end < 0) continue
    const compact = text.slice(start, end).replaceAll(' ', '')
    if (!validIban(compact)) continue
    found.push({ start, end })
  }
  return found
}

const isIbanChar = (code: number) => isDigit(code) || isUpper(code)

/** The mod-97 check of an IBAN (its first four characters moved to the end, letters as 10–35): 1 when it holds. */
function mod97(iban: string): number {
  let rest = 0
  for (let index = 0; index < iban.length; index++) {
    const code = iban.charCodeAt((index + 4) % iban.length)
    rest = code >= 65 ? (rest * 100 + (code - 55)) % 97 : (rest * 10 + (code - 48)) % 97
  }
  return rest
}

/**
 * IBANs checked lately, and whether they hold (a conversation sends its history again with each
 * turn; ibantools' whole check, the country's format and national check digits, costs microseconds).
 */
const checkedIbans = new Map<string, boolean>()

/** The mod-97 check first (cheap, and what most near-misses fail), then ibantools' whole check, remembered. */
function validIban(compact: string): boolean {
  if (mod97(compact) !== 1) return false
  let valid = checkedIbans.get(compact)
  if (valid === undefined) {
    valid = isValidIBAN(compact)
    if (checkedIbans.size >= 1024) checkedIbans.clear()
    checkedIbans.set(compact, valid)
  }
  return valid
}

/** Where an IBAN of `length` characters starting at `start` ends, or -1 when the text does not hold one. */
function ibanEnd(text: string, start: number, length: number): number {
  let i = start + 4
  if (at(text, i) === 32) {
    // Printed: groups of 4 after single spaces, the last of 1-4.
    let count = 4
    while (count < length) {
      if (at(text, i) !== 32) return -1
      i++
      let group = 0
      while (group < 4 && isIbanChar(at(text, i))) {
        i++
        group++
      }
      count += group
      if (group === 0 || (group < 4 && count < length)) return -1
    }
    if (count !== length) return -1
  } else {
    const end = start + length
    for (; i < end; i++) if (!isIbanChar(at(text, i))) return -1
  }
  return isAlnum(at(text, i)) ? -1 : i
}

// us_ssn: AAA-GG-SSSS with dashes or with spaces (the same separator twice). Bare 9-digit runs are
// not taken: too many ordinary numbers (ids, amounts, ZIP+4 without the dash) look like them. The
// SSA never issues area 000, 666 or 900-999, group 00 or serial 0000; those are not SSNs. The
// well-known advertising number 123-45-6789 (never issued) is still taken: it is the number people
// test a guardrail with, and masking a sample costs nothing.

export function detectSsns(text: string): Found[] {
  const found: Found[] = []
  const { count, starts, ends } = digitRuns(text)
  // Three runs of 3, 2 and 4 digits (the last may run on: then it is glued, below), each separated
  // by the same single dash or space.
  for (let r = 0; r + 2 < count; r++) {
    const start = starts[r]!
    if (ends[r]! - start !== 3) continue
    const separator = at(text, start + 3)
    if ((separator !== 45 && separator !== 32) || starts[r + 1] !== start + 4 || ends[r + 1] !== start + 6) continue
    if (at(text, start + 6) !== separator || starts[r + 2] !== start + 7 || ends[r + 2]! - start < 11) continue
    const end = start + 11
    const before = at(text, start - 1)
    const after = at(text, end)
    // Not part of a longer token: a word, a longer digit run, a dashed id, a decimal.
    if (isWord(before) || before === 45 || ((before === 46 || before === 44) && isDigit(at(text, start - 2)))) continue
    if (isWord(after) || after === 45 || ((after === 46 || after === 44) && isDigit(at(text, end + 1)))) continue
    const area = serialAt(text, start, 3)
    if (area === 0 || area === 666 || area >= 900 || serialAt(text, start + 4, 2) === 0 || serialAt(text, start + 7, 4) === 0) continue
    found.push({ start, end })
    r += 2
  }
  return found
}

/** The number the `length` digits at `from` spell. */
function serialAt(text: string, from: number, length: number): number {
  let value = 0
  for (let i = from; i < from + length; i++) value = value * 10 + text.charCodeAt(i) - 48
  return value
}
