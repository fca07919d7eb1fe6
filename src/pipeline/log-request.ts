/**
 * The request-log queue (SPEC "What the service does" 7): finished requests are pushed from the hot
 * path; their rows are built and written in batched transactions on a timer, with last_used_at
 * stamped per key in the same pass. Nothing here touches the database synchronously during a request.
 */
import type { Logger } from '../observability/logger'
import type { Metrics } from '../observability/metrics'
import type { Repositories } from '../storage/repositories'
import type { RequestLogRow } from '../storage/repositories/request-logs'

/** A finished request that can describe its log row (the row is built when the batch is written). */
export interface LogEntry {
  logRow(): RequestLogRow
}

export interface RequestLogQueue {
  push(entry: LogEntry): void
  /** Writes everything queued now (timer, shutdown, tests). */
  flush(): void
  depth(): number
  start(intervalMs?: number): void
  stop(): void
}

/**
 * Rows are written in batches of about `batchSize`: large enough that a commit costs little per
 * row, small enough that one write blocks the event loop for well under a millisecond.
 */
export function createRequestLogQueue(repositories: Repositories, metrics: Metrics, logger: Logger, batchSize = 128, maxQueued = 200_000): RequestLogQueue {
  let queue: LogEntry[] = []
  let timer: ReturnType<typeof setInterval> | undefined
  let scheduled = false

  const flush = () => {
    scheduled = false
    if (queue.length === 0) return
    const entries = queue
    queue = []
    const batch = entries.map((entry) => entry.logRow())
    const lastUsed = new Map<string, number>()
    for (const row of batch) if (row.keyId && row.status !== 401) lastUsed.set(row.keyId, row.createdAt)
    try {
      repositories.requestLogs.insertMany(batch)
      repositories.inferenceKeys.touchLastUsed([...lastUsed].map(([keyId, at]) => ({ keyId, at: new Date(at).toISOString() })))
      metrics.logRowsWritten += batch.length
    } catch (error) {
      // Keep the rows for the next pass rather than losing them, up to a bound: a database that
      // keeps failing must not take the process's memory with it (dropped rows are counted).
      queue = entries.concat(queue)
      if (queue.length > maxQueued) {
        metrics.logRowsDropped += queue.length - maxQueued
        queue = queue.slice(queue.length - maxQueued)
      }
      logger.error('request_log_flush_failed', { rows: batch.length, error: error instanceof Error ? error.message : String(error) })
    }
  }

  const queueApi: RequestLogQueue = {
    push(entry) {
      queue.push(entry)
      if (queue.length >= batchSize && !scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush,
    depth: () => queue.length,
    start(intervalMs = 50) {
      if (timer) return
      timer = setInterval(flush, intervalMs)
      timer.unref?.()
    },
    stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      flush()
    },
  }
  metrics.logQueueDepth = queueApi.depth
  return queueApi
}
