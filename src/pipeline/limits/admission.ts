/**
 * A limited key's request at the door and until it settles (CONTRACT §11). Before any upstream call
 * (the decisioner's included) the request is admitted or refused: on a key with a USD cap its plan
 * is made once and priced (worst-case.ts: an upper bound, the largest over the targets the plan may
 * try), the targets whose model lists no price are passed over (nothing is counted as $0), and the
 * ledger admits it only when the settled spend, the open reservations and this worst case fit under
 * the cap. The plan priced is the plan run: a percentage remap is rolled once, here. While the
 * request runs, whatever else it calls upstream is reserved before it is sent (each further model
 * round of a tool loop, the decisioner's call) or the call is not made; and a call the request
 * makes is bounded as it was priced (the router's own output bound where the request set none,
 * usage asked for on a stream). When it ends, it is charged what the upstream reported, priced; and
 * where an answer came without usage, its reservation, never less.
 */
import { RouterError } from '../../errors/router-error'
import type { ModelPricing } from '../../gateways/model-prices'
import type { ParsedRequest } from '../answer/dialect'
import { cachedPlan } from '../read-model/plan-cache'
import type { Snapshot } from '../read-model/entries'
import type { AuthenticatedContext, SpendCap } from '../request/context'
import type { Operation, PlannedAttempt, PlanStep, RoutePlan } from '../routing/plan-route'
import type { UpstreamCall } from '../routing/routed-call'
import type { InferenceDeps } from '../types'
import type { KeyLimits } from '../../domain/key-limits'
import type { Admission, KeyLimiter, LimitTicket } from './ledger'
import type { RoundKind } from '../stages/stage'
import { addedBytes, defaultMaxTokens, measurePrompt, needsDefaultBound, outputBound, worstCaseNano, type OutputBound, type PromptMeasure } from './worst-case'

const pricingOf = (snapshot: Snapshot, step: PlannedAttempt): ModelPricing | undefined => snapshot.catalogs.get(step.gateway)?.prices.get(step.model)

/** The most any of the plan's priced attempts can cost (each with what the router adds on its way); undefined when none is priced. */
function planWorst(snapshot: Snapshot, steps: readonly PlanStep[], prompt: PromptMeasure, output: OutputBound, operation: Operation, bodyModel: unknown): number | undefined {
  let worst: number | undefined
  for (const step of steps) {
    if (step.kind !== 'attempt') continue
    const cost = worstCaseNano(pricingOf(snapshot, step), prompt, output, operation, addedBytes(bodyModel, step.model))
    if (cost !== undefined && (worst === undefined || cost > worst)) worst = cost
  }
  return worst
}

/**
 * A limited key's admitted request: its ticket in the key's ledger, the plan it was priced on, and
 * what it reserved for each model round and side call, for its settlement.
 */
export class LimitedRequest implements SpendCap {
  ticket: LimitTicket | undefined
  /** The plan priced at admission, run as it is (a key with a USD cap; undefined otherwise). */
  plan: RoutePlan | undefined
  /** Each model round's reservation, nano-dollars, in order: round 1's made at admission. */
  readonly rounds: number[] = []
  /**
   * What the request leaves held in a record of its own when it ends: a batch's items' reservation,
   * on the batch's row until the batch settles. Its ticket keeps it until a read shows that row.
   */
  held: { nano: number; batchId: string } | undefined
  /** Side calls (the decisioner's): what they reserved and what they are charged, nano-dollars. */
  private side = 0
  /** What the request's model calls are bounded by now (the latest round's body). */
  private prompt: PromptMeasure | undefined
  private output: OutputBound = { requested: undefined, choices: 1 }
  /** The model the measured body names (each attempt's own spelling may be longer). */
  private bodyModel: unknown

  constructor(
    private readonly context: AuthenticatedContext,
    private readonly limiter: KeyLimiter,
    readonly limits: KeyLimits,
    readonly operation: Operation,
    readonly stream: boolean,
  ) {}

  get usdCap(): boolean {
    return this.limits.usdPerDay !== null || this.limits.usdPerMonth !== null
  }

  /** Admitted: it holds a ticket in the key's ledger. */
  get admitted(): boolean {
    return this.ticket !== undefined
  }

  /** Usage matters to the key's windows (a USD cap, or tokens per minute): a stream asks the upstream for it. */
  private get countsUsage(): boolean {
    return this.usdCap || this.limits.tokensPerMinute !== null
  }

