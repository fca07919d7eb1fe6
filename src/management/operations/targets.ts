/**
 * The object an operation acts on: as its audit event names it, and, for an inference key, as its
 * rule is given it (any key for the operator CLI, else a key of the actor's workspace).
 */
import type { Actor, ManagementDeps } from '../context'
import type { KeyRef } from '../keys'
import type { AuditTarget } from './operation'

export const provider = (id: string): AuditTarget => ({ type: 'provider_key', id })
export const inferenceKey = (id: string): AuditTarget => ({ type: 'inference_key', id })
export const managementKey = (id: string): AuditTarget => ({ type: 'management_key', id })
export const workspace = (id: string): AuditTarget => ({ type: 'workspace', id })

/** A key the actor may touch: any key for the operator CLI, else a key of the actor's workspace. */
export const keyRef = (actor: Actor, id: string): KeyRef => (actor.kind === 'cli' ? id : { id, workspaceId: actor.workspaceId })

/** The workspace an inference key belongs to (the audit event of a CLI write names it). */
export const keyWorkspace = (deps: ManagementDeps, id: string) => deps.repositories.inferenceKeys.getById(id)?.workspaceId
