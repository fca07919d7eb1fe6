/**
 * The batch-refresh job (SPEC: unfinished batches are refreshed from upstream every 5 minutes):
 * each running batch read from the gateway that holds it and its row brought up to date; a batch
 * reaching a terminal state gets its notifications in the same transaction (repositories/batches
 * applyProgress), so running the job twice, or beside a client's GET, never notifies twice.
 *
 * An upload the gateway took without confirming in time (`unconfirmed`) is looked for in the
 * gateway's batch list: a batch of the same endpoint, model and request count created since, not
 * held by another row, is adopted, so the client's "check the list" finds it. A submit whose upload
 * never finished (the process died mid-upload) is dropped after an hour.
 *
 * The run then makes the first try of the notifications no run has tried yet (deliver.ts
 * deliverNewRows), its own and any a client's read wrote since: SPEC "Batch webhook" sends within
 * about five minutes of the end, and the delivery run alone would add up to five more.
 */
import type { ProviderEntry } from '../domain/read-model'
import type { JobDeps, JobProgress } from '../scheduler/job-deps'
import type { Repositories } from '../storage/repositories'
import type { BatchRow } from '../storage/repositories/batches'
import { parseJson } from '../dialects/sse/decode'
import { scrubSecret } from '../gateways/scrub-secret'
import { isObject } from '../http/read-body'
import { deliverNewRows, type NewRowsDeliveryDeps } from './deliver'
import { readGatewayBatch } from './gateway-read'
import { progressFromUpstream } from './present'

const readTimeoutMs = 30_000
const unconfirmedLifetimeS = 24 * 3600
const staleSubmitS = 3600

/**
 * What the refresh uses: the batch rows (and what a terminal state's notifications read), the
 * provider entries of the read model and the gateways holding the batches, then the first delivery
 * of the new notifications.
 */
export type RefreshDeps = Pick<JobDeps, 'upstream' | 'logger' | 'snapshots'> &
  NewRowsDeliveryDeps & { repositories: Pick<Repositories, 'batches' | 'inferenceKeys' | 'workspaces'> }

/** A gateway's JSON answer as it came: the ids in it are kept (scrub what of it is logged). */
async function getJson(deps: Pick<RefreshDeps, 'upstream'>, provider: ProviderEntry, suffix: string): Promise<{ status: number; body: unknown }> {
  const answer = await deps.upstream.read(provider, { path: suffix }, readTimeoutMs)
  return { status: answer.status, body: parseJson(answer.raw) }
}

async function refreshOne(deps: RefreshDeps, row: BatchRow, provider: ProviderEntry): Promise<'unchanged' | 'updated' | 'finished' | 'not-visible'> {
  const read = await readGatewayBatch(deps, row, provider, readTimeoutMs)
  if (read.kind === 'invisible') return 'not-visible'
  if (read.kind === 'refused') throw new Error(`HTTP ${read.answer.status}`)
  if (read.finished) return 'finished'
  const next = read.row
  return next.status === row.status && next.requestCompleted === row.requestCompleted && next.requestFailed === row.requestFailed ? 'unchanged' : 'updated'
}

async function reconcile(deps: RefreshDeps, row: BatchRow, provider: ProviderEntry): Promise<'adopted' | 'waiting' | 'dropped'> {
  const nowS = Math.floor(Date.now() / 1000)
  const { status, body } = await getJson(deps, provider, `/batches?limit=100`)
  if (status >= 200 && status <= 299 && isObject(body) && Array.isArray(body.data)) {
    const held = deps.repositories.batches.upstreamIdsOf(row.providerKeyId)
    const match = body.data.find((item): item is Record<string, unknown> => {
      if (!isObject(item) || typeof item.id !== 'string' || held.has(item.id)) return false
      const counts = isObject(item.request_counts) ? item.request_counts : {}
      const created = typeof item.created_at === 'number' ? item.created_at : 0
      return item.endpoint === row.endpoint && item.model === row.upstreamModel && counts.total === row.requestTotal && created >= row.createdAt - 60
    })
    if (match) {
      deps.repositories.batches.confirm(row.id, match.id as string, progressFromUpstream(match, Date.now(), row.requestTotal, provider.secret), row.reservedNanoUsd)
      deps.logger.info('batch_adopted', { batch_id: row.id, upstream_id: scrubSecret(match.id as string, provider.secret) })
      return 'adopted'
    }
  }
  if (nowS - row.createdAt > unconfirmedLifetimeS) {
    deps.repositories.batches.discard(row.id)
    return 'dropped'
  }
  return 'waiting'
}

export async function refreshBatches(deps: RefreshDeps, progress: JobProgress): Promise<Record<string, unknown>> {
  const nowS = Math.floor(Date.now() / 1000)
  const droppedSubmits = deps.repositories.batches.dropStaleSubmits(nowS - staleSubmitS)
  const rows = deps.repositories.batches.listUnfinished().filter((row) => row.status !== 'submitting')
  const providers = deps.snapshots.current().providers
  const counts = { checked: 0, updated: 0, finished: 0, unchanged: 0, not_visible: 0, adopted: 0, failed: 0 }
  progress(0, rows.length)
  let done = 0
  for (const row of rows) {
    const provider = providers.get(row.providerKeyId)
    try {
      if (!provider) throw new Error('its provider key is gone')
      if (row.status === 'unconfirmed') {
        if ((await reconcile(deps, row, provider)) === 'adopted') counts.adopted++
      } else {
        counts.checked++
        const outcome = await refreshOne(deps, row, provider)
        counts[outcome === 'not-visible' ? 'not_visible' : outcome]++
      }
    } catch (error) {
      counts.failed++
      deps.logger.warn('batch_refresh_failed', { batch_id: row.id, gateway: provider?.gateway.id, error: error instanceof Error ? error.message : String(error) })
    }
    progress(++done, rows.length)
  }
  // After the loop: every terminal state and its outbox rows are committed (applyProgress).
  let deliveries: Record<string, unknown>
  try {
    deliveries = await deliverNewRows(deps)
  } catch (error) {
    // The refresh stands; the delivery run tries the rows.
    const message = error instanceof Error ? error.message : String(error)
    deps.logger.warn('batch_refresh_delivery_failed', { error: message })
    deliveries = { error: message }
  }
  return { batches: rows.length, ...counts, dropped_submits: droppedSubmits, deliveries }
}
