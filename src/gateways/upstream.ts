/**
 * Building the upstream call for one attempt (CONTRACT §6): URL under the provider's base, the
 * stored secret in the gateway's auth header, the forwarding allowlist, per-gateway omitted params.
 */
import type { ProviderEntry } from '../storage/snapshot'
import type { GatewayDefinition } from './catalog'
import { scrubSecret } from './scrub-secret'

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
export function upstreamHeaders(
  access: { gateway: GatewayDefinition; secret: string },
  forwarded: readonly [string, string][],
  hasBody: boolean,
  accept = 'application/json',
): Headers {
  const headers = new Headers(forwarded as [string, string][])
  if (hasBody) headers.set('content-type', 'application/json')
  headers.set('accept', accept)
  const { authHeader } = access.gateway
  if (authHeader === 'authorization') headers.set('authorization', `Bearer ${access.secret}`)
  else headers.set(authHeader, access.secret)
  return headers
}

export function upstreamUrl(provider: ProviderEntry, suffix: string): string {
  return provider.baseUrl + suffix
}

/**
 * The gateway's rate-limit headers and Retry-After, passed through under their own names, with the
 * provider secret scrubbed from their values (issue 11 item 8: nothing of an upstream leaves with it).
 */
export function copyRateLimitHeaders(from: Headers, to: Record<string, string>, secret: string | undefined) {
  // Bun's Headers#toJSON gives the lower-cased names in one native call (cheaper than iterating).
  const all = from.toJSON() as Record<string, string>
  for (const name in all) {
    if (name.startsWith('x-ratelimit-') || name === 'retry-after') to[name] = scrubSecret(all[name]!, secret)
  }
}

/**
 * The headers of a failed or relayed upstream answer that may reach the client (content type,
 * rate-limit headers, Retry-After), scrubbed of the provider secret: every later use of a failure's
 * headers reads this copy, never the gateway's own.
 */
export function relayableHeaders(from: Headers, secret: string | undefined): Headers {
  const kept = new Headers()
  const all = from.toJSON() as Record<string, string>
  for (const name in all) {
    if (name === 'content-type' || name.startsWith('x-ratelimit-') || name === 'retry-after') kept.set(name, scrubSecret(all[name]!, secret))
  }
  return kept
}

/** Removes parameters this gateway rejects (e.g. the top_p quirk), in place on a copy. */
export function omitParameters(body: Record<string, unknown>, provider: ProviderEntry): Record<string, unknown> {
  const omit = provider.gateway.capabilities.omitParams
  if (omit.length === 0) return body
  const copy = { ...body }
  for (const name of omit) delete copy[name]
  return copy
}
