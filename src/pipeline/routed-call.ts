/**
 * The chat-dialect routed calls: POST /chat/completions (buffered and piped streams) and
 * POST /embeddings. Plan, run the attempts, answer, and log when the answer is complete.
 */
import { RouterError } from '../errors/router-error'
import { forwardedHeaders } from '../gateways/client'
import { chatViaResponses } from '../gateways/responses-only'
import type { RequestContext } from './context'
import { finishFailedRun, finishWith, recordServingAttempt, trackStream } from './finish'
import type { EndpointHandler, InferenceDeps } from './types'
import { isPlanCacheable, planRoute, type Operation, type PlannedAttempt, type RoutePlan } from './plan-route'
import type { KeyEntry, ProviderEntry, Snapshot } from './read-model/snapshot'
import { spellingFor } from '../gateways/model-catalog'
import { applySteering, requireModel, stripRouterFields, validateChatBody } from './prepare-chat'
import { isObject, parseJsonBody, readBodyBytes, readJsonBody } from './read-body'
import { readUsage, readUsageFromBody, relayChatStream } from './respond'
import { runAttempts, type AttemptCall, type RunResult } from './run-attempts'
import type { ReplyKind } from '../dialects/reply-shape'
import type { StreamIdleWatch } from '../dialects/upstream-body'

export interface UpstreamCall {
  /** Upstream path suffix, e.g. `/chat/completions`. */
  suffix: string
  body: Record<string, unknown>
  /** The client's bytes, when they can go upstream unchanged (same model, nothing added or removed). */
  raw?: Uint8Array<ArrayBuffer>
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
  /**
   * The answer's bytes go to the client as they are (the chat dialect): a buffered 2xx is checked by
   * scanning it, not parsed. Otherwise it is parsed, for a translator or an id rewrite.
   */
  relaysReply?: boolean
  /** The decisioner's pick: this provider key's attempt goes first, the rest of the rule fails over as usual. */
  preferProviderKeyId?: string
  /** The model the pick overrode the inbound one with: sent on the picked attempt only (the inbound model is the fallback). */
  preferModel?: string
  /** A further check of a parsed buffered answer; a problem fails the attempt over (an unusable reply). */
  accept?: (value: unknown) => string | undefined
}

/**
 * One attempt's call: the body with the attempt's model spelling. With the client's bytes (`raw`),
 * the body goes upstream as sent unless something must change: the bytes are reused as they are.
 */
export function upstreamCall(suffix: string, step: PlannedAttempt, body: Record<string, unknown>, raw?: Uint8Array<ArrayBuffer>): UpstreamCall {
  const untouched = raw !== undefined && step.model === body.model && !step.provider.gateway.capabilities.omitParams.some((name) => name in body)
  return untouched ? { suffix, body, raw } : { suffix, body: { ...body, model: step.model } }
}

/** The same body for every attempt, with the attempt's model spelling. */
export function sameBody(suffix: string, body: Record<string, unknown>, raw?: Uint8Array<ArrayBuffer>): (step: PlannedAttempt) => UpstreamCall {
  return (step) => upstreamCall(suffix, step, body, raw)
}

const planCacheLifetimeMs = 60_000
const planCacheLimit = 10_000

interface PlanCacheEntry {
  /** undefined: this key's plan for this model is not deterministic (split, or a remap applies). */
  plan: RoutePlan | undefined
  at: number
}

/**
 * planRoute, memoized per snapshot when the plan cannot vary between requests. Entries are keyed by
 * the key entry, then by operation and model; a model whose plan is not deterministic is remembered
 * as such, so the check is not repeated on every request.
 */
function cachedPlan(context: RequestContext, deps: InferenceDeps, input: RoutedCallInput): RoutePlan {
  if (input.pinnedProviderKeyId) return planFor(context, deps, input)
  const snapshot = context.snapshot!
  const key = context.key!
  const cache = snapshot.planCache as Map<KeyEntry, Map<string, PlanCacheEntry>>
  let plans = cache.get(key)
  const entryKey = input.operation === 'chat' ? input.model : `${input.operation}\u0000${input.model}`
  const cached = plans?.get(entryKey)
  const now = Date.now()
  if (cached && now - cached.at < planCacheLifetimeMs) return cached.plan ?? planFor(context, deps, input)
  const cacheable = isPlanCacheable(key.rule, input.model)
  const plan = planFor(context, deps, input)
  if (snapshot.planCacheSize >= planCacheLimit) {
    cache.clear()
    snapshot.planCacheSize = 0
    plans = undefined
  }
  if (!plans) cache.set(key, (plans = new Map()))
  if (!cached) snapshot.planCacheSize++
  plans.set(entryKey, { plan: cacheable ? plan : undefined, at: now })
  return plan
}

