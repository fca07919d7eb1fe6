/** The inference proxy at /v1 (and the 404s of /v1beta): every request goes to the pipeline. */
import { RouterError } from '../../errors/router-error'
import { errorResponse, type Envelope } from '../../errors/render'
import { handleInference, type InferenceDeps } from '../../pipeline'
import { resolveInferenceRoute } from './routes'

function notServed(pathname: string, envelope: Envelope): Response {
  const requestId = crypto.randomUUID()
  const headers: Record<string, string> = { 'x-router-request-id': requestId, 'x-router-attempts': '0' }
  if (envelope === 'messages') headers['request-id'] = requestId
  return errorResponse(envelope, new RouterError('not_found', `The path ${pathname} is not served.`), headers)
}

export async function handleProxyRequest(request: Request, deps: InferenceDeps, socketAddress: () => string | undefined): Promise<Response> {
  try {
    return await routeProxyRequest(request, deps, socketAddress)
  } catch (error) {
    // The pipeline answers its own errors; this is the last guard so nothing leaves without the
    // router headers and a JSON envelope.
    deps.logger.error('proxy_request_failed', { error: error instanceof Error ? error.message : String(error) })
    return errorResponse('chat', new RouterError('internal'), { 'x-router-request-id': crypto.randomUUID(), 'x-router-attempts': '0' })
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
