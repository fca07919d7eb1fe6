/**
 * A key's guardrails setting (CONTRACT §17): off (null, the default), or whether findings change the
 * request and the answer (`enforce`) or are only counted (`monitor`), and the rules run on what the
 * request sends (`input`) and on what the answer says (`output`). A rule is one detector with what is
 * done with its matches: masked or blocked. Stored as JSON with the wire names and every default
 * filled in (a rule's name too); a key without one, or with both lists empty, pays nothing for them.
 * A `regex` rule's pattern is compiled once, when the read model is built.
 */
import { compileGuardrailPattern, maxGuardrailPatternLength, type GuardrailPattern } from './guardrail-pattern'
import { presentStoredSetting, storedSetting, type SettingCodec } from './stored-setting'

export const guardrailDetectors = ['email', 'phone', 'credit_card', 'iban', 'us_ssn', 'ip_address', 'secret', 'regex', 'moderation'] as const
export type GuardrailDetector = (typeof guardrailDetectors)[number]
export const guardrailActions = ['mask', 'block'] as const
export type GuardrailAction = (typeof guardrailActions)[number]
export const guardrailModes = ['enforce', 'monitor'] as const
export type GuardrailMode = (typeof guardrailModes)[number]
export type GuardrailSide = 'input' | 'output'

export interface GuardrailRule {
  /** The rule's name in findings and errors: the one given, else the detector's. */
  readonly name: string
  readonly detector: GuardrailDetector
  readonly action: GuardrailAction
  /** A `regex` rule's pattern, compiled. */
  readonly pattern?: GuardrailPattern
  /** A `moderation` rule's provider key (its gateway serves `/moderations`). */
  readonly providerKeyId?: string
  /** A `moderation` rule's categories: a flag in one of them blocks the request. */
  readonly categories?: readonly string[]
}

export interface GuardrailSettings {
  readonly mode: GuardrailMode
  readonly input: readonly GuardrailRule[]
  readonly output: readonly GuardrailRule[]
}

/** A rule as the key object shows it (wire names, the name filled in). */
export interface GuardrailRuleView {
  name: string
  detector: GuardrailDetector
  action: GuardrailAction
  pattern?: string
  provider_key_id?: string
  categories?: string[]
}

/** The setting as the key object shows it (wire names, defaults filled in). */
export interface GuardrailsView {
  mode: GuardrailMode
  input: GuardrailRuleView[]
  output: GuardrailRuleView[]
}

export const defaultGuardrailMode: GuardrailMode = 'enforce'
export const maxGuardrailRules = 32
export const maxGuardrailCategories = 32

const guardrailsFields = ['mode', 'input', 'output'] as const
const ruleFields = ['name', 'detector', 'action', 'pattern', 'provider_key_id', 'categories'] as const
const namePattern = /^[A-Za-z0-9_.-]{1,64}$/
const categoryPattern = /^[a-z/-]{1,64}$/

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const oneOf = (names: readonly string[]) => names.slice(0, -1).join(', ') + ' or ' + names.at(-1)
const quoted = (names: readonly string[]) => oneOf(names.map((name) => `'${name}'`))

type CompiledPatterns = Map<string, GuardrailPattern>

/**
 * Why a `guardrails` value is refused, naming the field (as the cache's, cache-settings.ts); undefined
 * when it is good. Null turns guardrails off; an object is the whole setting (fields not named take
 * their defaults). Whether a moderation rule's provider key serves moderations is the management
 * rule's check: it needs the workspace's provider keys.
 */
export function guardrailsProblem(value: unknown): string | undefined {
  return problemOf(value)
}

/** guardrailsProblem; each regex rule's compiled pattern goes into `patterns` (by `input.0`, `output.3`, …). */
function problemOf(value: unknown, patterns?: CompiledPatterns): string | undefined {
  if (value === null) return undefined
  if (!isObject(value)) return 'Invalid guardrails: expected an object {mode, input, output}, or null to turn guardrails off.'
  for (const name of Object.keys(value)) {
    if (!(guardrailsFields as readonly string[]).includes(name)) return `Invalid guardrails.${name}: unknown field; expected ${oneOf(guardrailsFields)}.`
  }
  if (value.mode !== undefined && !(guardrailModes as readonly unknown[]).includes(value.mode)) return `Invalid guardrails.mode: expected ${quoted(guardrailModes)}.`
  for (const side of ['input', 'output'] as const) {
    const rules = value[side]
    if (rules === undefined) continue
    if (!Array.isArray(rules)) return `Invalid guardrails.${side}: expected an array of rules {detector, action}.`
    if (rules.length > maxGuardrailRules) return `Invalid guardrails.${side}: at most ${maxGuardrailRules} rules (got ${rules.length}).`
    for (let index = 0; index < rules.length; index++) {
      const problem = ruleProblem(rules[index], side, index, patterns)
      if (problem) return problem
    }
  }
  return undefined
}

