/**
 * POST /internal/v1/logs (CONTRACT §10): the primary takes a replica's request-log rows. Only with
 * `Authorization: Bearer $RT_CLUSTER_SECRET`: anything else on this path, whatever the method, or
 * anything at all when no secret is configured here, is 401; other methods with the secret, 405.
 * The rows are written through the writer seam as rows that may be there already (by id), so a
 * batch the replica sends again after a lost acknowledgement lands once. `{accepted: n}` answers
 * only after the commit: the replica deletes its copy on that answer.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps'
import { bearerToken } from '../http/bearer-token'
import { hashesEqual, hashSecret } from '../storage/crypto'
import { jsonResponse as json } from '../http/json-response'
import { readBodyWithin } from '../http/read-body'
import { internalLogsPath } from '../cluster/ship-logs'
import type { RequestLogRow } from '../storage/repositories/request-logs'
import { withNanoCost } from '../storage/request-journal'

/** A batch is at most 500 rows; a captured body is at most the 10 MB inference limit. */
const bodyLimit = 64 * 1024 * 1024

/** Constant time whatever the lengths: both sides are hashed first, as management keys are. */
function secretMatches(given: string | undefined, expected: string | undefined): boolean {
  if (given === undefined || expected === undefined) return false
  return hashesEqual(hashSecret(given), hashSecret(expected))
}

const textFields = ['keyId', 'gateway', 'providerKeyId', 'model', 'upstreamModel', 'errorCode', 'attemptPath', 'stageTimings', 'clientIp', 'requestBody', 'enrichment'] as const
const numberFields = ['overheadMs', 'ttfbMs'] as const
/**
 * Counted in whole units: tokens, the cost and a cache answer's saving in nano-dollars (CONTRACT §11:
 * money is counted exactly), the continuations a stream took (CONTRACT §16).
 */
const countFields = ['inputTokens', 'outputTokens', 'costNanoUsd', 'savedNanoUsd', 'continued'] as const
/** The response cache's outcomes a row records (CONTRACT §15); a miss or bypass is no cache answer, so null. */
const cacheOutcomes: readonly unknown[] = ['hit', 'semantic-hit', 'coalesced']

const isCount = (value: unknown) => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0

/** Guardrail findings as the log queue writes them (CONTRACT §17): a JSON array, as text. */
function isJsonArrayText(value: unknown): boolean {
  if (typeof value !== 'string') return false
  try {
    return Array.isArray(JSON.parse(value))
  } catch {
    return false
  }
}

/** The row as the log queue built it, or why not (the index and field named). */
function checkRow(value: unknown, index: number): RequestLogRow | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `rows[${index}] must be an object`
  let row = value as Record<string, unknown>
  for (const name of ['id', 'workspaceId', 'endpoint'] as const) {
    if (typeof row[name] !== 'string' || row[name] === '') return `rows[${index}].${name} must be a non-empty string`
  }
  for (const name of ['createdAt', 'status', 'latencyMs'] as const) {
    if (typeof row[name] !== 'number' || !Number.isFinite(row[name])) return `rows[${index}].${name} must be a number`
  }
  // Unix milliseconds a date can hold (the last-used stamp is written as one).
  if (!Number.isInteger(row.createdAt) || (row.createdAt as number) < 0 || (row.createdAt as number) > 8.64e15) return `rows[${index}].createdAt must be Unix milliseconds`
  for (const name of textFields) {
    if (row[name] !== undefined && row[name] !== null && typeof row[name] !== 'string') return `rows[${index}].${name} must be a string or null`
  }
  for (const name of numberFields) {
    if (row[name] !== undefined && row[name] !== null && (typeof row[name] !== 'number' || !Number.isFinite(row[name]))) return `rows[${index}].${name} must be a number or null`
  }
  // A replica of a build before nano-dollars sends its cost as `costUsd`, in USD: taken as the
  // nearest whole nano-dollar (as that build's own journal is read), unless the row has both.
  const usd = row.costUsd
  if (usd !== undefined && usd !== null && (typeof usd !== 'number' || !Number.isFinite(usd) || usd < 0)) return `rows[${index}].costUsd must be a non-negative number or null`
  row = withNanoCost(row)
  for (const name of countFields) {
    if (row[name] !== undefined && row[name] !== null && !isCount(row[name])) return `rows[${index}].${name} must be a non-negative integer or null`
  }
  if (row.cache !== undefined && row.cache !== null && !cacheOutcomes.includes(row.cache)) return `rows[${index}].cache must be one of hit, semantic-hit, coalesced or null`
  if (row.guardrails !== undefined && row.guardrails !== null && !isJsonArrayText(row.guardrails)) return `rows[${index}].guardrails must be the JSON text of an array, or null`
  if (row.stream !== undefined && typeof row.stream !== 'boolean') return `rows[${index}].stream must be a boolean`
  if (row.attempts !== undefined && (typeof row.attempts !== 'number' || !Number.isInteger(row.attempts))) return `rows[${index}].attempts must be an integer`
  return row as unknown as RequestLogRow
}

/**
 * Whether the request came through fly.io's public edge: its proxy adds `Fly-Client-IP` and
 * `Fly-Forwarded-Port` to everything it forwards and cannot be made to leave them out, while a
 * replica's shipping goes over the private network straight to the machine, without them.
 */
function fromPublicEdge(headers: Headers): boolean {
  return headers.has('fly-client-ip') || headers.has('fly-forwarded-port')
}

export async function handleInternalLogs(deps: AppDeps, request: Request): Promise<Response> {
  // The ingest is for the private network only: from the public edge it does not exist.
  if (fromPublicEdge(request.headers)) return json(404, { error: 'Not found.' })
  if (!secretMatches(bearerToken(request.headers.get('authorization')), deps.config.clusterSecret)) {
    return json(401, { error: 'A valid cluster secret is required (Authorization: Bearer $RT_CLUSTER_SECRET).' })
  }
  if (request.method !== 'POST') return json(405, { error: 'Method not allowed: this path takes POST only.' }, { allow: 'POST' })
  // A node that is a replica now (a failover the sender has not seen yet) is not where rows go.
  const replay = deps.writer.replay()
  if (replay) return replay
  const bytes = await readBodyWithin(request, bodyLimit)
  if (bytes === undefined) return json(400, { error: `Request body too large: the limit is ${bodyLimit} bytes.` })
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes))
  } catch {
    return json(400, { error: 'Malformed JSON body.' })
  }
  const list = (parsed as { rows?: unknown } | null)?.rows
  if (!Array.isArray(list)) return json(400, { error: 'rows must be an array of request-log rows.' })
  const rows: RequestLogRow[] = []
  for (let index = 0; index < list.length; index++) {
    const checked = checkRow(list[index], index)
    if (typeof checked === 'string') return json(400, { error: checked })
    rows.push(checked)
  }
  const inserted = deps.writer.commit(rows, true)
  return json(200, { accepted: rows.length, inserted })
}

export function internalRoutes(deps: AppDeps) {
  // Every method: without the secret anything on this path is 401 (CONTRACT §10), before a 405.
  return new Elysia({ name: 'internal' }).all(internalLogsPath, ({ request }) => handleInternalLogs(deps, request), { parse: 'none', detail: { hide: true } })
}
