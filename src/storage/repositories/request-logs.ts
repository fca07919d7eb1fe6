/** Request-log rows: batched inserts from the log queue, and the usage aggregates read from them. */
import { and, count, eq, gte, inArray, isNotNull, lt, ne, sql, type SQL } from 'drizzle-orm'
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core'
import type { Db } from '../client'
import { requestLogs, usageDailyRollups, usageRollups } from '../schema'

export type RequestLogRow = typeof requestLogs.$inferInsert

export interface UsageFilter {
  workspaceId: string
  sinceMs: number
  keyIds?: string[]
}

/**
 * A key's usage as the database shows it: [second, requests, tokens] since a time, and [UTC day
 * start, its recorded cost in whole nano-dollars (storage/money.ts)].
 */
export interface KeyWindows {
  seconds: [second: number, requests: number, tokens: number][]
  days: [dayMs: number, nanoUsd: number][]
}

/** The request explorer's filter: a workspace's rows since a time, newest first. */
export interface RecentFilter {
  workspaceId: string
  sinceMs: number
  keyId?: string
  /** `ok`: below 400; `error`: 400 and above (what the usage summary counts as errors); a number: that status. */
  status?: 'ok' | 'error' | number
  model?: string
  limit: number
}

const hourMs = 3_600_000
const dayMs = 24 * hourMs

/** One roll-up row's sums for a batch, before it is added to the stored row. */
type RollupSums = typeof usageRollups.$inferSelect

/** The hour and the day roll-ups: one table type (schema `rollupTable`), so one query serves both. */
type RollupTable = typeof usageRollups

const sumNames = ['requests', 'errors', 'latencySum', 'latencyCount', 'overheadSum', 'overheadCount', 'inputTokens', 'outputTokens', 'costNanoUsd', 'unpriced'] as const

/** A part of a usage window answered from one roll-up table. */
interface RolledPart {
  table: RollupTable
  where: SQL
}

