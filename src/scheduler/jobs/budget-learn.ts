/**
 * Learned per-gateway failover budgets (SPEC "Timeouts"): every 4 hours, from 14 days of
 * first-byte times, twice the 95th percentile, kept within 5–15 s and moved at most 3 s per run.
 */
import type { Runtime } from '../../runtime'

const windowMs = 14 * 86_400_000
const floorMs = 5000
const ceilingMs = 15000
const maxStepMs = 3000
const minimumSamples = 20

export function nextBudget(samples: number[], previous: number | undefined): number {
  const sorted = [...samples].sort((left, right) => left - right)
  const p95 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!
  const target = Math.min(ceilingMs, Math.max(floorMs, Math.round(p95 * 2)))
  const from = previous ?? floorMs
  return Math.min(ceilingMs, Math.max(floorMs, from + Math.max(-maxStepMs, Math.min(maxStepMs, target - from))))
}

export async function learnBudgets(runtime: Runtime): Promise<Record<string, unknown>> {
  const samples = new Map<string, number[]>()
  for (const row of runtime.repositories.requestLogs.firstByteTimes(Date.now() - windowMs)) {
    if (!row.gateway || row.ttfbMs === null) continue
    const list = samples.get(row.gateway)
    if (list) list.push(row.ttfbMs)
    else samples.set(row.gateway, [row.ttfbMs])
  }
  const previous = new Map(runtime.repositories.gatewayCatalogs.listBudgets().map((row) => [row.gateway, row.ttfbBudgetMs]))
  const budgets: Record<string, number> = {}
  for (const [gateway, values] of samples) {
    if (values.length < minimumSamples) continue
    const budget = nextBudget(values, previous.get(gateway))
    runtime.repositories.gatewayCatalogs.setBudget(gateway, budget, Date.now())
    budgets[gateway] = budget
  }
  return { budgets }
}
