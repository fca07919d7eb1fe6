/**
 * The decisioner (SPEC "Decisioner", CONTRACT §9): on a key with one, and only with
 * RT_DECISIONER_ENABLED=1, a pick among the key's targets (and, when allowed, a model) before the
 * static rule, which stays the fail-open fallback. In CONTRACT order:
 *
 * 1. facts per distinct target gateway: does its catalog list the model, at what listed price;
 * 2. skips: `single_target`, `no_facts` (cost objective, nothing priced), `over_budget`;
 * 3. cost objective with a unique cheapest priced target: picked in code, no call;
 * 4. otherwise one decision call to the decisioner's provider key (3 s, inside the request
 *    deadline): `jev_error` when it fails, `low_confidence` under p = 0.5, else the pick.
 *
 * The outcome is the X-Router-Decisioner header, the target tried first and, maybe, the model.
 * It is a stage of the registry (stages/registry.ts), deciding before routing: a key's chain has it
 * when the key has a decisioner and the operator flag is on, and no other key pays for it.
 */
import { canonicalId, decideModel, gatewaysListing, spellingFor, type GatewayCatalog } from '../../gateways/model-catalog'
import type { ProviderEntry } from '../read-model/entries'
import type { AuthenticatedContext } from '../request/context'
import { checkDecisionAnswer, type DecisionQuestion } from '../endpoints/decisions'
import { costOf } from '../../gateways/model-prices'
import { addedBytes, measurePrompt, worstCaseNano } from '../limits/worst-case'
import type { InferenceDeps } from '../types'
import type { Stage, StageRun } from './stage'

export type Objective = 'cost' | 'capability' | 'efficiency'

interface DecisionerConfig {
  provider_key_id: string
  objective?: Objective
  allow_model_override?: boolean
  max_usd_m?: number
  notes?: string
  models?: string[]
}

/** What the decisioner decided for one request. */
export interface Decision {
  /** X-Router-Decisioner. */
  header: string
  /** The target tried first (a pick). */
  providerKeyId?: string
  /** The model the pick overrode the inbound one with. */
  model?: string
  /** The decision call's time, when one was made. */
  callMs?: number
}

/** The decision call's limit (CONTRACT §9), cut to the request's time left. */
export const decisionCallMs = 3_000
/** A pick needs its option's probability at least this high. */
export const minConfidence = 0.5
export const maxHeaderLength = 500
/** Models offered by the automatic shortlist besides the inbound one. */
const shortlistSize = 11

interface Fact {
  gateway: string
  provider: ProviderEntry
  listed: boolean
  /** The model's listed spelling on this gateway (undefined: not listed, or no catalog). */
  spelled: string | undefined
  /** Listed prompt + completion price, USD per million tokens; undefined: unknown. */
  usdPerMillion: number | undefined
  /** Whether the rule would send it the model at all (the catalog rules of routing: a stale catalog never rules it out). */
  sendable: boolean
}

/**
 * A model id that can go in a header and a plan: printable ASCII without the pair separator (the
 * key's `models` are free text). Its length is not limited here: a long one is used, and the header
 * is cut (header()).
 */
const headerSafe = (id: string) => id.length > 0 && /^[\x21-\x7e]+$/.test(id) && !id.includes(';')

const twoDecimals = (value: number) => (Math.round(value * 100) / 100).toFixed(2)

/**
 * X-Router-Decisioner from its `key:value` pairs, capped at 500 chars (SPEC "Response headers",
 * "Limits"). Only a model id makes it longer (the other values are gateway ids and short numbers
 * and words), so the longest pair's value is shortened and every pair stays whole and in place,
 * `obj` included. Should even that not do, whole pairs are dropped from the end, and a first pair
 * alone over the cap is cut.
 */
function header(parts: readonly string[]): string {
  const text = parts.join(';')
  if (text.length <= maxHeaderLength) return text
  const excess = text.length - maxHeaderLength
  const longest = parts.reduce((best, part, index) => (part.length > parts[best]!.length ? index : best), 0)
  const pair = parts[longest]!
  const valueStart = pair.indexOf(':') + 1
  // A value kept to at least one character, so the pair keeps its `key:value` form.
  if (valueStart > 0 && pair.length - excess > valueStart) return parts.map((part, index) => (index === longest ? part.slice(0, part.length - excess) : part)).join(';')
  const kept: string[] = []
  for (const part of parts) {
    if ([...kept, part].join(';').length > maxHeaderLength) break
    kept.push(part)
  }
  return kept.length > 0 ? kept.join(';') : text.slice(0, maxHeaderLength)
}