function planFor(context: RequestContext, deps: InferenceDeps, input: RoutedCallInput): RoutePlan {
  const snapshot = context.snapshot!
  const key = context.key!
  return planRoute({
    rule: key.rule,
    keyFailoverTtfbMs: key.failoverTtfbMs,
    keyUpstreamTimeoutMs: key.upstreamTimeoutMs,
    model: input.model,
    operation: input.operation,
    providers: snapshot.providers,
    gatewayEnabled: snapshot.gatewayEnabled,
    catalogs: snapshot.catalogs,
    budgets: snapshot.budgets,
    now: Date.now(),
    random: deps.random,
    pinnedProviderKeyId: input.pinnedProviderKeyId,
  })
}

/**
 * One routed call's side of the attempt loop: sends each planned step upstream and books attempts,
 * failovers and the path on the request. A class, so a request allocates one object for it rather
 * than an options object and a closure per hook.
 */
class RoutedCall implements AttemptCall {
  readonly stream: boolean
  readonly deadlineAt: number
  readonly clientSignal: AbortSignal | undefined
  readonly streamIdleMs: number
  readonly relaysReply: boolean
  replyKind: ReplyKind = 'chat'
  accept: ((value: unknown) => string | undefined) | undefined = undefined
  private readonly forwarded: readonly [string, string][]

  constructor(
    private readonly context: RequestContext,
    private readonly deps: InferenceDeps,
    private readonly input: RoutedCallInput,
  ) {
    this.stream = input.stream
    this.deadlineAt = context.startedAt + deps.config.deadlineMs
    this.clientSignal = input.clientSignal
    this.streamIdleMs = deps.config.streamIdleMs
    this.relaysReply = input.relaysReply === true
    if (input.accept) this.accept = input.accept
    this.forwarded = forwardedHeaders(input.incomingHeaders)
  }

  send(step: PlannedAttempt, signal: AbortSignal, watch: StreamIdleWatch | undefined): Promise<Response> {
    const call = this.input.requestFor(step)
    // The responses-only kind answers /chat/completions as chat (below), so the suffix says it all.
    this.replyKind = call.suffix === '/responses' ? 'response' : call.suffix === '/embeddings' ? 'embeddings' : call.suffix === '/decisions' ? 'decision' : 'chat'
    const provider = step.provider
    // The responses-only gateway kind is called on /responses and answers as chat.
    if (call.suffix === '/chat/completions' && provider.gateway.capabilities.responses === 'only') {
      return chatViaResponses((path, body) => this.deps.upstream.send(provider, { path, body, stream: this.stream, forwarded: this.forwarded, signal }), call.body, watch)
    }
    // The client's bytes when they go unchanged, else the body encoded without the gateway's omitted parameters.
    return this.deps.upstream.send(provider, call.raw ? { path: call.suffix, bytes: call.raw, stream: this.stream, forwarded: this.forwarded, signal } : { path: call.suffix, body: call.body, stream: this.stream, forwarded: this.forwarded, signal })
  }

  onAttempt(gateway: string, outcome: string, upstreamMs: number) {
    this.context.upstreamWaitMs += upstreamMs
    this.deps.metrics.countAttempt(gateway, outcome)
    this.deps.metrics.observeUpstreamLatency(gateway, upstreamMs)
  }

  onSettled(result: RunResult) {
    const context = this.context
    // A tool loop makes several routed calls for one answer: the log counts every attempt, in order.
    context.attempts += result.attempts
    context.path = context.path ? [...context.path, ...result.path] : result.path
    for (const failure of result.failures) this.deps.metrics.countFailover(failure.gateway, failure.reason)
    context.mark('upstream')
  }
}

/**
 * A plan with the decisioner's pick first. Without a model override, the pick's own attempt moves
 * to the front (unchanged when the pick has none: not listed, say). With one, an attempt of the
 * picked provider key with the override's spelling goes in front of the plan as it was, so the
 * inbound model stays the fallback, on the pick as on the rest of the rule.
 */
