/**
 * Mid-stream continuation's management rule (CONTRACT §16): a key's `continuation` setting, set
 * whole (its checks are the key's, keys.ts), as the response cache's is (cache.ts).
 */
import { presentStoredContinuation } from '../domain/continuation-settings'
import type { Actor, ManagementDeps } from './context'
import { setKeySetting, type KeyView } from './keys'

export interface SetContinuationInput {
  id: string
  /** The whole setting, or null (off). */
  continuation: unknown
  /**
   * The fields not named keep what is stored (the operator CLI: `key continuation` without
   * `--max-hops` keeps the hops already set); otherwise the value replaces the setting whole.
   */
  keepStored?: boolean
}

/** Sets a key's continuation (the CLI's actor acts in the key's own workspace). Answers the key. */
export function setKeyContinuation(deps: ManagementDeps, actor: Actor, input: SetContinuationInput): KeyView {
  return setKeySetting(deps, actor, input.id, 'continuation', input.continuation, input.keepStored ? (row) => presentStoredContinuation(row.continuation) : undefined)
}
