/**
 * The one upstream client (CONTRACT §6): every call the service makes to a gateway goes out here —
 * routed attempts, model listings, the decisioner's decision call, Responses retrieval and every
 * Batch API call. It owns the URL (the provider's base URL + the call's path), the stored secret in
 * the gateway's auth header, the forwarding allowlist, the parameters a gateway rejects, time limits
 * and abort; it never follows a redirect (the secret goes to the configured gateway only), and keeps
 * the provider secret out of whatever of an answer may be relayed or logged, while what the router
 * keeps of an answer (a batch id, a state) is read from the answer as it came.
 */
import type { ProviderEntry } from '../domain/read-model'
import { scrubSecret } from './scrub-secret'

/** One call to a provider's gateway. */
export interface GatewayCall {
  /** POST when there is a body, else GET. */
  method?: 'GET' | 'POST' | 'DELETE'
  /** The path under the provider's base URL, e.g. `/chat/completions` (already percent-encoded). */
  path: string
  /** A JSON body, encoded here without the parameters this gateway rejects. */
  body?: Record<string, unknown>
  /** The body as bytes that go as they are (the client's, unchanged), or an upload stream. */
  bytes?: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array>
  /** The answer is an event stream (`accept: text/event-stream`). */
  stream?: boolean
  /** The client's headers on the forwarding allowlist (`forwardedHeaders`). */
  forwarded?: readonly [string, string][]
  signal?: AbortSignal
}

/**
 * A call's whole answer, read under a time limit: the body as it came, for what the router keeps and
 * uses, and the scrubbed copy, for whatever of it leaves the service.
 */
export interface GatewayAnswer {
  status: number
  ok: boolean
  /** The body, with the provider secret scrubbed out: the copy that may be relayed or logged. */
  text: string
  /**
   * The body as the gateway sent it, for what the router keeps and reads (a batch id, a state, a
   * count): scrubbing would change an id that happens to hold 8 characters of the secret (a gateway's
   * name in both), and the id would no longer name the gateway's object. Never relayed or logged.
   */
  raw: string
  /** The headers that may reach a client (content type, rate limits, Retry-After), scrubbed. */
  headers: Headers
}

/** What a call needs of a provider key: its gateway kind, secret and base URL (and, for a routed key, prebuilt headers). */
export type GatewayAccess = Pick<ProviderEntry, 'gateway' | 'secret' | 'baseUrl'> & { postHeaders?: ProviderEntry['postHeaders'] }

/** A model listing that could not be read (a non-2xx answer, or no `data` array). */
export class ModelListingFailed extends Error {}

/** The gateway could not be reached, or did not answer within the time limit (`reason` says which). */
export class GatewayUnreachable extends Error {
  constructor(readonly reason: 'unreachable' | 'timeout' | 'client-closed') {
    super(`gateway ${reason}`)
  }
}

/** SPEC "Request headers forwarded upstream": allowlist only, ≤512 chars, no control characters. */
const forwardableHeaders = ['http-referer', 'x-title', 'idempotency-key'] as const
const controlCharacters = /[\u0000-\u001f\u007f]/
const noHeaders: readonly [string, string][] = Object.freeze([])

export function forwardedHeaders(incoming: Headers): readonly [string, string][] {
  let kept: [string, string][] | undefined
  for (const name of forwardableHeaders) {
    const value = incoming.get(name)
    if (value === null || value.length > 512 || controlCharacters.test(value)) continue
    ;(kept ??= []).push([name, value])
  }
  return kept ?? noHeaders
}

/** The stored secret in the gateway's auth header (Bearer unless the gateway wants another header). */
export function authHeaders(provider: Pick<GatewayAccess, 'gateway' | 'secret'>, accept: string, hasBody: boolean): Record<string, string> {
  const { authHeader } = provider.gateway
  const headers: Record<string, string> = hasBody ? { 'content-type': 'application/json', accept } : { accept }
  headers[authHeader] = authHeader === 'authorization' ? `Bearer ${provider.secret}` : provider.secret
  return headers
}

/**
 * The gateway's rate-limit headers and Retry-After, passed through under their own names, with the
 * provider secret scrubbed from their values (nothing of an upstream leaves with it).
 */
export function copyRateLimitHeaders(from: Headers, to: Record<string, string>, secret: string | undefined) {
  // Bun's Headers#toJSON gives the lower-cased names in one native call (cheaper than iterating).
  const all = from.toJSON() as Record<string, string>
  for (const name in all) {
    if (name.startsWith('x-ratelimit-') || name === 'retry-after') to[name] = scrubSecret(all[name]!, secret)
  }
}

/**
 * The headers of an upstream answer that may reach the client (content type, rate-limit headers,
 * Retry-After), scrubbed of the provider secret: every later use of a failure's headers reads this
 * copy, never the gateway's own.
 */
