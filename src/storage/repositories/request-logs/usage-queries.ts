/**
 * The request log's reads: the usage answers (summary, series, tokens, breakdown) from the roll-ups
 * and the rows of a window's first, partial hour; the request explorer's rows; what counts against
 * keys' limits; the first-byte histogram the budget learning reads.
 */
import { and, count, eq, gte, inArray, isNotNull, lt, ne, sql, type SQL } from 'drizzle-orm'
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core'
import type { Db } from '../../client'
import { requestLogs, usageDailyRollups, usageRollups } from '../../schema'
import { dayMs, hourMs, type KeyWindows, type RecentFilter, type RollupTable, type UsageFilter } from './types'

/** A part of a usage window answered from one roll-up table. */
interface RolledPart {
  table: RollupTable
  where: SQL
}

/** The reads, over the query builder (and over prepared statements where a job reads many times). */
export function prepareUsageQueries(db: Db) {
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
    cacheHits: sql<number>`coalesce(sum(${table.cacheHits}), 0)`,
    savedNanoUsd: sql<number>`coalesce(sum(${table.savedNanoUsd}), 0)`,
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
    cacheHits: sql<number>`coalesce(sum(case when ${requestLogs.cache} is not null then 1 else 0 end), 0)`,
    savedNanoUsd: sql<number>`coalesce(sum(${requestLogs.savedNanoUsd}), 0)`,
  })
  const emptySums = () => ({ requests: 0, errors: 0, latencySum: 0, latencyCount: 0, overheadSum: 0, overheadCount: 0, costNanoUsd: 0, unpriced: 0, cacheHits: 0, savedNanoUsd: 0 })
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
     * `costNanoUsd` the known costs summed in whole nano-dollars, `unpriced` the requests of unknown cost,
     * `cacheHits` the answers the response cache gave and `savedNanoUsd` their known savings summed
     * (CONTRACT §15).
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
        cacheHits: Number(total.cacheHits),
        savedNanoUsd: Number(total.savedNanoUsd),
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
