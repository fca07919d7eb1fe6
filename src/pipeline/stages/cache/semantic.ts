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
import type { AuthenticatedContext } from '../../request/context'
import type { InferenceDeps } from '../../types'
import { sideCall } from '../side-call'

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

/**
 * Embeds `text` with the semantic setting's provider key and model, as an embeddings request of the
 * key's own (its row in the request log: stages/side-call.ts). Undefined when that cannot be done
 * now: the provider key is gone or disabled, the key's limits do not admit the call, or the gateway
 * did not give an embedding (each logged).
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
  const input = { endpoint: 'embeddings', provider, model: semantic.model, upstreamModel: model, path: '/embeddings', body: { model, input: text }, pricing: catalog?.prices.get(model) }
  const result = await sideCall(context, deps, input, deadlineAt, signal, (value) => embeddingOf(value) !== undefined)
  if (result.kind === 'refused') {
    if (result.why === 'unpriced') deps.logger.warn('cache_semantic_unpriced', { request_id: context.requestId, key_id: context.key.id, gateway: provider.gateway.id })
    return undefined
  }
  const embedding = result.kind === 'answered' && result.status >= 200 && result.status < 300 ? embeddingOf(result.value) : undefined
  if (!embedding) {
    // An answer without an embedding is the gateway's fault: its row says 502.
    const status = result.kind === 'answered' && result.status >= 200 && result.status < 300 ? 502 : result.status
    deps.logger.warn('cache_semantic_embedding_failed', { request_id: context.requestId, key_id: context.key.id, gateway: provider.gateway.id, status })
  }
  return embedding
}
