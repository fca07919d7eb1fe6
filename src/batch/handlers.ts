/**
 * /v1/batches on `chat` and `chat_router` keys (SPEC "Batch API"): submit (submit.ts), read one,
 * list, delete. A read goes to the gateway that holds the batch, updates the row (a terminal state
 * writes its notifications in the same transaction, as the refresh job does) and answers from both.
 */
import { finishJson, setRoutingHeaders, type AuthenticatedContext, type EndpointHandler, type InferenceDeps, type ProviderEntry } from '../pipeline'
import { RouterError } from '../errors/router-error'
import { GatewayUnreachable, type GatewayAnswer } from '../gateways/client'
import { scrubSecretInValue } from '../gateways/scrub-secret'
import { batchStatuses, isTerminalStatus, type BatchRow } from '../storage/repositories/batches'
import { batchRetentionMs, readBatchId } from './batch-ids'
import { readGatewayBatch, UnreadableBatch, type GatewayRead } from './gateway-read'
import { normalizeResults, presentBatch } from './present'
import { submitBatch } from './submit'
import { keyStillHolds } from './target'
import { relayUpstreamError } from './upstream-errors'

const readTimeoutMs = 30_000

const json = finishJson

/** The batch's row and provider key, after every check that needs no call. */
function resolveBatch(context: AuthenticatedContext, deps: InferenceDeps, id: string): { row: BatchRow; provider: ProviderEntry } {
  const claims = readBatchId(id, deps.sign)
  if (!claims) throw new RouterError('invalid_batch_id', 'This is not a batch id the service issued (altered or truncated?).')
  const key = context.key
  if (claims.keyId !== key.id) throw new RouterError('batch_not_found', 'No batch of this key has this id: batches are bound to the key that created them.')
  const row = deps.repositories.batches.get(id)
  if (!row || row.purgedAt !== null || !(batchStatuses as readonly string[]).includes(row.status)) throw new RouterError('batch_not_found')
  if (Date.now() - row.createdAt * 1000 > batchRetentionMs) throw new RouterError('batch_expired')
  const provider = context.snapshot.providers.get(row.providerKeyId)
  if (!provider || !keyStillHolds(key, row.providerKeyId)) throw new RouterError('batch_target_unavailable')
  context.gateway = provider.gateway.id
  context.providerKeyId = provider.id
  context.model = row.model
  context.upstreamModel = row.upstreamModel
  return { row, provider }
}

type UpstreamRead = { kind: 'read'; row: BatchRow; results: unknown[] | null } | { kind: 'relay'; response: Response }

/** The row brought up to date by the gateway's read, or the gateway's refusal to relay. */
async function readUpstream(context: AuthenticatedContext, deps: InferenceDeps, request: Request, row: BatchRow, provider: ProviderEntry): Promise<UpstreamRead> {
  context.attempts++
  const started = performance.now()
  let read: GatewayRead
  try {
    read = await readGatewayBatch(deps, row, provider, readTimeoutMs, request.signal)
  } catch (error) {
    if (error instanceof UnreadableBatch) throw new RouterError('upstream_unreadable', `The ${error.message}.`)
    throw new RouterError('all_targets_failed', `The gateway ${provider.gateway.id} that holds this batch could not be reached.`)
  } finally {
    context.upstreamWaitMs += performance.now() - started
  }
  if (read.kind === 'invisible') return { kind: 'read', row, results: null }
  setRoutingHeaders(context, provider.gateway.id, [], read.answer.headers, provider.secret)
  if (read.kind === 'refused') return { kind: 'relay', response: relayUpstreamError(context, deps, provider, read.answer) }
  // The results leave the service: scrubbed of the provider secret (the batch object was read raw).
  return { kind: 'read', row: read.row, results: read.row.status === 'completed' ? scrubSecretInValue(normalizeResults(read.upstreamBatch.results), provider.secret) : null }
}

async function getBatch(context: AuthenticatedContext, deps: InferenceDeps, request: Request, id: string): Promise<Response> {
  const { row, provider } = resolveBatch(context, deps, id)
  const read = await readUpstream(context, deps, request, row, provider)
  if (read.kind === 'relay') return read.response
  return json(context, deps, 200, presentBatch(read.row, { results: read.results }))
}

