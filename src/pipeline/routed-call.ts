/**
 * The chat-dialect routed calls: POST /chat/completions (buffered and piped streams) and
 * POST /embeddings. Plan, run the attempts, answer, and log when the answer is complete.
 */
import { RouterError } from '../errors/router-error'
import { forwardedHeaders, omitParameters, upstreamHeaders, upstreamUrl } from '../gateways/upstream'
import { chatViaResponses } from '../gateways/responses-only'
import type { RequestContext } from './context'
import { finishFailedRun, finishWith, recordServingAttempt, trackStream } from './finish'
import type { EndpointHandler, InferenceDeps } from './types'
import { isPlanCacheable, planRoute, type Operation, type PlanInput, type PlannedAttempt, type RoutePlan } from './plan-route'
import type { KeyEntry, Snapshot } from '../storage/snapshot'
import { applySteering, requireModel, stripRouterFields, validateChatBody } from './prepare-chat'
import { isObject, readJsonBody } from './read-body'
import { readUsage, relayChatStream, usageText } from './respond'
import { runAttempts, type RunResult } from './run-attempts'

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
}

/** The same chat body for every attempt, with the attempt's model spelling. */
export function sameBody(suffix: string, body: Record<string, unknown>, raw?: Uint8Array<ArrayBuffer>): (step: PlannedAttempt) => UpstreamCall {
  return (step) => {
    // The body goes upstream as sent unless something must change: the bytes are reused as they are.
    const untouched = raw !== undefined && step.model === body.model && !step.provider.gateway.capabilities.omitParams.some((name) => name in body)
    return untouched ? { suffix, body, raw } : { suffix, body: { ...body, model: step.model } }
  }
}

const planCacheLifetimeMs = 60_000
const planCacheLimit = 10_000

/** planRoute, memoized per snapshot when the plan cannot vary between requests. */
function cachedPlan(snapshot: Snapshot, key: KeyEntry, input: RoutedCallInput, makeInput: () => PlanInput): RoutePlan {
  if (input.pinnedProviderKeyId || !isPlanCacheable(key.rule, input.model)) return planRoute(makeInput())
  const cacheKey = `${key.id}\u0000${input.operation}\u0000${input.model}`
  const cached = snapshot.planCache.get(cacheKey)
  const now = Date.now()
  if (cached && now - cached.at < planCacheLifetimeMs) return cached.plan as RoutePlan
  const plan = planRoute(makeInput())
  if (snapshot.planCache.size >= planCacheLimit) snapshot.planCache.clear()
  snapshot.planCache.set(cacheKey, { plan, at: now })
  return plan
}

/** Plans and runs the attempts of one routed call (shared by every dialect that pivots on chat). */
export async function runRoutedCall(context: RequestContext, deps: InferenceDeps, input: RoutedCallInput): Promise<RunResult> {
  const snapshot = context.snapshot ?? deps.snapshots.current()
  const key = context.key!
  const makeInput = (): PlanInput => ({
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
  const plan = cachedPlan(snapshot, key, input, makeInput)
  context.mark('plan')
  const forwarded = forwardedHeaders(input.incomingHeaders)
  const accept = input.stream ? 'text/event-stream' : 'application/json'
  const deadlineAt = context.startedAt + deps.config.deadlineMs
  const result = await runAttempts(
    plan.steps,
    {
      stream: input.stream,
      send(step: PlannedAttempt, signal: AbortSignal) {
        const call = input.requestFor(step)
        const post = (suffix: string, body: Record<string, unknown>, raw?: Uint8Array<ArrayBuffer>) =>
          deps.fetch(upstreamUrl(step.provider, suffix), {
            method: 'POST',
            headers: forwarded.length ? upstreamHeaders(step.provider, forwarded, true, accept) : step.provider.postHeaders[input.stream ? 'stream' : 'json'],
            body: raw ?? JSON.stringify(omitParameters(body, step.provider)),
            signal,
          })
        // The responses-only gateway kind is called on /responses and answers as chat.
        if (call.suffix === '/chat/completions' && step.provider.gateway.capabilities.responses === 'only') return chatViaResponses(post, call.body)
        return post(call.suffix, call.body, call.raw)
      },
    },
    {
      deadlineAt,
      clientSignal: input.clientSignal,
      now: () => performance.now(),
      onAttempt(gateway, outcome, upstreamMs) {
        context.upstreamWaitMs += upstreamMs
        deps.metrics.countAttempt(gateway, outcome)
        deps.metrics.observeUpstreamLatency(gateway, upstreamMs)
      },
    },
  )
  context.attempts = result.attempts
  context.path = result.path
  for (const failure of result.failures) deps.metrics.countFailover(failure.gateway, failure.reason)
  context.mark('upstream')
  return result
}

/** Answers a finished run in the chat dialect: relayed bytes, a piped stream, or an error. */
export function answerChatDialect(context: RequestContext, deps: InferenceDeps, result: RunResult): Response {
  if (result.kind === 'failed') return finishFailedRun(context, deps, result)
  recordServingAttempt(context, result)
  if (result.kind === 'relay') {
    context.headers.set('content-type', result.headers.get('content-type') ?? 'application/json')
    return finishWith(context, deps, new Response(result.body, { status: result.status, headers: context.headers }), `upstream_${result.status}`)
  }
  const upstream = result.response
  context.headers.set('content-type', upstream.headers.get('content-type') ?? (context.stream ? 'text/event-stream' : 'application/json'))
  if (!context.stream || !upstream.body) {
    const body = result.body ?? new ArrayBuffer(0)
    readUsage(usageText(body), context)
    return finishWith(context, deps, new Response(body, { status: upstream.status, headers: context.headers }))
  }
  const ended = trackStream(context, deps)
  const piped = relayChatStream(upstream.body, result.controller, (end) => {
    readUsage(end.tail, context)
    if (end.clientClosed) ended(499, 'client_closed')
    else ended(upstream.status, end.complete ? undefined : 'stream_aborted')
  })
  context.headers.set('cache-control', 'no-cache')
  return new Response(piped, { status: upstream.status, headers: context.headers })
}

export const handleChatCompletions: EndpointHandler = async (context, request, _route, deps) => {
  const { bytes, text, value } = await readJsonBody(request)
  const body = validateChatBody(value)
  context.requestBody = text
  context.model = body.model
  context.stream = body.stream === true
  const key = context.key!
  const steering = key.steeringMessage ?? context.workspace?.steeringMessage
  const prepared = applySteering(stripRouterFields(body), steering)
  context.mark('body')
  const result = await runRoutedCall(context, deps, {
    operation: 'chat',
    requestFor: sameBody('/chat/completions', prepared, prepared === body ? bytes : undefined),
    model: body.model,
    stream: context.stream,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
  })
  return answerChatDialect(context, deps, result)
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
  })
  return answerChatDialect(context, deps, result)
}
