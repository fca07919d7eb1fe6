/** The scheduled jobs by name (CONTRACT §5 `jobs run NAME`), runnable once from the CLI. */
import type { Runtime } from '../runtime'
import { crawlCatalogs } from './jobs/catalog-crawl'
import { learnBudgets } from './jobs/budget-learn'
import { refreshBatches } from '../batch/refresh'
import { deliverOutbox } from '../batch/deliver'

export const jobNames = ['catalog-crawl', 'budget-learn', 'batch-refresh', 'webhooks', 'all'] as const
export type JobName = (typeof jobNames)[number]

/** Reports progress of a run: items done out of the total known so far. */
export type JobProgress = (done: number, total: number) => void

export type Job = (runtime: Runtime, progress: JobProgress) => Promise<Record<string, unknown>>

export const jobs: Record<Exclude<JobName, 'all'>, Job> = {
  'catalog-crawl': crawlCatalogs,
  'budget-learn': learnBudgets,
  'batch-refresh': refreshBatches,
  webhooks: deliverOutbox,
}

export async function runJob(runtime: Runtime, name: string, progress: JobProgress = () => {}): Promise<Record<string, unknown>> {
  if (!(jobNames as readonly string[]).includes(name)) throw new Error(`unknown job '${name}': one of ${jobNames.join(', ')}`)
  if (name === 'all') {
    const results: Record<string, unknown> = {}
    for (const [jobName, job] of Object.entries(jobs)) results[jobName] = await job(runtime, progress)
    return { job: 'all', results }
  }
  return { job: name, ...(await jobs[name as Exclude<JobName, 'all'>](runtime, progress)) }
}
