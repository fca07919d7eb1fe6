/** Runs the scheduled jobs in the service process: catalog crawl daily, budgets every 4 hours. */
import type { Runtime } from '../runtime'
import { jobs, type JobName } from './jobs'

interface Schedule {
  job: Exclude<JobName, 'all'>
  everyMs: number
  firstAfterMs: number
}

const schedules: Schedule[] = [
  // The first crawl runs soon after start so a new deployment learns its catalogs the same day.
  { job: 'catalog-crawl', everyMs: 24 * 3_600_000, firstAfterMs: 60_000 },
  { job: 'budget-learn', everyMs: 4 * 3_600_000, firstAfterMs: 5 * 60_000 },
  { job: 'batch-refresh', everyMs: 5 * 60_000, firstAfterMs: 5 * 60_000 },
  { job: 'webhooks', everyMs: 5 * 60_000, firstAfterMs: 5 * 60_000 },
]

export function startScheduler(runtime: Runtime): () => void {
  const timers: ReturnType<typeof setTimeout>[] = []
  for (const schedule of schedules) {
    const job = jobs[schedule.job]
    if (!job) continue
    let running = false
    const run = async () => {
      if (running) return
      running = true
      try {
        const result = await job(runtime)
        runtime.logger.info('job_finished', { job: schedule.job, result })
      } catch (error) {
        runtime.logger.error('job_failed', { job: schedule.job, error: error instanceof Error ? error.message : String(error) })
      } finally {
        running = false
      }
    }
    const first = setTimeout(() => {
      void run()
      const every = setInterval(() => void run(), schedule.everyMs)
      every.unref?.()
      timers.push(every)
    }, schedule.firstAfterMs)
    first.unref?.()
    timers.push(first)
  }
  return () => {
    for (const timer of timers) clearTimeout(timer)
  }
}
