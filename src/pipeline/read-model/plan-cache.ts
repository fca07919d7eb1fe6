/**
 * Route plans memoized per snapshot (the read model): a key's plan for a model is made once while it
 * cannot vary between requests (priority order, no remap that could apply), and a model whose plan
 * is not deterministic is remembered as such, so that check is not repeated on every request either.
 * Entries expire after a minute, so catalog ageing (SPEC "Model catalog staleness") is seen.
 */
import { isPlanCacheable, planRoute, type Operation, type RoutePlan } from '../routing/plan-route'
import type { KeyEntry, Snapshot } from './entries'

const planCacheLifetimeMs = 60_000
const planCacheLimit = 10_000

interface PlanCacheEntry {
  /** undefined: this key's plan for this model is not deterministic (split, or a remap applies). */
  plan: RoutePlan | undefined
  at: number
}

export interface PlanRequest {
  operation: Operation
  model: string
  /** A pinned Responses chain: only this provider key, no remaps (never cached). */
  pinnedProviderKeyId?: string
}

/** A fresh plan for this key, model and operation. */
export function planFor(snapshot: Snapshot, key: KeyEntry, request: PlanRequest, random: () => number): RoutePlan {
  return planRoute({
    rule: key.rule,
    keyFailoverTtfbMs: key.failoverTtfbMs,
    keyUpstreamTimeoutMs: key.upstreamTimeoutMs,
    model: request.model,
    operation: request.operation,
    providers: snapshot.providers,
    gatewayEnabled: snapshot.gatewayEnabled,
    catalogs: snapshot.catalogs,
    budgets: snapshot.budgets,
    now: Date.now(),
    random,
    pinnedProviderKeyId: request.pinnedProviderKeyId,
  })
}

/** The plan from the snapshot's cache when it cannot vary, else a fresh one. */
export function cachedPlan(snapshot: Snapshot, key: KeyEntry, request: PlanRequest, random: () => number): RoutePlan {
  if (request.pinnedProviderKeyId) return planFor(snapshot, key, request, random)
  const cache = snapshot.planCache as Map<KeyEntry, Map<string, PlanCacheEntry>>
  let plans = cache.get(key)
  const entryKey = request.operation === 'chat' ? request.model : `${request.operation}\u0000${request.model}`
  const cached = plans?.get(entryKey)
  const now = Date.now()
  if (cached && now - cached.at < planCacheLifetimeMs) return cached.plan ?? planFor(snapshot, key, request, random)
  const cacheable = isPlanCacheable(key.rule, request.model)
  const plan = planFor(snapshot, key, request, random)
  if (snapshot.planCacheSize >= planCacheLimit) {
    cache.clear()
    snapshot.planCacheSize = 0
    plans = undefined
  }
  if (!plans) cache.set(key, (plans = new Map()))
  if (!cached) snapshot.planCacheSize++
  plans.set(entryKey, { plan: cacheable ? plan : undefined, at: now })
  return plan
}
