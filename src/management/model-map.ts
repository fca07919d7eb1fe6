/** GET /api/model-map: the live model translation table, per gateway catalog (canonical ids, listed prices, staleness). */
import { catalogStaleAfterMs } from '../gateways/model-catalog'
import { pricingOfStoredObject } from '../gateways/model-prices'
import type { ManagementDeps } from './context'

export function modelMap(deps: Pick<ManagementDeps, 'repositories'>) {
  const now = Date.now()
  const models = new Map<string, { id: string; canonical_id: string; pricing?: { prompt: number | null; completion: number | null } }[]>()
  for (const row of deps.repositories.gatewayCatalogs.listModels()) {
    const list = models.get(row.gateway) ?? []
    // Prices where the gateway lists them (USD per token); a side it does not list is null (unknown, never zero).
    const pricing = pricingOfStoredObject(row.object)
    list.push({ id: row.modelId, canonical_id: row.canonicalId, ...(pricing ? { pricing: { prompt: pricing.prompt ?? null, completion: pricing.completion ?? null } } : {}) })
    models.set(row.gateway, list)
  }
  return deps.repositories.gatewayCatalogs.listCatalogs().map((catalog) => ({
    gateway: catalog.gateway,
    fetched_at: new Date(catalog.fetchedAt).toISOString(),
    stale: now - catalog.fetchedAt > catalogStaleAfterMs,
    models: (models.get(catalog.gateway) ?? []).sort((left, right) => left.canonical_id.localeCompare(right.canonical_id)),
  }))
}
