/** Usage summary, series and breakdown from the request log (SPEC "Usage records", "Usage filters"), queried off the serving thread. */
import { uuidPattern, type Actor, type ManagementDeps } from './context'
import { badRequest, messages, notFound } from './errors'
import type { UsageFilter } from '../storage/repositories/request-logs'
import { nanoToUsd } from '../storage/money'

export type UsageRange = '24h' | '7d' | '30d'
const hourMs = 3_600_000
const dayMs = 86_400_000

export interface UsageQueryInput {
  range?: string
  api_key_id?: string | string[]
  by?: string
}

/** Any range other than 24h or 30d is treated as 7d, not refused. */
export function parseRange(range: unknown): UsageRange {
  return range === '24h' || range === '30d' ? range : '7d'
}

export function bucketPlan(range: UsageRange, now: number) {
  if (range === '24h') {
    const last = Math.floor(now / hourMs) * hourMs
    return { size: hourMs, count: 24, first: last - 23 * hourMs }
  }
  const days = range === '30d' ? 30 : 7
  const last = Math.floor(now / dayMs) * dayMs
  return { size: dayMs, count: days, first: last - (days - 1) * dayMs }
}

/** The `api_key_id` filter: UUIDs of keys of the actor's workspace (400 for a malformed one, 404 for another's), lower-cased and unique. */
export function keyIdFilter(deps: ManagementDeps, actor: Actor, value: string | string[] | undefined): string[] {
  const ids = value === undefined ? [] : Array.isArray(value) ? value : [value]
  for (const id of ids) {
    if (typeof id !== 'string' || !uuidPattern.test(id)) throw badRequest(`Invalid api_key_id: '${String(id).slice(0, 80)}' is not a key UUID.`)
  }
  const unique = [...new Set(ids.map((id) => id.toLowerCase()))]
  const known = new Set(deps.repositories.inferenceKeys.listIds(actor.workspaceId, unique))
  if (unique.some((id) => !known.has(id))) throw notFound(messages.keyNotFound)
  return unique
}

function buildFilter(deps: ManagementDeps, actor: Actor, query: UsageQueryInput): { filter: UsageFilter; range: UsageRange } {
  const range = parseRange(query.range)
  const keyIds = keyIdFilter(deps, actor, query.api_key_id)
  const plan = bucketPlan(range, deps.now().getTime())
  // The window starts at the first bucket so the summary and the series count the same rows.
  return { range, filter: { workspaceId: actor.workspaceId, sinceMs: plan.first, keyIds: keyIds.length ? keyIds : undefined } }
}

const round = (value: number | null) => (value === null ? null : Math.round(value * 100) / 100)
/** USD to a billionth of a dollar: per-request costs are often millionths. */
export const roundUsd = (value: number) => Math.round(value * 1e9) / 1e9

/**
 * A sum of whole nano-dollars as the API shows it, USD (CONTRACT §11); null when every request it
 * covers has an unknown cost (an unpriced model): unknown, never $0.
 */
function shownCost(nanoUsd: number, requests: number, unpriced: number): number | null {
  return requests > 0 && unpriced === requests ? null : roundUsd(nanoToUsd(nanoUsd))
}

export async function usageSummary(deps: ManagementDeps, actor: Actor, query: UsageQueryInput) {
  const { filter } = buildFilter(deps, actor, query)
  const row = await deps.usage.summary(filter)
  const requests = row.requests
  const errors = Number(row.errors)
  return {
    requests,
    errors,
    errorRate: requests === 0 ? 0 : round((errors / requests) * 100)!,
    avgLatency: round(row.avgLatency) ?? 0,
    avgOverhead: round(row.avgOverhead) ?? 0,
    models: row.models,
    // Known costs summed; requests whose cost is unknown (an unpriced model) are counted, never priced at $0.
    cost_usd: roundUsd(nanoToUsd(row.costNanoUsd)),
    unpriced_requests: row.unpriced,
    // The answers the response cache gave, and the known costs of the answers they repeat (CONTRACT §15).
    cache_hits: row.cacheHits,
    saved_usd: roundUsd(nanoToUsd(row.savedNanoUsd)),
  }
}

export async function usageSeries(deps: ManagementDeps, actor: Actor, query: UsageQueryInput) {
  const { filter, range } = buildFilter(deps, actor, query)
  const plan = bucketPlan(range, deps.now().getTime())
  const rows = new Map((await deps.usage.series(filter, plan.size)).map((row) => [Number(row.bucket), row]))
  return Array.from({ length: plan.count }, (_, index) => {
    const start = plan.first + index * plan.size
    const row = rows.get(start)
    return {
      bucket: new Date(start).toISOString(),
      requests: row?.requests ?? 0,
      errors: Number(row?.errors ?? 0),
      avgLatency: row ? round(row.avgLatency) : null,
      avgOverhead: row ? round(row.avgOverhead) : null,
    }
  })
}

export async function usageBreakdown(deps: ManagementDeps, actor: Actor, query: UsageQueryInput) {
  if (query.by !== 'model' && query.by !== 'gateway') throw badRequest("Invalid by: expected 'model' or 'gateway'.")
  const { filter } = buildFilter(deps, actor, query)
  // A name whose every request is unpriced has an unknown cost: null, as in the dashboard's table.
  return (await deps.usage.breakdown(filter, query.by, 12)).map((row) => ({ name: row.name, requests: row.requests, cost_usd: shownCost(row.costNanoUsd, row.requests, row.unpriced), unpriced_requests: row.unpriced }))
}

/**
 * Tokens and cost by model and gateway (the dashboard): the costs recorded on the request-log rows
 * (CONTRACT §11), the same numbers as the usage summary's. A group with requests of unknown cost
 * counts them in `unpriced_requests`; its `cost_usd` is null when none of its requests was priced.
 */
export async function usageCosts(deps: ManagementDeps, actor: Actor, query: UsageQueryInput) {
  const { filter } = buildFilter(deps, actor, query)
  const groups = await deps.usage.tokens(filter)
  const rows = groups.map((row) => ({
    model: row.model || null,
    gateway: row.gateway || null,
    requests: row.requests,
    input_tokens: row.inputTokens,
    output_tokens: row.outputTokens,
    cost_usd: shownCost(row.costNanoUsd, row.requests, row.unpriced),
    unpriced_requests: row.unpriced,
  }))
  return {
    rows,
    totals: {
      input_tokens: rows.reduce((sum, row) => sum + row.input_tokens, 0),
      output_tokens: rows.reduce((sum, row) => sum + row.output_tokens, 0),
      // Summed in nano-dollars, then shown: the same number as the usage summary's.
      cost_usd: roundUsd(nanoToUsd(groups.reduce((sum, row) => sum + row.costNanoUsd, 0))),
      unpriced_requests: rows.reduce((sum, row) => sum + row.unpriced_requests, 0),
    },
  }
}
