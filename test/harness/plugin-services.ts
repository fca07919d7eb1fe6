/**
 * A plug-in service for tests (CONTRACT §7): a real HTTP server on 127.0.0.1 that stands in for
 * the companion-ad service (`RT_ADS_URL`) or the keyterm link service (`RT_KEYTERMS_URL`). It
 * records every request (path, headers, parsed JSON body, time received) and answers as the test
 * scripts it: a status, JSON, raw text, a delay, or no answer at all.
 * `await using service = await startPluginService({ path: '/ads', answer: { json: { ads: [] } } })`.
 */
import { droppingUpstream } from './dropping-upstream'
import { recordRequest, type RecordedRequest } from './mock-gateway'

/** A recorded request (`path` is the one the service was called on, e.g. `/ads`) and when it came. */
export interface PluginRequest extends RecordedRequest {
  /** `performance.now()` when the request arrived (same clock as the tests). */
  at: number
}

export interface PluginReply {
  status?: number
  /** Sent JSON-encoded, `content-type: application/json`. */
  json?: unknown
  /** Sent as-is (used when `json` is absent). */
  text?: string
  headers?: Record<string, string>
  /** Wait this long before answering. */
  delayMs?: number
  /** Never answer (until the caller gives up or the service closes). */
  hang?: boolean
}

export type PluginHandler = (request: PluginRequest) => PluginReply | Response | undefined | Promise<PluginReply | Response | undefined>

export interface PluginService extends AsyncDisposable {
  /** The URL to configure, path included (e.g. `http://127.0.0.1:PORT/ads`). */
  url: string
  requests: PluginRequest[]
  /** Replaces the behaviour; a handler returning undefined falls back to the default answer. */
  handle(handler: PluginHandler): void
  close(): Promise<void>
}

export interface PluginServiceOptions {
  /** The path part of `url` (default `/`). */
  path?: string
  /** The answer when no handler is set or the handler returns undefined (default 200 `{}`). */
  answer?: PluginReply
  handler?: PluginHandler
}

function toResponse(reply: PluginReply): Response {
  const headers = new Headers(reply.headers)
  if (reply.json !== undefined) {
    if (!headers.has('content-type')) headers.set('content-type', 'application/json')
    return new Response(JSON.stringify(reply.json), { status: reply.status ?? 200, headers })
  }
  return new Response(reply.text ?? '', { status: reply.status ?? 200, headers })
}

export async function startPluginService(options: PluginServiceOptions = {}): Promise<PluginService> {
  const requests: PluginRequest[] = []
  let handler: PluginHandler | undefined = options.handler
  const fallback: PluginReply = options.answer ?? { json: {} }
  /** Requests still waiting on a hang or a delay: released at close. */
  const waiting = new Set<() => void>()
  const wait = (ms: number | undefined, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        if (timer !== undefined) clearTimeout(timer)
        waiting.delete(done)
        signal.removeEventListener('abort', done)
        resolve()
      }
      const timer = ms === undefined ? undefined : setTimeout(done, ms)
      waiting.add(done)
      signal.addEventListener('abort', done)
    })

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    development: false,
    async fetch(request) {
      const at = performance.now()
      const recorded: PluginRequest = { ...(await recordRequest(request)), at }
      requests.push(recorded)
      const custom = handler ? await handler(recorded) : undefined
      if (custom instanceof Response) return custom
      const reply = custom ?? fallback
      if (reply.hang) {
        await wait(undefined, request.signal)
        return new Response(null, { status: 499 })
      }
      if (reply.delayMs) await wait(reply.delayMs, request.signal)
      return toResponse(reply)
    },
  })
  const path = options.path ?? '/'
  const close = async () => {
    for (const release of [...waiting]) release()
    await server.stop(true)
  }
  return {
    url: `http://127.0.0.1:${server.port}${path.startsWith('/') ? path : `/${path}`}`,
    requests,
    handle(next) {
      handler = next
    },
    close,
    [Symbol.asyncDispose]: close,
  }
}

/**
 * A URL on 127.0.0.1 that cannot be reached: a listener that drops every connection as it opens
 * (harness/dropping-upstream.ts), kept until the test process ends. A port opened and closed for the
 * purpose could be taken meanwhile by another server of the test, which would then answer.
 */
export async function refusedUrl(path = '/'): Promise<string> {
  return `${droppingUpstream().url}${path.startsWith('/') ? path : `/${path}`}`
}
