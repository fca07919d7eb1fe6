/**
 * What a key's guardrail rules find in a text, and what is done with it (CONTRACT §17): the matches
 * of each rule (one detector each, or a custom pattern), overlaps resolved in the rules' order, the
 * placeholders of a masked request (the same value the same placeholder within the request) and
 * their restoring, and the findings the row and the metric count — never the matched text.
 */
import type { GuardrailRule } from '../../../domain/guardrail-settings'
import { detect, detectorLabel } from './detectors'

/** A rule's match in a text (UTF-16 offsets). */
export interface Hit {
  rule: GuardrailRule
  start: number
  end: number
}

/** The matches of the rules in the text, sorted, none overlapping (an earlier rule wins a tie). */
export function scan(rules: readonly GuardrailRule[], text: string): Hit[] {
  let hits: (Hit & { order: number })[] | undefined
  for (let order = 0; order < rules.length; order++) {
    const rule = rules[order]!
    if (rule.detector === 'moderation') continue
    const found = rule.detector === 'regex' ? (rule.pattern?.matches(text) ?? []) : detect(rule.detector, text)
    for (const match of found) if (match.end > match.start) (hits ??= []).push({ rule, start: match.start, end: match.end, order })
  }
  if (!hits) return []
  if (hits.length === 1) return hits
  hits.sort((left, right) => left.start - right.start || left.order - right.order)
  const kept: Hit[] = []
  for (const hit of hits) {
    const last = kept.at(-1)
    if (last && hit.start < last.end) continue
    kept.push(hit)
  }
  return kept
}

/** The text with each hit replaced by what `replace` gives (the text itself when there is no hit). */
export function replaceHits(text: string, hits: readonly Hit[], replace: (hit: Hit, value: string) => string): string {
  if (hits.length === 0) return text
  let out = ''
  let at = 0
  for (const hit of hits) {
    out += text.slice(at, hit.start) + replace(hit, text.slice(hit.start, hit.end))
    at = hit.end
  }
  return out + text.slice(at)
}

/**
 * A rule's label in placeholders and redactions: EMAIL, PHONE, …; a custom pattern's is its rule's
 * name in capitals (`project_code` → PROJECT_CODE), REGEX when it has none of its own.
 */
export function labelOf(rule: GuardrailRule): string {
  if (rule.detector === 'moderation') return 'MODERATION'
  if (rule.detector === 'regex' && rule.name !== 'regex') return rule.name.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '') || 'REGEX'
  return detectorLabel(rule.detector)
}

/** `[REDACTED:<DETECTOR>]`: what an output rule that masks puts in place of a match. */
export const redaction = (rule: GuardrailRule) => `[REDACTED:${labelOf(rule)}]`

const placeholderPattern = /<([A-Z][A-Z0-9_]*)_(\d+)>/g
/** The longest a placeholder is, for what a stream holds back at the end of a piece. */
export const placeholderMaxLength = 80

/**
 * One request's placeholders: each value masked on the way out has one (`<EMAIL_1>`, the same value
 * the same placeholder), and the answer's placeholders are put back to the values.
 */
export class Placeholders {
  /** Each masked value with its label and placeholder, in the order made (a request has few: a list, searched). */
  private readonly entries: { label: string; value: string; placeholder: string; count: number }[] = []

  get size(): number {
    return this.entries.length
  }

  /** The placeholder of a value (made on first use). */
  of(label: string, value: string): string {
    let count = 0
    for (const entry of this.entries) {
      if (entry.label !== label) continue
      if (entry.value === value) return entry.placeholder
      count = entry.count
    }
    const placeholder = `<${label}_${count + 1}>`
    this.entries.push({ label, value, placeholder, count: count + 1 })
    return placeholder
  }

  private valueOf(placeholder: string): string | undefined {
    for (const entry of this.entries) if (entry.placeholder === placeholder) return entry.value
    return undefined
  }

  /** The text with its placeholders put back (`json`: inside a JSON string, the values escaped as such). */
  restore(text: string, json = false): string {
    if (this.entries.length === 0 || text.indexOf('<') === -1) return text
    return text.replace(placeholderPattern, (placeholder) => {
      const value = this.valueOf(placeholder)
      if (value === undefined) return placeholder
      return json ? JSON.stringify(value).slice(1, -1) : value
    })
  }

  /**
   * Where a text can be cut without splitting a placeholder it ends with: the start of a `<…` at
   * its end that may still become one (the text's length when there is none).
   */
  safeEnd(text: string): number {
    if (this.entries.length === 0) return text.length
    const open = text.lastIndexOf('<')
    if (open === -1 || text.length - open > placeholderMaxLength) return text.length
    return /^<[A-Z0-9_]*$/.test(text.slice(open)) ? open : text.length
  }
}

export type Where = 'input' | 'output'

/** A finding as the row keeps it: rule, where, action, count (CONTRACT §17). */
export interface Finding {
  rule: string
  where: Where
  action: string
  count: number
}

/** The findings of one request, counted per rule, side and action. */
export class Findings {
  readonly list: Finding[] = []
  /** The detector of each finding, for the metric. */
  readonly detectors: string[] = []

  add(rule: GuardrailRule, where: Where, action: string, count = 1) {
    const found = this.list.find((finding) => finding.rule === rule.name && finding.where === where && finding.action === action)
    if (found) found.count += count
    else {
      this.list.push({ rule: rule.name, where, action, count })
      this.detectors.push(rule.detector)
    }
  }

  /** Counts each hit of a text as its rule's finding. */
  addHits(hits: readonly Hit[], where: Where) {
    for (const hit of hits) this.add(hit.rule, where, hit.rule.action)
  }
}
