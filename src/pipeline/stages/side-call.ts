/**
 * A call a stage makes beside the request's own model call (the response cache's embedding of the
 * last turn, a guardrail's moderation check): a request of the key in its own right, made through
 * the one upstream client, logged as its own request-log row under the key, and on a key with
 * limits admitted (its worst case reserved where it is priced) and settled through the key's ledger
 * like any request — or not made when the limits do not admit it.
 */
import type { ProviderEntry } from '../../domain/read-model'
import type { ModelPricing } from '../../gateways/model-prices'
import { logRequest } from '../answer/finish'
import { LimitedRequest } from '../limits/admission'
import { measurePrompt, outputBound, worstCaseNano } from '../limits/worst-case'
import { RequestContext, type AuthenticatedContext } from '../request/context'
import { defaultUpstreamTimeoutMs } from '../routing/plan-route'
import type { InferenceDeps } from '../types'

export interface SideCallInput {
  /** The row's endpoint (`embeddings`, `moderations`). */
  endpoint: string
  provider: ProviderEntry
  /** The model as the key names it (the row's model), and as the gateway spells it (sent). */
  model: string
  upstreamModel: string
  path: string
  body: Record<string, unknown>
  /**
   * What a USD cap reserves for it: priced at these prices (undefined: the model lists none, and a
   * capped key does not make the call), or `free` (the gateway does not bill it: nothing reserved).
   */
  pricing: ModelPricing | undefined | 'free'
}

export type SideCallResult =
  /** The gateway answered: its status and its body parsed (undefined when it is not JSON). */
  | { kind: 'answered'; status: number; value: unknown }
  /** The call could not be made or did not answer (unreachable, the deadline, the client gone). */
  | { kind: 'failed'; status: number }
  /** The key's limits do not admit it now, or a USD cap cannot price it: not made. */
  | { kind: 'refused'; why: 'limits' | 'unpriced' }

const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)

/** Makes the call as a request of the key (its own row); `accepted` says whether an answered body is what was asked for (else the row says 502). */
export async function sideCall(context: AuthenticatedContext, deps: InferenceDeps, input: SideCallInput, deadlineAt: number, signal: AbortSignal | undefined, accepted: (value: unknown) => boolean): Promise<SideCallResult> {
  const { provider, body } = input
  const side = new RequestContext(input.endpoint, context.envelope, undefined, undefined, false) as AuthenticatedContext
  side.key = context.key
  side.workspace = context.workspace
  side.snapshot = context.snapshot
  side.model = input.model
  side.mark('body')
  // A limited key: the call is a request of the key, admitted (and its worst case reserved) before it is made.
  const limits = context.key.limits
  if (limits) {
    const limited = new LimitedRequest(side, deps.limiter, limits, 'embeddings', false)
    let worst = 0
    if (limited.usdCap && input.pricing !== 'free') {
      const priced = worstCaseNano(input.pricing, measurePrompt(body), outputBound(body, 'embeddings'), 'embeddings')
      if (priced === undefined) return { kind: 'refused', why: 'unpriced' }
      worst = priced
      limited.rounds.push(worst)
    }
    let admission = deps.limiter.admit(context.key.id, context.key.workspaceId, limits, worst, side.requestId, side.createdAt)
    if (admission instanceof Promise) admission = await admission
    if (admission.refusal) return { kind: 'refused', why: 'limits' }
    limited.ticket = admission.ticket
    side.limited = limited
    side.chain = { finished: () => limited.settle() }
  }
  side.gateway = provider.gateway.id
  side.providerKeyId = provider.id
  side.upstreamModel = input.upstreamModel
  side.attempts = 1
  side.mark('plan')
  const started = performance.now()
  const timeLeft = Math.min(context.key.upstreamTimeoutMs ?? defaultUpstreamTimeoutMs, deadlineAt - started)
  let status = 200
  let code: string | undefined
  let result: SideCallResult
  try {
    const answer = await deps.upstream.read(provider, { path: input.path, body, signal }, timeLeft)
    side.ttfbMs = performance.now() - started
    let value: unknown
    try {
      value = JSON.parse(answer.raw)
    } catch {
      value = undefined
    }
    result = { kind: 'answered', status: answer.status, value }
    if (answer.ok) {
      const usage = (value as { usage?: Record<string, unknown> } | undefined)?.usage
      side.inputTokens = tokenCount(usage?.prompt_tokens) ?? tokenCount(usage?.input_tokens)
      if (!accepted(value)) {
        status = 502
        code = 'upstream_unreadable'
      }
    } else {
      status = answer.status
      code = `upstream_${answer.status}`
    }
  } catch {
    status = signal?.aborted ? 499 : performance.now() >= deadlineAt ? 504 : 502
    code = status === 499 ? 'client_closed' : status === 504 ? 'deadline_exceeded' : 'all_targets_failed'
    result = { kind: 'failed', status }
  }
  const waited = performance.now() - started
  side.upstreamWaitMs = waited
  context.upstreamWaitMs += waited
  side.path = [`${provider.gateway.id}:${status === 200 ? 'ok' : code}`]
  side.readyAt = performance.now()
  logRequest(side, deps, status, code)
  return result
}
