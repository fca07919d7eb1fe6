/** Request-log rows: batched inserts from the log queue, and the usage aggregates read from them. */
import { and, count, countDistinct, desc, eq, gte, inArray, isNotNull, sql, type SQL } from 'drizzle-orm'
import type { Db } from '../client'
import { requestLogs } from '../schema'

export type RequestLogRow = typeof requestLogs.$inferInsert

export interface UsageFilter {
  workspaceId: string
  sinceMs: number
  keyIds?: string[]
}

export function createRequestLogRepository(db: Db) {
  const where = (filter: UsageFilter): SQL =>
    and(
      eq(requestLogs.workspaceId, filter.workspaceId),
      gte(requestLogs.createdAt, filter.sinceMs),
      filter.keyIds && filter.keyIds.length > 0 ? inArray(requestLogs.keyId, filter.keyIds) : undefined,
    )!

  return {
    /** Writes a batch in one transaction. */
    insertMany(rows: RequestLogRow[]) {
      if (rows.length === 0) return
      db.transaction((tx) => {
        // SQLite caps bound parameters per statement; 200 rows × 22 columns stays under it.
        for (let start = 0; start < rows.length; start += 200) tx.insert(requestLogs).values(rows.slice(start, start + 200)).run()
      })
    },
    count(workspaceId?: string): number {
      const query = db.select({ value: count() }).from(requestLogs)
      return (workspaceId ? query.where(eq(requestLogs.workspaceId, workspaceId)) : query).get()!.value
    },
    summary(filter: UsageFilter) {
      return db
        .select({
          requests: count(),
          errors: sql<number>`coalesce(sum(case when ${requestLogs.status} >= 400 then 1 else 0 end), 0)`,
          avgLatency: sql<number | null>`avg(${requestLogs.latencyMs})`,
          avgOverhead: sql<number | null>`avg(${requestLogs.overheadMs})`,
          models: countDistinct(requestLogs.model),
        })
        .from(requestLogs)
        .where(where(filter))
        .get()!
    },
    /** Rows grouped by bucket start (ms), where the bucket is `floor(created_at / size) * size`. */
    series(filter: UsageFilter, bucketMs: number) {
      const bucket = sql<number>`(${requestLogs.createdAt} / ${bucketMs}) * ${bucketMs}`
      return db
        .select({
          bucket,
          requests: count(),
          errors: sql<number>`coalesce(sum(case when ${requestLogs.status} >= 400 then 1 else 0 end), 0)`,
          avgLatency: sql<number | null>`avg(${requestLogs.latencyMs})`,
          avgOverhead: sql<number | null>`avg(${requestLogs.overheadMs})`,
        })
        .from(requestLogs)
        .where(where(filter))
        .groupBy(bucket)
        .all()
    },
    breakdown(filter: UsageFilter, by: 'model' | 'gateway', limit: number) {
      const column = by === 'model' ? requestLogs.model : requestLogs.gateway
      return db
        .select({ name: sql<string>`${column}`, requests: count() })
        .from(requestLogs)
        .where(and(where(filter), isNotNull(column)))
        .groupBy(column)
        .orderBy(desc(count()), column)
        .limit(limit)
        .all()
    },
    /** First-byte times of successful requests per gateway since `sinceMs` (budget learning). */
    firstByteTimes(sinceMs: number) {
      return db
        .select({ gateway: requestLogs.gateway, ttfbMs: requestLogs.ttfbMs })
        .from(requestLogs)
        .where(and(gte(requestLogs.createdAt, sinceMs), isNotNull(requestLogs.ttfbMs), isNotNull(requestLogs.gateway)))
        .all()
    },
  }
}
