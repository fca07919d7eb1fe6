/** How often each scheduled job runs, for the scheduler's worker and for the next run a CLI `jobs run` sets. */
import type { JobName } from './jobs'

export type ScheduledJobName = Exclude<JobName, 'all'>

export interface Schedule {
  job: ScheduledJobName
  everyMs: number
  /** The first run after the job's lease row is created (a new database's first start). */
  firstAfterMs: number
}

export const schedules: readonly Schedule[] = [
  // The first crawl runs soon after start so a new deployment learns its catalogs the same day.
  { job: 'catalog-crawl', everyMs: 24 * 3_600_000, firstAfterMs: 60_000 },
  { job: 'budget-learn', everyMs: 4 * 3_600_000, firstAfterMs: 5 * 60_000 },
  { job: 'batch-refresh', everyMs: 5 * 60_000, firstAfterMs: 5 * 60_000 },
  // CONTRACT §5: one delivery run every 5 minutes (a failed delivery is retried on the next two).
  { job: 'webhooks', everyMs: 5 * 60_000, firstAfterMs: 5 * 60_000 },
  { job: 'log-prune', everyMs: 24 * 3_600_000, firstAfterMs: 10 * 60_000 },
  // The primary's cache file (every node's store also prunes itself each minute: CONTRACT §15).
  { job: 'cache-prune', everyMs: 3_600_000, firstAfterMs: 10 * 60_000 },
]

export function scheduleOf(job: ScheduledJobName): Schedule {
  return schedules.find((schedule) => schedule.job === job)!
}
