/**
 * The pure failure classifier (SPEC "Failover triggers", "Failover reasons", "Errors"): what one
 * attempt's outcome means (retry or relay, and its reason), and what the client gets when every
 * attempt has failed.
 */
import { RouterError } from '../../errors/router-error'

export type AttemptOutcome =
  | { kind: 'status'; status: number; body: string }
  | { kind: 'ttfb-timeout' }
  | { kind: 'timeout' }
  | { kind: 'deadline' }
  | { kind: 'unreachable' }
  | { kind: 'client-closed' }
  | { kind: 'unreadable' }
  /** A 2xx whose body is not the answer the call expects (not JSON, the wrong kind, not an event stream). */
  | { kind: 'unusable'; detail: string }
  /** Planned but not called (not-listed, batch-only, no-embeddings): listed in X-Router-Failover only. */
  | { kind: 'skipped' }

export interface Classified {
  /** true: try the next target; false: answer the client with this outcome now. */
  retryable: boolean
  reason: string
}

/** A 400 that means "unknown model" (several gateways answer 400 instead of 404). */
export function isModelMiss400(body: string): boolean {
  if (!body) return false
  const lower = body.slice(0, 4000).toLowerCase()
  return (
    lower.includes('model_not_found') ||
    /\b(model|models)\b[^.]{0,80}\b(not found|does not exist|not exist|is not available|not supported|unknown|invalid|not a valid)\b/.test(lower) ||
    /\b(unknown|invalid|unsupported|no such)\s+model\b/.test(lower) ||
    lower.includes('not a valid model id')
  )
}

const verdict = (retryable: boolean, reason: string): Classified => Object.freeze({ retryable, reason })

/** The outcomes without a status have one verdict each. */
const verdicts: Record<Exclude<AttemptOutcome['kind'], 'status'>, Classified> = {
  'ttfb-timeout': verdict(true, 'ttfb-timeout'),
  timeout: verdict(true, 'timeout'),
  deadline: verdict(false, 'deadline'),
  unreachable: verdict(true, 'unreachable'),
  'client-closed': verdict(false, 'client-closed'),
  unreadable: verdict(true, 'unknown'),
  // Not a 5xx (so not server-error), and no named error: SPEC's `unknown`, like a body that broke off.
  unusable: verdict(true, 'unknown'),
  skipped: verdict(true, 'skipped'),
}
const serverError = verdict(true, 'server-error')
const rateLimited = verdict(true, 'rate-limited')
const providerAuth = verdict(true, 'provider-auth')
const noModel = verdict(true, 'no-model')

export function classify(outcome: AttemptOutcome): Classified {
  if (outcome.kind !== 'status') return verdicts[outcome.kind]
  const { status } = outcome
  if (status >= 500) return serverError
  if (status === 429) return rateLimited
  if (status === 401) return providerAuth
  if (status === 404) return noModel
  if (status === 400) return isModelMiss400(outcome.body) ? noModel : verdict(false, 'http-400')
  // A redirect (the upstream client never follows one) is the gateway not answering where it is
  // configured, a gateway fault like a 5xx, never the client's malformed request that SPEC relays
  // (and its Location is not relayed, so the client could not follow it either): it fails over.
  // SPEC "Failover reasons" names no 3xx, so its reason is the `http-NNN` of any other status.
  if (status >= 300 && status < 400) return verdict(true, `http-${status}`)
  return verdict(status === 402 || status === 403, `http-${status}`)
}

export interface FailedAttempt {
  gateway: string
  outcome: AttemptOutcome
  reason: string
  /** Upstream headers of a status outcome (for Retry-After and rate-limit pass-through). */
  headers?: Headers
}

/** Relayed upstream message from a JSON error body, when there is one. */
export function upstreamMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown }
    if (typeof parsed.error === 'object' && parsed.error && typeof parsed.error.message === 'string') return parsed.error.message
    if (typeof parsed.error === 'string') return parsed.error
    if (typeof parsed.message === 'string') return parsed.message
  } catch {}
  return undefined
}

/** The answer when every attempt failed (or a deadline/hang-up ended the request). */
export function finalError(failures: readonly FailedAttempt[]): RouterError {
  const last = failures[failures.length - 1]
  if (!last) return new RouterError('all_targets_failed')
  if (last.outcome.kind === 'deadline') return new RouterError('deadline_exceeded')
  const statuses = failures.map((failure) => (failure.outcome.kind === 'status' ? failure.outcome.status : 0))
  if (statuses.every((status) => status === 402)) return new RouterError('all_targets_failed_402', 'Every target answered 402 (billing refusal).')
  if (statuses.every((status) => status === 429)) {
    const retryAfter = last.headers?.get('retry-after')
    return new RouterError('rate_limited', undefined, retryAfter ? { 'retry-after': retryAfter } : undefined)
  }
  if (failures.every((failure) => failure.reason === 'no-model')) {
    const body = last.outcome.kind === 'status' ? last.outcome.body : ''
    return new RouterError('model_not_found', upstreamMessage(body) ?? 'The model was not found on any target.')
  }
  if (last.outcome.kind === 'status' && last.outcome.status === 401) {
    return new RouterError('provider_auth_failed', `The gateway ${last.gateway} rejected the stored provider key (401).`)
  }
  // Every target answered but no answer could be read or used: the gateways' bodies were the fault
  // (upstream_unreadable). Mixed with other failures it is all_targets_failed, the way rate_limited
  // and model_not_found also need every target to have failed alike.
  if (failures.every((failure) => failure.outcome.kind === 'unreadable' || failure.outcome.kind === 'unusable')) {
    return new RouterError(
      'upstream_unreadable',
      last.outcome.kind === 'unusable'
        ? `The answer from ${last.gateway} could not be used: ${last.outcome.detail}.`
        : `The response from ${last.gateway} broke off before it could be read.`,
    )
  }
  const summary = failures.map((failure) => `${failure.gateway}:${failure.reason}`).join(', ')
  return new RouterError('all_targets_failed', `Every target failed (${summary}).`)
}
