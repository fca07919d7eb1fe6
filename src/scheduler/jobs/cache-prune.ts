/**
 * The `cache-prune` job (CONTRACT §15 "Storage"): deletes the expired entries of this node's
 * response cache file. Every node's store also prunes itself about once a minute on its writer
 * thread (the scheduled jobs run on the primary only, and each node has its own cache); this job is
 * the scheduled pass on the primary and `./scripts/cli jobs run cache-prune` on any node. An
 * expired entry is never served in between: the read checks the expiry.
 */
import type { CacheStore } from '../../storage/cache-store'
import type { JobProgress } from '../job-deps'

/** The node's cache store, absent when this process has none. */
export interface CachePruneDeps {
  cache?: Pick<CacheStore, 'prune' | 'stats'>
}

export async function pruneCache(deps: CachePruneDeps, progress: JobProgress): Promise<Record<string, unknown>> {
  if (!deps.cache) return { deleted: 0, skipped: 'this process has no response cache' }
  const deleted = deps.cache.prune()
  progress(deleted, deleted)
  const { entries, bytes } = deps.cache.stats()
  return { deleted, entries, bytes }
}
