/**
 * Model ids across gateways (SPEC "Model ids"): canonical `provider/model` ids, each gateway's own
 * spelling, dash/dot version equivalence, region pins, the 72-hour staleness rule and `:batch` ids.
 * Pure functions over a crawled catalog; the crawl job fills it.
 */

export const catalogStaleAfterMs = 72 * 3_600_000

/** Vendors of unslashed ids, by prefix, and the gateways that serve only their own vendor's models. */
const vendorPrefixes: [RegExp, string][] = [
  [/^(gpt-|o\d|chatgpt-|text-embedding-|davinci|babbage|codex|omni-|dall-e|whisper|tts-)/, 'openai'],
  [/^claude/, 'anthropic'],
  [/^(gemini|gemma)/, 'google'],
  [/^(llama|meta-llama)/, 'meta-llama'],
  [/^(mistral|mixtral|codestral|ministral|pixtral|magistral|devstral)/, 'mistralai'],
  [/^grok/, 'x-ai'],
  [/^deepseek/, 'deepseek'],
  [/^qwen/, 'qwen'],
  [/^(command|c4ai)/, 'cohere'],
  [/^(sonar|pplx)/, 'perplexity'],
]
const gatewayVendors: Record<string, string> = {
  openai: 'openai',
  'openai-responses': 'openai',
  mistral: 'mistralai',
  xai: 'x-ai',
  deepseek: 'deepseek',
  perplexity: 'perplexity',
}

export function guessVendor(modelId: string, gatewayId?: string): string | undefined {
  const lower = modelId.toLowerCase()
  for (const [pattern, vendor] of vendorPrefixes) if (pattern.test(lower)) return vendor
  return gatewayId ? gatewayVendors[gatewayId] : undefined
}

/** The comparison key: lower case, and `3-5` written as `3.5` so dash and dotted versions meet. */
export function modelKey(modelId: string): string {
  return modelId.toLowerCase().replace(/(\d)-(?=\d)/g, '$1.')
}

/** The canonical `provider/model` id of a listed id. */
export function canonicalId(listedId: string, gatewayId: string): string {
  if (listedId.includes('/')) return listedId
  const vendor = guessVendor(listedId, gatewayId)
  return vendor ? `${vendor}/${listedId}` : listedId
}

export const isBatchId = (modelId: string) => modelId.toLowerCase().endsWith(':batch')

/** Region-pinned ids carry an `@region` suffix (e.g. `anthropic/claude-sonnet-4@eu`). */
export const isRegionPinned = (modelId: string) => /@[a-z0-9-]+$/i.test(modelId)

import type { ModelPricing } from './model-prices'

export interface GatewayCatalog {
  gateway: string
  fetchedAt: number
  /** exact listed id (lower case) → listed spelling */
  exact: Map<string, string>
  /** modelKey(canonical id) → listed spelling */
  canonical: Map<string, string>
  /** listed spelling → the prices the catalog lists for it (only models that list any; the decisioner's facts) */
  prices: Map<string, ModelPricing>
}

export function buildGatewayCatalog(gateway: string, fetchedAt: number, listedIds: readonly string[], prices: Map<string, ModelPricing> = new Map()): GatewayCatalog {
  const exact = new Map<string, string>()
  const canonical = new Map<string, string>()
  for (const id of listedIds) {
    exact.set(id.toLowerCase(), id)
    const key = modelKey(canonicalId(id, gateway))
    if (!canonical.has(key)) canonical.set(key, id)
    // The dash/dot-equivalent of the listed id itself, so `claude-3-5-sonnet` finds `claude-3.5-sonnet`.
    const ownKey = modelKey(id)
    if (!canonical.has(ownKey)) canonical.set(ownKey, id)
  }
  return { gateway, fetchedAt, exact, canonical, prices }
}

/** The gateway's spelling of a requested id, or undefined when its catalog does not list it. */
export function spellingFor(catalog: GatewayCatalog, requested: string): string | undefined {
  const exact = catalog.exact.get(requested.toLowerCase())
  if (exact !== undefined) return exact
  // A region pin goes only where that exact pin is listed.
  if (isRegionPinned(requested)) return undefined
  const key = modelKey(requested)
  const found = catalog.canonical.get(key)
  if (found !== undefined) return found
  if (!requested.includes('/')) {
    const vendor = guessVendor(requested)
    if (vendor) return catalog.canonical.get(modelKey(`${vendor}/${requested}`))
  }
  return undefined
}

export type CatalogDecision =
  /** Send this spelling. */
  | { kind: 'send'; model: string }
  /** Fresh catalog that does not list the model: skip without a call. */
  | { kind: 'not-listed' }

export function isFresh(catalog: GatewayCatalog | undefined, now: number): catalog is GatewayCatalog {
  return catalog !== undefined && now - catalog.fetchedAt <= catalogStaleAfterMs
}

/**
 * Decides what a target gets for `requested`. `knownSomewhere` tells whether any fresh catalog
 * lists the id: an id no catalog knows is forwarded untouched; a stale or missing catalog is never
 * assumed to lack a model; a region pin goes only to gateways listing that exact pin.
 */
export function decideModel(
  catalog: GatewayCatalog | undefined,
  requested: string,
  knownSomewhere: boolean,
  now: number,
): CatalogDecision {
  if (isFresh(catalog, now)) {
    const spelling = spellingFor(catalog, requested)
    if (spelling !== undefined) return { kind: 'send', model: spelling }
    if (knownSomewhere || isRegionPinned(requested)) return { kind: 'not-listed' }
    return { kind: 'send', model: requested }
  }
  if (isRegionPinned(requested)) return { kind: 'not-listed' }
  return { kind: 'send', model: requested }
}

/** Gateways whose fresh catalog lists the id (for `model_not_available` and the not-listed rule). */
export function gatewaysListing(catalogs: ReadonlyMap<string, GatewayCatalog>, requested: string, now: number): string[] {
  const listing: string[] = []
  for (const catalog of catalogs.values()) {
    if (isFresh(catalog, now) && spellingFor(catalog, requested) !== undefined) listing.push(catalog.gateway)
  }
  return listing
}
