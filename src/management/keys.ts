/** Inference key rules (SPEC "Inference key", "POST /keys body", "PATCH /keys/:id fields", "States"). */
import { randomUUID } from 'node:crypto'
import { displayPrefix, generateSecret, hashSecret } from '../storage/crypto'
import type { InferenceKeyRow, KeyWithRule } from '../storage/repositories/inference-keys'
import type { ProviderKeyRow } from '../storage/repositories/provider-keys'
import { assertCanWrite, isPlainObject, pickLabel, uuidPattern, type Actor, type ManagementDeps } from './context'
import { ManagementError, badRequest, messages, notFound } from './errors'
import { parseAllowlist } from '../net/ip-allowlist'
import { emptyRule, presentRule, validateRoutingRule } from './routing'
import { KeyCreateInput, KeyUpdateInput, apiShapes, assertValid, type ApiShape } from './schemas'
import { limitsProblem, mergeLimits, presentStoredLimits } from '../domain/key-limits'
import { cacheProblem, presentStoredCache, storedCache } from '../domain/cache-settings'
import { continuationProblem, presentStoredContinuation, storedContinuation } from '../domain/continuation-settings'
import { guardrailsProblem, presentStoredGuardrails, storedGuardrails } from '../domain/guardrail-settings'
import { findGateway } from '../gateways/catalog'
import { monthStartOf, shownState, type LimitState } from '../pipeline/limits/ledger'
import { roundUsd } from './usage'

export const inferenceKeyPrefix = 'rt_live_'
export const defaultFailoverTtfbMs = 5000
export const defaultUpstreamTimeoutMs = 60000
export const keysPageSize = 100

export function effectiveTimeouts(key: Pick<InferenceKeyRow, 'failoverTtfbMs' | 'upstreamTimeoutMs'>) {
  const upstream = key.upstreamTimeoutMs ?? defaultUpstreamTimeoutMs
  // The failover timeout never exceeds the upstream timeout (SPEC "Timeouts").
  return { failover_ttfb_ms: Math.min(key.failoverTtfbMs ?? defaultFailoverTtfbMs, upstream), upstream_timeout_ms: upstream }
}

function providerMap(deps: ManagementDeps, actor: Actor): Map<string, ProviderKeyRow> {
  return new Map(deps.repositories.providerKeys.list(actor.workspaceId).map((row) => [row.id, row]))
}

/** What counts against each key's limits now (CONTRACT §11 `limit_state`), by key id. */
export function limitStates(deps: ManagementDeps, workspaceId: string, keyIds: readonly string[]): Map<string, LimitState> {
  const states = new Map<string, LimitState>()
  const unknown: string[] = []
  for (const id of keyIds) {
    const live = deps.limiter?.liveState(id)
    if (live) states.set(id, live)
    else unknown.push(id)
  }
  if (unknown.length === 0) return states
  // Keys this node keeps no ledger of: as the database shows them (indexed reads of a minute of rows and this month's day roll-ups).
  const now = deps.now().getTime()
  const { windows } = deps.repositories.requestLogs.keyWindows(workspaceId, unknown, (Math.floor(now / 1000) - 59) * 1000, monthStartOf(now))
  for (const id of unknown) states.set(id, shownState(id, workspaceId, windows.get(id), now))
  return states
}

const emptyState: LimitState = { requests_last_minute: 0, tokens_last_minute: 0, usd_today: 0, usd_this_month: 0 }

function presentState(state: LimitState | undefined): LimitState {
  const value = state ?? emptyState
  return { ...value, usd_today: roundUsd(value.usd_today), usd_this_month: roundUsd(value.usd_this_month) }
}

export function presentKey({ key, rule }: KeyWithRule, providers: ReadonlyMap<string, ProviderKeyRow>, secret?: string, state?: LimitState) {
  return {
    id: key.id,
    label: key.label,
    key_prefix: key.keyPrefix,
    api_shape: key.apiShape,
    companion_ads: key.companionAds,
    keyterms: key.keyterms,
    allowed_ips: JSON.parse(key.allowedIps) as string[],
    steering_message: key.steeringMessage,
    failover_ttfb_ms: key.failoverTtfbMs,
    upstream_timeout_ms: key.upstreamTimeoutMs,
    effective_timeouts: effectiveTimeouts(key),
    created_at: key.createdAt,
    last_used_at: key.lastUsedAt,
    revoked_at: key.revokedAt,
    routing: presentRule(rule, providers),
    limits: presentStoredLimits(key.limits),
    limit_state: presentState(state),
    cache: presentStoredCache(key.cache),
    continuation: presentStoredContinuation(key.continuation),
    guardrails: presentStoredGuardrails(key.guardrails),
    ...(secret !== undefined ? { key: secret } : {}),
  }
}
export type KeyView = ReturnType<typeof presentKey>

