/** Inserting request-log rows: the log flush's batches, and replayed rows that may be there already. */
import type { Db } from '../../client'
import type { RollUp } from './rollups'
import type { RequestLogRow } from './types'

/** The insert statements prepared once, and the two batch writes over them (each with its roll-ups). */
export function prepareRowInserts(db: Db, rollUp: RollUp) {
  // The log flush is the one write on the request path's timer. Rows go in as multi-row INSERTs of
  // `rowsPerStatement` rows (one statement step per group instead of per row), the rest one by one;
  // both are prepared once. The query builder would cost tens of microseconds a row.
  const columns = `id, workspace_id, key_id, created_at, endpoint, gateway, provider_key_id, model, upstream_model,
      status, error_code, stream, latency_ms, overhead_ms, ttfb_ms, attempts, attempt_path, stage_timings, input_tokens,
      output_tokens, cost_nano_usd, client_ip, request_body, enrichment, cache, saved_nano_usd, continued, guardrails`
  const columnCount = 28
  const rowsPerStatement = 32
  const placeholders = `(${new Array(columnCount).fill('?').join(', ')})`
  const insertOne = db.$client.prepare(`insert into request_logs (${columns}) values ${placeholders}`)
  const insertGroup = db.$client.prepare(`insert into request_logs (${columns}) values ${new Array(rowsPerStatement).fill(placeholders).join(', ')}`)
  // A replayed row (from the request journal after a crash that came between the commit and the
  // journal's release) may be there already: found through the workspace/time index, then its id.
  const insertIfAbsent = db.$client.prepare(
    `insert into request_logs (${columns}) select ${placeholders.slice(1, -1)} where not exists (select 1 from request_logs where workspace_id = ? and created_at = ? and id = ?)`,
  )
  const groupParameters: (string | number | null)[] = new Array(rowsPerStatement * columnCount)
  const setParameters = (target: (string | number | null)[], offset: number, row: RequestLogRow) => {
    target[offset] = row.id
    target[offset + 1] = row.workspaceId
    target[offset + 2] = row.keyId ?? null
    target[offset + 3] = row.createdAt
    target[offset + 4] = row.endpoint
    target[offset + 5] = row.gateway ?? null
    target[offset + 6] = row.providerKeyId ?? null
    target[offset + 7] = row.model ?? null
    target[offset + 8] = row.upstreamModel ?? null
    target[offset + 9] = row.status
    target[offset + 10] = row.errorCode ?? null
    target[offset + 11] = row.stream ? 1 : 0
    target[offset + 12] = row.latencyMs
    target[offset + 13] = row.overheadMs ?? null
    target[offset + 14] = row.ttfbMs ?? null
    target[offset + 15] = row.attempts ?? 0
    target[offset + 16] = row.attemptPath ?? null
    target[offset + 17] = row.stageTimings ?? null
    target[offset + 18] = row.inputTokens ?? null
    target[offset + 19] = row.outputTokens ?? null
    target[offset + 20] = row.costNanoUsd ?? null
    target[offset + 21] = row.clientIp ?? null
    target[offset + 22] = row.requestBody ?? null
    target[offset + 23] = row.enrichment ?? null
    target[offset + 24] = row.cache ?? null
    target[offset + 25] = row.savedNanoUsd ?? null
    target[offset + 26] = row.continued ?? null
    target[offset + 27] = row.guardrails ?? null
  }
  const oneParameters: (string | number | null)[] = new Array(columnCount)
  const insertBatch = db.$client.transaction((rows: RequestLogRow[]): number => {
    let inserted = 0
    let index = 0
    for (; index + rowsPerStatement <= rows.length; index += rowsPerStatement) {
      for (let row = 0; row < rowsPerStatement; row++) setParameters(groupParameters, row * columnCount, rows[index + row]!)
      inserted += insertGroup.run(...groupParameters).changes
    }
    for (; index < rows.length; index++) {
      setParameters(oneParameters, 0, rows[index]!)
      inserted += insertOne.run(...oneParameters).changes
    }
    rollUp(rows)
    return inserted
  })
  const ifAbsentParameters: (string | number | null)[] = new Array(columnCount + 3)
  const insertIfAbsentBatch = db.$client.transaction((rows: RequestLogRow[]): number => {
    const added: RequestLogRow[] = []
    for (const row of rows) {
      setParameters(ifAbsentParameters, 0, row)
      ifAbsentParameters[columnCount] = row.workspaceId
      ifAbsentParameters[columnCount + 1] = row.createdAt
      ifAbsentParameters[columnCount + 2] = row.id
      if (insertIfAbsent.run(...ifAbsentParameters).changes > 0) added.push(row)
    }
    // Only the rows written now are rolled up: the others were when they were written.
    rollUp(added)
    return added.length
  })

  return {
    /** Writes a batch of new rows in one transaction; returns the rows inserted. */
    insertMany(rows: RequestLogRow[]): number {
      if (rows.length === 0) return 0
      return insertBatch(rows)
    },
    /** Writes replayed rows in one transaction, skipping any already there (same request); returns the rows inserted. */
    insertManyIfAbsent(rows: RequestLogRow[]): number {
      if (rows.length === 0) return 0
      return insertIfAbsentBatch(rows)
    },
  }
}
