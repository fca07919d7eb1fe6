/** What management rules need: storage, configuration, the secret box and a clock. */
import type { LimitState } from '../pipeline/limits/ledger'
import type { Config } from '../config/env'
import type { SecretBox } from '../storage/crypto'
import type { Repositories } from '../storage/repositories'
import type { UsageReader } from '../storage/usage-reader'
import { ManagementError, messages } from './errors'

export interface ManagementDeps {
  repositories: Repositories
  config: Config
  secretBox: SecretBox
  now: () => Date
  /** The usage queries, answered off the serving thread (storage/usage-reader.ts). */
  usage: UsageReader
  /**
   * The writer seam (cluster/writer.ts): a write on a LiteFS replica is refused here, whatever door
   * it came through (the doors replay it on the primary before it gets this far).
   */
  writer?: { assertPrimary(): void }
  /** Live limit state of the limited keys this node admits for (pipeline/limits/ledger.ts). */
  limiter?: { liveState(keyId: string): LimitState | undefined }
  /**
   * This node's response cache file (CONTRACT §15), for a purge: it deletes one key's entries, or a
   * workspace's shared entries when `keyId` is undefined, and answers how many. Absent: nothing to purge.
   */
  cache?: { purge(target: { workspaceId: string; keyId: string | undefined }): number }
}

/** The authenticated management caller: one workspace, possibly read-only. */
export interface Actor {
  workspaceId: string
  readOnly: boolean
  /** Who it is, for the audit log: a management key (its id and display prefix), or the operator CLI. */
  kind: 'management_key' | 'cli'
  id?: string
  prefix?: string
}

export function assertCanWrite(actor: Actor) {
  if (actor.readOnly) throw new ManagementError(403, messages.readOnly)
}

export const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Label rule shared by keys and providers: `label` wins over `name`; longer than 120 is cut. */
export function pickLabel(body: { name?: string | null; label?: string | null }): string | null | undefined {
  const value = body.label !== undefined ? body.label : body.name
  if (value === undefined) return undefined
  if (value === null) return null
  return value.slice(0, 120)
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
