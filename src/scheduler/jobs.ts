/**
 * The scheduled jobs by name (CONTRACT §5 `jobs run NAME`), runnable once from the CLI: this
 * folder's own, and the ones a feature registers (the Batch API's, batch/index.ts) when the
 * composition root (runtime.ts) puts the service together. This table imports no feature.
 */
import type { Job, JobDeps, JobProgress } from './job-deps'
import { crawlCatalogs } from './jobs/catalog-crawl'
import { learnBudgets } from './jobs/budget-learn'
import { pruneLogs } from './jobs/log-prune'
import { pruneCache } from './jobs/cache-prune'

export const jobNames = ['catalog-crawl', 'budget-learn', 'batch-refresh', 'webhooks', 'log-prune', 'cache-prune', 'all'] as const
export type JobName = (typeof jobNames)[number]

export type ScheduledJobName = Exclude<JobName, 'all'>

const registered: Partial<Record<ScheduledJobName, Job>> = {
  'catalog-crawl': crawlCatalogs,
  'budget-learn': learnBudgets,
  'log-prune': pruneLogs,
  'cache-prune': pruneCache,
}

/** A feature's jobs join the table (its names are in jobNames: the CLI knows them before anything loads). */
export function registerJobs(jobs: Partial<Record<ScheduledJobName, Job>>) {
  Object.assign(registered, jobs)
}

/** The job of this name; one no feature registered in this process is an error, not a silent skip. */
export function jobNamed(name: ScheduledJobName): Job {
  const job = registered[name]
  if (!job) throw new Error(`the job '${name}' is not registered in this process`)
  return job
}

export async function runJob(deps: JobDeps, name: string, progress: JobProgress = () => {}): Promise<Record<string, unknown>> {
  if (!(jobNames as readonly string[]).includes(name)) throw new Error(`unknown job '${name}': one of ${jobNames.join(', ')}`)
  if (name === 'all') {
    const results: Record<string, unknown> = {}
    for (const jobName of jobNames) if (jobName !== 'all') results[jobName] = await jobNamed(jobName)(deps, progress)
    return { job: 'all', results }
  }
  return { job: name, ...(await jobNamed(name as ScheduledJobName)(deps, progress)) }
}
