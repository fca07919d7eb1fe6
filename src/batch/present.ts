/**
 * The batch object of SPEC "Batch object", from a batch row and, when the gateway was just read, its
 * own batch object; and what a gateway's batch object says, as a row update.
 */
import { scrubSecretInValue } from '../gateways/scrub-secret'
import { isObject } from '../http/read-body'
import { batchStatuses, isTerminalStatus, type BatchProgress, type BatchRow, type BatchStatus } from '../storage/repositories/batches'

type Json = Record<string, unknown>

const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : 0)
const unixSeconds = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : null)

/**
 * The row update a gateway's batch object gives. An unknown status is read as still validating.
 * `upstream` is the object as the gateway sent it; its error, kept to be shown (the batch object,
 * webhooks), is stored scrubbed of `secret`, the provider secret.
 */
export function progressFromUpstream(upstream: Json, nowMs: number, fallbackTotal: number, secret: string | undefined): BatchProgress {
  const status: BatchStatus = (batchStatuses as readonly string[]).includes(upstream.status as string) ? (upstream.status as BatchStatus) : 'validating'
  const counts = isObject(upstream.request_counts) ? upstream.request_counts : {}
  const usage = isObject(upstream.usage) ? upstream.usage : undefined
  const cost = usage && typeof usage.cost === 'number' && Number.isFinite(usage.cost) ? usage.cost : usage && typeof usage.cost === 'string' && usage.cost.trim() !== '' && Number.isFinite(Number(usage.cost)) ? Number(usage.cost) : null
  const terminal = isTerminalStatus(status)
  return {
    status,
    requestTotal: count(counts.total) || fallbackTotal,
    requestCompleted: count(counts.completed),
    requestFailed: count(counts.failed),
    cost,
    error: isObject(upstream.error) ? JSON.stringify(scrubSecretInValue(upstream.error, secret)) : null,
    finalizedAt: terminal ? (unixSeconds(upstream.finalized_at) ?? unixSeconds(upstream.completed_at) ?? Math.floor(nowMs / 1000)) : null,
    refreshedAt: nowMs,
  }
}

export function usageOf(row: BatchRow): { cost: number } | null {
  return row.cost === null ? null : { cost: row.cost }
}

/**
 * The client's batch object. `results` only when completed and read from the gateway (never in a
 * list), each item with exactly one of `response` and `error`.
 */
export function presentBatch(row: BatchRow, options: { results?: unknown[] | null; status?: BatchStatus } = {}): Json {
  const status = options.status ?? (row.status as BatchStatus)
  return {
    id: row.id,
    object: 'batch',
    endpoint: row.endpoint,
    model: row.model,
    completion_window: '24h',
    status,
    created_at: row.createdAt,
    request_counts: { total: row.requestTotal, completed: row.requestCompleted, failed: row.requestFailed },
    usage: usageOf(row),
    results: status === 'completed' ? (options.results ?? null) : null,
    error: row.error === null ? null : (JSON.parse(row.error) as unknown),
  }
}

/** A gateway's result items as SPEC shapes them: `{custom_id, response, error}`, one of the two set. */
export function normalizeResults(results: unknown): unknown[] {
  if (!Array.isArray(results)) return []
  return results.flatMap((item) => {
    if (!isObject(item) || typeof item.custom_id !== 'string') return []
    const response = isObject(item.response) ? item.response : null
    const error = response ? null : isObject(item.error) ? item.error : { code: 'missing_result', message: 'The gateway gave no response for this request.' }
    return [{ custom_id: item.custom_id, response, error }]
  })
}

/** The webhook body of SPEC "Batch webhook" (never results). */
export function webhookBody(row: BatchRow, event: string, createdAt: number): Json {
  return {
    type: event,
    created_at: createdAt,
    data: {
      id: row.id,
      object: 'batch',
      status: row.status,
      endpoint: row.endpoint,
      model: row.model,
      request_counts: { total: row.requestTotal, completed: row.requestCompleted, failed: row.requestFailed },
      usage: { cost: row.cost },
      created_at: row.createdAt,
      finalized_at: row.finalizedAt,
      error: row.error === null ? null : (JSON.parse(row.error) as unknown),
    },
  }
}
