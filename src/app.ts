/** buildApp(deps): mounts the route groups for RT_ROLE and renders every error in one place. */
import { Elysia, type AnyElysia } from 'elysia'
import type { AppDeps } from './api/deps'
import { adminRoutes, managementBodyLimit } from './api/admin'
import { mcpRoutes } from './api/mcp'
import { healthRoutes } from './api/health'
import { dashboardRoutes } from './api/dashboard'
import { apiDocument, docsRoutes } from './api/docs'
import { handleProxyRequest } from './api/inference'
import { internalError } from './pipeline'
import { ManagementError } from './management/errors'
import { describeViolation } from './management/schemas'
import { internalRoutes } from './api/internal'
import { jsonResponse as json } from './http/json-response'
import { isWellFormedKey, parseTxid, PositionWatch, readTxid, txidHeader } from './cluster/position'
import { authenticate, presentedKey } from './pipeline/request/authenticate'
import { authenticateManagementKey, managementKeyPrefix } from './management/workspaces'
import { RouterError } from './errors/router-error'
import { recordPeer } from './api/peer-address'
import { writesByRoute } from './api/admin/auth'



function notFoundResponse(path: string): Response {
  if (path.startsWith('/v1/') || path === '/v1') {
    return json(404, { error: { message: `No route for ${path}.`, type: 'invalid_request_error', code: 'not_found' } })
  }
  return json(404, { error: 'Not found.' })
}

export function buildApp(deps: AppDeps): AnyElysia {
  const { role } = deps.config
  const servesApp = role === 'all' || role === 'app'
  const servesProxy = role === 'all' || role === 'proxy'

  let app: AnyElysia = new Elysia({ name: 'router', normalize: false })
    .onRequest(({ request }) => {
      // Management bodies are small JSON documents; refuse oversized ones before reading them.
      const length = Number(request.headers.get('content-length') ?? 0)
      const path = new URL(request.url).pathname
      if (length > managementBodyLimit && path.startsWith('/api/')) {
        return json(400, { error: `Request body too large: the limit is ${managementBodyLimit} bytes.` })
      }
    })
    .onError(({ code, error, request }) => {
      if (error instanceof ManagementError) return json(error.status, error.toBody())
      const path = new URL(request.url).pathname
      switch (code) {
        case 'VALIDATION': {
          const first = (error as { valueError?: { path: string; message: string; value?: unknown; schema?: never } }).valueError
          return json(400, { error: first ? describeViolation(first) : 'Request body is invalid.' })
        }
        case 'PARSE': {
          const cause = (error as { cause?: unknown }).cause
          if (cause instanceof ManagementError) return json(cause.status, cause.toBody())
          return json(400, { error: 'Malformed JSON body.' })
        }
        case 'NOT_FOUND':
          return notFoundResponse(path)
        default: {
          // A write that reached a replica past the request check below (the writer seam refused it,
          // or the read-only database did, or LiteFS failed it on a node demoted a moment ago).
          const replay = deps.writer.replayAfterFailedWrite(error)
          if (replay) return replay
          deps.logger.error('unhandled_error', { path, code: String(code), error: error instanceof Error ? error.message : String(error) })
          return json(500, { error: 'Internal error.' })
        }
      }
    })
    .use(healthRoutes(deps))
    .use(internalRoutes(deps))

  if (servesApp) {
    app = app
      .use(apiDocument())
      .use(docsRoutes())
      .use(adminRoutes(deps))
      .use(dashboardRoutes(deps))
  }
  if (servesProxy) app = app.use(mcpRoutes(deps))
  return app
}

/**
 * The Bun.serve fetch handler. Inference paths (/v1, /v1beta) go straight to the pipeline: the
 * framework's per-request lifecycle cost more than the whole routing decision (see the benchmark).
 * Everything else (management API, MCP, health, metrics) goes through Elysia.
 */