async function deleteBatch(context: AuthenticatedContext, deps: InferenceDeps, request: Request, id: string): Promise<Response> {
  const { row, provider } = resolveBatch(context, deps, id)
  // The state as the gateway has it now (the row may be up to five minutes old).
  const read = await readUpstream(context, deps, request, row, provider)
  if (read.kind === 'relay') return read.response
  if (!isTerminalStatus(read.row.status)) {
    throw new RouterError('batch_not_terminal', `This batch is ${read.row.status}: only a completed, failed, expired or cancelled batch can be deleted (there is no cancel operation).`)
  }
  context.attempts++
  let upstream: GatewayAnswer
  try {
    upstream = await deps.upstream.read(provider, { method: 'DELETE', path: `/batches/${encodeURIComponent(row.upstreamId!)}`, signal: request.signal }, readTimeoutMs)
  } catch (error) {
    if (!(error instanceof GatewayUnreachable)) throw error
    throw new RouterError('all_targets_failed', `The gateway ${provider.gateway.id} that holds this batch could not be reached; nothing was deleted.`)
  }
  // A batch the gateway no longer has is gone there already.
  if (!upstream.ok && upstream.status !== 404) return relayUpstreamError(context, deps, provider, upstream)
  deps.repositories.batches.markPurged(row.id, Date.now())
  return json(context, deps, 200, { id: row.id, object: 'batch', deleted: true })
}

/** `created_after`/`created_before`: unix seconds or an ISO 8601 time. */
function timeParameter(name: string, value: string): number {
  if (/^\d{1,12}$/.test(value)) return Number(value)
  const parsed = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN
  if (Number.isNaN(parsed)) throw new RouterError('invalid_request', `${name} must be unix seconds or an ISO 8601 time, not '${value.slice(0, 100)}'.`)
  return Math.floor(parsed / 1000)
}

function listBatches(context: AuthenticatedContext, deps: InferenceDeps, request: Request): Response {
  const query = new URL(request.url).searchParams
  let limit = 20
  const rawLimit = query.get('limit')
  if (rawLimit !== null) {
    limit = Number(rawLimit)
    if (!/^\d+$/.test(rawLimit) || limit < 1 || limit > 100) throw new RouterError('invalid_request', `limit must be an integer from 1 to 100, not '${rawLimit.slice(0, 50)}'.`)
  }
  const statuses = query.getAll('status').flatMap((value) => value.split(',')).filter(Boolean)
  for (const status of statuses) {
    if (!(batchStatuses as readonly string[]).includes(status)) throw new RouterError('invalid_request', `status must be one of ${batchStatuses.join(', ')}, not '${status.slice(0, 50)}'.`)
  }
  const createdAfter = query.get('created_after')
  const createdBefore = query.get('created_before')
  let after: { createdAt: number; id: string } | undefined
  const afterId = query.get('after')
  if (afterId !== null) {
    const claims = readBatchId(afterId, deps.sign)
    if (!claims) throw new RouterError('invalid_batch_id', '`after` is not a batch id the service issued.')
    const cursor = claims.keyId === context.key.id ? deps.repositories.batches.get(afterId) : undefined
    if (!cursor) throw new RouterError('batch_not_found', '`after` names no batch of this key.')
    after = { createdAt: cursor.createdAt, id: cursor.id }
  }
  const rows = deps.repositories.batches.list({
    keyId: context.key.id,
    limit: limit + 1,
    after,
    statuses,
    createdAfter: createdAfter === null ? undefined : timeParameter('created_after', createdAfter),
    createdBefore: createdBefore === null ? undefined : timeParameter('created_before', createdBefore),
  })
  const page = rows.slice(0, limit)
  // List items never carry results, whatever their state.
  const data = page.map((row) => presentBatch(row))
  return json(context, deps, 200, { object: 'list', data, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.length > limit })
}

export const handleBatches: EndpointHandler = async (context, request, _route, deps) => {
  const pathname = new URL(request.url).pathname.replace(/\/+$/, '')
  const rest = pathname.slice('/v1/batches'.length)
  if (request.method === 'POST') {
    if (rest !== '') throw new RouterError('not_found', `The path ${pathname} is not served (there is no cancel operation).`)
    return submitBatch(context, request, deps)
  }
  if (rest === '') {
    if (request.method !== 'GET') throw new RouterError('not_found')
    return listBatches(context, deps, request)
  }
  let id: string
  try {
    id = decodeURIComponent(rest.slice(1))
  } catch {
    throw new RouterError('invalid_batch_id')
  }
  if (id.includes('/')) throw new RouterError('not_found', `The path ${pathname} is not served.`)
  return request.method === 'DELETE' ? deleteBatch(context, deps, request, id) : getBatch(context, deps, request, id)
}
