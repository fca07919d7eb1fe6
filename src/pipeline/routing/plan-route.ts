/**
 * The pure route planner (SPEC "Routing behavior"): remaps before the rule, priority or split order,
 * skipped targets (disabled, switched off, decision-only, not-listed, batch-only, no-embeddings),
 * per-attempt timeouts, and the error when nothing can be called. Values in, data out.
 */
import { RouterError } from '../../errors/router-error'
import { decideModel, gatewaysListing, isBatchId, type GatewayCatalog } from '../../gateways/model-catalog'
import type { StoredRemap, StoredRule, StoredTarget } from '../../storage/repositories/inference-keys'
import type { ProviderEntry } from '../read-model/entries'
import { gatewayCatalog } from '../../gateways/catalog'

export type Operation = 'chat' | 'embeddings' | 'responses' | 'decisions'
/**
 * Why a planned target is passed over; on a key with a USD cap (CONTRACT §11), `unpriced`: no price
 * listed for the model there; `over-cap`: it would cost more than the request reserved (a model a
 * pre-routing pick put in front of the plan it was priced on).
 */
export type SkipReason = 'not-listed' | 'batch-only' | 'no-embeddings' | 'unpriced' | 'over-cap'

export const defaultFailoverTimeoutMs = 5000
export const defaultUpstreamTimeoutMs = 60000
const budgetFloorMs = 5000
const budgetCeilingMs = 15000

export interface PlannedAttempt {
  kind: 'attempt'
  provider: ProviderEntry
  gateway: string
  /** The id sent upstream: the gateway's spelling, or the remap's upstream model. */
  model: string
  remap: boolean
  /** Failover (first-byte) timeout, used on streams when another attempt follows. */
  failoverTimeoutMs: number
  upstreamTimeoutMs: number
}

export interface PlannedSkip {
  kind: 'skip'
  gateway: string
  reason: SkipReason
}

export type PlanStep = PlannedAttempt | PlannedSkip

export interface PlanInput {
  rule: StoredRule
  keyFailoverTtfbMs: number | null
  keyUpstreamTimeoutMs: number | null
  model: string
  operation: Operation
  providers: ReadonlyMap<string, ProviderEntry>
  gatewayEnabled: ReadonlyMap<string, boolean>
  catalogs: ReadonlyMap<string, GatewayCatalog>
  budgets: ReadonlyMap<string, number>
  now: number
  /** Uniform in [0, 1); injected so plans are reproducible in tests. */
  random: () => number
  /** A pinned Responses chain: no remaps, only this provider key. */
  pinnedProviderKeyId?: string
}

export interface RoutePlan {
  steps: PlanStep[]
  /** The remap that was rolled, if any. */
  remap: StoredRemap | undefined
}

/** Remaps for the model: its own enabled rows (case-insensitive exact), else the `*` rows; one percent roll. */
export function rollRemap(remaps: readonly StoredRemap[], model: string, random: () => number): StoredRemap | undefined {
  const lower = model.toLowerCase()
  let rows = remaps.filter((remap) => remap.enabled && remap.match.toLowerCase() === lower)
  if (rows.length === 0) rows = remaps.filter((remap) => remap.enabled && remap.match === '*')
  if (rows.length === 0) return undefined
  const roll = random() * 100
  let cumulative = 0
  for (const remap of rows) {
    cumulative += remap.percent
    if (roll < cumulative) return remap
  }
  return undefined
}

/**
 * A plan that depends on nothing random: priority order and no enabled remap that could apply to
 * this model. Such plans are cached per snapshot (they still expire, so catalog ageing is seen).
 */
export function isPlanCacheable(rule: StoredRule, model: string): boolean {
  if (rule.strategy !== 'priority') return false
  const lower = model.toLowerCase()
  return !rule.remaps.some((remap) => remap.enabled && (remap.match === '*' || remap.match.toLowerCase() === lower))
}

/** Split: the first pick in proportion to weight (weight 0 never first), then the others in listed order. */
export function orderTargets(rule: StoredRule, targets: readonly StoredTarget[], random: () => number): StoredTarget[] {
  if (rule.strategy !== 'split') return [...targets]
  const weighted = targets.filter((target) => (target.weight ?? 0) > 0)
  if (weighted.length === 0) return [...targets]
  const total = weighted.reduce((sum, target) => sum + target.weight!, 0)
  let roll = random() * total
  let first = weighted[weighted.length - 1]!
  for (const target of weighted) {
    roll -= target.weight!
    if (roll < 0) {
      first = target
      break
    }
  }
  return [first, ...targets.filter((target) => target !== first)]
}

function learnedBudget(budgets: ReadonlyMap<string, number>, gateway: string): number | undefined {
  const budget = budgets.get(gateway)
  return budget === undefined ? undefined : Math.min(budgetCeilingMs, Math.max(budgetFloorMs, budget))
}

/**
 * The targets that can be called at all, throwing in the order the errors are reported: no
 * targets (402), no healthy provider key (502), every gateway switched off (503), none routable (501).
 */
