/**
 * One read of a batch from the gateway that holds it (GET …/batches/{upstream id}), applied to its
 * row: shared by a client's GET or DELETE (handlers.ts) and the refresh job (refresh.ts), so both
 * move a batch the same way and a terminal state writes its notifications once, in the same
 * transaction, whichever read sees it first.
 */
import { parseJson } from '../dialects/sse/decode'
import type { GatewayAnswer, UpstreamClient } from '../gateways/client'
import { isObject } from '../http/read-body'
import type { Repositories } from '../storage/repositories'
import type { BatchRow } from '../storage/repositories/batches'
import type { ProviderEntry } from '../domain/read-model'
import { notificationsFor } from './notify'
import { progressFromUpstream } from './present'

export class UnreadableBatch extends Error {}

export type GatewayRead =
  /** SPEC: right after submission the gateway may not see the batch yet. */
  | { kind: 'invisible' }
  | { kind: 'refused'; answer: GatewayAnswer }
  /** `upstreamBatch`: the gateway's object as it came (scrub what of it is relayed). */
  | { kind: 'read'; answer: GatewayAnswer; row: BatchRow; upstreamBatch: Record<string, unknown>; finished: boolean }

/** A gateway that cannot be reached (or does not answer within `timeoutMs`) rejects with GatewayUnreachable. */
export async function readGatewayBatch(
  deps: { upstream: UpstreamClient; repositories: Pick<Repositories, 'batches' | 'inferenceKeys' | 'workspaces'> },
  row: BatchRow,
  provider: ProviderEntry,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<GatewayRead> {
  const answer = await deps.upstream.read(provider, { path: `/batches/${encodeURIComponent(row.upstreamId!)}`, signal }, timeoutMs)
  if (answer.status === 404 && row.status === 'validating') return { kind: 'invisible' }
  if (!answer.ok) return { kind: 'refused', answer }
  // Read as it came: its id, state and counts are kept (a scrubbed copy would change an id holding
  // 8 characters of the secret); what is relayed of it is scrubbed where it leaves.
  const upstreamBatch = parseJson(answer.raw)
  if (!isObject(upstreamBatch)) throw new UnreadableBatch(`the gateway ${provider.gateway.id} answered with something that is not a batch object`)
  const now = Date.now()
  const finished = deps.repositories.batches.applyProgress(row.id, progressFromUpstream(upstreamBatch, now, row.requestTotal, provider.secret), (next) => notificationsFor(deps.repositories, next, now))
  return { kind: 'read', answer, row: deps.repositories.batches.get(row.id)!, upstreamBatch, finished }
}
