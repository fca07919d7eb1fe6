/**
 * One read of a batch from the gateway that holds it (GET …/batches/{upstream id}), applied to its
 * row: shared by a client's GET or DELETE (handlers.ts) and the refresh job (refresh.ts), so both
 * move a batch the same way and a terminal state writes its notifications once, in the same
 * transaction, whichever read sees it first.
 */
import { parseJson } from '../dialects/sse/decode'
import { upstreamHeaders } from '../gateways/upstream'
import { isObject } from '../pipeline/read-body'
import type { Repositories } from '../storage/repositories'
import type { BatchRow } from '../storage/repositories/batches'
import type { ProviderEntry } from '../storage/snapshot'
import { notificationsFor } from './notify'
import { progressFromUpstream } from './present'

export class UnreadableBatch extends Error {}

export type GatewayRead =
  /** SPEC: right after submission the gateway may not see the batch yet. */
  | { kind: 'invisible' }
  | { kind: 'refused'; upstream: Response; text: string }
  | { kind: 'read'; upstream: Response; row: BatchRow; upstreamBatch: Record<string, unknown>; finished: boolean }

export async function readGatewayBatch(
  deps: { fetch: typeof fetch; repositories: Pick<Repositories, 'batches' | 'inferenceKeys' | 'workspaces'> },
  row: BatchRow,
  provider: ProviderEntry,
  signal: AbortSignal,
): Promise<GatewayRead> {
  const upstream = await deps.fetch(`${provider.baseUrl}/batches/${encodeURIComponent(row.upstreamId!)}`, { headers: upstreamHeaders(provider, [], false), signal })
  const text = await upstream.text()
  if (upstream.status === 404 && row.status === 'validating') return { kind: 'invisible' }
  if (!upstream.ok) return { kind: 'refused', upstream, text }
  const upstreamBatch = parseJson(text)
  if (!isObject(upstreamBatch)) throw new UnreadableBatch(`the gateway ${provider.gateway.id} answered with something that is not a batch object`)
  const now = Date.now()
  const finished = deps.repositories.batches.applyProgress(row.id, progressFromUpstream(upstreamBatch, now, row.requestTotal), (next) => notificationsFor(deps.repositories, next, now))
  return { kind: 'read', upstream, row: deps.repositories.batches.get(row.id)!, upstreamBatch, finished }
}
