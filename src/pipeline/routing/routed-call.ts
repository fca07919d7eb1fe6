/**
 * One routed call: the plan (from the read model's cache, with a pre-routing hook's pick in front),
 * the attempts (run-attempts.ts) and what each attempt sends, through the one upstream client. The
 * gateway kind that serves only /responses is reached here too: a chat call to it goes out as a
 * Responses call, and its reply comes back as what it is (a Response), for the answer path to
 * translate once into the client's dialect.
 */
import { forwardedHeaders } from '../../gateways/client'
import { spellingFor } from '../../gateways/model-catalog'
import { chatToResponses } from '../../dialects/responses/convert-request'
import type { ReplyKind } from '../../dialects/reply-shape'
import type { AuthenticatedContext } from '../request/context'
import type { InferenceDeps } from '../types'
import type { Operation, PlannedAttempt, PlanStep, RoutePlan } from './plan-route'
import { cachedPlan, planFor } from '../read-model/plan-cache'
import type { Snapshot } from '../read-model/entries'
import { runAttempts, type AttemptCall, type RunResult } from './run-attempts'

/** What one attempt sends: a path under the gateway's base URL and its body. */
export interface UpstreamCall {
  /** e.g. `/chat/completions`; a GET when `method` says so (retrieval). */
  path: string
  method?: 'GET'
  body: Record<string, unknown> | undefined
  /** The client's bytes, when they can go upstream unchanged (same model, nothing added or removed). */
  raw?: Uint8Array<ArrayBuffer>
}

/** Where a pre-routing stage sends the request first: this provider key (with this model, when it overrode the client's). */
export interface RoutePreference {
  providerKeyId: string
  model: string | undefined
}

/** A watch on one attempt (its span): a header its upstream call carries, and its end. */
export interface AttemptWatch {
  /** A header to send with the attempt's call (the attempt span's `traceparent`). */
  header?: [name: string, value: string]
  /** The attempt ended: its outcome (`ok` or a failover reason, `not-sent`) and the upstream's status when one came. */
  end(outcome: string, status: number | undefined): void
}

/** What the key's chain (stages/chain.ts) has to say about a routed call; undefined on a plain key. */
export interface CallHooks {
  /** The plan to run instead of planning one (the plan a spend cap priced). */
  plan(): RoutePlan | undefined
  /** The steps as they may run. */
  steps(snapshot: Snapshot, steps: readonly PlanStep[]): PlanStep[]
  /** One attempt's call, rewritten. */
  upstreamCall(snapshot: Snapshot, step: PlannedAttempt, call: UpstreamCall): UpstreamCall
  /** A watch on one attempt, or undefined. */
  attempt(step: PlannedAttempt): AttemptWatch | undefined
}

export interface RoutedCallInput {
  operation: Operation
  /** What to send to one planned attempt (its model spelling is `step.model`). */
  requestFor(step: PlannedAttempt): UpstreamCall
  model: string
  stream: boolean
  incomingHeaders: Headers
  clientSignal: AbortSignal | undefined
  /** A pinned Responses chain: only this provider key, no remaps. */
  pinnedProviderKeyId?: string
  /** The steps to run as they are, instead of a plan (a call pinned to one provider key: retrieval). */
  steps?: readonly PlanStep[]
  /**
   * The kind of reply whose bytes go to the client as they are (no stage changes it): a buffered 2xx
   * of that kind is checked by scanning it, not parsed. Another kind (a translation) is parsed.
   */
  relayKind?: ReplyKind
  /** Every non-2xx answer is relayed as it came, never failed over (a call pinned to one provider key). */
  relaysErrors?: boolean
  /** A pre-routing hook's pick: this provider key's attempt goes first, the rest of the rule fails over as usual. */
  preference?: RoutePreference
  /** A further check of a parsed buffered answer; a problem fails the attempt over (an unusable reply). */
  accept?: (value: unknown) => string | undefined
  /** The key's chain, where it has anything to say about the call. */
  hooks?: CallHooks
}

/** The reply a call's path is answered with. */
function replyKindOf(path: string): ReplyKind {
  if (path === '/chat/completions') return 'chat'
  if (path === '/embeddings') return 'embeddings'
  if (path === '/decisions') return 'decision'
  return 'response'
}

/**
 * One attempt's call: the body with the attempt's model spelling. With the client's bytes (`raw`),
 * the body goes upstream as sent unless something must change: the bytes are reused as they are.
 */
export function upstreamCall(path: string, step: PlannedAttempt, body: Record<string, unknown>, raw?: Uint8Array<ArrayBuffer>): UpstreamCall {
  const untouched = raw !== undefined && step.model === body.model && !step.provider.gateway.capabilities.omitParams.some((name) => name in body)
  return untouched ? { path, body, raw } : { path, body: { ...body, model: step.model } }
}

/**
 * The routed call's side of the attempt loop: sends each planned step upstream and books attempts,
 * failovers and the path on the request. A class, so a request allocates one object for it rather
 * than an options object and a closure per hook.
 */