function preferred(plan: RoutePlan, providerKeyId: string, model: string | undefined, snapshot: Snapshot): RoutePlan {
  const own = plan.steps.find((step): step is PlannedAttempt => step.kind === 'attempt' && step.provider.id === providerKeyId)
  if (model === undefined) return own ? { ...plan, steps: [own, ...plan.steps.filter((step) => step !== own)] } : plan
  const timing = own ?? plan.steps.find((step): step is PlannedAttempt => step.kind === 'attempt')
  const provider = snapshot.providers.get(providerKeyId)
  if (!timing || !provider) return plan
  const catalog = snapshot.catalogs.get(provider.gateway.id)
  const spelled = (catalog && spellingFor(catalog, model)) ?? model
  const overridden: PlannedAttempt = { ...timing, kind: 'attempt', provider, gateway: provider.gateway.id, model: spelled, remap: false }
  return { ...plan, steps: [overridden, ...plan.steps] }
}

/** Plans and runs the attempts of one routed call (shared by every dialect that pivots on chat). */
export function runRoutedCall(context: RequestContext, deps: InferenceDeps, input: RoutedCallInput): Promise<RunResult> {
  context.snapshot ??= deps.snapshots.current()
  const plan = input.preferProviderKeyId ? preferred(planFor(context, deps, input), input.preferProviderKeyId, input.preferModel, context.snapshot!) : cachedPlan(context, deps, input)
  context.mark('plan')
  return runAttempts(plan.steps, new RoutedCall(context, deps, input))
}

/** Answers a finished run in the chat dialect: relayed bytes, a piped stream, or an error. */
export function answerChatDialect(context: RequestContext, deps: InferenceDeps, result: RunResult): Response {
  if (result.kind === 'failed') return finishFailedRun(context, deps, result)
  if (result.kind === 'relay') return relayUpstreamError(context, deps, result)
  return passChatThrough(context, deps, result)
}

/** A gateway's error relayed as it came (body and headers are the scrubbed copies run-attempts made). */
export function relayUpstreamError(context: RequestContext, deps: InferenceDeps, result: Extract<RunResult, { kind: 'relay' }>): Response {
  recordServingAttempt(context, result)
  context.headers['content-type'] = result.headers.get('content-type') ?? 'application/json'
  return finishWith(context, deps, new Response(result.body, { status: result.status, headers: context.responseHeaders() }), `upstream_${result.status}`)
}

/**
 * A chat-dialect success passed through: the checked bytes of a buffered answer, or the piped
 * stream. `extras` (fields enrichment stages attach) go beside a buffered answer: its parsed object
 * is written again with them.
 */
export function passChatThrough(context: RequestContext, deps: InferenceDeps, result: Extract<RunResult, { kind: 'success' }>, extras?: Record<string, unknown>): Response {
  recordServingAttempt(context, result)
  const upstream = result.response
  // Success answers carry our own content type: the body was checked to be JSON or an event stream.
  if (extras && !result.stream && result.value !== undefined) {
    readUsage((result.value as { usage?: unknown }).usage, context)
    context.headers['content-type'] = 'application/json'
    return finishWith(context, deps, new Response(JSON.stringify({ ...(result.value as object), ...extras }), { status: upstream.status, headers: context.responseHeaders() }))
  }
  if (!result.stream) {
    const body = result.body ?? new ArrayBuffer(0)
    if (result.value === undefined) readUsageFromBody(body, context)
    else readUsage((result.value as { usage?: unknown }).usage, context)
    context.headers['content-type'] = 'application/json'
    return finishWith(context, deps, new Response(body, { status: upstream.status, headers: context.responseHeaders() }))
  }
  const started = result.stream
  const ended = trackStream(context, deps)
  const piped = relayChatStream(started, result.controller, (end) => {
    // Usage for what was served, from the same records the relay checked.
    readUsage(started.records.usage, context)
    if (end.clientClosed) ended(499, 'client_closed')
    else ended(upstream.status, end.complete ? undefined : 'stream_aborted')
  })
  context.headers['content-type'] = 'text/event-stream; charset=utf-8'
  context.headers['cache-control'] = 'no-cache'
  return new Response(piped, { status: upstream.status, headers: context.responseHeaders() })
}

export const handleEmbeddings: EndpointHandler = async (context, request, _route, deps) => {
  const { bytes, text, value } = await readJsonBody(request)
  if (!isObject(value)) throw new RouterError('invalid_request', 'The request body must be a JSON object.')
  const model = requireModel(value.model)
  if (value.input === undefined || value.input === null) throw new RouterError('invalid_request', 'The request body needs `input`.')
  context.requestBody = text
  context.model = model
  context.mark('body')
  const result = await runRoutedCall(context, deps, {
    operation: 'embeddings',
    requestFor: sameBody('/embeddings', value, bytes),
    model,
    stream: false,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
    relaysReply: true,
  })
  return answerChatDialect(context, deps, result)
}
