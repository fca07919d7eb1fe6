/**
 * What the guardrail detectors share: the span type, character classes by char code (cheaper than
 * a regex per character), the small scans every detector file uses, and the digit runs of a text
 * that the numeric detectors (phone, card, IBAN, SSN, IPv4) all start from.
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

/**
 * The maximal runs of ASCII digits in a text: run `r` is [starts[r], ends[r]). The arrays are shared
 * and overwritten by the next text's runs: a detector reads them before it returns.
 */
export interface DigitRuns {
  readonly count: number
  readonly starts: Int32Array
  readonly ends: Int32Array
}

/** The runs of the text scanned last: the numeric detectors of one scan all read the same text's. */
let runsText: string | undefined
const runs = { count: 0, starts: new Int32Array(256), ends: new Int32Array(256) }

/**
 * The digit runs of a text, found in one pass and remembered for the next detector of the same
 * text. Every numeric detector starts from these instead of scanning the text itself: one pass
 * for five detectors, and no regular expression (the engine drops the compiled code of a regular
 * expression on a garbage collection, and recompiling one costs microseconds on the next request).
 */
export function digitRuns(text: string): DigitRuns {
  if (text === runsText) return runs
  let count = 0
  const length = text.length
  for (let i = 0; i < length; i++) {
    let code = text.charCodeAt(i)
    if (code > 57 || code < 48) continue
    const start = i
    do code = text.charCodeAt(++i)
    while (code >= 48 && code <= 57)
    if (count === runs.starts.length) {
      const starts = new Int32Array(count * 2)
      const ends = new Int32Array(count * 2)
      starts.set(runs.starts)
      ends.set(runs.ends)
      runs.starts = starts
      runs.ends = ends
    }
    runs.starts[count] = start
    runs.ends[count] = i
    count++
  }
  runs.count = count
  runsText = text
  return runs
}
