/**
 * Running a management operation (operations.ts) and the audit log it writes (CONTRACT §12): a
 * write runs in one transaction with its audit event, so a refused or failed write leaves neither;
 * a read-only actor's write is refused before it runs. The event names who wrote (a management key
 * or the operator CLI), through which door, what and which object, with every secret and key value
 * replaced by "[redacted]".
 */
import type { Actor, ManagementDeps } from './context'
import { assertCanWrite } from './context'
import { badRequest } from './errors'
import type { Caller, Operation } from './operations'
import type { AuditEventRow } from '../storage/repositories/audit-events'

export const redacted = '[redacted]'

/** Field names whose values are secrets or key material (a provider's `key`, a webhook's signing secret, …). */
const secretField = /^(key|secret|token|password|authorization|api_key|management_key|signing_secret|.*_secret|.*_token)$/i

/** A copy of `value` with every secret field's value replaced. */
export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets)
  if (typeof value !== 'object' || value === null) return value
  const copy: Record<string, unknown> = {}
  for (const [name, field] of Object.entries(value)) copy[name] = secretField.test(name) && field !== null && field !== undefined ? redacted : redactSecrets(field)
  return copy
}

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
      action: operation.name,
      targetType: event.target.type,
      targetId: event.target.id,
      changes: JSON.stringify(redactSecrets(event.changes ?? {})),
      callerIp: caller.ip ?? null,
      requestId: caller.requestId ?? null,
    })
    return output
  })
}

export interface AuditQueryInput {
  limit?: string | number
  after?: string
  action?: string
  target_id?: string
}

export const defaultAuditPage = 50
export const maxAuditPage = 100

function presentEvent(row: AuditEventRow) {
  return {
    id: row.id,
    time: row.time,
    workspace_id: row.workspaceId,
    actor: { kind: row.actorKind, id: row.actorId, prefix: row.actorPrefix },
    via: row.via,
    action: row.action,
    target: { type: row.targetType, id: row.targetId },
    changes: JSON.parse(row.changes) as unknown,
    caller_ip: row.callerIp,
    request_id: row.requestId,
  }
}

/** The caller's workspace's events, newest first: `{data, has_more, last_id}` (`last_id` is the next page's `after`). */
export function listAuditEvents(deps: ManagementDeps, actor: Actor, input: AuditQueryInput) {
  const limitText = input.limit === undefined ? undefined : String(input.limit)
  const limit = limitText === undefined ? defaultAuditPage : Number(limitText)
  if (!/^\d{1,3}$/.test(limitText ?? '1') || !Number.isInteger(limit) || limit < 1 || limit > maxAuditPage) throw badRequest(`Invalid limit: a whole number from 1 to ${maxAuditPage}.`)
  const page = deps.repositories.auditEvents.list({ workspaceId: actor.workspaceId, limit, after: input.after || undefined, action: input.action || undefined, targetId: input.target_id || undefined })
  if (!page) throw badRequest('Invalid after: not an event of this workspace.')
  return { data: page.rows.map(presentEvent), has_more: page.hasMore, last_id: page.rows.at(-1)?.id ?? null }
}