/** The decisioner as the stage of the keys that have one (RT_DECISIONER_ENABLED=1): it decides before routing. */
export const decisionerStage: Stage = {
  name: 'decisioner',
  appliesTo: (key, flags) => flags.decisionerEnabled && key.rule.decisioner !== null,
  open({ context, deps, dialect, answered }): StageRun | undefined {
    // An answered request (the response cache's) calls no model: there is no target to pick.
    if (answered) return undefined
    if (!dialect.enriched) return undefined
    let record: { header: string; ms?: number } | undefined
    return {
      name: 'decisioner',
      async beforeRouting(parsed) {
        const decision = await decide(context, deps, parsed.model, parsed.pinnedProviderKeyId !== undefined)
        context.headers['x-router-decisioner'] = decision.header
        record = { header: decision.header, ...(decision.callMs !== undefined ? { ms: decision.callMs } : {}) }
        return decision.providerKeyId === undefined ? undefined : { prefer: { providerKeyId: decision.providerKeyId, model: decision.model } }
      },
      // The log row's record of it: its header and its call's time.
      logRecord: () => record,
    }
  },
}

function usdPerMillion(catalog: GatewayCatalog | undefined, spelled: string | undefined): number | undefined {
  if (!catalog || spelled === undefined) return undefined
  const pricing = catalog.prices.get(spelled)
  if (pricing?.prompt === undefined || pricing.completion === undefined) return undefined
  return (pricing.prompt + pricing.completion) * 1_000_000
}

/** One fact per distinct gateway among the key's callable targets, in rule order. */
function factsOf(context: AuthenticatedContext, model: string): Fact[] {
  const snapshot = context.snapshot
  const facts: Fact[] = []
  const seen = new Set<string>()
  const now = Date.now()
  const knownSomewhere = gatewaysListing(snapshot.catalogs, model, now).length > 0
  for (const target of context.key.rule.targets) {
    const provider = snapshot.providers.get(target.providerKeyId)
    if (!provider || provider.disabled || !provider.gateway.routable || snapshot.gatewayEnabled.get(provider.gateway.id) === false) continue
    if (seen.has(provider.gateway.id)) continue
    seen.add(provider.gateway.id)
    const catalog = snapshot.catalogs.get(provider.gateway.id)
    const spelled = catalog ? spellingFor(catalog, model) : undefined
    const sendable = decideModel(catalog, model, knownSomewhere, now).kind === 'send'
    facts.push({ gateway: provider.gateway.id, provider, listed: spelled !== undefined, spelled, usdPerMillion: usdPerMillion(catalog, spelled), sendable })
  }
  return facts
}

/** The models the decision call may pick from besides the inbound one: the key's list, or the cheapest listed elsewhere on its targets. */
function modelOptions(config: DecisionerConfig, facts: readonly Fact[], model: string, context: AuthenticatedContext): string[] {
  if (!config.allow_model_override) return []
  const allowed = config.models ?? shortlist(facts, model, context)
  return [...new Set(allowed)].filter((candidate) => candidate !== model)
}

function shortlist(facts: readonly Fact[], model: string, context: AuthenticatedContext): string[] {
  const priced = new Map<string, number>()
  for (const fact of facts) {
    const catalog = context.snapshot.catalogs.get(fact.gateway)
    if (!catalog) continue
    for (const [spelled, pricing] of catalog.prices) {
      if (pricing.prompt === undefined || pricing.completion === undefined) continue
      const id = canonicalId(spelled, fact.gateway)
      const usd = (pricing.prompt + pricing.completion) * 1_000_000
      if (id !== model && (priced.get(id) ?? Infinity) > usd) priced.set(id, usd)
    }
  }
  return [...priced].sort((left, right) => left[1] - right[1]).slice(0, shortlistSize).map(([id]) => id)
}

/**
 * The answer to one choice question: the top option (the most probable one; the answer names it
 * on a tie), its probability and the runner-up's.
 */
