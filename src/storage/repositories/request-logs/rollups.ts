/**
 * The usage roll-ups (schema usage_rollups, usage_daily_rollups), kept in the transaction that
 * inserts the rows: a batch's rows summed per hour, key, model and gateway in memory, those sums per
 * day, then one upsert per group.
 */
import type { Db } from '../../client'
import type { usageRollups } from '../../schema'
import { dayMs, hourMs, type RequestLogRow } from './types'

/** One roll-up row's sums for a batch, before it is added to the stored row. */
type RollupSums = typeof usageRollups.$inferSelect

const sumNames = ['requests', 'errors', 'latencySum', 'latencyCount', 'overheadSum', 'overheadCount', 'inputTokens', 'outputTokens', 'costNanoUsd', 'unpriced', 'cacheHits', 'savedNanoUsd'] as const

/** Adds rows to the hour and day roll-ups; called inside the transaction that inserts them. */
export type RollUp = (rows: Iterable<RequestLogRow>) => void

/** Prepares the two upserts once and returns the function that rolls a batch's rows up with them. */
export function prepareRollUp(db: Db): RollUp {
  const upsertInto = (table: string, start: string) =>
    db.$client.prepare(
      `insert into ${table} (workspace_id, ${start}, key_id, model, gateway, requests, errors, latency_sum, latency_count, overhead_sum, overhead_count, input_tokens, output_tokens, cost_nano_usd, unpriced, cache_hits, saved_nano_usd)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (workspace_id, ${start}, key_id, model, gateway) do update set
         requests = requests + excluded.requests, errors = errors + excluded.errors,
         latency_sum = latency_sum + excluded.latency_sum, latency_count = latency_count + excluded.latency_count,
         overhead_sum = overhead_sum + excluded.overhead_sum, overhead_count = overhead_count + excluded.overhead_count,
         input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         cost_nano_usd = cost_nano_usd + excluded.cost_nano_usd, unpriced = unpriced + excluded.unpriced,
         cache_hits = cache_hits + excluded.cache_hits, saved_nano_usd = saved_nano_usd + excluded.saved_nano_usd`,
    )
  const upsertHour = upsertInto('usage_rollups', 'hour')
  const upsertDay = upsertInto('usage_daily_rollups', 'day')
  const upsert = (statement: typeof upsertHour, sums: RollupSums) =>
    statement.run(sums.workspaceId, sums.start, sums.keyId, sums.model, sums.gateway, sums.requests, sums.errors, sums.latencySum, sums.latencyCount, sums.overheadSum, sums.overheadCount, sums.inputTokens, sums.outputTokens, sums.costNanoUsd, sums.unpriced, sums.cacheHits, sums.savedNanoUsd)
  return (rows) => {
    const groups = new Map<string, RollupSums>()
    for (const row of rows) {
      const hour = row.createdAt - (row.createdAt % hourMs)
      const keyId = row.keyId ?? ''
      const model = row.model ?? ''
      const gateway = row.gateway ?? ''
      const id = `${row.workspaceId}\u0000${hour}\u0000${keyId}\u0000${model}\u0000${gateway}`
      let sums = groups.get(id)
      if (!sums) {
        sums = { workspaceId: row.workspaceId, start: hour, keyId, model, gateway, requests: 0, errors: 0, latencySum: 0, latencyCount: 0, overheadSum: 0, overheadCount: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0, unpriced: 0, cacheHits: 0, savedNanoUsd: 0 }
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
      // A cache answer (CONTRACT §15) is counted, and what it saved summed; an unpriced saving adds nothing.
      if (row.cache !== null && row.cache !== undefined) sums.cacheHits++
      sums.savedNanoUsd += row.savedNanoUsd ?? 0
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
}
