/**
 * The dashboard's request explorer: a workspace's recent requests with their status, latency, stage
 * timings, attempt path and, when body capture is on, the request body. Read on the read thread.
 */
import type { Actor, ManagementDeps } from './context'
import { badRequest } from './errors'
import { bucketPlan, keyIdFilter, parseRange, roundUsd } from './usage'
import { nanoToUsd } from '../storage/money'
import type { RecentFilter } from '../storage/repositories/request-logs'
import type { RecentRow } from '../storage/usage-reader'

export const explorerPageSize = 100

export interface RequestsQueryInput {
  range?: string
  api_key_id?: string
  status?: string
  model?: string
}

/** Filters as the explorer sends them; a bad one is a 400 naming it. */
function buildFilter(deps: ManagementDeps, actor: Actor, query: RequestsQueryInput): RecentFilter {
  // The window the usage summary and chart count for the same range: from the first bucket.
  const filter: RecentFilter = { workspaceId: actor.workspaceId, sinceMs: bucketPlan(parseRange(query.range), deps.now().getTime()).first, limit: explorerPageSize }
  if (query.api_key_id) filter.keyId = keyIdFilter(deps, actor, query.api_key_id)[0]
  if (query.status) {
    if (query.status === 'ok' || query.status === 'error') filter.status = query.status
    else if (/^[1-5]\d\d$/.test(query.status)) filter.status = Number(query.status)
    else throw badRequest(`Invalid status: expected ok, error or an HTTP status, got '${query.status.slice(0, 20)}'.`)
  }
  if (query.model) filter.model = query.model.slice(0, 256)
  return filter
}

function parseJson(text: string | null): unknown {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/** A guardrail finding as the row records it (CONTRACT §17). */
export interface GuardrailFinding {
  rule: string
  where: 'input' | 'output'
  action: string
  count: number
}

/** The row's findings: its JSON array, or null (none recorded, or a text that is no array). */
function parseFindings(text: string | null): GuardrailFinding[] | null {
  const parsed = parseJson(text)
  return Array.isArray(parsed) ? (parsed as GuardrailFinding[]) : null
}

function presentRequest(row: RecentRow) {
  return {
    id: row.id,
    created_at: new Date(row.createdAt).toISOString(),
    api_key_id: row.keyId,
    endpoint: row.endpoint,
    model: row.model,
    upstream_model: row.upstreamModel,
    gateway: row.gateway,
    status: row.status,
    error_code: row.errorCode,
    stream: row.stream,
    latency_ms: row.latencyMs,
    overhead_ms: row.overheadMs,
    ttfb_ms: row.ttfbMs,
    attempts: row.attempts,
    attempt_path: row.attemptPath,
    stage_timings: parseJson(row.stageTimings),
    input_tokens: row.inputTokens,
    output_tokens: row.outputTokens,
    // Stored only while the workspace captures bodies (SPEC "Workspace").
    request_body: row.requestBody,
    // CONTRACT §15: the cache's part in the answer (null: none) and, for a cache answer, the cost of the
    // answer it repeats (null: unpriced, or no cache answer).
    cache: row.cache as 'hit' | 'semantic-hit' | 'coalesced' | null,
    saved_usd: row.savedNanoUsd === null ? null : roundUsd(nanoToUsd(row.savedNanoUsd)),
    // CONTRACT §16: mid-stream continuations the answer took; null: none.
    continued: row.continued,
    // CONTRACT §17: the guardrail findings, never the matched text; null: none.
    guardrails: parseFindings(row.guardrails),
  }
}
export type RequestView = ReturnType<typeof presentRequest>

export async function recentRequests(deps: ManagementDeps, actor: Actor, query: RequestsQueryInput): Promise<RequestView[]> {
  return (await deps.usage.recent(buildFilter(deps, actor, query))).map(presentRequest)
}
