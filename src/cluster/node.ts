/**
 * What a server process does for its role (CONTRACT §10), and how it changes role while serving.
 * - Primary: the database read-write (migrated at open), the WAL checkpointer and the scheduled jobs.
 * - Replica: the database read-only, request-log rows spooled and shipped to the primary.
 * A promotion (LiteFS's `primaryChange`, or `.primary` gone) reopens the database read-write, writes the spool's rows here and
 * starts the jobs; a demotion stops the jobs and reopens read-only. Requests keep being served
 * throughout: the connection is swapped between two of them (storage and repositories are the same
 * objects, given new contents), and the snapshot is rebuilt from the new connection.
 */
import { existsSync } from 'node:fs'
import type { Metrics } from '../observability/metrics'
import { openStorage, type BackgroundCheckpoints, type Storage } from '../storage/client'
import { createRepositories, type Repositories } from '../storage/repositories'
import { startScheduler, type SchedulerDeps, type SchedulerOptions } from '../scheduler/scheduler'
import type { NodeRole, RoleWatcher } from './role'
import { LogShipper, primaryBaseUrl } from './ship-logs'
import { databaseLogSink, type Writer } from './writer'
import { spooledRows, spoolPath } from './spool'

/**
 * What a node uses of the runtime: the role it follows, the writer seam it points at the primary,
 * the connection and repositories it swaps in place on a role change (with the snapshot rebuilt and
 * the log queue flushed first), the shipping and checkpoint settings, and the scheduler's parts.
 */
export interface NodeDeps extends SchedulerDeps {
  storage: Storage
  repositories: Repositories
  writer: Writer
  roles: RoleWatcher
  metrics: Metrics
  /** The log shipper's calls to the primary. */
  fetch: typeof fetch
  logQueue: { flush(): void }
  snapshots: { invalidate(): void }
}

export interface NodeOptions {
  scheduler?: SchedulerOptions
  /** How often the shipper looks at the spool; default a quarter of RT_LIMIT_SYNC_MS, at most 250 ms. */
  shipIntervalMs?: number
  /** How often `.primary` is read; default 250 ms. */
  roleIntervalMs?: number
}

/** A replica started before the primary created the database waits for LiteFS to bring it. */
export async function waitForDatabase(runtimeLog: { warn(event: string, fields: Record<string, unknown>): void }, path: string, litefsDir: string | undefined): Promise<void> {
  if (!litefsDir || path === ':memory:' || existsSync(path)) return
  runtimeLog.warn('waiting_for_database', { path, message: 'This replica waits for the primary to create the database and LiteFS to copy it here.' })
  while (!existsSync(path)) await Bun.sleep(250)
}

export class ClusterNode {
  private stopJobs: (() => Promise<void>) | undefined
  private checkpoints: BackgroundCheckpoints | undefined
  private shipper: LogShipper | undefined

  constructor(
    private readonly deps: NodeDeps,
    private readonly options: NodeOptions = {},
  ) {}

  /** Starts the duties of the role the node has now, and follows the role from here on (LiteFS's events, `.primary`). */
  async start(): Promise<void> {
    const { deps } = this
    if (deps.writer.replica) this.startShipping()
    else {
      // A former replica started again as the primary: what it had spooled is written here.
      const moved = this.takeSpool()
      if (moved > 0) deps.logger.warn('spool_written', { rows: moved, message: 'Request-log rows this node had spooled as a replica are written here, as the primary.' })
      await this.startPrimaryDuties()
    }
    deps.roles.onChange((role, previous) => this.change(role, previous))
    // LiteFS's event stream where its API answers (its first word applied, if it differs), and the file's poll.
    await deps.roles.start(this.options.roleIntervalMs)
  }

  /** Stops jobs, checkpoints and shipping (a last shipping pass first); the caller closes the storage. */
  async stop(): Promise<void> {
    await this.deps.roles.stop()
    await this.stopPrimaryDuties()
    if (this.shipper) {
      await this.shipper.ship()
      await this.shipper.stop()
      this.shipper = undefined
    }
    this.deps.writer.close()
  }

  private async change(role: NodeRole, previous: NodeRole): Promise<void> {
    const { logger, writer } = this.deps
    if (role.kind === 'replica' && previous.kind === 'replica') {
      // A new primary: rows and replays go there from now on.
      writer.follow(role)
      logger.info('primary_changed', { primary: role.primaryHost })
      return
    }
    if (role.kind === 'primary') await this.promote()
    else await this.demote(role)
  }

