/**
 * The daily `log-prune` job: audit events older than RT_AUDIT_RETENTION_DAYS (CONTRACT §12) are
 * deleted, a thousand per transaction, so the database is never held for long and freed pages are
 * reused by later writes. It runs on the scheduler's thread, under its lease.
 */
import type { Runtime } from '../../runtime'
import type { JobProgress } from '../jobs'

const dayMs = 24 * 3_600_000
const perTransaction = 1000

export async function pruneLogs(runtime: Runtime, progress: JobProgress): Promise<Record<string, unknown>> {
  const before = new Date(runtime.now().getTime() - runtime.config.auditRetentionDays * dayMs).toISOString()
  let deleted = 0
  for (;;) {
    const removed = runtime.repositories.auditEvents.deleteBefore(before, perTransaction)
    deleted += removed
    progress(deleted, deleted)
    if (removed < perTransaction) break
    // Between batches, other work on this thread's event loop runs.
    await Bun.sleep(0)
  }
  return { audit_events: { deleted, retention_days: runtime.config.auditRetentionDays, before } }
}
