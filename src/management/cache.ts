/**
 * The response cache's management rules (CONTRACT §15): a key's `cache` setting, set whole (its
 * checks are the key's, keys.ts), and the purge of the entries the key's requests are answered from.
 */
import { parseStoredCache, presentStoredCache } from '../domain/cache-settings'
import type { Actor, ManagementDeps } from './context'
import { requireKeyRow, setKeySetting, type KeyRef, type KeyView } from './keys'

export interface SetCacheInput {
  id: string
  /** The whole setting, or null (off). */
  cache: unknown
  /**
   * The fields not named keep what is stored (the operator CLI: `--ttl` and `--scope` only, the
   * semantic lookup kept); otherwise the value replaces the setting whole.
   */
  keepStored?: boolean
}

/** Sets a key's cache (the CLI's actor acts in the key's own workspace). Answers the key. */
export function setKeyCache(deps: ManagementDeps, actor: Actor, input: SetCacheInput): KeyView {
  return setKeySetting(deps, actor, input.id, 'cache', input.cache, input.keepStored ? (row) => presentStoredCache(row.cache) : undefined)
}

/**
 * Purges the cache entries the key's requests are answered from: its own, or its workspace's shared
 * entries when its scope is `workspace` (a key whose cache is off: its own). Every node keeps its
 * own cache file (CONTRACT §15), so the purge is a time written on the key (or the workspace), which
 * every node's read model sees: no entry made before it is served anywhere again. The entries of
 * this node's file are deleted now (`purged` counts them); other nodes' go as they expire or are
 * evicted.
 */
export function purgeKeyCache(deps: ManagementDeps, ref: KeyRef): { purged: number } {
  const key = requireKeyRow(deps, ref)
  const shared = parseStoredCache(key.cache)?.scope === 'workspace'
  // Whole milliseconds, and after any entry this node made so far (an entry of this very millisecond included).
  const at = deps.now().getTime() + 1
  if (shared) deps.repositories.workspaces.updateSettings(key.workspaceId, { cachePurgedAt: at })
  else deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ cachePurgedAt: at }])
  const purged = deps.cache?.purge({ workspaceId: key.workspaceId, keyId: shared ? undefined : key.id }) ?? 0
  return { purged }
}