  private async promote(): Promise<void> {
    const { deps } = this
    if (this.shipper) {
      await this.shipper.stop()
      this.shipper = undefined
    }
    this.reopen(false)
    deps.writer.follow({ kind: 'primary' })
    const moved = this.takeSpool()
    await this.startPrimaryDuties()
    deps.logger.warn('promoted', { spooled_rows_written: moved, message: 'This node is the primary now: it writes the database and runs the scheduled jobs.' })
  }

  private async demote(role: NodeRole & { kind: 'replica' }): Promise<void> {
    const { deps } = this
    await this.stopPrimaryDuties()
    // Rows queued while primary go into the spool from now on, with the others.
    deps.writer.follow(role)
    this.reopen(true)
    this.startShipping()
    deps.logger.warn('demoted', { primary: role.primaryHost, message: 'This node is a replica now: writes are replayed on the primary, request logs shipped to it.' })
  }

  /**
   * Rows a former replica still held for the primary (in this process, or in a spool file left from
   * before): it is the primary now, so they are written here. No spool file, nothing to take.
   */
  private takeSpool(): number {
    const { writer, metrics, config } = this.deps
    if (!writer.hasSpool() && !existsSync(spoolPath(config.dataDir))) return 0
    const spool = writer.spool()
    const sink = databaseLogSink(this.deps.repositories, metrics)
    let moved = 0
    for (let batch = spool.take(500); batch; batch = spool.take(500)) {
      sink.commit(spooledRows(batch), true)
      spool.remove(batch.upTo)
      moved += batch.texts.length
    }
    return moved
  }

  private startShipping(): void {
    const { deps } = this
    const { config } = deps
    if (config.clusterSecret === undefined) {
      deps.logger.warn('cluster_secret_missing', { message: 'RT_CLUSTER_SECRET is unset: request-log rows stay in this replica\'s spool until it is set.' })
    }
    this.shipper = new LogShipper({
      spool: deps.writer.spool(),
      primaryUrl: () => primaryBaseUrl({ primaryUrl: config.primaryUrl, flyAppName: config.flyAppName, port: config.port, primaryHost: deps.writer.primaryHost() }),
      secret: config.clusterSecret,
      fetch: deps.fetch,
      logger: deps.logger,
      metrics: deps.metrics,
    })
    // Key limits (CONTRACT §11) see another node's requests once their rows are on the primary: with a
    // short RT_LIMIT_SYNC_MS the rows go there as often, a quarter of it (250 ms at the default).
    this.shipper.start(this.options.shipIntervalMs ?? Math.min(250, Math.max(10, Math.floor(config.limitSyncMs / 4))))
  }

  private async startPrimaryDuties(): Promise<void> {
    const { deps } = this
    this.checkpoints = await deps.storage.startBackgroundCheckpoints({
      onCheckpoint: (pages) => {
        deps.metrics.walCheckpoints++
        deps.metrics.walCheckpointPages += pages
      },
      onError: (message) => deps.logger.error('wal_checkpoint_failed', { error: message }),
    })
    this.stopJobs = startScheduler(deps, this.options.scheduler)
  }

  /** Never throws: a demotion must finish whatever the jobs or the checkpointer say on the way out. */
  private async stopPrimaryDuties(): Promise<void> {
    const { logger } = this.deps
    const stopJobs = this.stopJobs
    const checkpoints = this.checkpoints
    this.stopJobs = undefined
    this.checkpoints = undefined
    try {
      await stopJobs?.()
    } catch (error) {
      logger.error('scheduler_stop_failed', { error: error instanceof Error ? error.message : String(error) })
    }
    try {
      await checkpoints?.stop()
    } catch (error) {
      logger.error('wal_checkpoint_stop_failed', { error: error instanceof Error ? error.message : String(error) })
    }
  }

  /**
   * A new connection in place of the old: read-write (and migrated) on a promotion, read-only on a
   * demotion. The storage and repositories objects stay the ones everything holds.
   */
  private reopen(readonly: boolean): void {
    const { deps } = this
    deps.logQueue.flush()
    const fresh = openStorage(deps.config.dbPath, { readonly })
    const old = deps.storage.close
    Object.assign(deps.storage, fresh)
    Object.assign(
      deps.repositories,
      createRepositories(deps.storage, (change) => {
        for (const listener of deps.onConfigWrite) listener(change)
      }),
    )
    old()
    deps.snapshots.invalidate()
  }
}
