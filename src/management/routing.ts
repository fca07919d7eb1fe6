/** Routing rule validation and presentation (SPEC "Routing rule", "PUT routing rules"). */
import { findGateway } from '../gateways/catalog'
import type { ProviderKeyRow } from '../storage/repositories/provider-keys'
import type { StoredRemap, StoredRule, StoredTarget } from '../storage/repositories/inference-keys'
import { isPlainObject, uuidPattern, type Actor, type ManagementDeps } from './context'
import { badRequest, messages } from './errors'
import { RoutingInput, assertValid, type ApiShape } from './schemas'

function providerIdOrRefuse(value: string): string {
  // A gateway slug (or anything else that is not a UUID) in place of a provider key id.
  if (!uuidPattern.test(value)) throw badRequest(messages.providerIdNotUuid)
  return value.toLowerCase()
}

/**
 * Validates a whole rule against the workspace's provider keys and returns what to store.
 * `previous` supplies the stored `ttfb_ms` of targets that omit it. Nothing is written here.
 */
export function validateRoutingRule(
  deps: ManagementDeps,
  actor: Actor,
  body: unknown,
  apiShape: ApiShape,
  previous: StoredRule | undefined,
): StoredRule {
  if (!isPlainObject(body)) throw badRequest('Invalid routing: expected an object {strategy, targets, model_remaps?, decisioner?}.')
  if (!('targets' in body)) throw badRequest('Invalid routing.targets: required, 1 to 10 provider key targets.')
  assertValid(RoutingInput, body)
  const strategy = body.strategy ?? 'priority'
  if (body.targets.length === 0) throw badRequest('Invalid routing.targets: at least one target is required.')

  const referenced = new Set<string>()
  const targetIds = body.targets.map((target) => providerIdOrRefuse(target.provider_key_id))
  const remapInputs = body.model_remaps ?? []
  const remapIds = remapInputs.map((remap) => providerIdOrRefuse(remap.provider_key_id))
  const decisionerInput = body.decisioner && Object.keys(body.decisioner).length > 0 ? body.decisioner : null
  let decisionerId: string | undefined
  if (decisionerInput) {
    if (apiShape === 'decisions') throw badRequest('Invalid routing.decisioner: a key of shape decisions cannot have a decisioner.')
    if (typeof decisionerInput.provider_key_id !== 'string') throw badRequest('Invalid routing.decisioner.provider_key_id: required.')
    decisionerId = providerIdOrRefuse(decisionerInput.provider_key_id)
  }
  for (const id of [...targetIds, ...remapIds, ...(decisionerId ? [decisionerId] : [])]) referenced.add(id)

  const providers = new Map<string, ProviderKeyRow>(
    deps.repositories.providerKeys.getMany(actor.workspaceId, [...referenced]).map((row) => [row.id, row]),
  )
  const usable = (id: string, field: string): ProviderKeyRow => {
    const row = providers.get(id)
    if (!row) throw badRequest(`Invalid ${field}: provider key ${id} does not exist in this workspace.`)
    if (row.disabledAt) throw badRequest(`Invalid ${field}: provider key ${id} is disabled.`)
    return row
  }

  const seen = new Set<string>()
  const previousTtfb = new Map((previous?.targets ?? []).map((target) => [target.providerKeyId, target.ttfbMs]))
  const targets: StoredTarget[] = body.targets.map((target, index) => {
    const field = `targets[${index}].provider_key_id`
    const id = targetIds[index]!
    if (seen.has(id)) throw badRequest(`Invalid ${field}: provider key ${id} is listed more than once.`)
    seen.add(id)
    const row = usable(id, field)
    if (apiShape === 'decisions' && !findGateway(row.gateway)?.decisions) {
      throw badRequest(`Invalid ${field}: gateway '${row.gateway}' cannot serve a decisions key.`)
    }
    if (strategy === 'split' && target.weight === undefined) {
      throw badRequest(`Invalid targets[${index}].weight: split targets need a whole-number weight from 0 to 1000000.`)
    }
    const ttfbMs = target.ttfb_ms === undefined ? (previousTtfb.get(id) ?? null) : target.ttfb_ms
    return { providerKeyId: id, weight: strategy === 'split' ? target.weight! : null, ttfbMs }
  })
  if (strategy === 'split' && !targets.some((target) => (target.weight ?? 0) > 0)) {
    throw badRequest('Invalid targets: on split, at least one weight must be above 0.')
  }

  const remaps: StoredRemap[] = remapInputs.map((remap, index) => {
    const id = remapIds[index]!
    usable(id, `model_remaps[${index}].provider_key_id`)
    return {
      match: remap.match,
      percent: remap.percent ?? 100,
      providerKeyId: id,
      upstreamModel: remap.upstream_model,
      enabled: remap.enabled ?? true,
    }
  })
  const percentByMatch = new Map<string, number>()
  for (const remap of remaps) {
    if (!remap.enabled) continue
    const match = remap.match.toLowerCase()
    const total = (percentByMatch.get(match) ?? 0) + remap.percent
    if (total > 100) throw badRequest(`Invalid model_remaps: enabled remaps for match '${remap.match}' total ${total} percent; at most 100.`)
    percentByMatch.set(match, total)
  }

  let decisioner: Record<string, unknown> | null = null
  if (decisionerInput && decisionerId) {
    const row = usable(decisionerId, 'decisioner.provider_key_id')
    if (!findGateway(row.gateway)?.capabilities.decisioner) {
      throw badRequest(`Invalid decisioner.provider_key_id: gateway '${row.gateway}' cannot host a decisioner.`)
    }
    decisioner = {
      provider_key_id: decisionerId,
      objective: decisionerInput.objective ?? 'cost',
      allow_model_override: decisionerInput.allow_model_override ?? false,
      ...(decisionerInput.max_usd_m !== undefined ? { max_usd_m: decisionerInput.max_usd_m } : {}),
      ...(decisionerInput.notes !== undefined ? { notes: decisionerInput.notes } : {}),
      ...(decisionerInput.models !== undefined ? { models: decisionerInput.models } : {}),
    }
  }
  return { strategy, targets, remaps, decisioner }
}

export function emptyRule(): StoredRule {
  return { strategy: 'priority', targets: [], remaps: [], decisioner: null }
}

/** The rule as the API shows it, with each target's gateway filled from its provider row. */
export function presentRule(rule: StoredRule, providers: ReadonlyMap<string, ProviderKeyRow>) {
  const gatewayOf = (id: string) => providers.get(id)?.gateway ?? null
  return {
    strategy: rule.strategy,
    targets: rule.targets.map((target) => ({
      provider_key_id: target.providerKeyId,
      gateway: gatewayOf(target.providerKeyId),
      ...(rule.strategy === 'split' ? { weight: target.weight ?? 0 } : {}),
      ttfb_ms: target.ttfbMs,
    })),
    model_remaps: rule.remaps.map((remap) => ({
      match: remap.match,
      percent: remap.percent,
      provider_key_id: remap.providerKeyId,
      gateway: gatewayOf(remap.providerKeyId),
      upstream_model: remap.upstreamModel,
      enabled: remap.enabled,
    })),
    decisioner: rule.decisioner,
  }
}
