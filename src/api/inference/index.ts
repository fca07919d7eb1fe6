/** The inference proxy at /v1 (and the 404s of /v1beta): every request goes to the pipeline. */
import { RouterError } from '../../errors/router-error'
import { errorResponse, type Envelope } from '../../errors/render'
import { handleInference, internalError, type InferenceDeps } from '../../pipeline'
import { resolveInferenceRoute } from './routes'

function notServed(pathname: string, envelope: Envelope): Response {
  const requestId = crypto.randomUUID()
  const headers: Record<string, string> = { 'x-router-request-id': requestId, 'x-router-attempts': '0' }
  if (envelope === 'messages') headers['request-id'] = requestId
  return errorResponse(envelope, new RouterError('not_found', `The path ${pathname} is not served.`), headers)
}

/**
 * The pipeline answers its own errors (handleInference never rejects); this is the last guard for a
 * synchronous throw, so nothing leaves without the router headers and a JSON envelope. Not an async
 * wrapper: that would cost every request a promise and a microtask.
 */
export function handleProxyRequest(request: Request, deps: InferenceDeps, socketAddress: () => string | undefined): Response | Promise<Response> {
  try {
    return routeProxyRequest(request, deps, socketAddress)
  } catch (error) {
    return internalError(deps, error)
  }
}

function routeProxyRequest(request: Request, deps: InferenceDeps, socketAddress: () => string | undefined): Response | Promise<Response> {
  const url = request.url
  const pathStart = url.indexOf('/', url.indexOf('//') + 2)
  const queryStart = url.indexOf('?', pathStart)
  const pathname = url.slice(pathStart, queryStart === -1 ? undefined : queryStart)
  if (pathname.startsWith('/v1beta/') || pathname === '/v1beta') return notServed(pathname, 'content')
  const route = resolveInferenceRoute(request.method, pathname)
  if (!route) return notServed(pathname, pathname.includes(':generateContent') || pathname.includes(':streamGenerateContent') ? 'content' : pathname.startsWith('/v1/messages') ? 'messages' : 'chat')
  return handleInference(request, route, deps, socketAddress)
}
