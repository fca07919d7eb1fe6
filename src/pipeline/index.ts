/**
 * handleInference: the stage calls of one inference request, in order — authenticate, check the
 * shape, read the body, plan the route, run the attempts, respond, log. Nothing else lives here.
 */
import { RouterError } from '../errors/router-error'
import type { Envelope } from '../errors/render'
import { authenticate, presentedKey } from './request/authenticate'
import { RequestContext, type AuthenticatedContext } from './request/context'
import { dialectHandler } from './answer/handler'
import { stagesOf } from './stages/chain'
import { handleGetModel, handleListModels } from './endpoints/list-models'
import { failWith, internalError } from './answer/finish'
import type { EndpointHandler, InferenceDeps, InferenceEndpoint, InferenceRoute } from './types'
import { chatDialect, contentDialect, embeddingsDialect, handleCountTokens, handleStreamGenerateContent, messagesDialect } from './endpoints/dialect-endpoints'
import { responsesDialect, responsesRetrieveDialect } from './endpoints/responses'
import { decisionsDialect } from './endpoints/decisions'

export { internalError } from './answer/finish'
export type { EndpointHandler, InferenceDeps, InferenceEndpoint, InferenceRoute } from './types'

// The pipeline's public entry for the features that answer endpoints of their own (the Batch API):
// what they finish answers with, how steering and routing rules read, and a batch's spend cap.
export type { AuthenticatedContext } from './request/context'
export type { KeyEntry, ProviderEntry, Snapshot } from './read-model/entries'
export type { Operation } from './routing/plan-route'
export { finishClientClosed, finishJson } from './answer/finish'
export { setRoutingHeaders } from './answer/respond'
export { applySteering } from './request/prepare-chat'
export { appendSteering } from './endpoints/responses'
export { orderTargets, rollRemap } from './routing/plan-route'
export { BatchSpend } from './limits/batch-spend'

export function envelopeForShape(shape: string): Envelope {
  return shape === 'messages' ? 'messages' : shape === 'content' ? 'content' : 'chat'
}

const handlers: Partial<Record<InferenceEndpoint, EndpointHandler>> = {
  chat: dialectHandler(chatDialect),
  embeddings: dialectHandler(embeddingsDialect),
  models: handleListModels,
  model: handleGetModel,
  messages: dialectHandler(messagesDialect),
  count_tokens: handleCountTokens,
  generate_content: dialectHandler(contentDialect),
  stream_generate_content: handleStreamGenerateContent,
  responses: dialectHandler(responsesDialect),
  responses_get: dialectHandler(responsesRetrieveDialect),
  decisions: dialectHandler(decisionsDialect),
}

/**
 * A feature's endpoint joins the table (the Batch API's, batch/index.ts, registered by the composition
 * root runtime.ts): this table imports no feature.
 */
export function registerEndpoint(endpoint: InferenceEndpoint, handler: EndpointHandler) {
  handlers[endpoint] = handler
}

export async function handleInference(request: Request, route: InferenceRoute, deps: InferenceDeps, socketAddress: () => string | undefined): Promise<Response> {
  const context = new RequestContext(route.endpoint, route.envelope, request, socketAddress, deps.config.trustProxy)
  // On /messages the request id is also sent as `request-id`, errors included (SPEC "Common response headers").
  if (route.envelope === 'messages') context.headers['request-id'] = context.requestId
  try {
    // Awaited only while a change this request must see is being rebuilt (storage/snapshot.ts).
    let snapshot = deps.snapshots.fresh()
    if (snapshot instanceof Promise) snapshot = await snapshot
    context.snapshot = snapshot
    const queryKey = route.endpoint === 'generate_content' || route.endpoint === 'stream_generate_content' ? new URL(request.url).searchParams.get('key') : null
    const authenticated = authenticate(snapshot, presentedKey(request.headers, queryKey), () => context.clientIp, Date.now())
    context.key = authenticated.key
    context.workspace = authenticated.workspace
    context.envelope = envelopeForShape(authenticated.key.apiShape)
    // What the key's stages do for any of its requests (a limited key's ledger read before its first
    // answer, so every answer can carry its RateLimit fields); most keys have none.
    const onAuthenticated = authenticated.key.pipeline.onAuthenticated
    if (onAuthenticated.length > 0) {
      for (const stage of stagesOf(onAuthenticated)) {
        const waiting = stage.authenticated!(context, deps)
        if (waiting) await waiting
      }
    }
    if (authenticated.graceUntil) context.headers['x-router-key-grace-until'] = authenticated.graceUntil
    if (!route.shapes.includes(authenticated.key.apiShape)) {
      throw new RouterError('wrong_api_shape', `This endpoint is not served for keys of shape '${authenticated.key.apiShape}'.`)
    }
    context.mark('auth')
    // Traced when an OTLP endpoint is set: the request's SERVER span from its start, continuing the
    // caller's trace only now that the caller is known (CONTRACT §13).
    if (deps.tracing) context.span = deps.tracing.startRequest(route.endpoint, request.headers, context.createdAt)
    const handler = handlers[route.endpoint]
    if (!handler) throw new RouterError('not_found', 'This endpoint is not served by this build.')
    // From here on the request is authenticated: its key, workspace and snapshot are set (above).
    return await handler(context as AuthenticatedContext, request, route, deps)
  } catch (error) {
    // A request refused before it was authenticated is traced too, as a trace of its own: its
    // `traceparent` decides nothing (no client without a key can push spans into the export).
    if (deps.tracing && !context.span) context.span = deps.tracing.startRequest(route.endpoint, context.key ? request.headers : undefined, context.createdAt)
    // The error path is guarded too: the fetch handler returns this promise as it is, and only a
    // throw before the try (building the context) would reach Bun.serve's error handler.
    try {
      return failWith(context, deps, error)
    } catch (failure) {
      return internalError(deps, failure)
    }
  }
}
