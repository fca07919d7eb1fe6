/**
 * The audit log (CONTRACT §12): the event a write leaves (perform.ts writes it in the write's
 * transaction) names who wrote (a management key or the operator CLI), through which door, what and
 * which object, with every secret and key value replaced by "[redacted]"; and the workspace's events,
 * read a page at a time. Imports nothing of the operation table.
 */
import type { Actor, ManagementDeps } from './context'
import { badRequest } from './errors'
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
