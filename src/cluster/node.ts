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
import type { Runtime } from '../runtime'
import { openStorage, type BackgroundCheckpoints } from '../storage/client'
import { createRepositories } from '../storage/repositories'
import { startScheduler, type SchedulerOptions } from '../scheduler/scheduler'
import type { NodeRole } from './role'
import { LogShipper, primaryBaseUrl } from './ship-logs'
import { databaseLogSink } from './writer'
import { spooledRows, spoolPath } from './spool'


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
    private readonly runtime: Runtime,
    private readonly options: NodeOptions = {},
  ) {}

  /** Starts the duties of the role the node has now, and follows the role from here on (LiteFS's events, `.primary`). */
  async start(): Promise<void> {
    const { runtime } = this
    if (runtime.writer.replica) this.startShipping()
    else {
      // A former replica started again as the primary: what it had spooled is written here.
      const moved = this.takeSpool()
      if (moved > 0) runtime.logger.warn('spool_written', { rows: moved, message: 'Request-log rows this node had spooled as a replica are written here, as the primary.' })
      await this.startPrimaryDuties()
    }
    runtime.roles.onChange((role, previous) => this.change(role, previous))
    // LiteFS's event stream where its API answers (its first word applied, if it differs), and the file's poll.
    await runtime.roles.start(this.options.roleIntervalMs)
  }

  /** Stops jobs, checkpoints and shipping (a last shipping pass first); the caller closes the storage. */
  async stop(): Promise<void> {
    await this.runtime.roles.stop()
    await this.stopPrimaryDuties()
    if (this.shipper) {
      await this.shipper.ship()
      await this.shipper.stop()
      this.shipper = undefined
    }
    this.runtime.writer.close()
  }

  private async change(role: NodeRole, previous: NodeRole): Promise<void> {
    const { logger, writer } = this.runtime
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
    const { runtime } = this
    if (this.shipper) {
      await this.shipper.stop()
      this.shipper = undefined
    }
    this.reopen(false)
    runtime.writer.follow({ kind: 'primary' })
    const moved = this.takeSpool()
    await this.startPrimaryDuties()
    runtime.logger.warn('promoted', { spooled_rows_written: moved, message: 'This node is the primary now: it writes the database and runs the scheduled jobs.' })
  }

  private async demote(role: NodeRole & { kind: 'replica' }): Promise<void> {
    const { runtime } = this
    await this.stopPrimaryDuties()
    // Rows queued while primary go into the spool from now on, with the others.
    runtime.writer.follow(role)
    this.reopen(true)
    this.startShipping()
    runtime.logger.warn('demoted', { primary: role.primaryHost, message: 'This node is a replica now: writes are replayed on the primary, request logs shipped to it.' })
  }

  /**
   * Rows a former replica still held for the primary (in this process, or in a spool file left from
   * before): it is the primary now, so they are written here. No spool file, nothing to take.
   */
  private takeSpool(): number {
    const { writer, metrics, config } = this.runtime
    if (!writer.hasSpool() && !existsSync(spoolPath(config.dataDir))) return 0
    const spool = writer.spool()
    const sink = databaseLogSink(this.runtime.repositories, metrics)
    let moved = 0
    for (let batch = spool.take(500); batch; batch = spool.take(500)) {
      sink.commit(spooledRows(batch), true)
      spool.remove(batch.upTo)
      moved += batch.texts.length
    }
    return moved
  }

  private startShipping(): void {
    const { runtime } = this
    const { config } = runtime
    if (config.clusterSecret === undefined) {
      runtime.logger.warn('cluster_secret_missing', { message: 'RT_CLUSTER_SECRET is unset: request-log rows stay in this replica\'s spool until it is set.' })
    }
    this.shipper = new LogShipper({
      spool: runtime.writer.spool(),
      primaryUrl: () => primaryBaseUrl({ primaryUrl: config.primaryUrl, flyAppName: config.flyAppName, port: config.port, primaryHost: runtime.writer.primaryHost() }),
      secret: config.clusterSecret,
      fetch: runtime.fetch,
      logger: runtime.logger,
      metrics: runtime.metrics,
    })
    // Key limits (CONTRACT §11) see another node's requests once their rows are on the primary: with a
    // short RT_LIMIT_SYNC_MS the rows go there as often, a quarter of it (250 ms at the default).
    this.shipper.start(this.options.shipIntervalMs ?? Math.min(250, Math.max(10, Math.floor(config.limitSyncMs / 4))))
  }

  private async startPrimaryDuties(): Promise<void> {
    const { runtime } = this
    this.checkpoints = await runtime.storage.startBackgroundCheckpoints({
      onCheckpoint: (pages) => {
        runtime.metrics.walCheckpoints++
        runtime.metrics.walCheckpointPages += pages
      },
      onError: (message) => runtime.logger.error('wal_checkpoint_failed', { error: message }),
    })
    this.stopJobs = startScheduler(runtime, this.options.scheduler)
  }

  /** Never throws: a demotion must finish whatever the jobs or the checkpointer say on the way out. */
  private async stopPrimaryDuties(): Promise<void> {
    const { logger } = this.runtime
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
    const { runtime } = this
    runtime.logQueue.flush()
    const fresh = openStorage(runtime.config.dbPath, { readonly })
    const old = runtime.storage.close
    Object.assign(runtime.storage, fresh)
    Object.assign(
      runtime.repositories,
      createRepositories(runtime.storage, (change) => {
        for (const listener of runtime.onConfigWrite) listener(change)
      }),
    )
    old()
    runtime.snapshots.invalidate()
  }
}