export function relayableHeaders(from: Headers, secret: string | undefined): Headers {
  const kept = new Headers()
  const all = from.toJSON() as Record<string, string>
  for (const name in all) {
    if (name === 'content-type' || name.startsWith('x-ratelimit-') || name === 'retry-after') kept.set(name, scrubSecret(all[name]!, secret))
  }
  return kept
}

/** The body without the parameters this gateway rejects (the top_p quirk): a copy, or the body itself. */
export function omitParameters(body: Record<string, unknown>, provider: Pick<GatewayAccess, 'gateway'>): Record<string, unknown> {
  const omit = provider.gateway.capabilities.omitParams
  if (omit.length === 0) return body
  const copy = { ...body }
  for (const name of omit) delete copy[name]
  return copy
}

/** A gateway's answer read whole: its status, the body as it came and scrubbed of the provider secret, and the relayable headers. */
export async function readAnswer(provider: Pick<GatewayAccess, 'secret'>, response: Response): Promise<GatewayAnswer> {
  const raw = await response.text()
  // Scrubbed when first asked for: a batch's results, read raw and scrubbed where relayed, are not scrubbed twice.
  let scrubbed: string | undefined
  return {
    status: response.status,
    ok: response.ok,
    get text() {
      return (scrubbed ??= scrubSecret(raw, provider.secret))
    },
    raw,
    headers: relayableHeaders(response.headers, provider.secret),
  }
}

export class UpstreamClient {
  constructor(private readonly fetch: typeof globalThis.fetch) {}

  /**
   * Sends a call; the gateway's Response as it came (the caller reads it). A POST without forwarded
   * headers uses the provider's prebuilt headers: a routed request builds none.
   */
  send(provider: GatewayAccess, call: GatewayCall): Promise<Response> {
    const hasBody = call.body !== undefined || call.bytes !== undefined
    const accept = call.stream ? 'text/event-stream' : 'application/json'
    let headers: HeadersInit
    if (call.forwarded && call.forwarded.length > 0) {
      const built = new Headers(call.forwarded as [string, string][])
      const auth = authHeaders(provider, accept, hasBody)
      for (const name in auth) built.set(name, auth[name]!)
      headers = built
    } else headers = hasBody && provider.postHeaders ? provider.postHeaders[call.stream ? 'stream' : 'json'] : authHeaders(provider, accept, hasBody)
    const method = call.method ?? (hasBody ? 'POST' : 'GET')
    const url = provider.baseUrl + call.path
    // Redirects are never followed (`redirect: 'manual'`): fetch would resend the secret to the
    // Location, and it drops only Authorization across origins, never a gateway's own key header
    // (x-portkey-api-key …). A 3xx comes back as the gateway's answer, a failure like any non-2xx
    // (classify-failure.ts). One object literal per shape (no property added after the fact): the
    // hot path is a POST of bytes or JSON.
    if (call.bytes instanceof ReadableStream) return this.fetch(url, { method, headers, body: call.bytes, signal: call.signal, redirect: 'manual', duplex: 'half' } as RequestInit)
    const body = call.bytes ?? (call.body !== undefined ? JSON.stringify(omitParameters(call.body, provider)) : undefined)
    return this.fetch(url, { method, headers, body, signal: call.signal, redirect: 'manual' })
  }

  /**
   * Sends a call and reads its whole answer within `timeoutMs` (and the caller's signal): the status,
   * the body as it came and scrubbed, and the relayable headers. A gateway that cannot be reached or
   * does not answer in time throws GatewayUnreachable.
   */
  async read(provider: GatewayAccess, call: GatewayCall, timeoutMs: number): Promise<GatewayAnswer> {
    const limit = AbortSignal.timeout(Math.max(1, timeoutMs))
    const signal = call.signal ? AbortSignal.any([call.signal, limit]) : limit
    try {
      return await readAnswer(provider, await this.send(provider, { ...call, signal }))
    } catch {
      throw new GatewayUnreachable(call.signal?.aborted ? 'client-closed' : limit.aborted ? 'timeout' : 'unreachable')
    }
  }

  /**
   * GET …/models (CONTRACT §6, or another listing path such as a narrowed one): the listed model
   * objects that have an id. Throws ModelListingFailed for a non-2xx answer or a listing without
   * `data`; a gateway that cannot be reached rejects as fetch does.
   */
  async listModels(provider: GatewayAccess, signal: AbortSignal, path = '/models'): Promise<(Record<string, unknown> & { id: string })[]> {
    const response = await this.send(provider, { path, signal })
    if (!response.ok) {
      await response.body?.cancel().catch(() => {})
      throw new ModelListingFailed(`HTTP ${response.status}`)
    }
    const listing = (await response.json().catch(() => undefined)) as { data?: unknown } | undefined
    if (!Array.isArray(listing?.data)) throw new ModelListingFailed('the listing has no data array')
    return listing.data.filter((item): item is Record<string, unknown> & { id: string } => typeof item === 'object' && item !== null && typeof (item as { id?: unknown }).id === 'string')
  }
}
