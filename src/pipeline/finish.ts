/** Ending a request: the log row, the metrics and the response (errors in the key's envelope). */
import { RouterError } from '../errors/router-error'
import type { RequestContext } from './context'
import { renderError } from './respond'
import type { InferenceDeps } from './types'

/** Finishes a request that ends before or without a routed call: log row, metrics, response. */
export function finishWith(context: RequestContext, deps: InferenceDeps, response: Response, errorCode?: string): Response {
  context.readyAt ??= performance.now()
  if (!context.headers.has('x-router-attempts')) response.headers.set('x-router-attempts', String(context.attempts))
  logRequest(context, deps, response.status, errorCode)
  return response
}

export function logRequest(context: RequestContext, deps: InferenceDeps, status: number, errorCode: string | undefined) {
  deps.metrics.countRequest(context.endpoint, status)
  const overhead = context.overheadMs()
  if (overhead !== undefined) deps.metrics.observeAddedLatency(overhead)
  if (!context.key) return
  deps.logQueue.push(context.logRow(status, errorCode, context.workspace?.captureBodies ?? false))
}

export function failWith(context: RequestContext, deps: InferenceDeps, error: unknown): Response {
  const routerError =
    error instanceof RouterError
      ? error
      : (deps.logger.error('inference_failed', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) }),
        new RouterError('internal'))
  return finishWith(context, deps, renderError(context, routerError), routerError.code === 'all_targets_failed_402' ? 'all_targets_failed' : routerError.code)
}