export function createFetchHandler(app: AnyElysia, deps: AppDeps) {
  const servesProxy = deps.config.role === 'all' || deps.config.role === 'proxy'
  const litefs = deps.config.litefsDir !== undefined
  const positions = litefs ? new PositionWatch(deps.config.dbPath) : undefined
  const serve = (request: Request, server: { requestIP(request: Request): { address: string } | null }): Response | Promise<Response> => {
    if (servesProxy && isInferencePath(request.url)) {
      return handleProxyRequest(request, deps, () => server.requestIP(request)?.address)
    }
    recordPeer(request, () => server.requestIP(request)?.address)
    return app.handle(request)
  }
  return (request: Request, server: { requestIP(request: Request): { address: string } | null }) => {
    // Without LiteFS the node is alone: nothing of what follows applies.
    if (!litefs) return serve(request, server)
    // On a LiteFS replica, write requests go to the primary at once (CONTRACT §10; MCP write tools
    // are told apart in the MCP handler, which reads the body).
    if (deps.writer.replica) {
      if (isReplicaWrite(request)) return deps.writer.replay()!
      return onReplica(request, () => serve(request, server))
    }
    // On the primary, a write's answer says the position it reached, for the writer's next read elsewhere.
    return isReplicaWrite(request) ? withTxid(serve(request, server)) : serve(request, server)
  }

  /**
   * Read-your-writes on a replica: a request showing a position this copy has not reached waits for
   * it (at most 5 s, then it goes to the primary), and a key this copy does not know (it may be
   * that new) is asked of the primary rather than refused. The caller is known first: only a key this
   * copy knows may wait (a well-formed one it does not know goes to the primary at once, anything
   * else is answered here), one timer watches the position for every waiter, and beyond
   * `maxTxidWaiters` a request goes to the primary at once (cluster/position.ts).
   */
  async function onReplica(request: Request, answer: () => Response | Promise<Response>): Promise<Response> {
    const token = presentedToken(request)
    const wanted = parseTxid(request.headers.get(txidHeader))
    if (wanted !== undefined) {
      const caller = knownCaller(request, token)
      if (caller === 'unknown') return deps.writer.replay() ?? answer()
      if (caller === 'known') {
        const waiting = positions!.reach(wanted)
        const reached = waiting === true || (waiting !== 'full' && (await waiting))
        if (!reached) return deps.writer.replay() ?? answer()
      }
    }
    const response = await answer()
    // Only a key in the form the service issues may be one the primary has and this copy not yet.
    if (response.status !== 401 || !isWellFormedKey(token)) return response
    const replay = deps.writer.replay()
    if (!replay) return response
    // The refusal's own body is not read: its stream is let go.
    await response.body?.cancel().catch(() => undefined)
    return replay
  }

  /**
   * Who presents the request, as far as waiting goes: `known` (a key this copy holds), `unknown` (a
   * well-formed key it does not hold: the primary may), `none` (no key, or no key of ours: it is
   * answered here, 401 where a key is needed).
   */
  function knownCaller(request: Request, token: string | undefined): 'known' | 'unknown' | 'none' {
    if (!isWellFormedKey(token)) return 'none'
    if (token!.startsWith(managementKeyPrefix)) return authenticateManagementKey(deps, token) ? 'known' : 'unknown'
    try {
      authenticate(deps.snapshots.current(), token, () => undefined, Date.now())
      return 'known'
    } catch (error) {
      // Revoked, suspended, not allowed from here: this copy knows the key, whose answer it gives.
      return error instanceof RouterError && error.code === 'invalid_api_key' ? 'unknown' : 'known'
    }
  }

  async function withTxid(pending: Response | Promise<Response>): Promise<Response> {
    const response = await pending
    const txid = response.status < 400 ? readTxid(deps.config.dbPath) : undefined
    if (txid === undefined) return response
    const headers = new Headers(response.headers)
    headers.set(txidHeader, txid)
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
  }
}

/**
 * Requests that write: every management call but a read (the dashboard's own too), and the whole Batch API (a batch is the
 * primary's: even reading one may record the gateway's progress, and its webhooks go from there).
 */
export function isReplicaWrite(request: Request): boolean {
  const url = request.url
  const pathStart = url.indexOf('/', url.indexOf('//') + 2)
  const queryStart = url.indexOf('?', pathStart)
  const path = url.slice(pathStart, queryStart === -1 ? undefined : queryStart)
  if (path.startsWith('/api/v1/') || path.startsWith('/dashboard/api/')) return writesByRoute(request.method, path)
  return path === '/v1/batches' || path.startsWith('/v1/batches/')
}

/**
 * Bun.serve's last guard: a handler that threw or rejected outside every route's own error handling
 * still answers a 500 in the chat envelope with a request id, and is logged.
 */
export function createErrorHandler(deps: AppDeps) {
  return (error: Error) => internalError(deps, error, 'unhandled_error')
}

/** The key a request presents: an inference key's headers (or `?key=` where the content shape takes it), or a management Bearer token. */
function presentedToken(request: Request): string | undefined {
  const url = request.url
  const queryKey = url.includes('key=') ? new URL(url).searchParams.get('key') : null
  return presentedKey(request.headers, queryKey)
}

/** `/v1…` or `/v1beta…` after the origin, without parsing the whole URL. */
function isInferencePath(url: string): boolean {
  const pathStart = url.indexOf('/', url.indexOf('//') + 2)
  return pathStart !== -1 && url.startsWith('/v1', pathStart) && (url.length === pathStart + 3 || url[pathStart + 3] === '/' || url[pathStart + 3] === '?' || url.startsWith('/v1beta', pathStart))
}
