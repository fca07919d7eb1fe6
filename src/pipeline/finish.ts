/** Ending a request: the log row, the metrics and the response (errors in the key's envelope). */
import { RouterError } from '../errors/router-error'
import type { RequestContext } from './context'
import { errorResponse } from '../errors/render'
import { renderError, setRoutingHeaders } from './respond'
import type { RunResult } from './run-attempts'
import type { InferenceDeps } from './types'

/** Finishes a request that ends before or without a routed call: log row, metrics, response. */
export function finishWith(context: RequestContext, deps: InferenceDeps, response: Response, errorCode?: string): Response {
  context.readyAt ??= performance.now()
  logRequest(context, deps, response.status, errorCode)
  return response
}

export function logRequest(context: RequestContext, deps: InferenceDeps, status: number, errorCode: string | undefined) {
  deps.metrics.countRequest(context.endpoint, status)
  const overhead = context.overheadMs()
  if (overhead !== undefined) deps.metrics.observeAddedLatency(overhead)
  // Token counts exist only when a gateway answered with usage; labelled with the model as sent to
  // that gateway (its spelling, or the remap's model), which is what it billed.
  if (context.gateway !== undefined && (context.inputTokens !== undefined || context.outputTokens !== undefined)) {
    deps.metrics.countTokens(context.gateway, context.upstreamModel ?? context.model ?? '', context.inputTokens ?? 0, context.outputTokens ?? 0)
  }
  if (!context.key) return
  context.finish(status, errorCode)
  deps.logQueue.push(context)
}

/** The last-resort answer when answering an error itself failed: a 500 in the chat envelope, logged. */
export function internalError(deps: Pick<InferenceDeps, 'logger'>, error: unknown, event = 'proxy_request_failed'): Response {
  deps.logger.error(event, { error: error instanceof Error ? error.message : String(error) })
  return errorResponse('chat', new RouterError('internal'), { 'x-router-request-id': crypto.randomUUID(), 'x-router-attempts': '0' })
}

export function failWith(context: RequestContext, deps: InferenceDeps, error: unknown): Response {
  const routerError =
    error instanceof RouterError
      ? error
      : (deps.logger.error('inference_failed', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) }),
        new RouterError('internal'))
  return finishWith(context, deps, renderError(context, routerError), routerError.code === 'all_targets_failed_402' ? 'all_targets_failed' : routerError.code)
}

/** A run that ended without an answer: a client hang-up (logged 499, nothing sent) or the final error. */
export function finishFailedRun(context: RequestContext, deps: InferenceDeps, result: Extract<RunResult, { kind: 'failed' }>): Response {
  if (result.clientClosed) {
    context.readyAt = performance.now()
    logRequest(context, deps, 499, 'client_closed')
    return new Response(null, { status: 499 })
  }
  // A failure's headers are already the scrubbed, relayable copy (run-attempts).
  setRoutingHeaders(context, undefined, result.failures, result.failures.at(-1)?.headers, undefined)
  return failWith(context, deps, result.error)
}

/** Records the serving attempt on the context and sets the routing headers. */
export function recordServingAttempt(context: RequestContext, result: Exclude<RunResult, { kind: 'failed' }>) {
  context.gateway = result.step.gateway
  context.providerKeyId = result.step.provider.id
  context.upstreamModel = result.step.model
  // The first round's: a tool loop's later rounds serve the same answer.
  context.ttfbMs ??= result.headersAt - result.startedAt
  setRoutingHeaders(context, result.step.gateway, result.failures, result.kind === 'relay' ? result.headers : result.response.headers, result.step.provider.secret)
}

/** Counts a stream in flight; the returned function logs its end once (status and error code). */
export function trackStream(context: RequestContext, deps: InferenceDeps): (status: number, code: string | undefined) => void {
  context.readyAt = performance.now()
  context.waitAtReady = context.upstreamWaitMs
  deps.metrics.inFlightStreams++
  let logged = false
  return (status, code) => {
    if (logged) return
    logged = true
    deps.metrics.inFlightStreams--
    logRequest(context, deps, status, code)
  }
}
