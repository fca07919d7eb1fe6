/**
 * One run of a scheduled job under its lease row (storage/repositories/job-leases.ts): the one path
 * for the scheduler's worker and the CLI's `jobs run`, so a job runs once at a time across every
 * process on the database. The lease is renewed while the job runs (a crawl may take long), and a
 * process that dies holding it loses it when it expires.
 */
import { hostname } from 'node:os'
import type { Logger } from '../observability/logger'
import type { Job, JobDeps, JobProgress } from './job-deps'
import { jobNamed, jobNames } from './jobs'
import { scheduleOf, type ScheduledJobName } from './schedules'

/** Long enough that a renewal missed under load does not free it; short enough that a dead holder's lease frees the job soon. */
export const defaultLeaseMs = 10 * 60_000
export const defaultRenewEveryMs = 60_000
/** At most one `job_progress` line per second, plus the last report of the run. */
const progressIntervalMs = 1000

/** Who holds a lease: `host:pid:random`, so a refusal names the process, and two runtimes in one process differ. */
export function createHolderId(random: () => number = Math.random): string {
  const suffix = Math.floor(random() * 36 ** 6)
    .toString(36)
    .padStart(6, '0')
  return `${hostname()}:${process.pid}:${suffix}`
}

export interface LeaseRunOptions {
  holder: string
  /** true: only when `next_run_at` has come (the scheduler); false: whenever the lease is free (the CLI). */
  dueOnly: boolean
  /** The next run is set this long after this one finishes. */
  everyMs: number
  /** The first run of a job that has no lease row yet, this long from now. */
  firstAfterMs: number
  leaseMs?: number
  renewEveryMs?: number
  /** Where job_started/job_progress/job_finished/job_failed go; default deps.logger. */
  logger?: Logger
  /** What runs; default the registry's job of that name (tests pass their own, a triggered crawl a narrower one). */
  job?: Job
  /** A run on a trigger of its own (catalog-follow.ts): the job's schedule is left as it was. */
  keepSchedule?: boolean
}

export type LeaseRunOutcome =
  | { status: 'finished'; result: Record<string, unknown>; durationMs: number }
  | { status: 'failed'; error: unknown; message: string; durationMs: number }
  /** Not run: another holder has the lease, or (dueOnly) the job is not due. */
  | { status: 'skipped'; holder: string | null; lockedUntil: number; nextRunAt: number }

/** Logs progress at most once per interval; `flush` logs the last report if it was held back. */
function throttleProgress(log: JobProgress, now: () => number): { report: JobProgress; flush(): void } {
  let loggedAt = Number.NEGATIVE_INFINITY
  let held: [number, number] | undefined
  return {
    report(done, total) {
      const at = now()
      if (at - loggedAt < progressIntervalMs) {
        held = [done, total]
        return
      }
      loggedAt = at
      held = undefined
      log(done, total)
    },
    flush() {
      if (held) log(...held)
      held = undefined
    },
  }
}

/** `deps`: what the job is given (the lease's own reads and writes go through its repositories, logger and clock). */
export async function runUnderLease(deps: JobDeps, name: ScheduledJobName, options: LeaseRunOptions): Promise<LeaseRunOutcome> {
  const { holder, everyMs } = options
  const logger = options.logger ?? deps.logger
  const leases = deps.repositories.jobLeases
  const leaseMs = options.leaseMs ?? defaultLeaseMs
  const now = () => deps.now().getTime()
  const startedAt = now()
  if (!leases.acquire(name, holder, startedAt, leaseMs, { dueOnly: options.dueOnly, firstRunAt: startedAt + options.firstAfterMs })) {
    const row = leases.get(name)
    return { status: 'skipped', holder: row?.holder ?? null, lockedUntil: row?.lockedUntil ?? 0, nextRunAt: row?.nextRunAt ?? 0 }
  }
  logger.info('job_started', { job: name, holder })
  const renewal = setInterval(() => {
    try {
      // The job cannot be stopped from here (a Job takes no signal): a lost lease is said, and the run goes on.
      if (!leases.renew(name, holder, now() + leaseMs)) logger.warn('job_lease_lost', { job: name, holder })
    } catch (error) {
      logger.error('job_lease_renew_failed', { job: name, error: error instanceof Error ? error.message : String(error) })
    }
  }, options.renewEveryMs ?? defaultRenewEveryMs)
  const progress = throttleProgress((done, total) => logger.info('job_progress', { job: name, done, total }), now)
  const job = options.job ?? jobNamed(name)
  let outcome: LeaseRunOutcome
  try {
    const result = await job(deps, progress.report)
    progress.flush()
    outcome = { status: 'finished', result, durationMs: now() - startedAt }
    logger.info('job_finished', { job: name, result, duration_ms: outcome.durationMs })
  } catch (error) {
    progress.flush()
    const message = error instanceof Error ? error.message : String(error)
    outcome = { status: 'failed', error, message, durationMs: now() - startedAt }
    logger.error('job_failed', { job: name, error: message, duration_ms: outcome.durationMs })
  } finally {
    clearInterval(renewal)
  }
  const finishedAt = now()
  const released = leases.release(name, holder, {
    nextRunAt: options.keepSchedule ? undefined : finishedAt + everyMs,
    result: outcome.status === 'finished' ? outcome.result : { error: outcome.message },
    finishedAt,
  })
  if (!released) logger.warn('job_lease_lost', { job: name, holder })
  return outcome
}

/**
 * `jobs run NAME` (CONTRACT §5): runs the job now under its lease, whether due or not, and sets its
 * next scheduled run one interval later; `all` runs each under its own lease, in registry order.
 * A lease held by another process is an error naming it, so the job is never run twice at once.
 */
export async function runJobNow(deps: JobDeps, name: string, options: { holder: string; logger?: Logger }): Promise<Record<string, unknown>> {
  if (!(jobNames as readonly string[]).includes(name)) throw new Error(`unknown job '${name}': one of ${jobNames.join(', ')}`)
  const runOne = async (job: ScheduledJobName) => {
    const { everyMs, firstAfterMs } = scheduleOf(job)
    const outcome = await runUnderLease(deps, job, { ...options, dueOnly: false, everyMs, firstAfterMs })
    if (outcome.status === 'skipped') {
      throw new Error(`job '${job}' is running in another process (${outcome.holder}) until ${new Date(outcome.lockedUntil).toISOString()}; try again later`)
    }
    if (outcome.status === 'failed') throw outcome.error
    return outcome.result
  }
  if (name !== 'all') return { job: name, ...(await runOne(name as ScheduledJobName)) }
  const results: Record<string, unknown> = {}
  for (const job of jobNames) if (job !== 'all') results[job] = await runOne(job)
  return { job: 'all', results }
}