class RoutedCall implements AttemptCall {
  readonly stream: boolean
  readonly deadlineAt: number
  readonly clientSignal: AbortSignal | undefined
  readonly streamIdleMs: number
  readonly relaysErrors: boolean
  relaysReply = false
  replyKind: ReplyKind = 'chat'
  accept: ((value: unknown) => string | undefined) | undefined = undefined
  private readonly forwarded: readonly [string, string][]
  /** The watch on the attempt in flight (attempts run one after another). */
  private watch: AttemptWatch | undefined = undefined

  constructor(
    private readonly context: AuthenticatedContext,
    private readonly deps: InferenceDeps,
    private readonly input: RoutedCallInput,
  ) {
    this.stream = input.stream
    this.deadlineAt = context.startedAt + deps.config.deadlineMs
    this.clientSignal = input.clientSignal
    this.streamIdleMs = deps.config.streamIdleMs
    this.relaysErrors = input.relaysErrors === true
    if (input.accept) this.accept = input.accept
    this.forwarded = forwardedHeaders(input.incomingHeaders)
  }

  send(step: PlannedAttempt, signal: AbortSignal): Promise<Response> {
    const hooks = this.input.hooks
    let call = this.input.requestFor(step)
    if (hooks) call = hooks.upstreamCall(this.context.snapshot, step, call)
    const provider = step.provider
    // The responses-only gateway kind is asked in Responses: its reply is translated by the answer path.
    if (call.path === '/chat/completions' && provider.gateway.capabilities.responses === 'only') call = { path: '/responses', body: chatToResponses(call.body!) }
    this.replyKind = replyKindOf(call.path)
    this.relaysReply = this.input.relayKind === this.replyKind
    const stream = this.stream
    let forwarded = this.forwarded
    // A watched attempt (traces: a CLIENT span per attempt, whose traceparent goes upstream with it).
    if (hooks) {
      this.watch = hooks.attempt(step)
      if (this.watch?.header) forwarded = [...forwarded, this.watch.header]
    }
    // The client's bytes when they go unchanged, else the body encoded without the gateway's omitted parameters.
    if (call.raw) return this.deps.upstream.send(provider, { path: call.path, bytes: call.raw, stream, forwarded, signal })
    return this.deps.upstream.send(provider, { method: call.method, path: call.path, body: call.body, stream, forwarded, signal })
  }

  onAttempt(gateway: string, outcome: string, upstreamMs: number, status?: number) {
    if (this.watch) {
      this.watch.end(outcome, status)
      this.watch = undefined
    }
    this.context.upstreamWaitMs += upstreamMs
    this.deps.metrics.countAttempt(gateway, outcome)
    this.deps.metrics.observeUpstreamLatency(gateway, upstreamMs)
  }

  onSettled(result: RunResult) {
    // An attempt whose request could not be built (the client's input) sent nothing: its watch ends here.
    if (this.watch) {
      this.watch.end('not-sent', undefined)
      this.watch = undefined
    }
    const context = this.context
    // A tool loop makes several routed calls for one answer: the log counts every attempt, in order.
    context.attempts += result.attempts
    context.path = context.path ? [...context.path, ...result.path] : result.path
    for (const failure of result.failures) this.deps.metrics.countFailover(failure.gateway, failure.reason)
    context.mark('upstream')
  }
}

/**
 * A plan with a pre-routing pick first. Without a model override, the pick's own attempt moves to the
 * front (unchanged when the pick has none: not listed, say). With one, an attempt of the picked
 * provider key with the override's spelling goes in front of the plan as it was, so the inbound model
 * stays the fallback, on the pick as on the rest of the rule.
 */
function preferred(plan: RoutePlan, preference: RoutePreference, snapshot: Snapshot): RoutePlan {
  const own = plan.steps.find((step): step is PlannedAttempt => step.kind === 'attempt' && step.provider.id === preference.providerKeyId)
  if (preference.model === undefined) return own ? { ...plan, steps: [own, ...plan.steps.filter((step) => step !== own)] } : plan
  const timing = own ?? plan.steps.find((step): step is PlannedAttempt => step.kind === 'attempt')
  const provider = snapshot.providers.get(preference.providerKeyId)
  if (!timing || !provider) return plan
  const catalog = snapshot.catalogs.get(provider.gateway.id)
  const spelled = (catalog && spellingFor(catalog, preference.model)) ?? preference.model
  const overridden: PlannedAttempt = { ...timing, kind: 'attempt', provider, gateway: provider.gateway.id, model: spelled, remap: false }
  return { ...plan, steps: [overridden, ...plan.steps] }
}

/** Plans and runs the attempts of one routed call (every endpoint of the answer path). */
export function runRoutedCall(context: AuthenticatedContext, deps: InferenceDeps, input: RoutedCallInput): Promise<RunResult> {
  const snapshot = (context.snapshot ??= deps.snapshots.current())
  const key = context.key
  const hooks = input.hooks
  let steps = input.steps
  if (!steps) {
    // The chain may hold the plan to run (the one a spend cap priced: one remap roll, CONTRACT §11).
    const given = hooks?.plan()
    const plan = input.preference ? preferred(given ?? planFor(snapshot, key, input, deps.random), input.preference, snapshot) : (given ?? cachedPlan(snapshot, key, input, deps.random))
    steps = hooks ? hooks.steps(snapshot, plan.steps) : plan.steps
  }
  context.mark('plan')
  return runAttempts(steps, new RoutedCall(context, deps, input))
}