function ruleProblem(rule: unknown, side: GuardrailSide, index: number, patterns: CompiledPatterns | undefined): string | undefined {
  const at = `guardrails.${side}[${index}]`
  if (!isObject(rule)) return `Invalid ${at}: expected a rule {detector, action}.`
  for (const name of Object.keys(rule)) {
    if (!(ruleFields as readonly string[]).includes(name)) return `Invalid ${at}.${name}: unknown field; expected ${oneOf(ruleFields)}.`
  }
  const { detector, action } = rule
  if (!(guardrailDetectors as readonly unknown[]).includes(detector)) return `Invalid ${at}.detector: required, one of ${guardrailDetectors.join(', ')}.`
  if (!(guardrailActions as readonly unknown[]).includes(action)) return `Invalid ${at}.action: required, ${quoted(guardrailActions)}.`
  if (rule.name !== undefined && (typeof rule.name !== 'string' || !namePattern.test(rule.name))) {
    return `Invalid ${at}.name: expected 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'.`
  }
  if (detector === 'regex') {
    const pattern = rule.pattern
    if (typeof pattern !== 'string' || pattern === '') {
      return `Invalid ${at}.pattern: required for a regex rule, a pattern (RE2 syntax) of 1 to ${maxGuardrailPatternLength} characters.`
    }
    const compiled = compileGuardrailPattern(pattern)
    // The compiler's sentence says what is wrong (a backreference, a lookaround, the length, …).
    if ('problem' in compiled) return `Invalid ${at}.pattern: ${compiled.problem.charAt(0).toLowerCase()}${compiled.problem.slice(1)}`
    patterns?.set(`${side}.${index}`, compiled)
  } else if (rule.pattern !== undefined) {
    return `Invalid ${at}.pattern: only a regex rule takes a pattern.`
  }
  if (detector === 'moderation') return moderationProblem(rule, side, at)
  for (const name of ['provider_key_id', 'categories'] as const) {
    if (rule[name] !== undefined) return `Invalid ${at}.${name}: only a moderation rule takes ${name}.`
  }
  return undefined
}

function moderationProblem(rule: Record<string, unknown>, side: GuardrailSide, at: string): string | undefined {
  if (side === 'output') return `Invalid ${at}.detector: moderation is an input rule only (the answer is not sent for moderation).`
  if (rule.action !== 'block') return `Invalid ${at}.action: a moderation rule only blocks (a flagged request is refused; there is nothing to mask).`
  if (typeof rule.provider_key_id !== 'string' || rule.provider_key_id === '') {
    return `Invalid ${at}.provider_key_id: required for a moderation rule, a provider key UUID of this workspace whose gateway serves moderations.`
  }
  const categories = rule.categories
  if (!Array.isArray(categories) || categories.length === 0 || categories.length > maxGuardrailCategories) {
    return `Invalid ${at}.categories: required for a moderation rule, a list of 1 to ${maxGuardrailCategories} category names (hate, harassment, self-harm, sexual, violence, illicit, self-harm/intent, …).`
  }
  for (let index = 0; index < categories.length; index++) {
    const category = categories[index]
    if (typeof category !== 'string' || !categoryPattern.test(category)) {
      return `Invalid ${at}.categories[${index}]: expected a category name of 1 to 64 characters of a-z, '/' and '-' (such as hate or self-harm/intent).`
    }
  }
  return undefined
}

function ruleViewOf(rule: Record<string, unknown>): GuardrailRuleView {
  const detector = rule.detector as GuardrailDetector
  const view: GuardrailRuleView = { name: typeof rule.name === 'string' ? rule.name : detector, detector, action: rule.action as GuardrailAction }
  if (detector === 'regex') view.pattern = rule.pattern as string
  if (detector === 'moderation') {
    view.provider_key_id = rule.provider_key_id as string
    view.categories = [...(rule.categories as string[])]
  }
  return view
}

/** A value guardrailsProblem accepted, as the key object shows it: the whole setting, defaults filled in; null: off. */
export function guardrailsViewOf(value: unknown): GuardrailsView | null {
  if (!isObject(value)) return null
  const rules = (side: unknown) => (Array.isArray(side) ? side.filter(isObject).map(ruleViewOf) : [])
  return { mode: value.mode === 'monitor' ? 'monitor' : defaultGuardrailMode, input: rules(value.input), output: rules(value.output) }
}

const codec: SettingCodec<GuardrailsView> = { problem: guardrailsProblem, viewOf: guardrailsViewOf }

/** The stored JSON of a value guardrailsProblem accepted (null: off). A change replaces the whole setting. */
export function storedGuardrails(value: unknown): string | null {
  return storedSetting(codec, value)
}

/** The stored JSON as the key object shows it; null when off (or the text is unreadable). */
export function presentStoredGuardrails(text: string | null | undefined): GuardrailsView | null {
  return presentStoredSetting(codec, text)
}

/**
 * The stored JSON → the setting the key's requests use, each regex pattern compiled (once: while the
 * stored value is checked); undefined when off, when both lists are empty, or when unreadable.
 */
export function parseStoredGuardrails(text: string | null | undefined): GuardrailSettings | undefined {
  const patterns: CompiledPatterns = new Map()
  const view = presentStoredSetting({ problem: (value) => problemOf(value, patterns), viewOf: guardrailsViewOf }, text)
  if (!view || (view.input.length === 0 && view.output.length === 0)) return undefined
  const rulesOf = (side: GuardrailSide) =>
    Object.freeze(
      view[side].map((rule, index): GuardrailRule => {
        const pattern = patterns.get(`${side}.${index}`)
        return Object.freeze({
          name: rule.name,
          detector: rule.detector,
          action: rule.action,
          ...(pattern ? { pattern } : {}),
          ...(rule.provider_key_id !== undefined ? { providerKeyId: rule.provider_key_id } : {}),
          ...(rule.categories ? { categories: Object.freeze([...rule.categories]) } : {}),
        })
      }),
    )
  return Object.freeze({ mode: view.mode, input: rulesOf('input'), output: rulesOf('output') })
}
