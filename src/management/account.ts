/** The workspace snapshot of GET /account (SPEC "Account snapshot"); member e-mails never appear. */
import type { Actor, ManagementDeps } from './context'
import { presentProvider } from './providers'
import { notFound } from './errors'

export function accountSnapshot(deps: ManagementDeps, actor: Actor) {
  const workspace = deps.repositories.workspaces.get(actor.workspaceId)
  if (!workspace) throw notFound('Workspace not found.')
  const keyStates = deps.repositories.inferenceKeys.listWorkspaceKeyStates(actor.workspaceId)
  const revoked = keyStates.filter((key) => key.revokedAt !== null).length
  const managementKeys = deps.repositories.workspaces.countManagementKeys(actor.workspaceId)
  return {
    workspace: { id: workspace.id, name: workspace.name, kind: workspace.kind, created_at: workspace.createdAt },
    inference_keys: { total: keyStates.length, live: keyStates.length - revoked, revoked },
    provider_keys: deps.repositories.providerKeys.list(actor.workspaceId).map(presentProvider),
    management_keys: { total: managementKeys.total, read_only: managementKeys.readOnly },
    members: { total: deps.repositories.workspaces.countMembers(actor.workspaceId) },
  }
}
