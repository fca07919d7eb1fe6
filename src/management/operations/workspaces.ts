/**
 * The workspace operations of the dashboard and the operator CLI (SPEC leaves them out of the API):
 * create a workspace, read and set its settings, add a member, create and set management keys.
 */
import { Type } from '@sinclair/typebox'
import type { Actor } from '../context'
import { AllowedIpsInput } from '../schemas'
import { addMember, createManagementKey, createWorkspace, setManagementKeyReadOnly, setWorkspaceSettings, workspaceOverview } from '../workspaces'
import type { Operation } from './operation'
import { managementKey, workspace } from './targets'

/** The workspace a write acts on: the one a CLI flag names, else the actor's. */
const workspaceOf = (actor: Actor, input: { workspaceId?: string }) => (actor.kind === 'cli' && input.workspaceId !== undefined ? input.workspaceId : actor.workspaceId)

interface WorkspaceSetInput {
  workspaceId?: string
  allowedIps?: string | string[]
  steeringMessage?: string
  captureBodies?: boolean
  suspended?: boolean
}

export const workspacesCreate = {
  name: 'workspaces.create',
  access: 'write',
  run: (deps, _actor, input: { name: string }) => createWorkspace(deps, input.name),
  audit: (input, output: { workspace: { id: string } }) => ({ target: workspace(output.workspace.id), changes: { name: input.name }, workspaceId: output.workspace.id }),
} satisfies Operation<{ name: string }>

export const workspaceGet = {
  name: 'workspace.get',
  access: 'read',
  run: (deps, actor) => workspaceOverview(deps, actor.workspaceId),
  dashboard: { method: 'GET', path: '/workspace', input: () => ({}) },
} satisfies Operation<Record<string, never>>

export const workspaceSet = {
  name: 'workspace.set',
  access: 'write',
  run: (deps, actor, input: WorkspaceSetInput) => setWorkspaceSettings(deps, workspaceOf(actor, input), input),
  audit: (input, output: { id: string }) => {
    const { workspaceId: _named, ...changes } = input
    return { target: workspace(output.id), changes, workspaceId: output.id }
  },
  dashboard: {
    method: 'PATCH',
    path: '/workspace',
    body: Type.Object({ allowed_ips: Type.Optional(AllowedIpsInput), steering_message: Type.Optional(Type.String()), capture_bodies: Type.Optional(Type.Boolean()) }),
    input: ({ body }) => {
      const fields = body as { allowed_ips?: string | string[]; steering_message?: string; capture_bodies?: boolean }
      return { allowedIps: fields.allowed_ips, steeringMessage: fields.steering_message, captureBodies: fields.capture_bodies }
    },
  },
} satisfies Operation<WorkspaceSetInput>

export const membersAdd = {
  name: 'members.add',
  access: 'write',
  run: (deps, actor, input: { workspaceId?: string; email: string }) => addMember(deps, workspaceOf(actor, input), input.email),
  // The address is the member's own: the log names the member, not the address.
  audit: (input, output: { id: string }) => ({ target: { type: 'member', id: output.id }, changes: { added: true }, workspaceId: input.workspaceId }),
  dashboard: { method: 'POST', path: '/workspace/members', body: Type.Object({ email: Type.String() }), input: ({ body }) => ({ email: (body as { email: string }).email }) },
} satisfies Operation<{ workspaceId?: string; email: string }>

export const managementKeysCreate = {
  name: 'management_keys.create',
  access: 'write',
  run: (deps, actor, input: { workspaceId?: string; readOnly: boolean }) => createManagementKey(deps, workspaceOf(actor, input), input.readOnly),
  audit: (input, output: { id: string }) => ({ target: managementKey(output.id), changes: { read_only: input.readOnly }, workspaceId: input.workspaceId }),
  dashboard: {
    method: 'POST',
    path: '/workspace/management-keys',
    body: Type.Object({ read_only: Type.Optional(Type.Boolean()) }),
    input: ({ body }) => ({ readOnly: (body as { read_only?: boolean }).read_only ?? false }),
  },
} satisfies Operation<{ workspaceId?: string; readOnly: boolean }>

export const managementKeysSet = {
  name: 'management_keys.set',
  access: 'write',
  // From the dashboard only the workspace's own keys, and never its last one that can write.
  run: (deps, actor, input: { id: string; readOnly: boolean }) => setManagementKeyReadOnly(deps, input.id, input.readOnly, actor.kind === 'cli' ? undefined : actor.workspaceId),
  audit: (input, output: { workspace_id: string }) => ({ target: managementKey(input.id), changes: { read_only: input.readOnly }, workspaceId: output.workspace_id }),
  dashboard: {
    method: 'PATCH',
    path: '/workspace/management-keys/:id',
    body: Type.Object({ read_only: Type.Boolean() }),
    input: ({ params, body }) => ({ id: params.id!, readOnly: (body as { read_only: boolean }).read_only }),
  },
} satisfies Operation<{ id: string; readOnly: boolean }>
