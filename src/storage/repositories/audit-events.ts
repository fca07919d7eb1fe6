/** Audit events (CONTRACT §12): appended in a management write's transaction, read newest first. */
import { and, desc, eq, lt } from 'drizzle-orm'
import type { Db } from '../client'
import { auditEvents } from '../schema'

export type AuditEventRow = typeof auditEvents.$inferSelect
export type NewAuditEvent = Omit<typeof auditEvents.$inferInsert, 'seq'>

export interface AuditQuery {
  workspaceId: string
  limit: number
  /** An event id: only events older than it (the next page). */
  after?: string
  action?: string
  targetId?: string
}

export function createAuditEventRepository(db: Db) {
  const seqOf = db.$client.prepare<{ seq: number; workspace_id: string }, [string]>('select seq, workspace_id from audit_events where id = ?')
  return {
    /** Deletes at most `limit` of the oldest events before `time` (ISO 8601); returns how many. */
    deleteBefore(time: string, limit: number): number {
      return db.$client.run('delete from audit_events where seq in (select seq from audit_events where time < ? order by seq limit ?)', [time, limit]).changes
    },
    append(event: NewAuditEvent): void {
      db.insert(auditEvents).values(event).run()
    },
    /** Newest first; one more than `limit` is read to tell whether there are more. Undefined: `after` is not an event of the workspace. */
    list(query: AuditQuery): { rows: AuditEventRow[]; hasMore: boolean } | undefined {
      let before: number | undefined
      if (query.after !== undefined) {
        const found = seqOf.get(query.after)
        if (!found || found.workspace_id !== query.workspaceId) return undefined
        before = found.seq
      }
      const rows = db
        .select()
        .from(auditEvents)
        .where(
          and(
            eq(auditEvents.workspaceId, query.workspaceId),
            before === undefined ? undefined : lt(auditEvents.seq, before),
            query.action === undefined ? undefined : eq(auditEvents.action, query.action),
            query.targetId === undefined ? undefined : eq(auditEvents.targetId, query.targetId),
          ),
        )
        .orderBy(desc(auditEvents.seq))
        .limit(query.limit + 1)
        .all()
      return { rows: rows.slice(0, query.limit), hasMore: rows.length > query.limit }
    },
  }
}
