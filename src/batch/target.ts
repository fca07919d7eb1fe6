/**
 * Which provider key takes a batch (SPEC "Routing for batches"): a remap matched on the plain model
 * id, rolled once per batch, when its destination can batch the remapped model; otherwise the first
 * eligible target in rule order (split: the first pick by weight), eligible meaning an own, enabled
 * provider key of the gateway kind that keeps batch results whose catalog lists the model's
 * `:batch` variant. No failover: the batch stays on the one picked.
 */
import { orderTargets, rollRemap, type KeyEntry, type ProviderEntry, type Snapshot } from '../pipeline'
import { RouterError } from '../errors/router-error'
import { isFresh, spellingFor, type GatewayCatalog } from '../gateways/model-catalog'
import { ModelListingFailed, type UpstreamClient } from '../gateways/client'

export interface BatchTarget {
  provider: ProviderEntry
  /** The gateway's spelling of the `:batch` variant, sent as the batch's model. */
  upstreamModel: string
  remapped: boolean
}

const batchSuffix = ':batch'
const catalogCheckTimeoutMs = 10_000

export const plainModelId = (model: string) => (model.toLowerCase().endsWith(batchSuffix) ? model.slice(0, -batchSuffix.length) : model)

/** Lists of models fetched live for a gateway whose crawled catalog is missing or stale. */
type ListModels = (provider: ProviderEntry) => Promise<string[]>

export function liveModelLister(upstream: UpstreamClient, signal: AbortSignal): ListModels {
  return async (provider) => {
    try {
      return (await upstream.listModels(provider, AbortSignal.any([signal, AbortSignal.timeout(catalogCheckTimeoutMs)]))).map((item) => item.id)
    } catch (error) {
      const why = error instanceof ModelListingFailed ? `answered ${error.message}` : 'could not be read'
      throw new RouterError('batch_check_unavailable', `The model list of ${provider.gateway.id} ${why} when checked for a :batch variant. Nothing was submitted; try again.`)
    }
  }
}

function canBatch(provider: ProviderEntry | undefined, snapshot: Snapshot): provider is ProviderEntry {
  return provider !== undefined && !provider.disabled && provider.gateway.capabilities.batch && snapshot.gatewayEnabled.get(provider.gateway.id) !== false
}

export async function chooseBatchTarget(input: {
  key: KeyEntry
  snapshot: Snapshot
  model: string
  random: () => number
  now: number
  listModels: ListModels
}): Promise<BatchTarget> {
  const { key, snapshot, random, now } = input
  const plain = plainModelId(input.model)
  const rule = key.rule
  const candidates: { provider: ProviderEntry; model: string; remapped: boolean }[] = []
  const remap = rollRemap(rule.remaps, plain, random)
  const remapProvider = remap ? snapshot.providers.get(remap.providerKeyId) : undefined
  if (remap && canBatch(remapProvider, snapshot)) candidates.push({ provider: remapProvider, model: plainModelId(remap.upstreamModel), remapped: true })
  const targets = rule.targets.filter((target) => snapshot.providers.has(target.providerKeyId))
  for (const target of orderTargets(rule, targets, random)) {
    const provider = snapshot.providers.get(target.providerKeyId)
    if (canBatch(provider, snapshot)) candidates.push({ provider, model: plain, remapped: false })
  }
  if (candidates.length === 0) {
    throw new RouterError('batch_not_supported', 'This key has no enabled provider key of the gateway kind that keeps batch results (openrouter), as a target or remap destination.')
  }
  // One live listing per provider key at most, only when its crawled catalog cannot say.
  const live = new Map<string, Promise<GatewayCatalog>>()
  const catalogOf = (provider: ProviderEntry): Promise<GatewayCatalog> | GatewayCatalog => {
    const crawled = snapshot.catalogs.get(provider.gateway.id)
    if (isFresh(crawled, now)) return crawled
    let listing = live.get(provider.id)
    if (!listing) {
      listing = input.listModels(provider).then((ids) => {
        const exact = new Map(ids.map((id) => [id.toLowerCase(), id]))
        return { gateway: provider.gateway.id, fetchedAt: now, exact, canonical: new Map(), prices: new Map() }
      })
      live.set(provider.id, listing)
    }
    return listing
  }
  for (const candidate of candidates) {
    const catalog = await catalogOf(candidate.provider)
    const spelled = spellingFor(catalog, `${candidate.model}${batchSuffix}`) ?? catalog.exact.get(`${candidate.model}${batchSuffix}`.toLowerCase())
    if (spelled !== undefined) return { provider: candidate.provider, upstreamModel: spelled, remapped: candidate.remapped }
  }
  throw new RouterError('batch_model_not_available', `The batch provider key's catalog lists no :batch variant of '${plain}'.`)
}

/** Whether the provider key holding a batch is still on the key (a target or a remap destination). */
export function keyStillHolds(key: KeyEntry, providerKeyId: string): boolean {
  return key.rule.targets.some((target) => target.providerKeyId === providerKeyId) || key.rule.remaps.some((remap) => remap.providerKeyId === providerKeyId)
}