  /**
   * Prices the plan (USD caps): the worst case to reserve, or the 400 for a model no target prices.
   * Keeps the plan, which the routed call then runs (routed-call.ts).
   */
  price(context: AuthenticatedContext, deps: InferenceDeps, parsed: ParsedRequest): number | RouterError {
    const snapshot = context.snapshot
    const plan = cachedPlan(snapshot, context.key, { operation: parsed.operation, model: parsed.model, pinnedProviderKeyId: parsed.pinnedProviderKeyId }, deps.random)
    this.plan = plan
    this.prompt = measurePrompt(parsed.upstreamBody)
    this.output = outputBound(parsed.upstreamBody, parsed.operation)
    this.bodyModel = parsed.upstreamBody.model
    const worst = planWorst(snapshot, plan.steps, this.prompt, this.output, parsed.operation, this.bodyModel)
    if (worst === undefined) {
      return new RouterError('key_budget_unpriced_model', `This key has a spend cap, and no target of it lists a price for ${parsed.model}: its cost could not be counted.`, {
        'Retry-After': String(unpricedRetrySeconds(snapshot, plan.steps)),
      })
    }
    this.rounds.push(worst)
    return worst
  }

  /** An attempt's worst case on the current round's body (undefined: its model lists no price). */
  private worst(snapshot: Snapshot, step: PlannedAttempt): number | undefined {
    return worstCaseNano(pricingOf(snapshot, step), this.prompt!, this.output, this.operation, addedBytes(this.bodyModel, step.model))
  }

  /**
   * The steps a USD-capped request may run: an attempt whose model lists no price is passed over
   * (`unpriced`), and so is one that would cost more than the round reserved (`over-cap`: a model a
   * pre-routing pick put in front that the plan did not price).
   */
  screen(snapshot: Snapshot, steps: readonly PlanStep[]): PlanStep[] {
    const reserved = this.rounds.at(-1) ?? 0
    return steps.map((step) => {
      if (step.kind !== 'attempt') return step
      const worst = this.worst(snapshot, step)
      if (worst === undefined) return { kind: 'skip', gateway: step.gateway, reason: 'unpriced' }
      return worst > reserved ? { kind: 'skip', gateway: step.gateway, reason: 'over-cap' } : step
    })
  }

  /**
   * Reserves a model round before it is sent: the first round again when the stages changed its body
   * (the tools a stage offers), each later round of a tool loop and each continuation of a broken
   * stream anew. `bodyOf` gives the body as it
   * goes to an attempt. The refusal when it does not fit (nothing is sent then).
   */
  reserveRound(snapshot: Snapshot, bodyOf: (step: PlannedAttempt) => Record<string, unknown> | undefined, kind: RoundKind): RouterError | undefined {
    if (!this.usdCap || !this.ticket || !this.plan) return undefined
    const lead = this.plan.steps.find((step): step is PlannedAttempt => step.kind === 'attempt')
    const body = lead && bodyOf(lead)
    if (!body) return undefined
    this.prompt = measurePrompt(body)
    this.output = outputBound(body, this.operation)
    this.bodyModel = body.model
    const worst = planWorst(snapshot, this.plan.steps, this.prompt, this.output, this.operation, this.bodyModel) ?? 0
    if (kind === 'first') {
      const before = this.rounds[0] ?? 0
      if (worst <= before) return undefined
      const refusal = this.limiter.reserveMore(this.ticket, this.limits, worst - before)
      if (!refusal) this.rounds[0] = worst
      return refusal
    }
    const refusal = this.limiter.reserveMore(this.ticket, this.limits, worst)
    if (refusal) {
      const what = kind === 'continuation' ? 'The broken stream was not continued' : "The tool loop's next model round was not sent"
      return new RouterError(refusal.code, `${what}: ${refusal.message} The rounds answered so far are charged.`, refusal.extraHeaders)
    }
    this.rounds.push(worst)
    return undefined
  }

  /** Reserves a side call's worst case (the decisioner's) before it is made; the refusal when it does not fit. */
  reserveSide(worst: number): RouterError | undefined {
    if (!this.ticket) return undefined
    const refusal = this.limiter.reserveMore(this.ticket, this.limits, worst)
    return refusal
  }

  /** A side call made: what it is charged (nano-dollars). */
  chargeSide(spent: number) {
    this.side += spent
  }

