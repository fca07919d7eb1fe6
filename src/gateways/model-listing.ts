/**
 * GET …/models of one gateway (CONTRACT §6 "models"): the listed model objects that have an id.
 * Used by the daily catalog crawl and by a batch submit whose crawled catalog cannot say whether a
 * `:batch` variant is listed.
 */
import type { GatewayDefinition } from './catalog'
import { upstreamHeaders } from './upstream'

export class ModelListingFailed extends Error {}

export async function fetchModelListing(
  fetchImplementation: typeof fetch,
  access: { gateway: GatewayDefinition; secret: string; baseUrl: string },
  signal: AbortSignal,
): Promise<{ id: string }[]> {
  const response = await fetchImplementation(`${access.baseUrl}/models`, { headers: upstreamHeaders(access, [], false), signal })
  if (!response.ok) {
    await response.body?.cancel().catch(() => {})
    throw new ModelListingFailed(`HTTP ${response.status}`)
  }
  const listing = (await response.json().catch(() => undefined)) as { data?: unknown } | undefined
  if (!Array.isArray(listing?.data)) throw new ModelListingFailed('the listing has no data array')
  return listing.data.filter((item): item is { id: string } => typeof item === 'object' && item !== null && typeof (item as { id?: unknown }).id === 'string')
}
