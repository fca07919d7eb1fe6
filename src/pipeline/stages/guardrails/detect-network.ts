/**
 * The guardrail detector of IP addresses: IPv4 dotted quads and IPv6 (validated by ipaddr.js).
 */
import ipaddr from 'ipaddr.js'
import { type Found, isDigit, isUpper, isLower, isWord, at, digitRuns, disjoint } from './detect-text'

// ip_address: IPv4 dotted quads with each octet 0-255 without leading zeros, not glued to a letter,
// digit, `_` or dot on the left (`v1.2.3.4`, the tail of `1.2.3.4.5`) nor followed by `.digit` or a
// word character, and not right after "version", "ver", "v", "release", "build", "rev",
// "revision" or "firmware" (`version 1.2.3.4` is a version number). IPv6 in full, compressed (`::`) and IPv4-embedded forms, validated by ipaddr.js; a
// compressed form needs a decimal digit somewhere (`A::B` is Ruby, not an address) and times such
// as `12:30:45` are not addresses.

const versionWords = new Set(['version', 'ver', 'release', 'build', 'rev', 'revision', 'firmware', 'v'])

/** Whether the word before `start` (past spaces and `.:#=-`) names a version: `version 1.2.3.4`. */
function afterVersionWord(text: string, start: number): boolean {
  let i = start
  while (i > 0 && start - i < 4) {
    const code = at(text, i - 1)
    if (code === 32 || code === 9 || code === 46 || code === 58 || code === 35 || code === 61 || code === 45) i--
    else break
  }
  let wordStart = i
  while (wordStart > 0 && i - wordStart < 9 && (isUpper(at(text, wordStart - 1)) || isLower(at(text, wordStart - 1)))) wordStart--
  if (wordStart === i || isWord(at(text, wordStart - 1))) return false
  // Every version word starts with b, f, r or v and is 1, 3, 5, 7 or 8 letters long: most words are
  // ruled out without a slice.
  const first = at(text, wordStart) | 32
  const length = i - wordStart
  if ((first !== 98 && first !== 102 && first !== 114 && first !== 118) || !(length === 1 || length === 3 || length === 5 || length >= 7)) return false
  return versionWords.has(text.slice(wordStart, i).toLowerCase())
}

export function detectIpAddresses(text: string): Found[] {
  const found: Found[] = []
  if (text.indexOf('.') >= 0) findIpv4(text, found)
  if (text.indexOf(':') >= 0) findIpv6(text, found)
  return disjoint(found)
}

function findIpv4(text: string, found: Found[]): void {
  const { count, starts, ends } = digitRuns(text)
  let r = 0
  while (r + 3 < count) {
    // Four runs of 1-3 digits, each of the first three followed by a dot and the next run (the last
    // may run on: then it is glued, below).
    const start = starts[r]!
    if (!quadAt(text, starts, ends, r)) {
      r++
      continue
    }
    const end = starts[r + 3]! + Math.min(3, ends[r + 3]! - starts[r + 3]!)
    const before = at(text, start - 1)
    const after = at(text, end)
    // Glued to a word or to a longer dotted run (`v1.2.3.4`, `1.2.3.4.5`, `1.2.3.4567`): skip all of it.
    if (isWord(before) || before === 46 || isWord(after) || (after === 46 && isDigit(at(text, end + 1)))) {
      let skip = end
      while (isWord(at(text, skip)) || (at(text, skip) === 46 && isDigit(at(text, skip + 1)))) skip++
      while (r < count && starts[r]! < skip) r++
      continue
    }
    r += 4
    if (!validOctets(text, start, end) || afterVersionWord(text, start)) continue
    found.push({ start, end })
  }
}

/** Whether runs r..r+3 are a dotted quad's: 1-3 digits each, the first three followed by a dot and the next. */
function quadAt(text: string, starts: Int32Array, ends: Int32Array, r: number): boolean {
  for (let k = r; k < r + 3; k++) {
    const end = ends[k]!
    if (end - starts[k]! > 3 || at(text, end) !== 46 || starts[k + 1] !== end + 1) return false
  }
  return true
}

/** Each of the four parts of the quad in [start, end) 0-255, without a leading zero. */
function validOctets(text: string, start: number, end: number): boolean {
  let value = 0
  let length = 0
  for (let i = start; i <= end; i++) {
    const code = i < end ? text.charCodeAt(i) : 46
    if (code >= 48 && code <= 57) {
      if (length === 1 && value === 0) return false
      value = value * 10 + code - 48
      length++
      continue
    }
    if (value > 255) return false
    value = 0
    length = 0
  }
  return true
}

const isHex = (code: number) => isDigit(code) || (code >= 65 && code <= 70) || (code >= 97 && code <= 102)
const isIpv6Char = (code: number) => isHex(code) || code === 58 || code === 46

function findIpv6(text: string, found: Found[]): void {
  let colon = text.indexOf(':')
  while (colon >= 0) {
    // The run of hex digits, colons and dots around this colon; its colons, a `::`, a decimal digit.
    let start = colon
    while (start > 0 && colon - start < 4 && isHex(at(text, start - 1))) start--
    let runEnd = colon + 1
    let colons = 1
    let compressed = false
    let decimal = isDigit(at(text, start))
    for (let code = at(text, runEnd); runEnd - start < 64 && isIpv6Char(code); code = at(text, ++runEnd)) {
      if (code === 58) {
        colons++
        if (at(text, runEnd - 1) === 58) compressed = true
      } else if (isDigit(code)) decimal = true
    }
    if (at(text, colon - 1) === 58 || at(text, colon + 1) === 58) compressed = true
    colon = text.indexOf(':', runEnd)
    // Glued to a word or a longer run on either side: `std::vector`, `a1b2c:…`.
    const before = at(text, start - 1)
    if (isWord(before) || before === 58 || before === 46 || isWord(at(text, runEnd))) continue
    // 12:30:45 and other times have too few groups; `A::B` (Ruby) has no decimal digit.
    if (colons < 2 || (compressed ? !decimal : colons < 6)) continue
    let end = runEnd
    while (end > start && at(text, end - 1) === 46) end--
    const candidate = text.slice(start, end)
    if (ipaddr.IPv6.isValid(candidate)) found.push({ start, end })
  }
}
