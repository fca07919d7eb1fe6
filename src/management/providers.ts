/** Provider key rules (SPEC "Provider key", POST/PATCH/DELETE /providers). */
import { randomUUID } from 'node:crypto'
import { findGateway, type GatewayDefinition } from '../gateways/catalog'
import type { ProviderKeyRow } from '../storage/repositories/provider-keys'
import { assertCanWrite, isPlainObject, pickLabel, uuidPattern, type Actor, type ManagementDeps } from './context'
import { badRequest, messages, notFound } from './errors'
import { ProviderCreateInput, ProviderUpdateInput, assertValid } from './schemas'

export function presentProvider(row: ProviderKeyRow) {
  return {
    id: row.id,
    gateway: row.gateway,
    label: row.label,
    key_last4: row.keyLast4,
    config: JSON.parse(row.config) as Record<string, unknown>,
    created_at: row.createdAt,
    disabled_at: row.disabledAt,
  }
}
export type ProviderView = ReturnType<typeof presentProvider>

/** A gateway slug from the catalog; a provider key UUID in its place is the "mixing" 400. */
export function requireGateway(value: string, field = 'gateway'): GatewayDefinition {
  const gateway = findGateway(value)
  if (gateway) return gateway
  if (uuidPattern.test(value)) {
    throw badRequest(`${field} must be a gateway slug from GET /api/v1/gateways, not a provider key UUID.`)
  }
  throw badRequest(`Unknown gateway '${value.slice(0, 100)}'. See GET /api/v1/gateways for the catalog.`)
}

function buildConfig(gateway: GatewayDefinition, input: Record<string, unknown> | undefined): Record<string, unknown> {
  const config: Record<string, unknown> = { ...(input ?? {}) }
  for (const field of gateway.configFields ?? []) {
    const value = config[field.name]
    const missing = value === undefined || value === null || value === ''
    if (missing && field.required) throw badRequest(`config.${field.name} is required for gateway '${gateway.id}'.`)
    if (missing && field.default !== undefined) config[field.name] = field.default
    else if (!missing && typeof value !== 'string') throw badRequest(`Invalid config.${field.name}: expected string.`)
  }
  return config
}

export function listProviders(deps: ManagementDeps, actor: Actor, gatewayFilter?: string): ProviderView[] {
  if (gatewayFilter !== undefined && gatewayFilter !== '') requireGateway(gatewayFilter)
  return deps.repositories.providerKeys.list(actor.workspaceId, gatewayFilter || undefined).map(presentProvider)
}

export function getProvider(deps: ManagementDeps, actor: Actor, id: string): ProviderView {
  const row = uuidPattern.test(id) ? deps.repositories.providerKeys.get(actor.workspaceId, id) : undefined
  if (!row) throw notFound(messages.providerNotFound)
  return presentProvider(row)
}

export function createProvider(deps: ManagementDeps, actor: Actor, body: unknown): ProviderView {
  assertCanWrite(actor)
  if (!isPlainObject(body)) throw badRequest('Request body must be a JSON object.')
  assertValid(ProviderCreateInput, body)
  const gateway = requireGateway(body.gateway)
  const secret = body.key ?? body.secret
  if (secret === undefined || secret.trim() === '') throw badRequest('key (or secret) is required: the provider secret to store.')
  if (body.config !== undefined && !isPlainObject(body.config)) throw badRequest('Invalid config: expected object.')
  const config = buildConfig(gateway, body.config)
  const row = deps.repositories.providerKeys.insert({
    id: randomUUID(),
    workspaceId: actor.workspaceId,
    gateway: gateway.id,
    label: pickLabel(body) ?? '',
    secretCiphertext: deps.secretBox.encrypt(secret),
    // Short secrets show nothing: the last four characters would be most of the secret.
    keyLast4: secret.length >= 12 ? secret.slice(-4) : '',
    config: JSON.stringify(config),
    createdAt: deps.now().toISOString(),
    disabledAt: null,
  })
  return presentProvider(row)
}

export function updateProvider(deps: ManagementDeps, actor: Actor, id: string, body: unknown): ProviderView {
  assertCanWrite(actor)
  const existing = uuidPattern.test(id) ? deps.repositories.providerKeys.get(actor.workspaceId, id) : undefined
  if (!existing) throw notFound(messages.providerNotFound)
  if (!isPlainObject(body) || !['name', 'label', 'disabled'].some((field) => field in body)) throw badRequest(messages.emptyBody)
  assertValid(ProviderUpdateInput, body)
  const values: { label?: string; disabledAt?: string | null } = {}
  const label = pickLabel(body)
  if (label !== undefined) values.label = label ?? ''
  if (body.disabled === true) values.disabledAt = existing.disabledAt ?? deps.now().toISOString()
  if (body.disabled === false) values.disabledAt = null
  const row = deps.repositories.providerKeys.update(actor.workspaceId, id, values)!
  return presentProvider(row)
}

export function deleteProvider(deps: ManagementDeps, actor: Actor, id: string): { id: string; deleted: true } {
  assertCanWrite(actor)
  const removed = uuidPattern.test(id) && deps.repositories.providerKeys.delete(actor.workspaceId, id)
  if (!removed) throw notFound(messages.providerNotFound)
  return { id, deleted: true }
}

/** Provider notes (SPEC: free text, dashboard-only): every note of the workspace's provider keys, by id. */
export function providerNotes(deps: ManagementDeps, actor: Actor): Record<string, string> {
  const notes: Record<string, string> = {}
  for (const row of deps.repositories.providerKeys.list(actor.workspaceId)) if (row.notes) notes[row.id] = row.notes
  return notes
}

export const providerNotesLimit = 2000

/** Sets (an empty text clears) one provider key's notes. */
export function setProviderNotes(deps: ManagementDeps, actor: Actor, id: string, notes: string): { id: string; notes: string | null } {
  assertCanWrite(actor)
  if (notes.length > providerNotesLimit) throw badRequest(`Invalid notes: must be at most ${providerNotesLimit} characters.`)
  const row = uuidPattern.test(id) ? deps.repositories.providerKeys.update(actor.workspaceId, id, { notes: notes === '' ? null : notes }) : undefined
  if (!row) throw notFound(messages.providerNotFound)
  return { id: row.id, notes: row.notes }
}
