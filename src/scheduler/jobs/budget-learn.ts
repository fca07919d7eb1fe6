/**
 * Learned per-gateway failover budgets (SPEC "Timeouts"): every 4 hours, from 14 days of
 * first-byte times, twice the 95th percentile, kept within 5–15 s and moved at most 3 s per run.
 *
 * The failover timeout applies to streams only, and only a stream has a first byte apart from its
 * answer: the samples are the first lines of successful streamed requests. A buffered request's
 * time is that of its whole answer and would push the budget up to the ceiling on a gateway that
 * serves many of them. The samples come as counts per millisecond (one histogram per gateway).
 */
import type { Repositories } from '../../storage/repositories'
import type { JobDeps } from '../job-deps'

const windowMs = 14 * 86_400_000
const floorMs = 5000
const ceilingMs = 15000
const maxStepMs = 3000
const minimumSamples = 20

/** Counts per first-byte time in whole milliseconds. */
export type Histogram = Map<number, number>

export function histogramOf(samples: readonly number[]): Histogram {
  const histogram: Histogram = new Map()
  for (const sample of samples) histogram.set(Math.round(sample), (histogram.get(Math.round(sample)) ?? 0) + 1)
  return histogram
}

function sampleCount(histogram: Histogram): number {
  let total = 0
  for (const count of histogram.values()) total += count
  return total
}

/** The 95th percentile: the value at position ⌊0.95·n⌋ of the sorted samples. */
function p95(histogram: Histogram): number {
  const total = sampleCount(histogram)
  const position = Math.min(total - 1, Math.floor(total * 0.95))
  let seen = 0
  for (const value of [...histogram.keys()].sort((left, right) => left - right)) {
    seen += histogram.get(value)!
    if (seen > position) return value
  }
  return 0
}

export function nextBudget(histogram: Histogram, previous: number | undefined): number {
  const target = Math.min(ceilingMs, Math.max(floorMs, Math.round(p95(histogram) * 2)))
  const from = previous ?? floorMs
  return Math.min(ceilingMs, Math.max(floorMs, from + Math.max(-maxStepMs, Math.min(maxStepMs, target - from))))
}

/** What learning reads (the first-byte times of the logs) and writes (the budgets). */
export type BudgetLearnDeps = Pick<JobDeps, 'now'> & { repositories: Pick<Repositories, 'requestLogs' | 'gatewayCatalogs'> }

export async function learnBudgets(deps: BudgetLearnDeps): Promise<Record<string, unknown>> {
  const since = deps.now().getTime() - windowMs
  const histograms = new Map<string, Histogram>()
  // One workspace at a time, through the workspace/time index: the window is read, not the table.
  for (const workspaceId of deps.repositories.requestLogs.workspaceIds()) {
    for (const { gateway, ms, count } of deps.repositories.requestLogs.firstByteHistogram(workspaceId, since)) {
      let histogram = histograms.get(gateway)
      if (!histogram) histograms.set(gateway, (histogram = new Map()))
      histogram.set(ms, (histogram.get(ms) ?? 0) + count)
    }
    await Bun.sleep(0)
  }
  const previous = new Map(deps.repositories.gatewayCatalogs.listBudgets().map((row) => [row.gateway, row.ttfbBudgetMs]))
  const budgets: Record<string, number> = {}
  for (const [gateway, histogram] of histograms) {
    if (sampleCount(histogram) < minimumSamples) continue
    const budget = nextBudget(histogram, previous.get(gateway))
    deps.repositories.gatewayCatalogs.setBudget(gateway, budget, deps.now().getTime())
    budgets[gateway] = budget
  }
  return { budgets }
}
