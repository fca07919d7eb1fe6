/** The storage layer's write and read surface: every write goes through these repositories. */
import { busyTimeoutMs, type Storage } from '../client'
import type { ConfigChange } from './config-change'
import { createWorkspaceRepository } from './workspaces'
import { createProviderKeyRepository } from './provider-keys'
import { createInferenceKeyRepository } from './inference-keys'
import { createRequestLogRepository } from './request-logs'
import { createGatewayCatalogRepository } from './gateway-catalogs'
import { createBatchRepository } from './batches'
import { createJobLeaseRepository } from './job-leases'
import { createAuditEventRepository } from './audit-events'

// Defined below the repositories that take it (config-change.ts), so none of them imports this index.
export type { ConfigChange } from './config-change'

export interface Repositories {
  workspaces: ReturnType<typeof createWorkspaceRepository>
  providerKeys: ReturnType<typeof createProviderKeyRepository>
  inferenceKeys: ReturnType<typeof createInferenceKeyRepository>
  requestLogs: ReturnType<typeof createRequestLogRepository>
  gatewayCatalogs: ReturnType<typeof createGatewayCatalogRepository>
  batches: ReturnType<typeof createBatchRepository>
  jobLeases: ReturnType<typeof createJobLeaseRepository>
  auditEvents: ReturnType<typeof createAuditEventRepository>
  /**
   * Runs `write` in one transaction (a savepoint inside another): a management operation's writes
   * and its audit event commit together or not at all. When it throws, the snapshot is rebuilt from
   * the database: a write it already heard of was rolled back.
   */
  transaction<T>(write: () => T): T
  /**
   * Runs `write` in one transaction if the write lock is free now; undefined, having done nothing,
   * if another connection holds it. For the serving thread's log flush, which must not sleep in
   * SQLite's busy handler (1, 2, 5 … ms) while a job's transaction runs: it tries again shortly.
   */
  tryTransaction<T>(write: () => T): { value: T } | undefined
}

/** `onWrite` runs after every configuration write, so in-memory snapshots follow it. */
export function createRepositories(storage: Storage, onWrite: (change?: ConfigChange) => void = () => {}): Repositories {
  const written = (change?: ConfigChange) => {
    storage.bumpConfigVersion()
    onWrite(change)
  }
  return {
    workspaces: createWorkspaceRepository(storage.db, written),
    providerKeys: createProviderKeyRepository(storage.db, written),
    inferenceKeys: createInferenceKeyRepository(storage.db, written),
    requestLogs: createRequestLogRepository(storage.db),
    gatewayCatalogs: createGatewayCatalogRepository(storage.db, written),
    batches: createBatchRepository(storage.db),
    // Not configuration: a lease changes nothing a request reads, so no config-version bump.
    jobLeases: createJobLeaseRepository(storage.db),
    // Not configuration: an event changes nothing a request reads.
    auditEvents: createAuditEventRepository(storage.db),
    tryTransaction(write) {
      const sqlite = storage.sqlite
      if (sqlite.inTransaction) return { value: sqlite.transaction(write)() }
      sqlite.exec('PRAGMA busy_timeout = 0')
      try {
        sqlite.exec('BEGIN IMMEDIATE')
      } catch (error) {
        if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return undefined
        throw error
      } finally {
        sqlite.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
      }
      try {
        const value = write()
        sqlite.exec('COMMIT')
        return { value }
      } catch (error) {
        if (sqlite.inTransaction) sqlite.exec('ROLLBACK')
        throw error
      }
    },
    transaction(write) {
      try {
        // IMMEDIATE: the write lock is taken (waiting out other writers) before the rule's first read.
        // A deferred transaction that reads and then writes fails at once with SQLITE_BUSY_SNAPSHOT
        // when another connection (the scheduler's, the checkpointer's) committed in between.
        return storage.sqlite.inTransaction ? storage.sqlite.transaction(write)() : storage.sqlite.transaction(write).immediate()
      } catch (error) {
        onWrite()
        throw error
      }
    },
  }
}
