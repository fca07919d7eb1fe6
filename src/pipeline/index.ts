/**
 * handleInference: the stage calls of one inference request, in order — authenticate, check the
 * shape, read the body, plan the route, run the attempts, respond, log. Nothing else lives here.
 */
import type { Config } from '../config/env'
import { RouterError } from '../errors/router-error'
import type { Envelope } from '../errors/render'
import type { Logger } from '../observability/logger'
import type { Metrics } from '../observability/metrics'
import type { SnapshotStore } from '../storage/snapshot'
import { authenticate, callerAddress, presentedKey } from './authenticate'
import { RequestContext } from './context'
import type { RequestLogQueue } from './log-request'
import { handleChatCompletions, handleEmbeddings } from './routed-call'
import { handleGetModel, handleListModels } from './list-models'
import { renderError } from './respond'

export interface InferenceDeps {
  config: Config
  snapshots: SnapshotStore
  logQueue: RequestLogQueue
  metrics: Metrics
  logger: Logger
  fetch: typeof fetch
  random: () => number
}

export type InferenceEndpoint =
  | 'chat'
  | 'embeddings'
  | 'models'
  | 'model'
  | 'messages'
  | 'count_tokens'
  | 'generate_content'
  | 'stream_generate_content'
  | 'responses'
  | 'responses_get'
  | 'decisions'
  | 'batches'

export interface InferenceRoute {
  endpoint: InferenceEndpoint
  /** Key shapes this endpoint belongs to; any other shape gets 404 wrong_api_shape. */
  shapes: readonly string[]
  /** Envelope before the key is known (by path dialect). */
  envelope: Envelope
  /** Path parameter: a model id or response id. */
  parameter?: string
}

export function envelopeForShape(shape: string): Envelope {
  return shape === 'messages' ? 'messages' : shape === 'content' ? 'content' : 'chat'
}

export type EndpointHandler = (context: RequestContext, request: Request, route: InferenceRoute, deps: InferenceDeps) => Promise<Response>

const handlers: Partial<Record<InferenceEndpoint, EndpointHandler>> = {
  chat: handleChatCompletions,
  embeddings: handleEmbeddings,
  models: handleListModels,
  model: handleGetModel,
}

/** Lets later features (dialects, batches) register their endpoint handlers. */
export function registerEndpoint(endpoint: InferenceEndpoint, handler: EndpointHandler) {
  handlers[endpoint] = handler
}

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

export async function handleInference(request: Request, route: InferenceRoute, deps: InferenceDeps, socketAddress: string | undefined): Promise<Response> {
  const context = new RequestContext(route.endpoint, route.envelope, callerAddress(request.headers, socketAddress, deps.config.trustProxy))
  try {
    const snapshot = deps.snapshots.current()
    const queryKey = route.endpoint === 'generate_content' || route.endpoint === 'stream_generate_content' ? new URL(request.url).searchParams.get('key') : null
    const authenticated = authenticate(snapshot, presentedKey(request.headers, queryKey), context.clientIp, Date.now())
    context.key = authenticated.key
    context.workspace = authenticated.workspace
    context.envelope = envelopeForShape(authenticated.key.apiShape)
    if (authenticated.graceUntil) context.headers.set('x-router-key-grace-until', authenticated.graceUntil)
    if (!route.shapes.includes(authenticated.key.apiShape)) {
      throw new RouterError('wrong_api_shape', `This endpoint is not served for keys of shape '${authenticated.key.apiShape}'.`)
    }
    context.mark('auth')
    const handler = handlers[route.endpoint]
    if (!handler) throw new RouterError('not_found', 'This endpoint is not served by this build.')
    return await handler(context, request, route, deps)
  } catch (error) {
    return failWith(context, deps, error)
  }
}
