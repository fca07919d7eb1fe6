/**
 * The scheduler's thread (see scheduler.ts startScheduler): its own runtime and SQLite connection,
 * so a job's queries and JSON work never hold up the thread that serves requests. Every tick it
 * runs the jobs that are due, each under its lease (lease.ts), so across every process on the
 * database each run happens once. Log lines go to stdout as JSON, like the main thread's.
 */
import type { Config } from '../config/env'
import { createRuntime, type Runtime } from '../runtime'
import { runUnderLease } from './lease'
import { schedules } from './schedules'

declare const self: Worker

export type SchedulerCommand = { type: 'start'; config: Config; holder: string; tickMs: number } | { type: 'stop'; graceMs: number }
export type SchedulerReply = { type: 'started' } | { type: 'stopped' } | { type: 'failed'; error: string }

let runtime: Runtime | undefined
let holder = ''
let timer: ReturnType<typeof setInterval> | undefined
let stopping = false
/** One run per job at a time in this process; the lease keeps other processes out. */
const running = new Map<string, Promise<void>>()

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

function tick() {
  if (!runtime || stopping) return
  const current = runtime
  try {
    const now = current.now().getTime()
    const rows = new Map(current.repositories.jobLeases.list().map((row) => [row.job, row]))
    for (const schedule of schedules) {
      if (running.has(schedule.job)) continue
      const row = rows.get(schedule.job)
      // Read first, take second: a job that is not due costs a read, not the write lock. A job
      // without a row gets one from the take (first due `firstAfterMs` from now), not a run.
      if (row && (row.nextRunAt > now || row.lockedUntil > now)) continue
      const run = runUnderLease(current, schedule.job, { holder, dueOnly: true, everyMs: schedule.everyMs, firstAfterMs: schedule.firstAfterMs })
        .then(() => {})
        .catch((error) => current.logger.error('job_lease_failed', { job: schedule.job, error: messageOf(error) }))
        .finally(() => running.delete(schedule.job))
      running.set(schedule.job, run)
    }
  } catch (error) {
    current.logger.error('scheduler_tick_failed', { error: messageOf(error) })
  }
}

/**
 * Runs in progress get `graceMs` to finish and record themselves. A run still going after that is
 * abandoned: its lease is freed with `next_run_at` unchanged, so it is due again at once wherever
 * the lease is taken next, and the thread is then ended by the main thread.
 */
async function stop(graceMs: number) {
  stopping = true
  if (timer) clearInterval(timer)
  if (!runtime) return
  let graceTimer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([Promise.allSettled(running.values()), new Promise((resolve) => (graceTimer = setTimeout(resolve, graceMs)))])
  clearTimeout(graceTimer)
  try {
    runtime.repositories.jobLeases.abandon(holder)
  } catch (error) {
    runtime.logger.error('job_lease_release_failed', { holder, error: messageOf(error) })
  }
  // A run still going would fail on a closed connection; the thread ends right after anyway.
  if (running.size === 0) runtime.storage.close()
}

self.onmessage = async (event: MessageEvent<SchedulerCommand>) => {
  const command = event.data
  if (command.type === 'start') {
    try {
      runtime = createRuntime(command.config, { asPrimary: true, readsInPlace: true })
    } catch (error) {
      self.postMessage({ type: 'failed', error: messageOf(error) } satisfies SchedulerReply)
      return
    }
    holder = command.holder
    timer = setInterval(tick, command.tickMs)
    tick()
    self.postMessage({ type: 'started' } satisfies SchedulerReply)
    return
  }
  await stop(command.graceMs)
  self.postMessage({ type: 'stopped' } satisfies SchedulerReply)
}
