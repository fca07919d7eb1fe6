/**
 * A guardrail's custom `regex` rule (CONTRACT §17): its pattern compiled by re2js, a pure-JS port of
 * RE2, so matching is linear in the text whatever the pattern (no catastrophic backtracking: `(a+)+$`
 * over 50,000 `a`s costs what `a+$` does). The price is RE2's syntax: no backreferences and no
 * lookaround; those patterns are refused with a problem instead of being run by the JS engine.
 * Flags go inline: `(?i)` for case-insensitive, `(?s)` for a dot that matches newlines, `(?m)` for
 * `^`/`$` at line ends.
 */
import { RE2JS, RE2JSException } from 're2js'

/** A compiled custom pattern: finds every match, in time linear in the text. */
export interface GuardrailPattern {
  readonly source: string
  matches(text: string): { start: number; end: number }[]
}

/** The longest pattern a rule may carry, in characters. */
export const maxGuardrailPatternLength = 1000

// Texts a pattern is tried on at compile time: one that matches an empty string in any of them
// would match "nothing" everywhere, which masks nothing and would count findings without end.
const emptyProbes = ['', 'a', 'A', '0', ' ', '\n', 'a b', '-', '_']

/**
 * Compiles a rule's pattern; a problem (a sentence naming what is wrong: unsupported syntax such as
 * backreferences or lookaround, too long over 1,000 characters, empty, a pattern that matches the
 * empty string) instead when it cannot be used.
 */
export function compileGuardrailPattern(pattern: string): GuardrailPattern | { problem: string } {
  if (typeof pattern !== 'string' || pattern.length === 0) return { problem: 'The pattern is empty.' }
  if (pattern.length > maxGuardrailPatternLength) {
    return { problem: `The pattern is ${pattern.length} characters long; at most ${maxGuardrailPatternLength} are allowed.` }
  }
  const unsupported = unsupportedSyntax(pattern)
  if (unsupported) return { problem: unsupported }
  let compiled: RE2JS
  try {
    compiled = RE2JS.compile(pattern)
  } catch (error) {
    const detail = error instanceof RE2JSException || error instanceof Error ? error.message : String(error)
    return { problem: `The pattern is not a valid RE2 regular expression (${detail}).` }
  }
  for (const probe of emptyProbes) {
    const matcher = compiled.matcher(probe)
    while (matcher.find()) {
      if (matcher.start() === matcher.end()) {
        return { problem: 'The pattern matches the empty string; it must match at least one character (use + rather than *, or remove the empty alternative).' }
      }
    }
  }
  return {
    source: pattern,
    matches(text: string) {
      const found: { start: number; end: number }[] = []
      // The DFA answers "no match" (the usual case) without tracking positions: much cheaper.
      if (text.length === 0 || !compiled.test(text)) return found
      // re2js reports offsets in UTF-16 code units for a string input, the indexes slice() takes.
      const matcher = compiled.matcher(text)
      while (matcher.find()) {
        const start = matcher.start()
        const end = matcher.end()
        // An empty match (possible in a text unlike the probes, e.g. `\b` cases) is skipped: it masks nothing.
        if (end > start) found.push({ start, end })
      }
      return found
    },
  }
}

/**
 * A sentence for the JS-only syntax RE2 refuses, named plainly (RE2's own message for a lookbehind
 * is "invalid named capture"), or undefined. Escaped characters (`\(`) are skipped; classes too.
 */
function unsupportedSyntax(pattern: string): string | undefined {
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]
    if (ch === '\\') {
      const next = pattern[i + 1]
      if (!inClass && next !== undefined && next >= '1' && next <= '9') {
        return `The pattern uses a backreference (\\${next}), which is not supported: matching must stay linear in the text.`
      }
      if (!inClass && next === 'k' && pattern[i + 2] === '<') {
        return 'The pattern uses a named backreference (\\k<…>), which is not supported: matching must stay linear in the text.'
      }
      i++
      continue
    }
    if (inClass) {
      if (ch === ']') inClass = false
      continue
    }
    if (ch === '[') {
      inClass = true
      // A `]` right after `[` or `[^` is a literal member of the class.
      if (pattern[i + 1] === '^') i++
      if (pattern[i + 1] === ']') i++
      continue
    }
    if (ch === '(' && pattern[i + 1] === '?') {
      const a = pattern[i + 2]
      const b = pattern[i + 3]
      if (a === '=' || a === '!') return `The pattern uses a lookahead (?${a}…), which is not supported: matching must stay linear in the text.`
      if (a === '<' && (b === '=' || b === '!')) return `The pattern uses a lookbehind (?<${b}…), which is not supported: matching must stay linear in the text.`
    }
  }
  return undefined
}
