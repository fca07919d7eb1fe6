/**
 * SPEC "Batch errors": other batch refusals of the gateway are relayed with their own status,
 * message and numeric code (a duplicate custom_id 422, a mismatched body.model 400, no credit 402),
 * in the chat envelope, less the provider secret the gateway may echo.
 */
import { finishJson, setRoutingHeaders, type AuthenticatedContext, type InferenceDeps, type ProviderEntry } from '../pipeline'
import type { GatewayAnswer } from '../gateways/client'

const errorTypeFor = (status: number) =>
  status === 401 || status === 403 ? 'authentication_error' : status === 402 ? 'payment_required' : status === 429 ? 'rate_limit_error' : status >= 500 ? 'api_error' : 'invalid_request_error'

/** The gateway's refusal answered in the chat envelope (`answer` is the upstream client's scrubbed read of it). */
export function relayUpstreamError(context: AuthenticatedContext, deps: InferenceDeps, provider: ProviderEntry, answer: GatewayAnswer): Response {
  const upstream = answer
  setRoutingHeaders(context, provider.gateway.id, [], answer.headers, provider.secret)
  const scrubbed = answer.text
  let parsed: unknown
  try {
    parsed = JSON.parse(scrubbed)
  } catch {
    parsed = undefined
  }
  const error = (parsed as { error?: unknown } | undefined)?.error
  let body: Record<string, unknown>
  if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') {
    const relayed = error as Record<string, unknown>
    body = { error: { ...relayed, type: typeof relayed.type === 'string' ? relayed.type : errorTypeFor(upstream.status), code: relayed.code ?? upstream.status } }
  } else {
    const message = typeof error === 'string' ? error : scrubbed.trim().slice(0, 500) || `The gateway ${provider.gateway.id} answered ${upstream.status}.`
    body = { error: { message, type: errorTypeFor(upstream.status), code: upstream.status } }
  }
  return finishJson(context, deps, upstream.status, body, `upstream_${upstream.status}`)
}
