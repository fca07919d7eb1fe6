/** Builds the shared runtime (config → storage → master key checked against it → repositories) for the server, CLI and tests. */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from './config/env'
import { createLogger, type Logger } from './observability/logger'
import { Metrics } from './observability/metrics'
import { openStorage, type Storage } from './storage/client'
import { createIdSigner, createSecretBox, loadMasterKey, type SecretBox } from './storage/crypto'
import { createRepositories, type ConfigChange, type Repositories } from './storage/repositories'
import type { AppDeps } from './api/deps'
import { createSnapshotStore, type SnapshotStore } from './pipeline/read-model/snapshot'
import { McpServers } from './pipeline/stages/mcp-servers'
import { createRequestLogQueue, type RequestLogQueue } from './pipeline/log/log-request'
import { KeyLimiter } from './pipeline/limits/ledger'
import type { RouterTracing } from './observability/tracing'
import { RoleWatcher, type NodeRole } from './cluster/role'
import { Writer } from './cluster/writer'
import { spoolPath } from './cluster/spool'
import { createUsageReader } from './storage/usage-reader'
import { createReadThread, type ReadThread } from './storage/read-thread'
import { UpstreamClient } from './gateways/client'
import { registerBatch } from './batch'
import { CacheStore, type CacheStats, type CacheStoreOptions } from './storage/cache-store'

export interface Runtime extends AppDeps {
  config: Config
  storage: Storage
  repositories: Repositories
  secretBox: SecretBox
  logger: Logger
  metrics: Metrics
  /** Listeners told about this process's own configuration writes. */
  onConfigWrite: Set<(change?: ConfigChange) => void>
  masterKeyCreated: boolean
  snapshots: SnapshotStore
  logQueue: RequestLogQueue
  /** Outside calls that are not to a gateway (plug-in services, webhooks' resolver, log shipping). */
  fetch: typeof fetch
  /** Every call to a gateway (gateways/client.ts). */
  upstream: UpstreamClient
  random: () => number
  sign: (text: string) => string
  /** The MCP servers attached to keys: clients, tool lists and tool calls (pipeline/stages). */
  mcpServers: McpServers
  /** The node's LiteFS role as it changes (cluster/role.ts); always the primary without RT_LITEFS_DIR. */
  roles: RoleWatcher
  /** The thread for heavy reads (usage queries, snapshot rows): storage/read-thread.ts. */
  reads: ReadThread
  /** Admission against keys' limits (pipeline/limits/ledger.ts). */
  limiter: KeyLimiter
  /** OpenTelemetry traces (CONTRACT §13), set by enableTracing when an OTLP endpoint is configured. */
  tracing?: RouterTracing
  /** This node's response cache file (CONTRACT §15), opened on first use; management purges through it. */
  cache: NodeCache
}

/**
 * This node's response cache (CONTRACT §15, RT_CACHE_PATH): one store per process, opened (and its
 * file made) when first used, so a node whose keys have no cache never makes the file. A purge or a
 * prune of a file never made deletes nothing and makes nothing.
 */
export class NodeCache {
  private store: CacheStore | undefined

  constructor(
    private readonly config: Pick<Config, 'cachePath' | 'cacheMaxMb'>,
    private readonly options: Omit<CacheStoreOptions, 'maxBytes'> = {},
  ) {}

  /** The store, opened on first use. */
  open(): CacheStore {
    this.store ??= new CacheStore(this.config.cachePath, { ...this.options, maxBytes: this.config.cacheMaxMb * 1024 * 1024 })
    return this.store
  }

  /** The store if the file is there (opened then), else undefined: reading or deleting never makes the file. */
  private existing(): CacheStore | undefined {
    return this.store ?? (existsSync(this.config.cachePath) ? this.open() : undefined)
  }

  /** Deletes a key's entries, or a workspace's shared ones (`keyId` undefined); answers how many. */
  purge(target: { workspaceId: string; keyId: string | undefined }): number {
    return this.existing()?.purge(target) ?? 0
  }

  /** Deletes the expired entries (the cache-prune job); answers how many. */
  prune(): number {
    return this.existing()?.prune() ?? 0
  }

  /** Entries, bytes and evictions of the store (zeros while it is not open). */
  stats(): CacheStats {
    return this.store?.stats() ?? { entries: 0, bytes: 0, evictions: 0 }
  }

  /** Commits what is queued and closes the file, if it was opened. */
  close(): Promise<void> {
    return this.store?.close() ?? Promise.resolve()
  }
}

/**
 * Turns traces on when the configuration names an OTLP endpoint. The OpenTelemetry packages are loaded
 * only then: a service without traces never loads them.
 */
