/**
 * Batch rows and the notification outbox (schema/batches.ts). A state change that notifies writes
 * its outbox rows in the same transaction; a delivery run reads pending rows and marks each one.
 */
import { and, desc, eq, gt, inArray, isNull, lt, lte, or, sql, type SQL } from 'drizzle-orm'
import type { Db } from '../client'
import { batches, outbox } from '../schema'
import { usdToNano } from '../money'

export type BatchRow = typeof batches.$inferSelect
export type OutboxRow = typeof outbox.$inferSelect
export type NewOutboxRow = typeof outbox.$inferInsert

export const terminalBatchStatuses = ['completed', 'failed', 'expired', 'cancelled'] as const
export const runningBatchStatuses = ['validating', 'in_progress', 'finalizing'] as const
export const batchStatuses = [...runningBatchStatuses, ...terminalBatchStatuses] as const
export type BatchStatus = (typeof batchStatuses)[number]

export const isTerminalStatus = (status: string) => (terminalBatchStatuses as readonly string[]).includes(status)

/** What a read of the upstream batch says, applied to the row. */
export interface BatchProgress {
  status: BatchStatus
  requestTotal: number
  requestCompleted: number
  requestFailed: number
  cost: number | null
  error: string | null
  finalizedAt: number | null
  refreshedAt: number
}

export interface BatchListQuery {
  keyId: string
  limit: number
  /** The row of the `after` cursor: items older than it (newest first). */
  after?: { createdAt: number; id: string }
  statuses?: string[]
  createdAfter?: number
  createdBefore?: number
}

/**
 * A batch that holds a reservation settles when it ends (CONTRACT §11): to the cost the gateway
 * reported; to its reservation when it reported none but answered any item; to 0 when it ended with
 * no item answered (it failed validation, or was cancelled or expired first). Nothing while it runs.
 */
function settlement(progress: BatchProgress, reservedNanoUsd: number | null): { chargedNanoUsd?: number } {
  if (reservedNanoUsd === null || !isTerminalStatus(progress.status)) return {}
  if (progress.cost !== null) return { chargedNanoUsd: usdToNano(progress.cost) }
  return { chargedNanoUsd: progress.requestCompleted > 0 || progress.status === 'completed' ? reservedNanoUsd : 0 }
}