export function eligibleTargets(
  rule: StoredRule,
  providers: ReadonlyMap<string, ProviderEntry>,
  gatewayEnabled: ReadonlyMap<string, boolean>,
  pinnedProviderKeyId?: string,
  operation: Operation = 'chat',
): StoredTarget[] {
  if (rule.targets.length === 0) throw new RouterError('no_route')
  const ruleTargets = pinnedProviderKeyId ? rule.targets.filter((target) => target.providerKeyId === pinnedProviderKeyId) : rule.targets
  const healthy = ruleTargets.filter((target) => {
    const provider = providers.get(target.providerKeyId)
    return provider !== undefined && !provider.disabled
  })
  if (healthy.length === 0) throw new RouterError('no_healthy_target')
  const switchedOn = healthy.filter((target) => gatewayEnabled.get(providers.get(target.providerKeyId)!.gateway.id) !== false)
  if (switchedOn.length === 0) throw new RouterError('gateway_disabled')
  if (operation === 'decisions') {
    // The decisions shape is served by the decision-capable gateways, decision-only ones included.
    const capable = switchedOn.filter((target) => providers.get(target.providerKeyId)!.gateway.decisions)
    if (capable.length === 0) throw new RouterError('gateway_not_supported', 'No target of this key is a decision-capable gateway.')
    return capable
  }
  const routable = switchedOn.filter((target) => providers.get(target.providerKeyId)!.gateway.routable)
  if (routable.length === 0) {
    throw new RouterError('gateway_not_supported', 'No target of this key is a routable gateway: decision-only gateways cannot serve inference.')
  }
  return routable
}

export function planRoute(input: PlanInput): RoutePlan {
  const { rule, providers, model, operation } = input
  const upstreamTimeoutMs = input.keyUpstreamTimeoutMs ?? defaultUpstreamTimeoutMs
  const failoverFor = (gateway: string, targetTtfb: number | null) =>
    Math.min(targetTtfb ?? input.keyFailoverTtfbMs ?? learnedBudget(input.budgets, gateway) ?? defaultFailoverTimeoutMs, upstreamTimeoutMs)

  const pinned = input.pinnedProviderKeyId
  const routable = eligibleTargets(rule, providers, input.gatewayEnabled, pinned, operation)

  const steps: PlanStep[] = []
  const batchModel = isBatchId(model)
  // The catalogs list chat models: an embedding or decision model id is never skipped as not listed.
  const uncataloged = operation === 'embeddings' || operation === 'decisions'
  const known = uncataloged ? [] : gatewaysListing(input.catalogs, model, input.now)
  const modelFor = (provider: ProviderEntry): string | SkipReason => {
    if (operation === 'decisions') return model
    if (operation === 'embeddings') {
      if (!provider.gateway.capabilities.embeddings) return 'no-embeddings'
      return model
    }
    const decision = decideModel(input.catalogs.get(provider.gateway.id), model, known.length > 0, input.now)
    return decision.kind === 'send' ? decision.model : 'not-listed'
  }

  const remap = pinned ? undefined : rollRemap(rule.remaps, model, input.random)
  if (remap) {
    const provider = providers.get(remap.providerKeyId)
    const usable = provider && !provider.disabled && (operation === 'decisions' ? provider.gateway.decisions : provider.gateway.routable) && input.gatewayEnabled.get(provider.gateway.id) !== false
    if (provider && usable) {
      if (isBatchId(remap.upstreamModel)) steps.push({ kind: 'skip', gateway: provider.gateway.id, reason: 'batch-only' })
      else if (operation === 'embeddings' && !provider.gateway.capabilities.embeddings) {
        steps.push({ kind: 'skip', gateway: provider.gateway.id, reason: 'no-embeddings' })
      } else {
        steps.push({
          kind: 'attempt',
          provider,
          gateway: provider.gateway.id,
          model: remap.upstreamModel,
          remap: true,
          // A remap hop never carries a target's ttfb_ms (SPEC "Strategy").
          failoverTimeoutMs: failoverFor(provider.gateway.id, null),
          upstreamTimeoutMs,
        })
      }
    }
  }
  if (batchModel && !steps.some((step) => step.kind === 'attempt')) {
    throw new RouterError('batch_only_model', `The model '${model}' is a :batch variant, served only through the Batch API.`)
  }

  for (const target of orderTargets(rule, routable, input.random)) {
    const provider = providers.get(target.providerKeyId)!
    if (batchModel) {
      steps.push({ kind: 'skip', gateway: provider.gateway.id, reason: 'batch-only' })
      continue
    }
    const spelled = modelFor(provider)
    if (spelled === 'not-listed' || spelled === 'no-embeddings' || spelled === 'batch-only') {
      steps.push({ kind: 'skip', gateway: provider.gateway.id, reason: spelled })
      continue
    }
    steps.push({
      kind: 'attempt',
      provider,
      gateway: provider.gateway.id,
      model: spelled,
      remap: false,
      failoverTimeoutMs: failoverFor(provider.gateway.id, target.ttfbMs),
      upstreamTimeoutMs,
    })
  }

  if (!steps.some((step) => step.kind === 'attempt')) {
    if (operation === 'embeddings') {
      const picked = [...new Set(routable.map((target) => providers.get(target.providerKeyId)!.gateway.id))]
      const serving = gatewayCatalog.filter((gateway) => gateway.capabilities.embeddings).map((gateway) => gateway.id)
      throw new RouterError(
        'embeddings_unsupported',
        `No target of this key serves embeddings. Targets: ${picked.join(', ')}. Gateways that serve embeddings: ${serving.join(', ')}.`,
      )
    }
    throw new RouterError(
      'model_not_available',
      `No target of this key lists the model '${model}'.${known.length ? ` Gateways that list it: ${known.join(', ')}.` : ''}`,
    )
  }
  return { steps, remap }
}
