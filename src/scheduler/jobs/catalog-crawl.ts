/**
 * The daily model-catalog crawl (SPEC "Model ids"): for each routable gateway kind with an enabled
 * provider key, GET …/models with that key and store the listing with its canonical ids. A crawl
 * may be narrowed to some kinds: the one the scheduler starts when a provider key arrives for a
 * kind without a fresh catalog (scheduler/catalog-follow.ts).
 */
import { findGateway, providerBaseUrl } from '../../gateways/catalog'
import { canonicalId } from '../../gateways/model-catalog'
import type { Runtime } from '../../runtime'

const crawlTimeoutMs = 20_000

export async function crawlCatalogs(runtime: Runtime, _progress?: unknown, only?: ReadonlySet<string>): Promise<Record<string, unknown>> {
  const byGateway = new Map<string, { secret: string; baseUrl: string }>()
  for (const row of runtime.repositories.providerKeys.listAll()) {
    const gateway = findGateway(row.gateway)
    if (!gateway || !gateway.routable || row.disabledAt !== null || byGateway.has(gateway.id) || (only && !only.has(gateway.id))) continue
    try {
      byGateway.set(gateway.id, {
        secret: runtime.secretBox.decrypt(row.secretCiphertext),
        baseUrl: providerBaseUrl(gateway, runtime.config.gatewayUrlOverrides, JSON.parse(row.config) as Record<string, unknown>),
      })
    } catch {
      runtime.logger.error('provider_secret_unreadable', { provider_key_id: row.id })
    }
  }
  const results: Record<string, unknown> = {}
  await Promise.all(
    [...byGateway].map(async ([gatewayId, access]) => {
      const gateway = findGateway(gatewayId)!
      try {
        const listed = await runtime.upstream.listModels({ gateway, ...access }, AbortSignal.timeout(crawlTimeoutMs))
        const models = listed.map((item) => ({ modelId: item.id, canonicalId: canonicalId(item.id, gatewayId), object: JSON.stringify(item) }))
        runtime.repositories.gatewayCatalogs.replaceCatalog(gatewayId, runtime.now().getTime(), models)
        results[gatewayId] = { models: models.length }
      } catch (error) {
        // A failed crawl keeps the previous catalog; past 72 hours it stops counting as evidence.
        results[gatewayId] = { error: error instanceof Error ? error.message : String(error) }
        runtime.logger.warn('catalog_crawl_failed', { gateway: gatewayId, error: results[gatewayId] })
      }
    }),
  )
  return { gateways: results }
}