function findKey(deps: ManagementDeps, actor: Actor, id: string): KeyWithRule {
  const found = uuidPattern.test(id) ? deps.repositories.inferenceKeys.get(actor.workspaceId, id) : undefined
  if (!found) throw notFound(messages.keyNotFound)
  return found
}

/** A key as the API shows it, with what counts against its limits now. */
function present(deps: ManagementDeps, entry: KeyWithRule, providers: ReadonlyMap<string, ProviderKeyRow>, secret?: string) {
  return presentKey(entry, providers, secret, limitStates(deps, entry.key.workspaceId, [entry.key.id]).get(entry.key.id))
}

/**
 * A provider key a key setting names (`field`): one of the key's workspace, enabled, whose gateway
 * serves what the setting calls it for (`serves`: embeddings, moderations).
 */
function requireServingProviderKey(deps: ManagementDeps, workspaceId: string, field: string, providerKeyId: string, serves: 'embeddings' | 'moderations'): void {
  const row = uuidPattern.test(providerKeyId) ? deps.repositories.providerKeys.get(workspaceId, providerKeyId) : undefined
  if (!row) throw badRequest(`Invalid ${field}: provider key ${providerKeyId} does not exist in this workspace.`)
  if (row.disabledAt) throw badRequest(`Invalid ${field}: provider key ${providerKeyId} is disabled.`)
  if (!findGateway(row.gateway)?.capabilities[serves]) throw badRequest(`Invalid ${field}: gateway '${row.gateway}' does not serve ${serves}.`)
}

/**
 * The stored JSON of a `cache` value (CONTRACT §15): the whole setting, replacing what was there, or
 * null (off). A semantic lookup's provider key must be one of the key's workspace, enabled, whose
 * gateway serves embeddings.
 */
function cacheFromBody(deps: ManagementDeps, workspaceId: string, value: unknown): string | null {
  const problem = cacheProblem(value)
  if (problem) throw badRequest(problem)
  const providerKeyId = (value as { semantic?: { provider_key_id?: string } | null } | null)?.semantic?.provider_key_id
  if (providerKeyId !== undefined) requireServingProviderKey(deps, workspaceId, 'cache.semantic.provider_key_id', providerKeyId, 'embeddings')
  return storedCache(value)
}

/**
 * The stored JSON of a `guardrails` value (CONTRACT §17): the whole setting, replacing what was
 * there, or null (off). A moderation rule's provider key must be one of the key's workspace,
 * enabled, whose gateway serves moderations.
 */
function guardrailsFromBody(deps: ManagementDeps, workspaceId: string, value: unknown): string | null {
  const problem = guardrailsProblem(value)
  if (problem) throw badRequest(problem)
  // Moderation is an input rule only (the check above refuses it in output).
  const rules = (value as { input?: { provider_key_id?: string }[] } | null)?.input ?? []
  rules.forEach((rule, index) => {
    if (rule.provider_key_id !== undefined) requireServingProviderKey(deps, workspaceId, `guardrails.input[${index}].provider_key_id`, rule.provider_key_id, 'moderations')
  })
  return storedGuardrails(value)
}

