/**
 * The writer seam (CONTRACT §10): every write of the service goes through here, and what a write
 * does depends on the node's role.
 * - On the primary (or a node without LiteFS) it writes the local database.
 * - On a replica the database is read-only (LiteFS applies the primary's changes to it):
 *   - a write request (management, MCP write tools, the Batch API) is answered at once with 409
 *     and `fly-replay: instance=<primary>`, and fly.io's edge replays it on the primary;
 *   - request-log rows, and with them the keys' last-used stamps, go to the local spool, and the
 *     shipper (ship-logs.ts) sends them to the primary, which writes them here again, as the
 *     primary, by row id.
 * Nothing else in the service decides where a write goes.
 */
import type { Metrics } from '../observability/metrics'
import type { Repositories } from '../storage/repositories'
import type { RequestLogRow } from '../storage/repositories/request-logs'
import type { NodeRole } from './role'
import { LogSpool } from './spool'
import { jsonResponse } from '../http/json-response'

/** Where the log queue (pipeline/log/log-request.ts) commits its batches. */
export interface LogSink {
  /** Writes rows; `replayed` rows may have been written before and are then skipped. Returns the rows new here. */
  commit(rows: RequestLogRow[], replayed: boolean): number
  /** Writes new rows if the database's write lock is free now; undefined, having written nothing, if it is not. */
  tryCommit(rows: RequestLogRow[]): number | undefined
}

export const replayMessage = 'replaying on the primary'

/** A write reached a replica: the CLI says so and exits 1, HTTP answers 409 with `fly-replay`. */
export class ReplicaWriteError extends Error {
  constructor(readonly primaryHost: string) {
    super(`this node is a LiteFS replica: writes go to the primary (${primaryHost || 'unknown host'}); run the command there`)
  }
}

/** SQLite refused a write because the connection is read-only (a write that slipped past the seam). */
export function isReadonlyDatabaseError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'SQLITE_READONLY' || (typeof code === 'string' && code.startsWith('SQLITE_READONLY_'))
}

/** A disk I/O error: in WAL mode, what LiteFS fails a write with on a node that is no longer the primary. */
export function isIoError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'SQLITE_IOERR' || (typeof code === 'string' && code.startsWith('SQLITE_IOERR_'))
}

/** Writes the rows to this node's database and stamps each key's last use, in the log flush. */
export function databaseLogSink(repositories: Repositories, metrics: Metrics): LogSink {
  const write = (rows: RequestLogRow[], replayed: boolean) => {
    if (rows.length === 0) return 0
    const lastUsed = new Map<string, number>()
    for (const row of rows) if (row.keyId && row.status !== 401) lastUsed.set(row.keyId, Math.max(row.createdAt, lastUsed.get(row.keyId) ?? 0))
    const inserted = replayed ? repositories.requestLogs.insertManyIfAbsent(rows) : repositories.requestLogs.insertMany(rows)
    repositories.inferenceKeys.touchLastUsed([...lastUsed].map(([keyId, at]) => ({ keyId, at: new Date(at).toISOString() })))
    metrics.logRowsWritten += inserted
    return inserted
  }
  return {
    commit: write,
    // The rows and the keys' last use in one transaction, taken only if the lock is free now.
    tryCommit: (rows) => (rows.length === 0 ? 0 : repositories.tryTransaction(() => write(rows, false))?.value),
  }
}

export class Writer implements LogSink {
  private readonly local: LogSink
  private current: NodeRole
  /** True while the node is a replica: read on every request, so a plain field. */
  replica: boolean
  private spoolFile: LogSpool | undefined

  constructor(
    role: NodeRole,
    repositories: Repositories,
    private readonly metrics: Metrics,
    /** `$RT_DATA_DIR/spool.db`, opened the first time the node is a replica. */
    private readonly spoolFilePath: string,
    /** The role now, not as last polled (LiteFS's word where its API answers, else `.primary`: cluster/role.ts). */
    private readonly roleNow: () => NodeRole = () => role,
  ) {
    this.local = databaseLogSink(repositories, metrics)
    this.current = role
    this.replica = role.kind === 'replica'
    metrics.isReplica = () => this.replica
    metrics.spoolDepth = () => this.spoolFile?.count() ?? 0
  }

  /** The replica's spool (opened on first use; it outlives role changes until close). */
  spool(): LogSpool {
    return (this.spoolFile ??= new LogSpool(this.spoolFilePath))
  }

  /** Whether a spool file is open (a node that was never a replica has none). */
  hasSpool(): boolean {
    return this.spoolFile !== undefined
  }

  close(): void {
    this.spoolFile?.close()
    this.spoolFile = undefined
  }

  /**
   * The role writes follow from now on. The node (cluster/node.ts) calls it at the safe moment of a
   * change: after reopening read-write on a promotion, before reopening read-only on a demotion.
   */
  follow(role: NodeRole): void {
    this.current = role
    this.replica = role.kind === 'replica'
  }

  role(): NodeRole {
    return this.current
  }

  /** The primary's hostname while this node is a replica. */
  primaryHost(): string | undefined {
    return this.current.kind === 'replica' ? this.current.primaryHost : undefined
  }

  /**
   * The answer to a write request on a replica (CONTRACT §10); undefined on the primary. While the
   * primary is unknown (a failover under way) there is nowhere to replay to: 503, retry shortly.
   */
  replay(): Response | undefined {
    return this.replayTo(this.primaryHost())
  }

  /**
   * Where a write that failed should go, when the failure is the node's role: the primary's host
   * ('' while none is known), or undefined for any other failure, which stays an internal error.
   * Role failures are the seam's own refusal (ReplicaWriteError), a read-only connection (a
   * replica), and, in WAL mode, the disk I/O error LiteFS gives a node demoted a moment ago, before
   * the role change has reached the node (the role is read again now).
   */
  refusedTo(error: unknown): string | undefined {
    if (error instanceof ReplicaWriteError || isReadonlyDatabaseError(error)) return this.primaryHost()
    if (!isIoError(error)) return undefined
    const role = this.roleNow()
    return role.kind === 'replica' ? role.primaryHost : undefined
  }

  /** The HTTP answer to a write that failed for the node's role (`refusedTo`): 409 + `fly-replay`, or 503 with no primary. */
  replayAfterFailedWrite(error: unknown): Response | undefined {
    const primary = this.refusedTo(error)
    return primary === undefined ? undefined : this.replayTo(primary)
  }

  private replayTo(primary: string | undefined): Response | undefined {
    if (primary === undefined) return undefined
    if (primary === '') {
      return jsonResponse(503, { error: 'no primary at the moment (a failover is under way): retry shortly' }, { 'retry-after': '2' })
    }
    this.metrics.writesReplayed++
    return jsonResponse(409, { error: replayMessage }, { 'fly-replay': `instance=${primary}` })
  }

  /** For writes that are not HTTP requests (the CLI): throws ReplicaWriteError on a replica. */
  assertPrimary(): void {
    const primary = this.primaryHost()
    if (primary !== undefined) throw new ReplicaWriteError(primary)
  }

  commit(rows: RequestLogRow[], replayed: boolean): number {
    if (!this.replica) return this.local.commit(rows, replayed)
    const added = this.spool().add(rows)
    this.metrics.logRowsSpooled += added
    return added
  }

  /** On a replica the spool is this node's own file, which no other writer shares: written at once. */
  tryCommit(rows: RequestLogRow[]): number | undefined {
    return this.replica ? this.commit(rows, false) : this.local.tryCommit(rows)
  }
}
