/**
 * What the guardrail detectors share: the span type, character classes by char code (cheaper than
 * a regex per character) and the small scans every detector file uses.
 */

/** A match in a text: UTF-16 offsets, `end` exclusive (what String.prototype.slice takes). */
export interface Found {
  start: number
  end: number
}

export const isDigit = (code: number) => code >= 48 && code <= 57
export const isUpper = (code: number) => code >= 65 && code <= 90
export const isLower = (code: number) => code >= 97 && code <= 122
export const isAlnum = (code: number) => isDigit(code) || isUpper(code) || isLower(code)
/** A letter, digit or `_`: what glues a candidate to a longer token. */
export const isWord = (code: number) => isAlnum(code) || code === 95

/** The char code at an index, NaN outside the text (every class test is then false). */
export const at = (text: string, index: number) => text.charCodeAt(index)

/** Sorted by start (the longer first on a tie), overlaps dropped: the earlier span wins. */
export function disjoint(found: Found[]): Found[] {
  if (found.length < 2) return found
  found.sort((a, b) => a.start - b.start || b.end - a.end)
  const kept: Found[] = []
  for (const span of found) {
    const last = kept[kept.length - 1]
    if (last && span.start < last.end) continue
    kept.push(span)
  }
  return kept
}

/** How many digits follow one another from `from`. */
export function digitsAt(text: string, from: number): number {
  let i = from
  while (isDigit(text.charCodeAt(i))) i++
  return i - from
}

/** How many digits the text holds from `from` on. */
export function countDigits(text: string, from: number): number {
  let count = 0
  for (let i = from; i < text.length; i++) if (isDigit(text.charCodeAt(i))) count++
  return count
}