  /**
   * One attempt's call, bounded as it was priced: where the request set no output bound and the
   * model lists none, the router's own (`max_tokens`, `max_output_tokens` on Responses); a stream of
   * chat asks for its usage (`stream_options.include_usage`), which the relay keeps from a client
   * that did not ask for it.
   */
  bound(snapshot: Snapshot, step: PlannedAttempt, call: UpstreamCall): UpstreamCall {
    const body = call.body
    if (!body) return call
    let changed: Record<string, unknown> | undefined
    if (this.usdCap && (call.path === '/chat/completions' || call.path === '/responses') && needsDefaultBound(outputBound(body, this.operation), pricingOf(snapshot, step))) {
      changed = { ...body, [call.path === '/responses' ? 'max_output_tokens' : 'max_tokens']: defaultMaxTokens }
    }
    if (this.countsUsage && this.stream && call.path === '/chat/completions') {
      const options = body.stream_options
      const asked = typeof options === 'object' && options !== null && (options as { include_usage?: unknown }).include_usage === true
      if (!asked) {
        changed = { ...(changed ?? body), stream_options: { ...(typeof options === 'object' && options !== null ? options : {}), include_usage: true } }
        this.context.hideUsageChunk = true
      }
    }
    return changed ? { path: call.path, method: call.method, body: changed } : call
  }

  /**
   * The request is finished (its cost computed, the row's state final): its reservation is replaced
   * in the key's ledger by what it was charged (and a batch's row holds what its items reserved).
   */
  settle() {
    const context = this.context
    if (this.ticket) this.limiter.settle(this.ticket, (context.inputTokens ?? 0) + (context.outputTokens ?? 0), (context.costNanoUsd ?? 0) + (this.held?.nano ?? 0), this.held)
  }

  /**
   * What the request is charged, nano-dollars, from what it reported (CONTRACT §11): `rounds`, each
   * model round's priced usage where it reported any (a tool loop; else the one call's, `single`);
   * `answered`: an answer was given (a success, or a stream that sent the client a byte). A round
   * that reported nothing is charged its reservation when it answered, 0 when it failed before any
   * answer; side calls as they were charged. Never below the reservation for lack of usage.
   */
  charge(single: number | null | undefined, rounds: readonly (number | null | undefined)[] | undefined, answered: boolean): number {
    let total = this.side
    if (rounds) {
      rounds.forEach((cost, index) => {
        // Rounds before the last answered (their tool calls were run); the last one answered when the request did.
        const roundAnswered = index < rounds.length - 1 || answered
        total += cost ?? (roundAnswered ? (this.rounds[index] ?? this.rounds.at(-1) ?? 0) : 0)
      })
      return total
    }
    // `undefined`: no usage reported; `null`: reported, but not priced (a target screened as priced cannot give one).
    if (single !== undefined && single !== null) return total + single
    return total + (answered || single === null ? (this.rounds[0] ?? 0) : 0)
  }
}

/**
 * Admits the request or answers why not (a refusal to send in the key's envelope). Sets the
 * RateLimit headers, and the request's LimitedRequest (its ticket, its plan) on the context.
 */
export function admitLimited(
  context: AuthenticatedContext,
  deps: InferenceDeps,
  limits: KeyLimits,
  parsed: ParsedRequest,
  /** The request is answered without a model call (the response cache): only its count matters. */
  answered = false,
): RouterError | undefined | Promise<RouterError | undefined> {
  const limited = new LimitedRequest(context, deps.limiter, limits, parsed.operation, parsed.stream)
  context.limited = limited
  let worst = 0
  // A retrieval (pinned to the provider key holding a response) bills nothing; nor does an answered request.
  if (limited.usdCap && !parsed.pinnedStep && !answered) {
    const priced = limited.price(context, deps, parsed)
    if (priced instanceof RouterError) return priced
    worst = priced
  }
  const admission = deps.limiter.admit(context.key.id, context.key.workspaceId, limits, worst, context.requestId, context.createdAt, answered)
  return admission instanceof Promise ? admission.then((ready) => admitted(context, limited, ready)) : admitted(context, limited, admission)
}

function admitted(context: AuthenticatedContext, limited: LimitedRequest, admission: Admission): RouterError | undefined {
  context.headers['ratelimit-policy'] = admission.headers['ratelimit-policy']
  context.headers.ratelimit = admission.headers.ratelimit
  if (admission.refusal) return admission.refusal
  limited.ticket = admission.ticket
  return undefined
}

/** Until the next catalog crawl of the targets' gateways is due (a price may be listed then): at least a minute. */
function unpricedRetrySeconds(snapshot: Snapshot, steps: readonly { kind: string; gateway: string }[]): number {
  const dayMs = 86_400_000
  let soonest = Infinity
  for (const step of steps) {
    const catalog = snapshot.catalogs.get(step.gateway)
    soonest = Math.min(soonest, catalog ? catalog.fetchedAt + dayMs : Date.now())
  }
  return Math.max(60, Math.ceil((soonest - Date.now()) / 1000))
}
