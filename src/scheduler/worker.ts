/**
 * The scheduler's thread (see scheduler.ts startScheduler): its own runtime and SQLite connection,
 * so a job's queries and JSON work never hold up the thread that serves requests. Every tick it
 * runs the jobs that are due, each under its lease (lease.ts), so across every process on the
 * database each run happens once. Log lines go to stdout as JSON, like the main thread's.
 */
import type { Config } from '../config/env'
import { createRuntime } from '../runtime'
import type { JobDeps } from './job-deps'
import { runUnderLease } from './lease'
import { scheduleOf, schedules } from './schedules'
import { CatalogFollower } from './catalog-follow'

declare const self: Worker

export type SchedulerCommand =
  | { type: 'start'; config: Config; holder: string; tickMs: number }
  | { type: 'stop'; graceMs: number }
  /** The serving thread wrote configuration (a provider key, say): catalogs may have to follow. */
  | { type: 'config-written' }
export type SchedulerReply = { type: 'started' } | { type: 'stopped' } | { type: 'failed'; error: string }

/** The thread's own runtime (the composition root builds it), used as what its jobs are given. */
let runtime: JobDeps | undefined
let holder = ''
let timer: ReturnType<typeof setInterval> | undefined
let stopping = false
/** One run per job at a time in this process; the lease keeps other processes out. */
const running = new Map<string, Promise<void>>()
const follower = new CatalogFollower()
/** The configuration counter when catalogs were last looked at, and when. */
let followedVersion = -1
let followedAt = 0
const followEveryMs = 60_000

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
    // A write by another process moves the configuration counter; and once a minute regardless (retries).
    const version = current.storage.configVersion()
    if (version !== followedVersion || now - followedAt >= followEveryMs) follow(version)
  } catch (error) {
    current.logger.error('scheduler_tick_failed', { error: messageOf(error) })
  }
}

/** Crawls the gateway kinds that have a provider key but no fresh catalog (catalog-follow.ts), under the crawl's lease. */
function follow(version: number) {
  if (!runtime || stopping) return
  const current = runtime
  // A crawl running now may not include a kind that just got its key: looked at again when it ends.
  if (running.has('catalog-crawl')) return
  followedVersion = version
  followedAt = current.now().getTime()
  const due = follower.due(current, followedAt)
  if (due.length === 0) return
  const { everyMs, firstAfterMs } = scheduleOf('catalog-crawl')
  const run = runUnderLease(current, 'catalog-crawl', { holder, dueOnly: false, everyMs, firstAfterMs, keepSchedule: true, job: follower.job(due) })
    .then(() => {})
    .catch((error) => current.logger.error('job_lease_failed', { job: 'catalog-crawl', error: messageOf(error) }))
    .finally(() => {
      running.delete('catalog-crawl')
      followedVersion = -1
    })
  running.set('catalog-crawl', run)
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
  if (command.type === 'config-written') {
    try {
      if (runtime) follow(runtime.storage.configVersion())
    } catch (error) {
      runtime?.logger.error('scheduler_tick_failed', { error: messageOf(error) })
    }
    return
  }
  await stop(command.graceMs)
  self.postMessage({ type: 'stopped' } satisfies SchedulerReply)
}
