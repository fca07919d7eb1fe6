/**
 * The response cache's semantic tier (CONTRACT §15): after an exact miss, the last user turn's text
 * is embedded with the key's named provider key and model — an embeddings request of its own, logged
 * in the request log under the key and billed like any (on a key with limits it is admitted and
 * settled through the key's ledger, and skipped when it does not fit) — and compared by cosine with
 * the stored entries that match the request in everything but that text. No vector database: the
 * candidates of one partition are few (the newest 1,000), compared here over Float32Arrays.
 */
import { spellingFor } from '../../../gateways/model-catalog'
import type { SemanticCacheSettings } from '../../../domain/cache-settings'
import type { SemanticCandidate } from '../../../storage/cache-store'
import { logRequest } from '../../answer/finish'
import { LimitedRequest } from '../../limits/admission'
import { measurePrompt, outputBound, worstCaseNano } from '../../limits/worst-case'
import { RequestContext, type AuthenticatedContext } from '../../request/context'
import { defaultUpstreamTimeoutMs } from '../../routing/plan-route'
import type { InferenceDeps } from '../../types'

/** The closest candidate at or above `threshold`, with its similarity; candidates of another dimension never match. */
export function closest(query: Float32Array, candidates: readonly SemanticCandidate[], threshold: number, notBefore: number): { candidate: SemanticCandidate; similarity: number } | undefined {
  let queryNorm = 0
  for (let index = 0; index < query.length; index++) queryNorm += query[index]! * query[index]!
  if (queryNorm === 0) return undefined
  let best: { candidate: SemanticCandidate; similarity: number } | undefined
  for (const candidate of candidates) {
    const vector = candidate.embedding
    if (vector.length !== query.length || candidate.createdAt < notBefore) continue
    let dot = 0
    let norm = 0
    for (let index = 0; index < vector.length; index++) {
      dot += query[index]! * vector[index]!
      norm += vector[index]! * vector[index]!
    }
    if (norm === 0) continue
    const similarity = dot / Math.sqrt(queryNorm * norm)
    if (similarity >= threshold && (!best || similarity > best.similarity)) best = { candidate, similarity }
  }
  return best
}

/** The embedding a gateway's embeddings answer carries for its one input; undefined when it has none. */
function embeddingOf(answer: unknown): Float32Array | undefined {
  const data = (answer as { data?: unknown } | null)?.data
  const first = Array.isArray(data) ? (data[0] as { embedding?: unknown } | undefined) : undefined
  const vector = first?.embedding
  if (!Array.isArray(vector) || vector.length === 0 || !vector.every((value) => typeof value === 'number' && Number.isFinite(value))) return undefined
  return Float32Array.from(vector as number[])
}

const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)

/**
 * Embeds `text` with the semantic setting's provider key and model, as an embeddings request of the
 * key's own (its row in the request log). Undefined when that cannot be done now: the provider key
 * is gone or disabled, the key's limits do not admit the call, or the gateway did not give an
 * embedding (each logged).
 */
export async function embedLastTurn(context: AuthenticatedContext, deps: InferenceDeps, semantic: SemanticCacheSettings, text: string, deadlineAt: number, signal: AbortSignal | undefined): Promise<Float32Array | undefined> {
  const snapshot = context.snapshot
  const provider = snapshot.providers.get(semantic.providerKeyId)
  if (!provider || provider.disabled || provider.workspaceId !== context.key.workspaceId) {
    deps.logger.warn('cache_semantic_provider_unavailable', { request_id: context.requestId, key_id: context.key.id })
    return undefined
  }
  const catalog = snapshot.catalogs.get(provider.gateway.id)
  const model = (catalog && spellingFor(catalog, semantic.model)) ?? semantic.model
  const body = { model, input: text }
  const side = new RequestContext('embeddings', context.envelope, undefined, undefined, false) as AuthenticatedContext
  side.key = context.key
  side.workspace = context.workspace
  side.snapshot = snapshot
  side.model = semantic.model
  side.mark('body')
  // A limited key: the call is a request of the key, admitted (and its worst case reserved) before it is made.
  const limits = context.key.limits
  if (limits) {
    const limited = new LimitedRequest(side, deps.limiter, limits, 'embeddings', false)
    let worst = 0
    if (limited.usdCap) {
      const priced = worstCaseNano(catalog?.prices.get(model), measurePrompt(body), outputBound(body, 'embeddings'), 'embeddings')
      if (priced === undefined) {
        deps.logger.warn('cache_semantic_unpriced', { request_id: context.requestId, key_id: context.key.id, gateway: provider.gateway.id })
        return undefined
      }
      worst = priced
      limited.rounds.push(worst)
    }
    let admission = deps.limiter.admit(context.key.id, context.key.workspaceId, limits, worst, side.requestId, side.createdAt)
    if (admission instanceof Promise) admission = await admission
    if (admission.refusal) return undefined
    limited.ticket = admission.ticket
    side.limited = limited
    side.chain = { finished: () => limited.settle() }
  }
  side.gateway = provider.gateway.id
  side.providerKeyId = provider.id
  side.upstreamModel = model
  side.attempts = 1
  side.mark('plan')
  const started = performance.now()
  const timeLeft = Math.min(context.key.upstreamTimeoutMs ?? defaultUpstreamTimeoutMs, deadlineAt - started)
  let status = 200
  let code: string | undefined
  let embedding: Float32Array | undefined
  try {
    const answer = await deps.upstream.read(provider, { path: '/embeddings', body, signal }, timeLeft)
    side.ttfbMs = performance.now() - started
    if (answer.ok) {
      let value: unknown
      try {
        value = JSON.parse(answer.raw)
      } catch {
        value = undefined
      }
      embedding = embeddingOf(value)
      const usage = (value as { usage?: Record<string, unknown> } | undefined)?.usage
      side.inputTokens = tokenCount(usage?.prompt_tokens) ?? tokenCount(usage?.input_tokens)
      if (!embedding) {
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
  }
  const waited = performance.now() - started
  side.upstreamWaitMs = waited
  context.upstreamWaitMs += waited
  side.path = [`${provider.gateway.id}:${status === 200 ? 'ok' : code}`]
  side.readyAt = performance.now()
  logRequest(side, deps, status, code)
  if (!embedding) deps.logger.warn('cache_semantic_embedding_failed', { request_id: context.requestId, key_id: context.key.id, gateway: provider.gateway.id, status })
  return embedding
}