function topChoice(answer: { answer: string; probabilities: Record<string, number> }): { option: string; p: number; runnerUp: number } {
  let option = answer.answer
  let p = answer.probabilities[option] ?? 0
  for (const [candidate, probability] of Object.entries(answer.probabilities)) {
    if (probability > p) {
      option = candidate
      p = probability
    }
  }
  let runnerUp = 0
  for (const [candidate, probability] of Object.entries(answer.probabilities)) if (candidate !== option && probability > runnerUp) runnerUp = probability
  return { option, p, runnerUp }
}

/**
 * The decision for a request. A pinned Responses chain skips it (SPEC: the follow-up goes to the
 * provider that holds the state); the key has a decisioner, so the header says so.
 */
export async function decide(context: AuthenticatedContext, deps: InferenceDeps, model: string, pinned: boolean): Promise<Decision> {
  const config = context.key.rule.decisioner as unknown as DecisionerConfig
  const objective: Objective = config.objective ?? 'cost'
  const skip = (reason: string, callMs?: number): Decision => ({ header: header([`skipped:${reason}`, `obj:${objective}`]), callMs })
  if (pinned) return skip('pinned_chain')
  const facts = factsOf(context, model)
  if (facts.length < 2) return skip('single_target')
  const priced = facts.filter((fact) => fact.usdPerMillion !== undefined)
  if (objective === 'cost' && priced.length === 0) return skip('no_facts')
  const budget = config.max_usd_m
  const affordable = budget === undefined ? priced : priced.filter((fact) => fact.usdPerMillion! <= budget)
  if (budget !== undefined && affordable.length === 0) return skip('over_budget')

  if (objective === 'cost' && affordable.length > 0) {
    const cheapest = Math.min(...affordable.map((fact) => fact.usdPerMillion!))
    const atCheapest = affordable.filter((fact) => fact.usdPerMillion === cheapest)
    if (atCheapest.length === 1) return { header: header([`pick:${atCheapest[0]!.gateway}`, 'via:code', 'obj:cost']), providerKeyId: atCheapest[0]!.provider.id }
  }

  // One decision call: which target, and (when allowed) which model.
  const decider = context.snapshot.providers.get(config.provider_key_id)
  const snapshot = context.snapshot
  if (!decider || decider.disabled || !decider.gateway.capabilities.decisioner || snapshot.gatewayEnabled.get(decider.gateway.id) === false) return skip('jev_error')
  // The options are the targets a pick can serve: not known to lack the model, within the budget.
  const servable = facts.filter((fact) => fact.sendable && (budget === undefined || fact.usdPerMillion === undefined || fact.usdPerMillion <= budget))
  if (servable.length < 2) return servable.length === 1 ? { header: header([`pick:${servable[0]!.gateway}`, 'via:code', `obj:${objective}`]), providerKeyId: servable[0]!.provider.id } : skip('not_listed')
  const targets = servable.map((fact) => fact.gateway)
  const models = modelOptions(config, servable, model, context)
  const questions: DecisionQuestion[] = [
    { id: 'target', type: 'choice', prompt: `Which gateway should serve this ${model} request best for the objective '${objective}'?`, options: targets },
  ]
  if (models.length > 0) questions.push({ id: 'model', type: 'choice', prompt: `Which model should serve it? '${model}' is the one the client asked for.`, options: [model, ...models] })
  const state = {
    objective,
    model,
    ...(config.notes ? { notes: config.notes } : {}),
    ...(budget !== undefined ? { max_usd_m: budget } : {}),
    targets: servable.map((fact) => ({ gateway: fact.gateway, lists_model: fact.listed, usd_per_million: fact.usdPerMillion ?? null })),
  }
  const started = performance.now()
  const timeLeft = context.startedAt + deps.config.deadlineMs - started
  const limit = Math.min(decisionCallMs, timeLeft)
  if (limit <= 0) return skip('jev_error')
  const body = { model, state, questions }
  // On a key with a USD cap the call is charged to the key: reserved before it is made, or not made.
  const charge = spendCapCharge(context, decider, body)
  if (charge === 'refused') return skip('spend_cap')
  let answer: unknown
  try {
    const call = () => deps.upstream.read(decider, { path: '/decisions', body }, limit)
    // Traced: the decision call is an INTERNAL span of the request (CONTRACT §13).
    const reply = deps.tracing && context.span ? await deps.tracing.internal(context.span, 'decisioner', { 'router.plugin': 'decisioner', 'gen_ai.provider.name': decider.gateway.id }, call, (answer) => (answer.ok ? undefined : 'decision_call_failed')) : await call()
    if (!reply.ok) {
      // An error answer: billed what it reported, which it does not say here.
      charge?.settle(undefined, false)
      return skip('jev_error', elapsed(started, context))
    }
    // Read as it came: the options it names are the router's own data (only what leaves is scrubbed).
    answer = JSON.parse(reply.raw)
    charge?.settle((answer as { usage?: unknown } | null)?.usage, true)
  } catch {
    // No answer (a timeout, a broken connection, a body that is not JSON): the call may have run, so it is charged its reservation.
    charge?.settle(undefined, true)
    return skip('jev_error', elapsed(started, context))
  }
  const callMs = elapsed(started, context)
  if (typeof answer !== 'object' || answer === null || checkDecisionAnswer(answer, questions) !== undefined) return skip('jev_error', callMs)
  const answers = (answer as { answers: { answer: string; probabilities: Record<string, number> }[] }).answers
  const target = topChoice(answers[0]!)
  if (target.p < minConfidence) return skip('low_confidence', callMs)
  const picked = servable.find((fact) => fact.gateway === target.option)!
  let override: string | undefined
  if (answers[1]) {
    const chosen = topChoice(answers[1])
    // An override needs the same confidence, and a model the picked target can be sent as routing
    // sends one: its catalog's spelling, or the id as it is where no fresh catalog says otherwise (a
    // model no catalog lists, however long its id, is forwarded untouched).
    const now = Date.now()
    const knownSomewhere = gatewaysListing(context.snapshot.catalogs, chosen.option, now).length > 0
    const sendable = decideModel(context.snapshot.catalogs.get(picked.gateway), chosen.option, knownSomewhere, now).kind === 'send'
    if (chosen.option !== model && chosen.p >= minConfidence && headerSafe(chosen.option) && sendable) override = chosen.option
  }
  return {
    header: header([
      `pick:${picked.gateway}`,
      ...(override ? [`model:${override}`] : []),
      `choice:${target.option}`,
      `conf:${twoDecimals(target.p - target.runnerUp)}`,
      `p:${twoDecimals(target.p)}`,
      `obj:${objective}`,
    ]),
    providerKeyId: picked.provider.id,
    model: override,
    callMs,
  }
}