export function createBatchRepository(db: Db) {
  const client = db.$client
  return {
    /** The row of a submit before its upload starts (invisible to clients until confirmed). */
    reserve(row: Pick<BatchRow, 'id' | 'workspaceId' | 'keyId' | 'providerKeyId' | 'endpoint' | 'model' | 'upstreamModel' | 'createdAt'>) {
      db.insert(batches).values({ ...row, status: 'submitting' }).run()
    },
    /**
     * The gateway confirmed the submit: its id and first state, and (a key with a USD cap) what its
     * items reserved, held on the row until the batch ends (CONTRACT §11).
     */
    confirm(id: string, upstreamId: string, progress: BatchProgress, reservedNanoUsd: number | null) {
      db.update(batches)
        .set({ upstreamId, ...progress, reservedNanoUsd, ...settlement(progress, reservedNanoUsd) })
        .where(eq(batches.id, id))
        .run()
    },
    /** Uploaded, but the gateway did not answer in time: kept for the refresh job to find (its reservation held, as it may exist). */
    markUnconfirmed(id: string, requestTotal: number, reservedNanoUsd: number | null) {
      db.update(batches).set({ status: 'unconfirmed', requestTotal, reservedNanoUsd }).where(eq(batches.id, id)).run()
    },
    /** A submit that failed before the gateway took it: nothing of it is kept. */
    discard(id: string) {
      db.delete(batches).where(and(eq(batches.id, id), inArray(batches.status, ['submitting', 'unconfirmed']))).run()
    },
    get(id: string): BatchRow | undefined {
      return db.select().from(batches).where(eq(batches.id, id)).get()
    },
    /**
     * Applies a read of the upstream. When it moves the batch into a terminal state for the first
     * time, `notifications(row)` gives the outbox rows, inserted in the same transaction: a crash
     * leaves either both or neither. Returns whether this call made the terminal transition.
     */
    applyProgress(id: string, progress: BatchProgress, notifications: (row: BatchRow) => NewOutboxRow[]): boolean {
      return client.transaction(() => {
        const row = db.select().from(batches).where(eq(batches.id, id)).get()
        if (!row) return false
        // A terminal row never moves again (a late or repeated read changes nothing).
        if (isTerminalStatus(row.status)) {
          db.update(batches).set({ refreshedAt: progress.refreshedAt }).where(eq(batches.id, id)).run()
          return false
        }
        db.update(batches)
          .set({ ...progress, ...settlement(progress, row.reservedNanoUsd) })
          .where(eq(batches.id, id))
          .run()
        if (!isTerminalStatus(progress.status)) return false
        const rows = notifications({ ...row, ...progress })
        if (rows.length) db.insert(outbox).values(rows).run()
        return true
      }).immediate()
    },
    markPurged(id: string, at: number) {
      db.update(batches).set({ purgedAt: at }).where(eq(batches.id, id)).run()
    },
    list(query: BatchListQuery): BatchRow[] {
      const conditions: SQL[] = [eq(batches.keyId, query.keyId), isNull(batches.purgedAt), inArray(batches.status, [...batchStatuses])]
      if (query.statuses?.length) conditions.push(inArray(batches.status, query.statuses))
      if (query.createdAfter !== undefined) conditions.push(gt(batches.createdAt, query.createdAfter))
      if (query.createdBefore !== undefined) conditions.push(lt(batches.createdAt, query.createdBefore))
      if (query.after) {
        conditions.push(or(lt(batches.createdAt, query.after.createdAt), and(eq(batches.createdAt, query.after.createdAt), lt(batches.id, query.after.id)))!)
      }
      return db
        .select()
        .from(batches)
        .where(and(...conditions))
        .orderBy(desc(batches.createdAt), desc(batches.id))
        .limit(query.limit)
        .all()
    },
    /** Batches the refresh job reads: running ones, and uploads never confirmed. */
    listUnfinished(): BatchRow[] {
      return db
        .select()
        .from(batches)
        .where(and(isNull(batches.purgedAt), inArray(batches.status, [...runningBatchStatuses, 'unconfirmed', 'submitting'])))
        .orderBy(batches.createdAt)
        .all()
    },
    /** Upstream ids already held by a row of this provider key (so an unconfirmed upload is not matched twice). */
    upstreamIdsOf(providerKeyId: string): Set<string> {
      const rows = db.select({ upstreamId: batches.upstreamId }).from(batches).where(eq(batches.providerKeyId, providerKeyId)).all()
      return new Set(rows.flatMap((row) => (row.upstreamId ? [row.upstreamId] : [])))
    },
    /** Pending deliveries, oldest first. */
    pendingOutbox(): OutboxRow[] {
      return db
        .select()
        .from(outbox)
        .where(and(isNull(outbox.deliveredAt), isNull(outbox.droppedAt)))
        .orderBy(outbox.createdAt)
        .all()
    },
    /** One delivery try's outcome: delivered, or failed (dropped once `maxAttempts` runs have tried). */
    recordDelivery(id: string, outcome: { delivered: true; at: number } | { delivered: false; at: number; error: string; maxAttempts: number }) {
      if (outcome.delivered) {
        db.update(outbox)
          .set({ deliveredAt: outcome.at, attempts: sql`${outbox.attempts} + 1`, lastError: null })
          .where(eq(outbox.id, id))
          .run()
        return
      }
      db.update(outbox)
        .set({
          attempts: sql`${outbox.attempts} + 1`,
          lastError: outcome.error.slice(0, 500),
          droppedAt: sql`case when ${outbox.attempts} + 1 >= ${outcome.maxAttempts} then ${outcome.at} else null end`,
        })
        .where(eq(outbox.id, id))
        .run()
    },
    listOutbox(batchId?: string): OutboxRow[] {
      return batchId ? db.select().from(outbox).where(eq(outbox.batchId, batchId)).all() : db.select().from(outbox).all()
    },
    /** Rows of a submit that never finished uploading (a crash mid-upload), older than `before`. */
    dropStaleSubmits(before: number): number {
      return client.prepare(`delete from batches where status = 'submitting' and created_at <= ?`).run(before).changes
    },
  }
}
