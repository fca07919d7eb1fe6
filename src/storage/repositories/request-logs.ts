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
  // The log flush is the one write on the request path's timer: a prepared statement per row in one
  // transaction costs a few microseconds a row, where the query builder costs tens.
  const insertRow = db.$client.prepare(
    `insert into request_logs (id, workspace_id, key_id, created_at, endpoint, gateway, provider_key_id, model, upstream_model,
      status, error_code, stream, latency_ms, overhead_ms, ttfb_ms, attempts, attempt_path, stage_timings, input_tokens,
      output_tokens, client_ip, request_body) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
  const insertBatch = db.$client.transaction((rows: RequestLogRow[]) => {
    for (const row of rows) {
      insertRow.run(
        row.id,
        row.workspaceId,
        row.keyId ?? null,
        row.createdAt,
        row.endpoint,
        row.gateway ?? null,
        row.providerKeyId ?? null,
        row.model ?? null,
        row.upstreamModel ?? null,
        row.status,
        row.errorCode ?? null,
        row.stream ? 1 : 0,
        row.latencyMs,
        row.overheadMs ?? null,
        row.ttfbMs ?? null,
        row.attempts ?? 0,
        row.attemptPath ?? null,
        row.stageTimings ?? null,
        row.inputTokens ?? null,
        row.outputTokens ?? null,
        row.clientIp ?? null,
        row.requestBody ?? null,
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