export function createRequestLogRepository(db: Db) {
  // The log flush is the one write on the request path's timer. Rows go in as multi-row INSERTs of
  // `rowsPerStatement` rows (one statement step per group instead of per row), the rest one by one;
  // both are prepared once. The query builder would cost tens of microseconds a row.
  const columns = `id, workspace_id, key_id, created_at, endpoint, gateway, provider_key_id, model, upstream_model,
      status, error_code, stream, latency_ms, overhead_ms, ttfb_ms, attempts, attempt_path, stage_timings, input_tokens,
      output_tokens, cost_nano_usd, client_ip, request_body, enrichment`
  const columnCount = 24
  const rowsPerStatement = 32
  const placeholders = `(${new Array(columnCount).fill('?').join(', ')})`
  const insertOne = db.$client.prepare(`insert into request_logs (${columns}) values ${placeholders}`)
  const insertGroup = db.$client.prepare(`insert into request_logs (${columns}) values ${new Array(rowsPerStatement).fill(placeholders).join(', ')}`)
  // A replayed row (from the request journal after a crash that came between the commit and the
  // journal's release) may be there already: found through the workspace/time index, then its id.
  const insertIfAbsent = db.$client.prepare(
    `insert into request_logs (${columns}) select ${placeholders.slice(1, -1)} where not exists (select 1 from request_logs where workspace_id = ? and created_at = ? and id = ?)`,
  )
  // The roll-ups (schema usage_rollups, usage_daily_rollups): each batch's rows summed per hour, key,
  // model and gateway in memory, those sums per day, then one upsert per group, in the batch's own
  // transaction.
  const upsertInto = (table: string, start: string) =>
    db.$client.prepare(
      `insert into ${table} (workspace_id, ${start}, key_id, model, gateway, requests, errors, latency_sum, latency_count, overhead_sum, overhead_count, input_tokens, output_tokens, cost_nano_usd, unpriced)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (workspace_id, ${start}, key_id, model, gateway) do update set
         requests = requests + excluded.requests, errors = errors + excluded.errors,
         latency_sum = latency_sum + excluded.latency_sum, latency_count = latency_count + excluded.latency_count,
         overhead_sum = overhead_sum + excluded.overhead_sum, overhead_count = overhead_count + excluded.overhead_count,
         input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         cost_nano_usd = cost_nano_usd + excluded.cost_nano_usd, unpriced = unpriced + excluded.unpriced`,
    )
  const upsertHour = upsertInto('usage_rollups', 'hour')
  const upsertDay = upsertInto('usage_daily_rollups', 'day')
  const upsert = (statement: typeof upsertHour, sums: RollupSums) =>
    statement.run(sums.workspaceId, sums.start, sums.keyId, sums.model, sums.gateway, sums.requests, sums.errors, sums.latencySum, sums.latencyCount, sums.overheadSum, sums.overheadCount, sums.inputTokens, sums.outputTokens, sums.costNanoUsd, sums.unpriced)
  const rollUp = (rows: Iterable<RequestLogRow>) => {
    const groups = new Map<string, RollupSums>()
    for (const row of rows) {
      const hour = row.createdAt - (row.createdAt % hourMs)
      const keyId = row.keyId ?? ''
      const model = row.model ?? ''
      const gateway = row.gateway ?? ''
      const id = `${row.workspaceId}\u0000${hour}\u0000${keyId}\u0000${model}\u0000${gateway}`
      let sums = groups.get(id)
      if (!sums) {
        sums = { workspaceId: row.workspaceId, start: hour, keyId, model, gateway, requests: 0, errors: 0, latencySum: 0, latencyCount: 0, overheadSum: 0, overheadCount: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0, unpriced: 0 }
        groups.set(id, sums)
      }
      sums.requests++
      if (row.status >= 400) sums.errors++
      sums.latencySum += row.latencyMs
      sums.latencyCount++
      if (row.overheadMs !== null && row.overheadMs !== undefined) {
        sums.overheadSum += row.overheadMs
        sums.overheadCount++
      }
      sums.inputTokens += row.inputTokens ?? 0
      sums.outputTokens += row.outputTokens ?? 0
      if (row.costNanoUsd === null || row.costNanoUsd === undefined) sums.unpriced++
      else sums.costNanoUsd += row.costNanoUsd
    }
    const days = new Map<string, RollupSums>()
    for (const sums of groups.values()) {
      upsert(upsertHour, sums)
      const day = sums.start - (sums.start % dayMs)
      const id = `${sums.workspaceId}\u0000${day}\u0000${sums.keyId}\u0000${sums.model}\u0000${sums.gateway}`
      const daySums = days.get(id)
      if (!daySums) days.set(id, { ...sums, start: day })
      else for (const name of sumNames) daySums[name] += sums[name]
    }
    for (const sums of days.values()) upsert(upsertDay, sums)
  }
  const groupParameters: (string | number | null)[] = new Array(rowsPerStatement * columnCount)
  const setParameters = (target: (string | number | null)[], offset: number, row: RequestLogRow) => {
    target[offset] = row.id
    target[offset + 1] = row.workspaceId
    target[offset + 2] = row.keyId ?? null
    target[offset + 3] = row.createdAt
    target[offset + 4] = row.endpoint
    target[offset + 5] = row.gateway ?? null
    target[offset + 6] = row.providerKeyId ?? null
    target[offset + 7] = row.model ?? null
    target[offset + 8] = row.upstreamModel ?? null
    target[offset + 9] = row.status
    target[offset + 10] = row.errorCode ?? null
    target[offset + 11] = row.stream ? 1 : 0
    target[offset + 12] = row.latencyMs
    target[offset + 13] = row.overheadMs ?? null
    target[offset + 14] = row.ttfbMs ?? null
    target[offset + 15] = row.attempts ?? 0
    target[offset + 16] = row.attemptPath ?? null
    target[offset + 17] = row.stageTimings ?? null
    target[offset + 18] = row.inputTokens ?? null
    target[offset + 19] = row.outputTokens ?? null
    target[offset + 20] = row.costNanoUsd ?? null
    target[offset + 21] = row.clientIp ?? null
    target[offset + 22] = row.requestBody ?? null
    target[offset + 23] = row.enrichment ?? null
  }
  const oneParameters: (string | number | null)[] = new Array(columnCount)
  const insertBatch = db.$client.transaction((rows: RequestLogRow[]): number => {
    let inserted = 0
    let index = 0
    for (; index + rowsPerStatement <= rows.length; index += rowsPerStatement) {
      for (let row = 0; row < rowsPerStatement; row++) setParameters(groupParameters, row * columnCount, rows[index + row]!)
      inserted += insertGroup.run(...groupParameters).changes
    }
    for (; index < rows.length; index++) {
      setParameters(oneParameters, 0, rows[index]!)
      inserted += insertOne.run(...oneParameters).changes
    }
    rollUp(rows)
    return inserted
  })
  const ifAbsentParameters: (string | number | null)[] = new Array(columnCount + 3)
  const insertIfAbsentBatch = db.$client.transaction((rows: RequestLogRow[]): number => {
    const added: RequestLogRow[] = []
    for (const row of rows) {
      setParameters(ifAbsentParameters, 0, row)
      ifAbsentParameters[columnCount] = row.workspaceId
      ifAbsentParameters[columnCount + 1] = row.createdAt
      ifAbsentParameters[columnCount + 2] = row.id
      if (insertIfAbsent.run(...ifAbsentParameters).changes > 0) added.push(row)
    }
    // Only the rows written now are rolled up: the others were when they were written.
    rollUp(added)
    return added.length
  })

  // Retention (CONTRACT §14), for the daily prune: small batches, each its own statement (and so its
  // own transaction), found through an index. The workspaces that have rows come from a skip scan of
  // the workspace/time index, one seek each; a workspace's old rows are the front of its part of it.
  const nextWorkspace = db.$client.prepare<{ workspace_id: string }, [string]>('select workspace_id from request_logs where workspace_id > ? order by workspace_id limit 1')
  const firstWorkspace = db.$client.prepare<{ workspace_id: string }, []>('select workspace_id from request_logs order by workspace_id limit 1')
  const deleteOld = db.$client.prepare<unknown, [string, number, number]>(
    'delete from request_logs where seq in (select seq from request_logs where workspace_id = ? and created_at < ? limit ?)',
  )
  // Hour roll-ups by their primary key (workspace first, then hour); day roll-ups are never deleted.
  const nextRolledWorkspace = db.$client.prepare<{ workspace_id: string }, [string]>('select workspace_id from usage_rollups where workspace_id > ? order by workspace_id limit 1')
  const firstRolledWorkspace = db.$client.prepare<{ workspace_id: string }, []>('select workspace_id from usage_rollups order by workspace_id limit 1')
  const deleteOldHours = db.$client.prepare<unknown, [string, number, number]>(
    'delete from usage_rollups where rowid in (select rowid from usage_rollups where workspace_id = ? and hour < ? limit ?)',
  )
  // Through the partial index request_logs_body_time_idx: only rows that still hold a body.
  const clearOldBodies = db.$client.prepare<unknown, [number, number]>(
    'update request_logs set request_body = null where seq in (select seq from request_logs where request_body is not null and created_at < ? limit ?)',
  )

  const firstBytes = db.$client.prepare<{ gateway: string; ms: number; count: number }, [string, number]>(
    `select gateway, cast(round(ttfb_ms) as integer) as ms, count(*) as count from request_logs
     where workspace_id = ? and created_at >= ? and stream = 1 and status < 400 and gateway is not null and ttfb_ms is not null
     group by gateway, ms`,
  )

  /** The sums a usage answer is made of, over a roll-up table and over rows (averages are sums over counts). */
  const rolledSums = (table: RollupTable) => ({
    requests: sql<number>`coalesce(sum(${table.requests}), 0)`,
    errors: sql<number>`coalesce(sum(${table.errors}), 0)`,
    latencySum: sql<number>`coalesce(sum(${table.latencySum}), 0)`,
    latencyCount: sql<number>`coalesce(sum(${table.latencyCount}), 0)`,
    overheadSum: sql<number>`coalesce(sum(${table.overheadSum}), 0)`,
    overheadCount: sql<number>`coalesce(sum(${table.overheadCount}), 0)`,
    costNanoUsd: sql<number>`coalesce(sum(${table.costNanoUsd}), 0)`,
    unpriced: sql<number>`coalesce(sum(${table.unpriced}), 0)`,
  })
  const rowSums = () => ({
    requests: count(),
    errors: sql<number>`coalesce(sum(case when ${requestLogs.status} >= 400 then 1 else 0 end), 0)`,
    latencySum: sql<number>`coalesce(sum(${requestLogs.latencyMs}), 0)`,
    latencyCount: count(requestLogs.latencyMs),
    overheadSum: sql<number>`coalesce(sum(${requestLogs.overheadMs}), 0)`,
    overheadCount: count(requestLogs.overheadMs),
    costNanoUsd: sql<number>`coalesce(sum(${requestLogs.costNanoUsd}), 0)`,
    unpriced: sql<number>`coalesce(sum(case when ${requestLogs.costNanoUsd} is null then 1 else 0 end), 0)`,
  })
  const emptySums = () => ({ requests: 0, errors: 0, latencySum: 0, latencyCount: 0, overheadSum: 0, overheadCount: 0, costNanoUsd: 0, unpriced: 0 })
  type UsageSums = ReturnType<typeof emptySums>
  const addSums = (target: UsageSums, row: Record<keyof UsageSums, number>) => {
    for (const name of Object.keys(target) as (keyof UsageSums)[]) target[name] += Number(row[name])
  }
  const keyFilter = (column: SQLiteColumn, filter: UsageFilter) => (filter.keyIds && filter.keyIds.length > 0 ? inArray(column, filter.keyIds) : undefined)
  /**
   * Where a window's usage is read: the rows of the part of an hour it starts in (none when it starts
   * on the hour, as the usage API's windows do), hour buckets up to its first UTC midnight and day
   * buckets from there on; or hour buckets all along with `days` false (a series whose buckets are
   * not whole days).
   */
  const window = (filter: UsageFilter, days = true): { parts: RolledPart[]; edge: SQL | undefined } => {
    const fromHour = Math.ceil(filter.sinceMs / hourMs) * hourMs
    const fromDay = Math.ceil(fromHour / dayMs) * dayMs
    const scope = (table: RollupTable, from: number, to: number | undefined) =>
      and(eq(table.workspaceId, filter.workspaceId), gte(table.start, from), to === undefined ? undefined : lt(table.start, to), keyFilter(table.keyId, filter))!
    const parts: RolledPart[] = []
    if (!days) parts.push({ table: usageRollups, where: scope(usageRollups, fromHour, undefined) })
    else {
      if (fromHour < fromDay) parts.push({ table: usageRollups, where: scope(usageRollups, fromHour, fromDay) })
      parts.push({ table: usageDailyRollups, where: scope(usageDailyRollups, fromDay, undefined) })
    }
    if (fromHour === filter.sinceMs) return { parts, edge: undefined }
    const edge = and(eq(requestLogs.workspaceId, filter.workspaceId), gte(requestLogs.createdAt, filter.sinceMs), lt(requestLogs.createdAt, fromHour), keyFilter(requestLogs.keyId, filter))!
    return { parts, edge }
  }

  return {
    /** Writes a batch of new rows in one transaction; returns the rows inserted. */
    insertMany(rows: RequestLogRow[]): number {
      if (rows.length === 0) return 0
      return insertBatch(rows)
    },
    /** Writes replayed rows in one transaction, skipping any already there (same request); returns the rows inserted. */
    insertManyIfAbsent(rows: RequestLogRow[]): number {
      if (rows.length === 0) return 0
      return insertIfAbsentBatch(rows)
    },
    /** The request explorer: the newest rows matching the filter (through the workspace/time index, newest first). */
    recent(filter: RecentFilter) {
      const conditions: SQL[] = [eq(requestLogs.workspaceId, filter.workspaceId), gte(requestLogs.createdAt, filter.sinceMs)]
      if (filter.keyId !== undefined) conditions.push(eq(requestLogs.keyId, filter.keyId))
      if (filter.model !== undefined) conditions.push(eq(requestLogs.model, filter.model))
      if (filter.status === 'ok') conditions.push(lt(requestLogs.status, 400))
      else if (filter.status === 'error') conditions.push(gte(requestLogs.status, 400))
      else if (filter.status !== undefined) conditions.push(eq(requestLogs.status, filter.status))
      return db
        .select()
        .from(requestLogs)
        .where(and(...conditions))
        .orderBy(sql`${requestLogs.createdAt} desc`, sql`${requestLogs.seq} desc`)
        .limit(filter.limit)
        .all()
    },
    count(workspaceId?: string): number {
      const query = db.select({ value: count() }).from(requestLogs)
      return (workspaceId ? query.where(eq(requestLogs.workspaceId, workspaceId)) : query).get()!.value
    },
    /**
     * The usage of a window, from the roll-ups and the rows of its first, partial hour (see `window`);
     * `costNanoUsd` the known costs summed in whole nano-dollars, `unpriced` the requests of unknown cost.
     */
    summary(filter: UsageFilter) {
      const { parts, edge } = window(filter)
      const total = emptySums()
      const models = new Set<string>()
      for (const { table, where } of parts) {
        addSums(total, db.select(rolledSums(table)).from(table).where(where).get()!)
        for (const { model } of db.selectDistinct({ model: table.model }).from(table).where(and(where, ne(table.model, ''))).all()) models.add(model)
      }
      if (edge) {
        addSums(total, db.select(rowSums()).from(requestLogs).where(edge).get()!)
        for (const { model } of db.selectDistinct({ model: requestLogs.model }).from(requestLogs).where(and(edge, isNotNull(requestLogs.model))).all()) models.add(model!)
      }
      return {
        requests: Number(total.requests),
        errors: Number(total.errors),
        avgLatency: total.latencyCount > 0 ? total.latencySum / total.latencyCount : null,
        avgOverhead: total.overheadCount > 0 ? total.overheadSum / total.overheadCount : null,
        models: models.size,
        costNanoUsd: Number(total.costNanoUsd),
        unpriced: Number(total.unpriced),
      }
    },
    /** Usage grouped by bucket start (ms), where the bucket is `floor(time / size) * size` (size a whole number of hours). */
    series(filter: UsageFilter, bucketMs: number) {
      const { parts, edge } = window(filter, bucketMs % dayMs === 0)
      const buckets = new Map<number, UsageSums>()
      const add = (bucket: number, row: Record<keyof UsageSums, number>) => {
        let sums = buckets.get(bucket)
        if (!sums) buckets.set(bucket, (sums = emptySums()))
        addSums(sums, row)
      }
      for (const { table, where } of parts) {
        const rolledBucket = sql<number>`(${table.start} / ${bucketMs}) * ${bucketMs}`
        for (const row of db
          .select({ bucket: rolledBucket, ...rolledSums(table) })
          .from(table)
          .where(where)
          .groupBy(rolledBucket)
          .all())
          add(Number(row.bucket), row)
      }
      if (edge) {
        const rowBucket = sql<number>`(${requestLogs.createdAt} / ${bucketMs}) * ${bucketMs}`
        for (const row of db
          .select({ bucket: rowBucket, ...rowSums() })
          .from(requestLogs)
          .where(edge)
          .groupBy(rowBucket)
          .all())
          add(Number(row.bucket), row)
      }
      return [...buckets].map(([bucket, sums]) => ({
        bucket,
        requests: sums.requests,
        errors: sums.errors,
        avgLatency: sums.latencyCount > 0 ? sums.latencySum / sums.latencyCount : null,
        avgOverhead: sums.overheadCount > 0 ? sums.overheadSum / sums.overheadCount : null,
      }))
    },
    /**
     * Tokens by model and gateway over the window (the dashboard's token and cost table); `costNanoUsd`
     * the known costs summed in whole nano-dollars, `unpriced` the requests of unknown cost.
     */
    tokens(filter: UsageFilter) {
      const { parts, edge } = window(filter)
      const sums = new Map<string, { model: string; gateway: string; requests: number; inputTokens: number; outputTokens: number; costNanoUsd: number; unpriced: number }>()
      const add = (model: string, gateway: string, requests: number, inputTokens: number, outputTokens: number, costNanoUsd: number, unpriced: number) => {
        const key = `${model}\u0000${gateway}`
        const entry = sums.get(key) ?? { model, gateway, requests: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0, unpriced: 0 }
        entry.requests += requests
        entry.inputTokens += inputTokens
        entry.outputTokens += outputTokens
        entry.costNanoUsd += costNanoUsd
        entry.unpriced += unpriced
        sums.set(key, entry)
      }
      for (const { table, where } of parts) {
        for (const row of db
          .select({
            model: table.model,
            gateway: table.gateway,
            requests: sql<number>`sum(${table.requests})`,
            inputTokens: sql<number>`sum(${table.inputTokens})`,
            outputTokens: sql<number>`sum(${table.outputTokens})`,
            costNanoUsd: sql<number>`sum(${table.costNanoUsd})`,
            unpriced: sql<number>`sum(${table.unpriced})`,
          })
          .from(table)
          .where(where)
          .groupBy(table.model, table.gateway)
          .all())
          add(row.model, row.gateway, Number(row.requests), Number(row.inputTokens), Number(row.outputTokens), Number(row.costNanoUsd), Number(row.unpriced))
      }
      if (edge) {
        for (const row of db
          .select({
            model: requestLogs.model,
            gateway: requestLogs.gateway,
            requests: count(),
            inputTokens: sql<number>`coalesce(sum(${requestLogs.inputTokens}), 0)`,
            outputTokens: sql<number>`coalesce(sum(${requestLogs.outputTokens}), 0)`,
            costNanoUsd: sql<number>`coalesce(sum(${requestLogs.costNanoUsd}), 0)`,
            unpriced: sql<number>`coalesce(sum(case when ${requestLogs.costNanoUsd} is null then 1 else 0 end), 0)`,
          })
          .from(requestLogs)
          .where(edge)
          .groupBy(requestLogs.model, requestLogs.gateway)
          .all())
          add(row.model ?? '', row.gateway ?? '', row.requests, Number(row.inputTokens), Number(row.outputTokens), Number(row.costNanoUsd), Number(row.unpriced))
      }
      return [...sums.values()].sort((left, right) => right.inputTokens + right.outputTokens - (left.inputTokens + left.outputTokens) || right.requests - left.requests)
    },
    /**
     * Requests per model or gateway, most first (ties by name), at most `limit`; each with its known
     * costs summed in whole nano-dollars (`costNanoUsd`) and its requests of unknown cost (`unpriced`).
     */
    breakdown(filter: UsageFilter, by: 'model' | 'gateway', limit: number) {
      const { parts, edge } = window(filter)
      const counts = new Map<string, { requests: number; costNanoUsd: number; unpriced: number }>()
      const add = (name: string, requests: number, costNanoUsd: number, unpriced: number) => {
        const entry = counts.get(name) ?? { requests: 0, costNanoUsd: 0, unpriced: 0 }
        entry.requests += requests
        entry.costNanoUsd += costNanoUsd
        entry.unpriced += unpriced
        counts.set(name, entry)
      }
      for (const { table, where } of parts) {
        const rolledColumn = by === 'model' ? table.model : table.gateway
        for (const row of db
          .select({ name: rolledColumn, requests: sql<number>`sum(${table.requests})`, costNanoUsd: sql<number>`sum(${table.costNanoUsd})`, unpriced: sql<number>`sum(${table.unpriced})` })
          .from(table)
          .where(and(where, ne(rolledColumn, '')))
          .groupBy(rolledColumn)
          .all())
          add(row.name, Number(row.requests), Number(row.costNanoUsd), Number(row.unpriced))
      }
      if (edge) {
        const column = by === 'model' ? requestLogs.model : requestLogs.gateway
        const sums = rowSums()
        for (const row of db.select({ name: column, requests: count(), costNanoUsd: sums.costNanoUsd, unpriced: sums.unpriced }).from(requestLogs).where(and(edge, isNotNull(column))).groupBy(column).all()) {
          add(row.name!, row.requests, Number(row.costNanoUsd), Number(row.unpriced))
        }
      }
      return [...counts]
        .sort((left, right) => right[1].requests - left[1].requests || (left[0] < right[0] ? -1 : left[0] > right[0] ? 1 : 0))
        .slice(0, limit)
        .map(([name, sums]) => ({ name, requests: sums.requests, costNanoUsd: sums.costNanoUsd, unpriced: sums.unpriced }))
    },
    /**
     * What counts against keys' limits (CONTRACT §11), as the database shows it: each key's requests
     * and tokens per second since `sinceMs` (the minute window, through the workspace/time index; the
     * requests its limits refused count for nothing) and its recorded cost (whole nano-dollars) per UTC day from
     * `fromDayMs` (the day roll-ups, kept with the rows, and what its batches hold or settled to); and which of the rows `own.ids` (a node's own
     * finished requests, created since `own.sinceMs`) are there. One read transaction: the rows found
     * are the ones the sums hold.
     */
    keyWindows(workspaceId: string, keyIds: readonly string[], sinceMs: number, fromDayMs: number, own: { ids: readonly string[]; sinceMs: number; batchIds?: readonly string[] } = { ids: [], sinceMs: 0 }) {
      return db.$client.transaction(() => {
        const windows = new Map<string, KeyWindows>()
        const found: string[] = []
        /** Of `own.batchIds`, the batches whose row holds their reservation now (the sums above count it). */
        const foundBatches: string[] = []
        if (keyIds.length === 0) return { windows, found, foundBatches }
        for (const id of keyIds) windows.set(id, { seconds: [], days: [] })
        const list = keyIds.map(() => '?').join(', ')
        const seconds = db.$client
          .query<{ key_id: string; second: number; requests: number; tokens: number }, (string | number)[]>(
            `select key_id, created_at / 1000 as second, count(*) as requests, coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), 0) as tokens
             from request_logs where workspace_id = ? and created_at >= ? and key_id in (${list})
               and (error_code is null or error_code not in ('key_rate_limited', 'key_budget_exhausted', 'key_budget_unpriced_model'))
             group by key_id, second`,
          )
          .all(workspaceId, sinceMs, ...keyIds)
        for (const row of seconds) windows.get(row.key_id)?.seconds.push([row.second, row.requests, row.tokens])
        const days = db.$client
          .query<{ key_id: string; day: number; nano_usd: number }, (string | number)[]>(
            `select key_id, day, sum(cost_nano_usd) as nano_usd from usage_daily_rollups where workspace_id = ? and day >= ? and key_id in (${list}) group by key_id, day`,
          )
          .all(workspaceId, fromDayMs, ...keyIds)
        for (const row of days) windows.get(row.key_id)?.days.push([row.day, row.nano_usd])
        // Batches of keys with a USD cap hold their items' reservation on their row until they end,
        // then what they settled to, counted on the day they were submitted (batches' key/time index).
        const held = db.$client
          .query<{ key_id: string; day: number; nano_usd: number }, (string | number)[]>(
            `select key_id, (created_at * 1000) - ((created_at * 1000) % ${dayMs}) as day, sum(coalesce(charged_nano_usd, reserved_nano_usd)) as nano_usd
             from batches where key_id in (${list}) and created_at >= ? and workspace_id = ? and reserved_nano_usd is not null group by key_id, day`,
          )
          .all(...keyIds, Math.floor(fromDayMs / 1000), workspaceId)
        for (const row of held) {
          const list = windows.get(row.key_id)?.days
          if (!list) continue
          const same = list.find(([day]) => day === row.day)
          if (same) same[1] += row.nano_usd
          else list.push([row.day, row.nano_usd])
        }
        // In slices: SQLite caps the parameters of one statement.
        for (let start = 0; start < own.ids.length; start += 500) {
          const slice = own.ids.slice(start, start + 500)
          const rows = db.$client
            .query<{ id: string }, (string | number)[]>(`select id from request_logs where workspace_id = ? and created_at >= ? and id in (${slice.map(() => '?').join(', ')})`)
            .all(workspaceId, own.sinceMs, ...slice)
          for (const row of rows) found.push(row.id)
        }
        for (let start = 0; start < (own.batchIds?.length ?? 0); start += 500) {
          const slice = own.batchIds!.slice(start, start + 500)
          const rows = db.$client
            .query<{ id: string }, string[]>(`select id from batches where reserved_nano_usd is not null and id in (${slice.map(() => '?').join(', ')})`)
            .all(...slice)
          for (const row of rows) foundBatches.push(row.id)
        }
        return { windows, found, foundBatches }
      })()
    },
    /** The workspace ids that have rows ('' for requests no key was found for), in order. */
    workspaceIds(): string[] {
      const ids: string[] = []
      for (let row = firstWorkspace.get(); row; row = nextWorkspace.get(row.workspace_id)) ids.push(row.workspace_id)
      return ids
    },
    /** Deletes up to `limit` of a workspace's rows created before `beforeMs`; returns how many. */
    deleteBefore(workspaceId: string, beforeMs: number, limit: number): number {
      return deleteOld.run(workspaceId, beforeMs, limit).changes
    },
    /** The workspace ids that have hour roll-ups, in order. */
    rolledWorkspaceIds(): string[] {
      const ids: string[] = []
      for (let row = firstRolledWorkspace.get(); row; row = nextRolledWorkspace.get(row.workspace_id)) ids.push(row.workspace_id)
      return ids
    },
    /** Deletes up to `limit` of a workspace's hour roll-ups of hours before `beforeMs`; returns how many. */
    deleteHoursBefore(workspaceId: string, beforeMs: number, limit: number): number {
      return deleteOldHours.run(workspaceId, beforeMs, limit).changes
    },
    /** Clears the captured body of up to `limit` rows created before `beforeMs` (the rows stay); returns how many. */
    clearBodiesBefore(beforeMs: number, limit: number): number {
      return clearOldBodies.run(beforeMs, limit).changes
    },
    /**
     * First-byte times of a workspace's successful streamed requests since `sinceMs`, per gateway, as
     * counts per whole millisecond (budget learning, SPEC "Timeouts"). Only a stream's first byte is
     * one: a buffered request's time is its whole answer's. Read through the workspace/time index, and
     * summed in SQL, so a busy window costs a histogram in memory, not its rows.
     */
    firstByteHistogram(workspaceId: string, sinceMs: number): { gateway: string; ms: number; count: number }[] {
      return firstBytes.all(workspaceId, sinceMs)
    },
  }
}
