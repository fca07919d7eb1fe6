/**
 * The daily model-catalog crawl (SPEC "Model ids"): for each routable gateway kind with an enabled
 * provider key, GET …/models with that key and store the listing with its canonical ids. A crawl
 * may be narrowed to some kinds: the one the scheduler starts when a provider key arrives for a
 * kind without a fresh catalog (scheduler/catalog-follow.ts).
 */
import { findGateway, providerBaseUrl } from '../../gateways/catalog'
import { canonicalId } from '../../gateways/model-catalog'
import type { Config } from '../../config/env'
import type { Repositories } from '../../storage/repositories'
import type { JobDeps } from '../job-deps'

const crawlTimeoutMs = 20_000

/** What a crawl reads and calls: the provider keys (one per kind, secret decrypted), the gateways, the catalogs it replaces. */
export type CatalogCrawlDeps = Pick<JobDeps, 'secretBox' | 'upstream' | 'logger' | 'now'> & {
  repositories: Pick<Repositories, 'providerKeys' | 'gatewayCatalogs'>
  config: Pick<Config, 'gatewayUrlOverrides'>
}

export async function crawlCatalogs(deps: CatalogCrawlDeps, _progress?: unknown, only?: ReadonlySet<string>): Promise<Record<string, unknown>> {
  const byGateway = new Map<string, { secret: string; baseUrl: string }>()
  for (const row of deps.repositories.providerKeys.listAll()) {
    const gateway = findGateway(row.gateway)
    if (!gateway || !gateway.routable || row.disabledAt !== null || byGateway.has(gateway.id) || (only && !only.has(gateway.id))) continue
    try {
      byGateway.set(gateway.id, {
        secret: deps.secretBox.decrypt(row.secretCiphertext),
        baseUrl: providerBaseUrl(gateway, deps.config.gatewayUrlOverrides, JSON.parse(row.config) as Record<string, unknown>),
      })
    } catch {
      deps.logger.error('provider_secret_unreadable', { provider_key_id: row.id })
    }
  }
  const results: Record<string, unknown> = {}
  await Promise.all(
    [...byGateway].map(async ([gatewayId, access]) => {
      const gateway = findGateway(gatewayId)!
      try {
        const listed = await deps.upstream.listModels({ gateway, ...access }, AbortSignal.timeout(crawlTimeoutMs))
        const models = listed.map((item) => ({ modelId: item.id, canonicalId: canonicalId(item.id, gatewayId), object: JSON.stringify(item) }))
        deps.repositories.gatewayCatalogs.replaceCatalog(gatewayId, deps.now().getTime(), models)
        results[gatewayId] = { models: models.length }
      } catch (error) {
        // A failed crawl keeps the previous catalog; past 72 hours it stops counting as evidence.
        results[gatewayId] = { error: error instanceof Error ? error.message : String(error) }
        deps.logger.warn('catalog_crawl_failed', { gateway: gatewayId, error: results[gatewayId] })
      }
    }),
  )
  return { gateways: results }
}
