/**
 * GET /models and GET /models/{id} (SPEC): a parallel fan-out to every routable target of the key,
 * merged with the first-seen object kept per id, `:batch` ids left out, narrowed listings preferred.
 * A look-up resolves the id the way routing does (SPEC "Model ids"): an exact listed id first, then
 * each listing's spelling map (canonical `provider/model`, the gateway's own spelling, dash and
 * dotted versions), so every id chat accepts for a listed model is found.
 */
import { RouterError } from '../../errors/router-error'
import { buildGatewayCatalog, isBatchId, spellingFor } from '../../gateways/model-catalog'
import type { ProviderEntry } from '../read-model/entries'
import type { AuthenticatedContext } from '../request/context'
import { finishJson } from '../answer/finish'
import type { EndpointHandler, InferenceDeps } from '../types'
import { defaultUpstreamTimeoutMs, eligibleTargets } from '../routing/plan-route'

type ModelObject = Record<string, unknown> & { id: string }

interface Listing {
  provider: ProviderEntry
  models: ModelObject[] | undefined
  calls: number
}

/** Gateways whose `/models` over-lists; the narrowed listing is tried first. */
const narrowedListingSuffix: Record<string, string> = { openrouter: '/models/user' }

async function fetchListing(provider: ProviderEntry, deps: InferenceDeps, signal: AbortSignal): Promise<Listing> {
  const suffixes = [narrowedListingSuffix[provider.gateway.id], '/models'].filter((suffix): suffix is string => suffix !== undefined)
  let calls = 0
  for (const suffix of suffixes) {
    calls++
    try {
      return { provider, models: await deps.upstream.listModels(provider, signal, suffix), calls }
    } catch {
      if (signal.aborted) break
    }
  }
  return { provider, models: undefined, calls }
}

async function mergedCatalog(context: AuthenticatedContext, deps: InferenceDeps, signal: AbortSignal) {
  const key = context.key
  const snapshot = (context.snapshot ?? deps.snapshots.current())
  const targets = eligibleTargets(key.rule, snapshot.providers, snapshot.gatewayEnabled)
  const providers = [...new Set(targets.map((target) => target.providerKeyId))].map((id) => snapshot.providers.get(id)!)
  const controller = new AbortController()
  const timeoutMs = Math.min(key.upstreamTimeoutMs ?? defaultUpstreamTimeoutMs, deps.config.deadlineMs - (performance.now() - context.startedAt))
  const timer = setTimeout(() => controller.abort('timeout'), Math.max(0, timeoutMs))
  const onClientAbort = () => controller.abort('client-closed')
  signal.addEventListener('abort', onClientAbort)
  const started = performance.now()
  let listings: Listing[]
  try {
    listings = await Promise.all(providers.map((provider) => fetchListing(provider, deps, controller.signal)))
  } finally {
    clearTimeout(timer)
    signal.removeEventListener('abort', onClientAbort)
  }
  context.upstreamWaitMs += performance.now() - started
  context.attempts = listings.reduce((sum, listing) => sum + listing.calls, 0)
  const supplied = listings.filter((listing) => listing.models !== undefined)
  if (supplied.length === 0) throw new RouterError('all_targets_failed', 'No target could list its models.')
  const merged = new Map<string, ModelObject>()
  for (const listing of supplied) {
    for (const model of listing.models!) {
      if (isBatchId(model.id) || merged.has(model.id)) continue
      merged.set(model.id, model)
    }
  }
  const suppliers = new Set(supplied.filter((listing) => listing.models!.length > 0).map((listing) => listing.provider.gateway.id))
  if (suppliers.size === 1) context.headers['x-router-provider'] = [...suppliers][0]!
  return { merged, supplied }
}

/**
 * The merged-catalog object a requested id names: the exact id (any case), else the first listing,
 * in target order, whose spelling map resolves the id. The map is built from the live listing with
 * the function the crawled catalogs are built with, so it answers the same with or without a crawl.
 */
function findModel(requested: string, merged: Map<string, ModelObject>, supplied: Listing[]): ModelObject | undefined {
  const lower = requested.toLowerCase()
  const exact = merged.get(requested) ?? [...merged.values()].find((model) => model.id.toLowerCase() === lower)
  if (exact) return exact
  const now = Date.now()
  for (const listing of supplied) {
    const listed = listing.models!.filter((model) => !isBatchId(model.id)).map((model) => model.id)
    const spelling = spellingFor(buildGatewayCatalog(listing.provider.gateway.id, now, listed), requested)
    // The merged object for that spelling: the first-seen one, as the list shows it.
    const model = spelling === undefined ? undefined : merged.get(spelling)
    if (model) return model
  }
  return undefined
}

/** `owned_by` (SPEC "Model objects"): the gateway's own value, else the vendor prefix of a slashed id. */
function ownerOf(model: ModelObject, id: string): string {
  if (typeof model.owned_by === 'string' && model.owned_by !== '') return model.owned_by
  for (const candidate of [id, model.id]) {
    const slash = candidate.indexOf('/')
    if (slash > 0) return candidate.slice(0, slash)
  }
  return 'system'
}

export const handleListModels: EndpointHandler = async (context, request, _route, deps) => {
  const { merged } = await mergedCatalog(context, deps, request.signal)
  context.readyAt = performance.now()
  return finishJson(context, deps, 200, { object: 'list', data: [...merged.values()].map((model) => ({ ...model, object: 'model' })) })
}

export const handleGetModel: EndpointHandler = async (context, request, route, deps) => {
  const id = route.parameter ?? ''
  context.model = id
  if (isBatchId(id)) throw new RouterError('model_not_found', `The model '${id}' is a :batch variant and is not listed.`)
  const { merged, supplied } = await mergedCatalog(context, deps, request.signal)
  const found = findModel(id, merged, supplied)
  if (!found) throw new RouterError('model_not_found', `No provider of this key lists the model '${id}'.`)
  context.readyAt = performance.now()
  // The object carries the id the client asked for (the id chat accepts for it, so a retrieve
  // round-trips), with the gateway's own fields kept.
  return finishJson(context, deps, 200, {
    ...found,
    id,
    object: 'model',
    created: typeof found.created === 'number' ? found.created : 0,
    owned_by: ownerOf(found, id),
  })
}
