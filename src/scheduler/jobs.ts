/** The scheduled jobs by name (CONTRACT §5 `jobs run NAME`), runnable once from the CLI. */
import type { Runtime } from '../runtime'
import { crawlCatalogs } from './jobs/catalog-crawl'
import { learnBudgets } from './jobs/budget-learn'

export const jobNames = ['catalog-crawl', 'budget-learn', 'batch-refresh', 'webhooks', 'all'] as const
export type JobName = (typeof jobNames)[number]

export type Job = (runtime: Runtime) => Promise<Record<string, unknown>>

/** Jobs that exist in this build. A name missing here is refused, never faked. */
export const jobs: Partial<Record<Exclude<JobName, 'all'>, Job>> = {
  'catalog-crawl': crawlCatalogs,
  'budget-learn': learnBudgets,
}

export async function runJob(runtime: Runtime, name: string): Promise<Record<string, unknown>> {
  if (!(jobNames as readonly string[]).includes(name)) throw new Error(`unknown job '${name}': one of ${jobNames.join(', ')}`)
  if (name === 'all') {
    const results: Record<string, unknown> = {}
    for (const [jobName, job] of Object.entries(jobs)) results[jobName] = await job!(runtime)
    // Named, not faked: jobs whose features are not in this build yet.
    const unavailable = jobNames.filter((jobName) => jobName !== 'all' && !(jobName in jobs))
    return { job: 'all', results, ...(unavailable.length ? { unavailable } : {}) }
  }
  const job = jobs[name as Exclude<JobName, 'all'>]
  if (!job) throw new Error(`job '${name}' is not available in this build yet`)
  return { job: name, ...(await job(runtime)) }
}
