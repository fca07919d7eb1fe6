/**
 * The one place an inference answer is finished: its status, headers (the routing headers gathered on
 * the request, X-Router-Attempts as it stands, the content type), its body or stream, the metrics
 * and the request-log row. Every /v1 answer of the pipeline is made by a function of this file,
 * errors included; nothing else builds one.
 */
import { RouterError } from '../../errors/router-error'
import type { RequestContext } from '../request/context'
import { errorBody, errorResponse } from '../../errors/render'
import { setRoutingHeaders } from './respond'
import { stagesOf } from '../stages/chain'
import type { RunResult } from '../routing/run-attempts'
import type { InferenceDeps } from '../types'

const jsonType = 'application/json'

/** A buffered answer: `body` as it is (bytes, or text), with its content type. */
export function finishAnswer(context: RequestContext, deps: InferenceDeps, status: number, body: BodyInit | null, contentType: string, errorCode?: string): Response {
  context.readyAt ??= performance.now()
  context.headers['content-type'] = contentType
  answered(context, deps)
  // The headers are handed over before the log takes the request's state (RequestContext.finish).
  const response = new Response(body, { status, headers: context.responseHeaders() })
  logRequest(context, deps, status, errorCode)
  return response
}

/** A buffered JSON answer. */
export function finishJson(context: RequestContext, deps: InferenceDeps, status: number, value: unknown, errorCode?: string): Response {
  return finishAnswer(context, deps, status, JSON.stringify(value), jsonType, errorCode)
}

/** How a streamed answer ended, for its log row: logged once, whichever end comes first. */
export type StreamEnded = (status: number, code: string | undefined) => void

/**
 * A streamed answer: the response (SSE headers) goes out now; the stream `body` makes is given the
 * function that logs its end (the row is written when the stream ends, with the usage it carried).
 */
export function finishStream(context: RequestContext, deps: InferenceDeps, status: number, body: (ended: StreamEnded) => ReadableStream<Uint8Array>): Response {
  const ended = trackStream(context, deps)
  // From here on the client has an answer: a stream that ends without usage is charged as one (CONTRACT §11).
  context.answerStarted = true
  const stream = body(ended)
  answered(context, deps)
  context.headers['content-type'] = 'text/event-stream; charset=utf-8'
  context.headers['cache-control'] = 'no-cache'
  return new Response(stream, { status, headers: context.responseHeaders() })
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
  const span = context.span
  if (span) {
    context.span = undefined
    deps.tracing!.endRequest(span, {
      endpoint: context.endpoint,
      status,
      errorCode,
      requestId: context.requestId,
      keyId: context.key?.id,
      model: context.model,
      gateway: context.gateway,
      upstreamModel: context.upstreamModel,
      responseModel: context.responseModel,
      inputTokens: context.inputTokens,
      outputTokens: context.outputTokens,
      attempts: context.attempts,
    })
  }
  if (!context.key) return
  context.finish(status, errorCode)
  // The stages' last word (a spend cap settles what the request was charged), before the row is written.
  context.chain?.finished()
  deps.logQueue.push(context)
}

/** What the key's stages put on every answer of the key (a limited key's RateLimit fields), whatever its endpoint and status. */
function answered(context: RequestContext, deps: InferenceDeps) {
  const entries = context.key?.pipeline.onAnswered
  if (entries && entries.length > 0) for (const stage of stagesOf(entries)) stage.answered!(context, deps)
}

/** The last-resort answer when answering an error itself failed: a 500 in the chat envelope, logged (no request state to finish). */
export function internalError(deps: Pick<InferenceDeps, 'logger'>, error: unknown, event = 'proxy_request_failed'): Response {
  deps.logger.error(event, { error: error instanceof Error ? error.message : String(error) })
  return errorResponse('chat', new RouterError('internal'), { 'x-router-request-id': crypto.randomUUID(), 'x-router-attempts': '0' })
}

/** An error in the key's envelope (an error that is not a RouterError is logged and answered 500 internal). */
export function failWith(context: RequestContext, deps: InferenceDeps, error: unknown): Response {
  const routerError =
    error instanceof RouterError
      ? error
      : (deps.logger.error('inference_failed', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) }),
        new RouterError('internal'))
  if (routerError.extraHeaders) for (const name in routerError.extraHeaders) context.headers[name.toLowerCase()] = routerError.extraHeaders[name]!
  return finishJson(context, deps, routerError.status, errorBody(context.envelope, routerError), routerError.code === 'all_targets_failed_402' ? 'all_targets_failed' : routerError.code)
}

/** A run that ended without an answer: a client hang-up (logged 499, nothing sent) or the final error. */
export function finishFailedRun(context: RequestContext, deps: InferenceDeps, result: Extract<RunResult, { kind: 'failed' }>): Response {
  if (result.clientClosed) return finishClientClosed(context, deps)
  // A failure's headers are already the scrubbed, relayable copy (run-attempts).
  setRoutingHeaders(context, undefined, result.failures, result.failures.at(-1)?.headers, undefined)
  return failWith(context, deps, result.error)
}

/** The client hung up before an answer: nothing is sent (the 499 is for the log and the metrics). */
export function finishClientClosed(context: RequestContext, deps: InferenceDeps): Response {
  context.readyAt = performance.now()
  logRequest(context, deps, 499, 'client_closed')
  return new Response(null, { status: 499 })
}

/** Records the serving attempt on the context and sets the routing headers. */
export function recordServingAttempt(context: RequestContext, result: Exclude<RunResult, { kind: 'failed' }>) {
  context.gateway = result.step.gateway
  context.providerKeyId = result.step.provider.id
  // A pinned call that names no model (retrieval) logs none.
  context.upstreamModel = result.step.model || undefined
  // The first round's: a tool loop's later rounds serve the same answer.
  context.ttfbMs ??= result.headersAt - result.startedAt
  setRoutingHeaders(context, result.step.gateway, result.failures, result.kind === 'relay' ? result.headers : result.response.headers, result.step.provider.secret)
}

/** Counts a stream in flight; the returned function logs its end once (status and error code). */
function trackStream(context: RequestContext, deps: InferenceDeps): StreamEnded {
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
