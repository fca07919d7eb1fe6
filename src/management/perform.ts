/**
 * Running a management operation (operations.ts): a read runs as it is; a write is refused to a
 * read-only actor and on a replica before it runs, then runs in one transaction with its audit event
 * (audit.ts), so a refused or failed write leaves neither.
 */
import { redactSecrets } from './audit'
import { assertCanWrite, type ManagementDeps } from './context'
import type { Caller, Operation } from './operations/operation'

/**
 * Runs an operation for a caller. A read runs as it is (it may answer a promise); a write is checked
 * against the actor, then runs with its audit event in one transaction.
 */
export function perform<I>(deps: ManagementDeps, caller: Caller, operation: Operation<I>, input: I): unknown {
  if (operation.access === 'read') return operation.run(deps, caller.actor, input)
  assertCanWrite(caller.actor)
  deps.writer?.assertPrimary()
  // A check that needs the outside (a host resolved) comes first; the write and its event then commit together.
  if (operation.prepare) return operation.prepare(deps, caller.actor, input).then((prepared) => write(deps, caller, operation, prepared))
  return write(deps, caller, operation, input)
}

function write<I>(deps: ManagementDeps, caller: Caller, operation: Operation<I>, input: I): unknown {
  return deps.repositories.transaction(() => {
    const output = operation.run(deps, caller.actor, input)
    if (output instanceof Promise) throw new Error(`The write ${operation.name} must be synchronous: its audit event is written in its transaction.`)
    const event = operation.audit?.(input, output, deps)
    if (!event) throw new Error(`The write ${operation.name} names no audit event.`)
    deps.repositories.auditEvents.append({
      id: crypto.randomUUID(),
      time: deps.now().toISOString(),
      workspaceId: event.workspaceId ?? caller.actor.workspaceId,
      actorKind: caller.actor.kind,
      actorId: caller.actor.id ?? null,
      actorPrefix: caller.actor.prefix ?? null,
      via: caller.via,
      action: event.action ?? operation.name,
      targetType: event.target.type,
      targetId: event.target.id,
      changes: JSON.stringify(redactSecrets(event.changes ?? {})),
      callerIp: caller.ip ?? null,
      requestId: caller.requestId ?? null,
    })
    return output
  })
}