/** Field rules shared by create and update; returns the column values to write. */
function settingsFromBody(deps: ManagementDeps, actor: Actor, body: KeyCreateInput | KeyUpdateInput, storedLimits: string | null = null): Partial<InferenceKeyRow> {
  const values: Partial<InferenceKeyRow> = {}
  if (body.limits !== undefined) {
    const problem = limitsProblem(body.limits)
    if (problem) throw badRequest(problem)
    values.limits = mergeLimits(storedLimits, body.limits as Record<string, unknown> | null)
  }
  if (body.cache !== undefined) values.cache = cacheFromBody(deps, actor.workspaceId, body.cache)
  if (body.continuation !== undefined) {
    // CONTRACT §16: the whole setting, replacing what was there, or null (off).
    const problem = continuationProblem(body.continuation)
    if (problem) throw badRequest(problem)
    values.continuation = storedContinuation(body.continuation)
  }
  if (body.guardrails !== undefined) values.guardrails = guardrailsFromBody(deps, actor.workspaceId, body.guardrails)
  const label = pickLabel(body)
  if (label !== undefined) values.label = label
  if (body.companion_ads !== undefined) values.companionAds = body.companion_ads
  // Stored as false unless the operator turned keyterms on (SPEC "Inference key").
  if (body.keyterms !== undefined) values.keyterms = body.keyterms && deps.config.keytermsEnabled
  if (body.allowed_ips !== undefined) values.allowedIps = JSON.stringify(parseAllowlist(body.allowed_ips))
  if (body.steering_message !== undefined) values.steeringMessage = body.steering_message === '' ? null : body.steering_message
  if (body.failover_ttfb_ms !== undefined) values.failoverTtfbMs = body.failover_ttfb_ms
  if (body.upstream_timeout_ms !== undefined) values.upstreamTimeoutMs = body.upstream_timeout_ms
  return values
}

export function listKeys(deps: ManagementDeps, actor: Actor, offsetText?: string | number): KeyView[] {
  const offset = offsetText === undefined || offsetText === '' ? 0 : Number(offsetText)
  if (!Number.isSafeInteger(offset) || offset < 0) throw badRequest('Invalid offset: expected a whole number of 0 or more.')
  const providers = providerMap(deps, actor)
  const entries = deps.repositories.inferenceKeys.list(actor.workspaceId, offset, keysPageSize)
  const states = limitStates(deps, actor.workspaceId, entries.map((entry) => entry.key.id))
  return entries.map((entry) => presentKey(entry, providers, undefined, states.get(entry.key.id)))
}

export function getKey(deps: ManagementDeps, actor: Actor, id: string): KeyView {
  return present(deps, findKey(deps, actor, id), providerMap(deps, actor))
}

export function createKey(deps: ManagementDeps, actor: Actor, body: unknown): KeyView {
  assertCanWrite(actor)
  const input = body === undefined || body === null ? {} : body
  if (!isPlainObject(input)) throw badRequest('Request body must be a JSON object.')
  assertValid(KeyCreateInput, input)
  const apiShape = input.api_shape ?? 'chat'
  if (!(apiShapes as readonly string[]).includes(apiShape)) throw badRequest(messages.unsupportedShape)
  const values = settingsFromBody(deps, actor, input)
  // Validate the whole rule before anything is written: an invalid rule creates no key.
  const rule = input.routing !== undefined ? validateRoutingRule(deps, actor, input.routing, apiShape as ApiShape, undefined) : emptyRule()
  const secret = generateSecret(inferenceKeyPrefix)
  const stored = deps.repositories.inferenceKeys.insert(
    {
      id: randomUUID(),
      workspaceId: actor.workspaceId,
      keyPrefix: displayPrefix(secret, inferenceKeyPrefix),
      secretHash: hashSecret(secret),
      apiShape,
      createdAt: deps.now().toISOString(),
      ...values,
    },
    rule,
  )
  return present(deps, stored, providerMap(deps, actor), secret)
}

const updatableFields = [
  'name',
  'label',
  'revoked',
  'companion_ads',
  'keyterms',
  'allowed_ips',
  'steering_message',
  'failover_ttfb_ms',
  'upstream_timeout_ms',
  'limits',
  'cache',
  'continuation',
  'guardrails',
] as const

/**
 * PATCH: every field validated first, then one transaction. A restore applies before the other
 * fields and a revoke after them; a revoked key refuses other changes unless restored here.
 */
export function updateKey(deps: ManagementDeps, actor: Actor, id: string, body: unknown): KeyView {
  assertCanWrite(actor)
  const existing = findKey(deps, actor, id)
  if (!isPlainObject(body) || !updatableFields.some((field) => field in body)) throw badRequest(messages.emptyBody)
  assertValid(KeyUpdateInput, body)
  const values = settingsFromBody(deps, actor, body, existing.key.limits)
  const changesOtherFields = Object.keys(values).length > 0
  const revokedNow = existing.key.revokedAt !== null
  if (revokedNow && changesOtherFields && body.revoked !== false) throw new ManagementError(409, messages.keyRevoked, 'key_revoked')

  const steps: Partial<InferenceKeyRow>[] = []
  if (body.revoked === false && revokedNow) steps.push({ revokedAt: null })
  steps.push(values)
  if (body.revoked === true && !revokedNow) steps.push({ revokedAt: deps.now().toISOString() })
  const updated = deps.repositories.inferenceKeys.update(actor.workspaceId, id, steps)!
  return present(deps, updated, providerMap(deps, actor))
}