/**
 * The decision call's charge on a key with a USD cap (CONTRACT §11: the decisioner's own call is
 * charged to the key): its worst case reserved in the request's ticket, at the price the decider's
 * catalog lists for the model; `refused` when that is unknown or does not fit (the call is skipped,
 * `skipped:spend_cap`); undefined on any other key. `settle` charges what the answer's usage costs,
 * its reservation when an answer came without usage (or none came at all), 0 for an error answer.
 */
function spendCapCharge(context: AuthenticatedContext, decider: ProviderEntry, body: Record<string, unknown>): { settle(usage: unknown, answered: boolean): void } | 'refused' | undefined {
  const limited = context.limited
  if (!limited?.usdCap || !limited.admitted) return undefined
  const catalog = context.snapshot.catalogs.get(decider.gateway.id)
  const model = String(body.model)
  const pricing = catalog?.prices.get((catalog && spellingFor(catalog, model)) ?? model)
  const worst = worstCaseNano(pricing, measurePrompt(body), { requested: undefined, choices: 1 }, 'decisions', addedBytes(body.model, String(body.model)))
  if (worst === undefined || limited.reserveSide(worst) !== undefined) return 'refused'
  return {
    settle(usage, answered) {
      const counts = typeof usage === 'object' && usage !== null ? (usage as Record<string, unknown>) : undefined
      const input = counts ? tokenCount(counts.prompt_tokens ?? counts.input_tokens) : undefined
      const output = counts ? tokenCount(counts.completion_tokens ?? counts.output_tokens) : undefined
      const cost = input === undefined && output === undefined ? undefined : costOf({ input, output, cachedInput: undefined }, pricing)
      limited.chargeSide(cost ?? (answered ? worst : 0))
    },
  }
}

const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)

/** The decision call's time; counted as time waiting on the outside, not the router's overhead. */
function elapsed(started: number, context: AuthenticatedContext): number {
  const ms = performance.now() - started
  context.upstreamWaitMs += ms
  return Math.round(ms * 1000) / 1000
}
