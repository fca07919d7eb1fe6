/**
 * Operator actions that SPEC.md keeps out of the API (the dashboard's): workspaces, members,
 * management keys and their authentication. Used by the CLI and by the first start.
 */
import { randomUUID } from 'node:crypto'
import { displayPrefix, generateSecret, hashSecret, hashesEqual } from '../storage/crypto'
import type { ManagementKeyRow, WorkspaceRow } from '../storage/repositories/workspaces'
import { uuidPattern, type Actor, type ManagementDeps } from './context'
import { badRequest, ManagementError, notFound } from './errors'
import { parseAllowlist } from '../net/ip-allowlist'

export const managementKeyPrefix = 'rt_mgmt_'

export function presentWorkspace(row: WorkspaceRow) {
  return { id: row.id, name: row.name, kind: row.kind, created_at: row.createdAt }
}

export function presentWorkspaceSettings(row: WorkspaceRow) {
  return {
    id: row.id,
    name: row.name,
    allowed_ips: JSON.parse(row.allowedIps) as string[],
    steering_message: row.steeringMessage,
    capture_bodies: row.captureBodies,
    suspended: row.suspended,
  }
}

function presentManagementKey(row: ManagementKeyRow) {
  return { id: row.id, workspace_id: row.workspaceId, prefix: row.prefix, read_only: row.readOnly, created_at: row.createdAt }
}

function requireWorkspace(deps: ManagementDeps, id: string): WorkspaceRow {
  const row = uuidPattern.test(id) ? deps.repositories.workspaces.get(id) : undefined
  if (!row) throw notFound(`Workspace ${id} not found.`)
  return row
}

export function createManagementKey(deps: ManagementDeps, workspaceId: string, readOnly: boolean) {
  requireWorkspace(deps, workspaceId)
  const secret = generateSecret(managementKeyPrefix)
  const row = deps.repositories.workspaces.insertManagementKey({
    id: randomUUID(),
    workspaceId,
    prefix: displayPrefix(secret, managementKeyPrefix),
    secretHash: hashSecret(secret),
    readOnly,
    createdAt: deps.now().toISOString(),
  })
  return { id: row.id, key: secret, prefix: row.prefix, read_only: row.readOnly }
}

export function createWorkspace(deps: ManagementDeps, name: string, kind = 'team') {
  const trimmed = name.trim()
  if (!trimmed) throw badRequest('--name is required.')
  if (trimmed.length > 120) throw badRequest('Workspace name must be at most 120 characters.')
  const row = deps.repositories.workspaces.insert({ id: randomUUID(), name: trimmed, kind, createdAt: deps.now().toISOString() })
  const managementKey = createManagementKey(deps, row.id, false)
  return { workspace: presentWorkspace(row), management_key: managementKey.key }
}

export interface WorkspaceSettingsInput {
  allowedIps?: string | string[]
  steeringMessage?: string
  captureBodies?: boolean
  suspended?: boolean
}

export function setWorkspaceSettings(deps: ManagementDeps, workspaceId: string, input: WorkspaceSettingsInput) {
  requireWorkspace(deps, workspaceId)
  // Validate every setting before writing any (one transaction-sized update).
  const allowedIps = input.allowedIps !== undefined ? parseAllowlist(input.allowedIps, 'allowed-ips') : undefined
  if (input.steeringMessage !== undefined && input.steeringMessage.length > 2000) {
    throw badRequest('Invalid steering-message: must be at most 2000 characters.')
  }
  const row = deps.repositories.workspaces.updateSettings(workspaceId, {
    allowedIps,
    steeringMessage: input.steeringMessage === undefined ? undefined : input.steeringMessage === '' ? null : input.steeringMessage,
    captureBodies: input.captureBodies,
    suspended: input.suspended,
  })!
  return presentWorkspaceSettings(row)
}

export function addMember(deps: ManagementDeps, workspaceId: string, email: string) {
  requireWorkspace(deps, workspaceId)
  const trimmed = email.trim()
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(trimmed)) throw badRequest(`Invalid email: '${trimmed}'.`)
  const row = deps.repositories.workspaces.addMember({ id: randomUUID(), workspaceId, email: trimmed, createdAt: deps.now().toISOString() })
  return { id: row.id, workspace_id: row.workspaceId, email: row.email, created_at: row.createdAt }
}

/** The workspace's settings, members and management keys (prefix and flag only), for the dashboard. */
export function workspaceOverview(deps: ManagementDeps, workspaceId: string) {
  const row = requireWorkspace(deps, workspaceId)
  return {
    settings: presentWorkspaceSettings(row),
    members: deps.repositories.workspaces.listMembers(workspaceId).map((member) => ({ id: member.id, email: member.email, created_at: member.createdAt })),
    management_keys: deps.repositories.workspaces.listManagementKeys(workspaceId).map(presentManagementKey),
  }
}

/** `workspaceId`: the key must belong to it (the dashboard); the operator CLI passes none. */
export function setManagementKeyReadOnly(deps: ManagementDeps, id: string, readOnly: boolean, workspaceId?: string) {
  const row = uuidPattern.test(id) ? deps.repositories.workspaces.getManagementKey(id) : undefined
  if (!row || (workspaceId !== undefined && row.workspaceId !== workspaceId)) throw notFound(`Management key ${id} not found.`)
  // From the dashboard, a workspace cannot take away its own last way to write (the operator CLI can).
  if (workspaceId !== undefined && readOnly && !row.readOnly && !deps.repositories.workspaces.listManagementKeys(workspaceId).some((other) => other.id !== id && !other.readOnly)) {
    throw new ManagementError(409, "This is the workspace's last management key that can write: create another one first.")
  }
  return presentManagementKey(deps.repositories.workspaces.setManagementKeyReadOnly(id, readOnly)!)
}

/** Resolves a Bearer token to its workspace; constant-time hash comparison. */
export function authenticateManagementKey(deps: Pick<ManagementDeps, 'repositories'>, token: string | undefined): Actor | undefined {
  if (!token || !token.startsWith(managementKeyPrefix)) return undefined
  const hash = hashSecret(token)
  for (const row of deps.repositories.workspaces.findManagementKeysByPrefix(displayPrefix(token, managementKeyPrefix))) {
    if (hashesEqual(row.secretHash, hash)) return { workspaceId: row.workspaceId, readOnly: row.readOnly, kind: 'management_key', id: row.id, prefix: row.prefix }
  }
  return undefined
}