/** DELETE: revoke, idempotently; the row is kept. */
export function revokeKey(deps: ManagementDeps, actor: Actor, id: string): KeyView {
  assertCanWrite(actor)
  const existing = findKey(deps, actor, id)
  if (existing.key.revokedAt !== null) return present(deps, existing, providerMap(deps, actor))
  const updated = deps.repositories.inferenceKeys.update(actor.workspaceId, id, [{ revokedAt: deps.now().toISOString() }])!
  return present(deps, updated, providerMap(deps, actor))
}

export function getRouting(deps: ManagementDeps, actor: Actor, id: string) {
  return presentRule(findKey(deps, actor, id).rule, providerMap(deps, actor))
}

export function putRouting(deps: ManagementDeps, actor: Actor, id: string, body: unknown) {
  assertCanWrite(actor)
  const existing = findKey(deps, actor, id)
  if (existing.key.revokedAt !== null) throw new ManagementError(409, messages.keyRevoked, 'key_revoked')
  const rule = validateRoutingRule(deps, actor, body, existing.key.apiShape as ApiShape, existing.rule)
  const updated = deps.repositories.inferenceKeys.update(actor.workspaceId, id, [], rule)!
  return presentRule(updated.rule, providerMap(deps, actor))
}

/** How long a rotated-out secret keeps working unless the operator says otherwise: a day; at most 30 days. */
export const defaultRotationGraceSeconds = 86_400
const maxRotationGraceSeconds = 30 * 86_400

/**
 * Sets one of a key's settings kept as JSON (`cache`, `continuation`, `guardrails`) on its own; the
 * CLI's actor acts in the key's own workspace. `stored`: the fields the value does not name keep what
 * is stored (the CLI's flags; `stored` reads the row's setting as the key object shows it); without
 * it the value replaces the setting whole. Answers the key.
 */
export function setKeySetting(deps: ManagementDeps, actor: Actor, id: string, field: 'cache' | 'continuation' | 'guardrails', value: unknown, stored?: (row: InferenceKeyRow) => object | null): KeyView {
  const scoped = actor.kind === 'cli' ? { ...actor, workspaceId: deps.repositories.inferenceKeys.getById(id)?.workspaceId ?? '' } : actor
  let setting = value
  if (stored && isPlainObject(setting)) setting = { ...(stored(requireKeyRow(deps, actor.kind === 'cli' ? id : { id, workspaceId: actor.workspaceId })) ?? {}), ...setting }
  return updateKey(deps, scoped, id, { [field]: setting })
}

/**
 * A key named by the operator (the CLI: any workspace) or by a workspace's management key (the
 * dashboard: that workspace's keys only; another's is not found, as on /api/v1).
 */
export type KeyRef = string | { id: string; workspaceId: string }

export function requireKeyRow(deps: ManagementDeps, ref: KeyRef): InferenceKeyRow {
  const id = typeof ref === 'string' ? ref : ref.id
  const key = uuidPattern.test(id) ? deps.repositories.inferenceKeys.getById(id) : undefined
  if (!key || (typeof ref !== 'string' && key.workspaceId !== ref.workspaceId)) throw notFound(messages.keyNotFound)
  return key
}

/** Rotation (CLI, dashboard): a new secret; the old one keeps working until `grace_until`. */
export function rotateKey(deps: ManagementDeps, ref: KeyRef, graceSeconds: number = defaultRotationGraceSeconds) {
  const key = requireKeyRow(deps, ref)
  if (key.revokedAt !== null) throw new ManagementError(409, messages.keyRevoked, 'key_revoked')
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > maxRotationGraceSeconds) {
    throw badRequest(`Invalid grace-seconds: expected a whole number from 0 to ${maxRotationGraceSeconds} (30 days).`)
  }
  const secret = generateSecret(inferenceKeyPrefix)
  const graceUntil = new Date(deps.now().getTime() + graceSeconds * 1000).toISOString()
  deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [
    {
      previousKeyPrefix: key.keyPrefix,
      previousSecretHash: key.secretHash,
      previousSecretUntil: graceUntil,
      keyPrefix: displayPrefix(secret, inferenceKeyPrefix),
      secretHash: hashSecret(secret),
    },
  ])
  return { key: secret, grace_until: graceUntil }
}
