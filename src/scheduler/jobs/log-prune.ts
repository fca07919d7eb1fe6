/**
 * The daily `log-prune` job (CONTRACT §14 "Retention and backup", §12 "Audit log"):
 * - request-log rows older than RT_LOG_RETENTION_DAYS are deleted. The usage roll-ups are kept, so
 *   usage over older windows still answers: the day roll-ups for good, the hour roll-ups as long as
 *   the rows (and at least two days). No usage window reads an hour bucket older than a day and an
 *   hour: the 24-hour window is read by the hour, the longer ones by the day from a UTC midnight
 *   (storage/repositories/request-logs.ts `window`). Without this, hour buckets would be the one
 *   thing that grows without end at constant traffic.
 * - captured request bodies older than RT_BODY_RETENTION_DAYS are cleared. The rows stay.
 * - audit events older than RT_AUDIT_RETENTION_DAYS are deleted.
 *
 * It runs on the scheduler's thread, under its lease, never on the serving thread. It works in
 * small batches, each a transaction of its own that holds the write lock for about half a
 * millisecond, with a pause between batches. So the serving thread's log flush, which shares that
 * lock, waits at most one batch.
 *
 * The database is never vacuumed: the pages a prune frees go on SQLite's free list and are reused
 * by the next days' rows. At constant traffic the file stops growing once it holds the retention
 * window.
 */
import type { Config } from '../../config/env'
import type { Storage } from '../../storage/client'
import type { Repositories } from '../../storage/repositories'
import type { JobDeps, JobProgress } from '../job-deps'

const dayMs = 24 * 3_600_000

/** What a prune deletes from, how long each kind is kept, and the batched writes it deletes in. */
export type LogPruneDeps = Pick<JobDeps, 'now'> & {
  repositories: Pick<Repositories, 'requestLogs' | 'auditEvents'>
  config: Pick<Config, 'logRetentionDays' | 'bodyRetentionDays' | 'auditRetentionDays'>
  storage: Pick<Storage, 'batchedWrites'>
}

export interface PruneOptions {
  /** Rows per transaction, fixed; by default the size adapts to the time a transaction takes. */
  batch?: number
  /** The pause between two transactions, ms, in which other writers take the lock. */
  pauseMs?: number
  /** The WAL size past which the run checkpoints on its own (storage batchedWrites), and how often it looks. */
  walLimitBytes?: number
  walCheckEvery?: number
}

/**
 * A transaction aims at about half a millisecond. The serving thread's flush that finds the lock
 * taken sleeps 1 ms, then 2 ms more (SQLite's busy handler): a transaction shorter than the first
 * sleep, followed by a pause longer than the second, lets the flush in at its first retry.
 */
const targetMs = 0.5
const pauseMs = 3
const smallest = 16
const largest = 4096
/** How often (in transactions) the run looks at the WAL's size, to checkpoint it if it grew large. */
const walCheckEvery = 32

/**
 * Runs `step` (one transaction that handles at most `limit` items) until it handles fewer than it
 * was allowed; returns the total. Without a fixed `batch`, the limit is halved after a transaction
 * that took over twice the target time and doubled after one that took under half of it.
 */
async function inBatches(deps: Pick<LogPruneDeps, 'storage'>, step: (limit: number) => number, options: PruneOptions, onBatch: (done: number) => void): Promise<number> {
  const writes = deps.storage.batchedWrites(options.walLimitBytes)
  let limit = options.batch ?? 64
  let total = 0
  try {
    for (let transactions = 1; ; transactions++) {
      const started = performance.now()
      const done = step(limit)
      const tookMs = performance.now() - started
      total += done
      onBatch(done)
      if (done < limit) return total
      if (options.batch === undefined) {
        if (tookMs > targetMs * 2) limit = Math.max(smallest, limit >> 1)
        else if (tookMs < targetMs / 2) limit = Math.min(largest, limit << 1)
      }
      if (transactions % (options.walCheckEvery ?? walCheckEvery) === 0) writes.checkpointIfLarge()
      await Bun.sleep(options.pauseMs ?? pauseMs)
    }
  } finally {
    writes.checkpointIfLarge()
    writes.end()
  }
}

export async function pruneLogs(deps: LogPruneDeps, progress: JobProgress, options: PruneOptions = {}): Promise<Record<string, unknown>> {
  const { requestLogs, auditEvents } = deps.repositories
  const now = deps.now().getTime()
  const logsBefore = now - deps.config.logRetentionDays * dayMs
  const bodiesBefore = now - deps.config.bodyRetentionDays * dayMs
  const auditBefore = new Date(now - deps.config.auditRetentionDays * dayMs).toISOString()
  let done = 0
  const count = (handled: number) => progress((done += handled), done)

  let rows = 0
  for (const workspaceId of requestLogs.workspaceIds()) {
    rows += await inBatches(deps, (limit) => requestLogs.deleteBefore(workspaceId, logsBefore, limit), options, count)
  }
  const hoursBefore = Math.min(logsBefore, now - 2 * dayMs)
  let hours = 0
  for (const workspaceId of requestLogs.rolledWorkspaceIds()) {
    hours += await inBatches(deps, (limit) => requestLogs.deleteHoursBefore(workspaceId, hoursBefore, limit), options, count)
  }
  // After the rows: a body of a row deleted above is not cleared first.
  const bodies = await inBatches(deps, (limit) => requestLogs.clearBodiesBefore(bodiesBefore, limit), options, count)
  const audit = await inBatches(deps, (limit) => auditEvents.deleteBefore(auditBefore, limit), options, count)
  const iso = (time: number) => new Date(time).toISOString()
  return {
    request_logs: { deleted: rows, retention_days: deps.config.logRetentionDays, before: iso(logsBefore) },
    hour_rollups: { deleted: hours, before: iso(hoursBefore) },
    request_bodies: { cleared: bodies, retention_days: deps.config.bodyRetentionDays, before: iso(bodiesBefore) },
    audit_events: { deleted: audit, retention_days: deps.config.auditRetentionDays, before: auditBefore },
  }
}
