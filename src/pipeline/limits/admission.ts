/**
 * A limited key's request at the door (CONTRACT §11): before any upstream call (the decisioner's
 * included), its worst-case cost is priced over the targets its plan may try, the targets with no
 * listed price are passed over on a key with a USD cap (nothing is counted as $0), and the ledger
 * admits it or names the full window. The RateLimit headers go on whatever answer follows.
 */
import { RouterError } from '../../errors/router-error'
import type { ParsedRequest } from '../answer/answer'
import { cachedPlan } from '../read-model/plan-cache'
import type { AuthenticatedContext } from '../request/context'
import type { PlannedAttempt } from '../routing/plan-route'
import type { InferenceDeps } from '../types'
import type { KeyLimits } from './key-limits'
import type { Admission } from './ledger'

/** `max_tokens` when the request names none (CONTRACT §11). */
export const defaultMaxTokens = 4096
/** A prompt estimate: characters of the request body, about four to a token (the JSON around the text makes it an overestimate). */
const charactersPerToken = 4

/** The completion tokens a request may use at most: what it asks for, else the default; none for embeddings. */
function maxCompletionTokens(parsed: ParsedRequest): number {
  if (parsed.operation === 'embeddings') return 0
  const body = parsed.upstreamBody
  for (const name of ['max_completion_tokens', 'max_tokens', 'max_output_tokens'] as const) {
    const value = body[name]
    if (typeof value === 'number' && Number.isFinite(value) && value > 0) return value
  }
  return defaultMaxTokens
}

/** The priced worst case of one attempt, or undefined when its model lists no price there. */
function worstCost(context: AuthenticatedContext, step: PlannedAttempt, promptTokens: number, completionTokens: number): number | undefined {
  const pricing = context.snapshot.catalogs.get(step.gateway)?.prices.get(step.model)
  if (pricing?.prompt === undefined || (completionTokens > 0 && pricing.completion === undefined)) return undefined
  return promptTokens * pricing.prompt + completionTokens * (pricing.completion ?? 0)
}

/**
 * Admits the request or answers why not (a refusal to send in the key's envelope). Sets the
 * RateLimit headers, the ticket its finish settles, and (USD caps) which targets may be tried.
 */
export function admitLimited(context: AuthenticatedContext, deps: InferenceDeps, limits: KeyLimits, parsed: ParsedRequest): RouterError | undefined | Promise<RouterError | undefined> {
  const limiter = deps.limiter
  let reserve = 0
  const usdCap = limits.usdPerDay !== null || limits.usdPerMonth !== null
  // A retrieval (pinned to the provider key holding a response) bills nothing.
  if (usdCap && !parsed.pinnedStep) {
    const steps = cachedPlan(context.snapshot, context.key, { operation: parsed.operation, model: parsed.model, pinnedProviderKeyId: parsed.pinnedProviderKeyId }, deps.random).steps
    // The client's body as read (every dialect keeps it on the context), else the body as it goes upstream.
    const promptTokens = Math.ceil((context.requestBody?.length ?? JSON.stringify(parsed.upstreamBody).length) / charactersPerToken)
    const completionTokens = maxCompletionTokens(parsed)
    let attempts = 0
    let unpriced: PlannedAttempt[] | undefined
    for (const step of steps) {
      if (step.kind !== 'attempt') continue
      attempts++
      const cost = worstCost(context, step, promptTokens, completionTokens)
      if (cost === undefined) (unpriced ??= []).push(step)
      else if (cost > reserve) reserve = cost
    }
    if (unpriced) {
      if (unpriced.length === attempts) {
        return new RouterError('key_budget_unpriced_model', `This key has a spend cap, and no target of it lists a price for ${parsed.model}: its cost could not be counted.`, {
          'Retry-After': String(unpricedRetrySeconds(context, steps)),
        })
      }
      // Passed over: the same provider key and model as an unpriced step of the plan.
      const passed = unpriced
      context.allowStep = (step) => !passed.some((other) => other.provider.id === step.provider.id && other.model === step.model)
    }
  }
  const admission = limiter.admit(context.key.id, context.key.workspaceId, limits, reserve, context.requestId, context.createdAt)
  return admission instanceof Promise ? admission.then((ready) => admitted(context, ready)) : admitted(context, admission)
}

function admitted(context: AuthenticatedContext, admission: Admission): RouterError | undefined {
  context.headers['ratelimit-policy'] = admission.headers['ratelimit-policy']
  context.headers.ratelimit = admission.headers.ratelimit
  if (admission.refusal) return admission.refusal
  context.limitTicket = admission.ticket
  return undefined
}

/** Until the next catalog crawl of the targets' gateways is due (a price may be listed then): at least a minute. */
function unpricedRetrySeconds(context: AuthenticatedContext, steps: readonly { kind: string; gateway: string }[]): number {
  const dayMs = 86_400_000
  let soonest = Infinity
  for (const step of steps) {
    const catalog = context.snapshot.catalogs.get(step.gateway)
    soonest = Math.min(soonest, catalog ? catalog.fetchedAt + dayMs : Date.now())
  }
  return Math.max(60, Math.ceil((soonest - Date.now()) / 1000))
}
