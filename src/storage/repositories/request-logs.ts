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

const logColumns = [
  ['id', 'id'],
  ['workspaceId', 'workspace_id'],
  ['keyId', 'key_id'],
  ['createdAt', 'created_at'],
  ['endpoint', 'endpoint'],
  ['gateway', 'gateway'],
  ['providerKeyId', 'provider_key_id'],
  ['model', 'model'],
  ['upstreamModel', 'upstream_model'],
  ['status', 'status'],
  ['errorCode', 'error_code'],
  ['stream', 'stream'],
  ['latencyMs', 'latency_ms'],
  ['overheadMs', 'overhead_ms'],
  ['ttfbMs', 'ttfb_ms'],
  ['attempts', 'attempts'],
  ['attemptPath', 'attempt_path'],
  ['stageTimings', 'stage_timings'],
  ['inputTokens', 'input_tokens'],
  ['outputTokens', 'output_tokens'],
  ['clientIp', 'client_ip'],
  ['requestBody', 'request_body'],
] as const satisfies readonly (readonly [keyof RequestLogRow, string])[]

export function createRequestLogRepository(db: Db) {
  // The log flush is the one write on the request path's timer: a prepared statement per row in one
  // transaction costs a few microseconds a row, where the query builder costs tens.
  const insertRow = db.$client.prepare(
    `insert into request_logs (${logColumns.map(([, column]) => column).join(', ')}) values (${logColumns.map(() => '?').join(', ')})`,
  )
  const insertBatch = db.$client.transaction((rows: RequestLogRow[]) => {
    for (const row of rows) {
      insertRow.run(
        ...logColumns.map(([field]) => {
          const value = row[field]
          return typeof value === 'boolean' ? (value ? 1 : 0) : (value ?? null)
        }),
      )
    }
  })
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
      insertBatch(rows)
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