export async function enableTracing(runtime: Runtime): Promise<void> {
  const settings = runtime.config.tracing
  if (!settings || runtime.tracing) return
  const { RouterTracing, loggableUrl } = await import('./observability/tracing')
  runtime.tracing = new RouterTracing(settings, runtime.logger)
  runtime.logger.info('tracing_enabled', { endpoint: loggableUrl(settings.url), protocol: settings.protocol, service_name: settings.serviceName, sampler: settings.sampler })
}

export interface RuntimeOptions {
  logger?: Logger
  fetch?: typeof fetch
  /**
   * Opens as the primary whatever `.primary` says: the scheduler's thread, which the node starts on
   * the primary only and stops before a demotion reopens read-only.
   */
  asPrimary?: boolean
  /** The role to open with (cluster/role.ts `startingRole`: LiteFS's `/info`, else `.primary`); default `.primary`'s. */
  role?: NodeRole
  /** Heavy reads on this thread, not a read thread of their own: a thread that serves no requests. */
  readsInPlace?: boolean
}

export function createRuntime(config: Config, options: RuntimeOptions = {}): Runtime {
  // The features that plug into the pipeline's and the scheduler's tables (once per process).
  registerBatch()
  const logger = options.logger ?? createLogger(config.logLevel)
  const roles = new RoleWatcher(options.asPrimary ? undefined : config.litefsDir, (error) => logger.error('role_read_failed', { error: error instanceof Error ? error.message : String(error) }), {
    initial: options.asPrimary ? undefined : options.role,
    apiUrl: options.asPrimary ? undefined : config.litefsApiUrl,
    onApi: (event, detail) =>
      event === 'connected'
        ? logger.info('litefs_api_connected', { url: detail, message: "LiteFS's event stream confirms this node's role from now on." })
        : logger.warn('litefs_api_lost', { error: detail, message: "LiteFS's event stream was lost: the role follows $RT_LITEFS_DIR/.primary until it is back." }),
  })
  const role = roles.current()
  // Storage first: whether a master key may be created, and whether the given one is right, is
  // decided by what the database holds (its key check value, its encrypted rows). A replica reads
  // the primary's database as LiteFS presents it: read-only.
  const storage = openStorage(config.dbPath, { readonly: role.kind === 'replica' })
  let masterKey: { key: Buffer; created: boolean }
  try {
    masterKey = loadMasterKey({ fromEnvironment: config.masterKey, keyFilePath: join(config.dataDir, 'master.key'), databasePath: config.dbPath, database: storage.masterKeyRecord })
  } catch (error) {
    storage.close()
    throw error
  }
  const { key, created } = masterKey
  const onConfigWrite = new Set<(change?: ConfigChange) => void>()
  const repositories = createRepositories(storage, (change) => {
    for (const listener of onConfigWrite) listener(change)
  })
  const secretBox = createSecretBox(key)
  const metrics = new Metrics()
  const reads = createReadThread(config.dbPath, () => ({ logs: repositories.requestLogs, sqlite: storage.sqlite }), options.readsInPlace ? false : undefined)
  const snapshots = createSnapshotStore({ storage, reads, secretBox, config, logger })
  onConfigWrite.add((change) => snapshots.invalidate(change))
  metrics.snapshotBuilds = snapshots.builds
  metrics.snapshotRequestWaits = snapshots.requestWaits
  // A thread that serves no requests (the scheduler's) leaves expired entries to the cache-prune job.
  const cache = new NodeCache(config, {
    logger,
    pruneEveryMs: options.readsInPlace ? 0 : undefined,
    // The cache stage's writer thread: it decodes the answers a miss puts raw, off the serving thread.
    writer: { beside: new URL('./pipeline/stages/cache/writer-thread.ts', import.meta.url), underSrc: './pipeline/stages/cache/writer-thread.ts' },
  })
  metrics.cacheStats = () => cache.stats()
  const writer = new Writer(role, repositories, metrics, spoolPath(config.dataDir), () => roles.readNow())
  const usage = createUsageReader(reads)
  const limiter = new KeyLimiter(usage.keyWindows, {
    syncMs: config.limitSyncMs,
    onError: (error) => logger.warn('limit_sync_failed', { error: error instanceof Error ? error.message : String(error) }),
    onExpired: (tickets) => {
      metrics.limitTicketsExpired += tickets
      logger.warn('limit_tickets_expired', { tickets })
    },
  })
  return {
    config,
    storage,
    repositories,
    secretBox,
    logger,
    metrics,
    now: () => new Date(),
    onConfigWrite,
    masterKeyCreated: created,
    snapshots,
    logQueue: createRequestLogQueue(writer, metrics, logger),
    limiter,
    writer,
    roles,
    reads,
    usage,
    fetch: options.fetch ?? fetch,
    upstream: new UpstreamClient(options.fetch ?? fetch),
    random: Math.random,
    sign: createIdSigner(key),
    mcpServers: new McpServers({ allowPrivate: config.webhookAllowPrivate, logger, version: '0.1.0' }),
    cache,
  }
}
