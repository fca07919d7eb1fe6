/**
 * Starts the scheduled jobs (schedules.ts: catalog crawl daily, budgets every 4 hours, batch refresh
 * and webhook deliveries every 5 minutes) on a worker thread, off the request path. Each run is
 * taken under its lease row, so several processes on one database (roles side by side, a CLI
 * `jobs run`) run each job once. CONTRACT §10 keeps jobs on the primary: the node (cluster/node.ts)
 * starts it on the primary only.
 */
import { workerEntry } from '../worker-entry'
import type { Config } from '../config/env'
import type { Logger } from '../observability/logger'
import { createHolderId } from './lease'
import type { SchedulerCommand, SchedulerReply } from './worker'
import type { ConfigChange, Repositories } from '../storage/repositories'

export interface SchedulerOptions {
  /** How often the worker looks for due jobs; default 1 s (a look is one read of a few rows). */
  tickMs?: number
  /** On stop, how long a run in progress may take to finish before its lease is freed unfinished. */
  stopGraceMs?: number
}

/**
 * What starting and stopping the scheduler uses of this process's runtime (the thread builds its
 * own from the config): the lease rows it frees on stop, and the writes it is told about.
 */
export interface SchedulerDeps {
  /** Sent to the thread, which opens its own connection and runtime with it. */
  config: Config
  logger: Logger
  random: () => number
  repositories: Pick<Repositories, 'jobLeases'>
  /** Listeners told about this process's own configuration writes. */
  onConfigWrite: Set<(change?: ConfigChange) => void>
}

/** Returns the stop function: it resolves once the worker has freed its leases and is ended. */
export function startScheduler(deps: SchedulerDeps, options: SchedulerOptions = {}): () => Promise<void> {
  const holder = createHolderId(deps.random)
  const graceMs = options.stopGraceMs ?? 5000
  // ref false: the server's listener keeps the process alive; the scheduler alone must not.
  const worker = new Worker(workerEntry(new URL('./worker.ts', import.meta.url), './scheduler/worker.ts'), { ref: false })
  let onStopped: (() => void) | undefined
  worker.onmessage = (event: MessageEvent<SchedulerReply>) => {
    const reply = event.data
    if (reply.type === 'failed') deps.logger.error('scheduler_failed', { error: reply.error })
    if (reply.type === 'stopped') onStopped?.()
  }
  worker.onerror = (event) => deps.logger.error('scheduler_failed', { error: event.message })
  // The config crosses as a structured clone (plain data); the worker opens its own connection.
  worker.postMessage({ type: 'start', config: deps.config, holder, tickMs: options.tickMs ?? 1000 } satisfies SchedulerCommand)
  // A provider key written here has its gateway kind's catalog crawled at once if it has none
  // (catalog-follow.ts): the thread is told after the write, which it never delays. A write is
  // announced from inside its transaction, which is synchronous: the message goes once the
  // current task is done, so the thread reads what was committed.
  let announced = false
  const onConfigWrite = (change?: ConfigChange) => {
    if (announced || (change !== undefined && change.table !== 'providers')) return
    announced = true
    queueMicrotask(() => {
      announced = false
      worker.postMessage({ type: 'config-written' } satisfies SchedulerCommand)
    })
  }
  deps.onConfigWrite.add(onConfigWrite)

  let stopped: Promise<void> | undefined
  return () => {
    deps.onConfigWrite.delete(onConfigWrite)
    stopped ??= (async () => {
      let timeout: ReturnType<typeof setTimeout> | undefined
      await Promise.race([
        new Promise<void>((resolve) => {
          onStopped = resolve
          worker.postMessage({ type: 'stop', graceMs } satisfies SchedulerCommand)
        }),
        // A worker that cannot answer (stuck in a query, or it never started) is ended all the same.
        new Promise<void>((resolve) => (timeout = setTimeout(resolve, graceMs + 2000))),
      ])
      clearTimeout(timeout)
      worker.terminate()
      // The worker freed its leases; this covers one that could not. Its runs ended with the thread.
      // On a node LiteFS has just demoted the database refuses the write: the lease then ends by
      // its own time, and the new primary takes it.
      try {
        deps.repositories.jobLeases.abandon(holder)
      } catch (error) {
        deps.logger.warn('job_lease_release_failed', { holder, error: error instanceof Error ? error.message : String(error) })
      }
    })()
    return stopped
  }
}
