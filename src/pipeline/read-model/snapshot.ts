/**
 * Read-mostly configuration in memory for the hot path: keys, workspaces, provider keys (secrets
 * decrypted), gateway switches, model catalogs and learned budgets.
 *
 * Rebuilt in the background and swapped, never by a request: right after this process writes
 * (invalidate()), and when another connection committed a configuration write (PRAGMA
 * data_version, then the config counter), noticed by a watch on the database's folder with a poll
 * behind it. The rows are read on the read thread (read-thread.ts, snapshot-rows.ts); the serving
 * thread only turns them into maps, reusing what did not change (decrypted secrets, compiled
 * allowlists, catalogs, prices). A request reads the snapshot in place; only one that must see a
 * change still being rebuilt (CONTRACT §3: a change is seen by the next request) waits for it.
 */
import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import { findGateway, providerBaseUrl } from '../../gateways/catalog'
import { authHeaders } from '../../gateways/client'
import { compileKeyPipeline } from '../stages/registry'
import { parseStoredLimits } from '../../domain/key-limits'
import { parseStoredCache } from '../../domain/cache-settings'
import { parseStoredContinuation } from '../../domain/continuation-settings'
import { parseStoredGuardrails } from '../../domain/guardrail-settings'
import { buildGatewayCatalog, type GatewayCatalog } from '../../gateways/model-catalog'
import { pricingOfStoredObject, type ModelPricing } from '../../gateways/model-prices'
import { compileAllowlist } from '../../net/ip-allowlist'
import type { CompiledAllowlist } from '../../domain/allowlist'
import type { KeyEntry, McpServerEntry, ProviderEntry, Snapshot, SnapshotStore, WorkspaceEntry } from './entries'
import type { StoredRemap, StoredRule } from '../../domain/routing-rule'
import type { Config } from '../../config/env'
import type { Logger } from '../../observability/logger'
import type { Storage } from '../../storage/client'
import type { SecretBox } from '../../storage/crypto'
import type { ConfigChange } from '../../storage/repositories'
import type { ReadThread } from '../../storage/read-thread'
import { SnapshotRowReader, SnapshotRowStore, type KeyRow, type KnownPrices, type ProviderRow, type SnapshotRows, type WorkspaceRow } from '../../storage/snapshot-rows'

// The read model's types (read-model/entries.ts), for the importers of this module.
export type { KeyEntry, McpServerEntry, ProviderEntry, Snapshot, SnapshotStore, WorkspaceEntry } from './entries'

const noMcpServers: readonly McpServerEntry[] = Object.freeze([])

interface Caches {
  /** Provider secrets by ciphertext: a rebuild decrypts only new ones. */
  secrets: Map<string, string>
  /** Compiled allowlists by their stored JSON (most are `[]`). */
  allowlists: Map<string, CompiledAllowlist>
  /** Each gateway's prices as of its catalog's crawl: read again only when a crawl replaced the catalog. */
  prices: Map<string, { fetchedAt: number; prices: Map<string, ModelPricing> }>
  /** Each gateway's catalog as of its crawl and listing size. */
  catalogs: Map<string, { fetchedAt: number; listed: number; catalog: GatewayCatalog }>
}

/** The tables a read sends whole (the snapshot keeps the last ones for a rebuild after a patch). */
type SmallTables = Pick<SnapshotRows, 'gatewaySettings' | 'catalogs' | 'modelIds' | 'pricedModels' | 'budgets'>

type Deps = { storage: Storage; reads: ReadThread; secretBox: SecretBox; config: Config; logger: Logger }

/**
 * Makes a snapshot's entries from rows, reusing what earlier builds made (`previous`) and keeping
 * what it used in `current`, the caches the next build starts from.
 */
class EntryMaker {
  /**
   * `current`: where what is used goes. A full build starts empty (so unused entries are dropped);
   * a patch adds to the caches in use.
   */
  constructor(
    private readonly previous: Caches,
    private readonly deps: Deps,
    readonly current: Caches = { secrets: new Map(), allowlists: new Map(), prices: new Map(), catalogs: new Map() },
  ) {}

  private allowlist(json: string): CompiledAllowlist {
    let compiled = this.current.allowlists.get(json)
    if (compiled) return compiled
    compiled = this.previous.allowlists.get(json) ?? compileAllowlist(JSON.parse(json) as string[])
    this.current.allowlists.set(json, compiled)
    return compiled
  }

  workspace(row: WorkspaceRow): WorkspaceEntry {
    return { id: row.id, suspended: row.suspended === 1, allowlist: this.allowlist(row.allowedIps), steeringMessage: row.steeringMessage, captureBodies: row.captureBodies === 1, cachePurgedAt: row.cachePurgedAt ?? 0 }
  }

  /** Undefined for an unknown gateway kind or a secret that cannot be decrypted (logged). */
  provider(row: ProviderRow): ProviderEntry | undefined {
    const gateway = findGateway(row.gateway)
    if (!gateway) return undefined
    let secret = this.current.secrets.get(row.secretCiphertext) ?? this.previous.secrets.get(row.secretCiphertext)
    if (secret === undefined) {
      try {
        secret = this.deps.secretBox.decrypt(row.secretCiphertext)
      } catch {
        this.deps.logger.error('provider_secret_unreadable', { provider_key_id: row.id })
        return undefined
      }
    }
    this.current.secrets.set(row.secretCiphertext, secret)
    return {
      id: row.id,
      workspaceId: row.workspaceId,
      gateway,
      secret,
      baseUrl: providerBaseUrl(gateway, this.deps.config.gatewayUrlOverrides, JSON.parse(row.config) as Record<string, unknown>),
      disabled: row.disabled === 1,
      postHeaders: { json: authHeaders({ gateway, secret }, 'application/json', true), stream: authHeaders({ gateway, secret }, 'text/event-stream', true) },
    }
  }

  key(key: KeyRow, workspace: WorkspaceEntry | undefined): KeyEntry {
    const previousUntil = key.previousSecretUntil ? Date.parse(key.previousSecretUntil) : undefined
    const rule: StoredRule = {
      strategy: key.strategy === 'split' ? 'split' : 'priority',
      targets: key.targets,
      remaps: key.remaps.map((remap): StoredRemap => ({ ...remap, enabled: remap.enabled === 1 })),
      decisioner: key.decisioner ? (JSON.parse(key.decisioner) as Record<string, unknown>) : null,
    }
    const entry: Omit<KeyEntry, 'pipeline'> = {
      id: key.id,
      workspaceId: key.workspaceId,
      apiShape: key.apiShape,
      secretHash: key.secretHash,
      previous:
        key.previousSecretHash && key.previousSecretUntil && previousUntil !== undefined
          ? { hash: key.previousSecretHash, untilMs: previousUntil, untilIso: key.previousSecretUntil }
          : undefined,
      revoked: key.revoked === 1,
      allowlist: this.allowlist(key.allowedIps),
      steeringMessage: key.steeringMessage,
      failoverTtfbMs: key.failoverTtfbMs,
      upstreamTimeoutMs: key.upstreamTimeoutMs,
      companionAds: key.companionAds === 1,
      keyterms: key.keyterms === 1,
      rule,
      mcpServers: key.mcpServers.length === 0 ? noMcpServers : key.mcpServers,
      limits: parseStoredLimits(key.limits),
      cache: parseStoredCache(key.cache, key.cachePurgedAt, workspace?.cachePurgedAt),
      continuation: parseStoredContinuation(key.continuation),
      guardrails: parseStoredGuardrails(key.guardrails),
    }
    return { ...entry, pipeline: compileKeyPipeline(entry, workspace, this.deps.config) }
  }
}

/** The prefixes a key is found by: its own, and the rotated-out secret's while that still works. */
function keyPrefixes(row: KeyRow, entry: KeyEntry): string[] {
  return entry.previous && row.previousKeyPrefix && row.previousKeyPrefix !== row.keyPrefix ? [row.keyPrefix, row.previousKeyPrefix] : [row.keyPrefix]
}

function addKey(keysByPrefix: Map<string, KeyEntry[]>, row: KeyRow, entry: KeyEntry) {
  for (const prefix of keyPrefixes(row, entry)) {
    const list = keysByPrefix.get(prefix)
    if (list) list.push(entry)
    else keysByPrefix.set(prefix, [entry])
  }
}

/**
 * Turns a snapshot's rows (the store's tables, the read's small tables) into its maps, reusing the
 * caches' entries; returns the caches to keep.
 */
function buildSnapshot(store: SnapshotRowStore, rows: SmallTables, known: KnownPrices, previous: Caches, deps: Deps): { snapshot: Snapshot; caches: Caches } {
  const make = new EntryMaker(previous, deps)
  const caches = make.current
  const workspaces = new Map<string, WorkspaceEntry>()
  for (const row of store.workspaces.values()) workspaces.set(row.id, make.workspace(row))
  const providers = new Map<string, ProviderEntry>()
  for (const row of store.providers.values()) {
    const entry = make.provider(row)
    if (entry) providers.set(row.id, entry)
  }
  const keysByPrefix = new Map<string, KeyEntry[]>()
  for (const row of store.keys.values()) addKey(keysByPrefix, row, make.key(row, workspaces.get(row.workspaceId)))
  const gatewayEnabled = new Map<string, boolean>()
  for (const row of rows.gatewaySettings) gatewayEnabled.set(row.gateway, row.enabled === 1)

  // Prices only where a listing carries them (the decisioner's facts; missing is unknown, never zero).
  const pricedRows = new Map<string, SnapshotRows['pricedModels']>()
  for (const row of rows.pricedModels) {
    const list = pricedRows.get(row.gateway)
    if (list) list.push(row)
    else pricedRows.set(row.gateway, [row])
  }
  const listed = new Map<string, string[]>()
  for (const row of rows.modelIds) {
    const ids = listed.get(row.gateway)
    if (ids) ids.push(row.modelId)
    else listed.set(row.gateway, [row.modelId])
  }
  const catalogs = new Map<string, GatewayCatalog>()
  for (const { gateway, fetchedAt } of rows.catalogs) {
    let prices = known[gateway] === fetchedAt ? previous.prices.get(gateway)?.prices : undefined
    if (!prices) {
      prices = new Map()
      for (const row of pricedRows.get(gateway) ?? []) {
        const pricing = pricingOfStoredObject(row.object)
        if (pricing) prices.set(row.modelId, pricing)
      }
    }
    caches.prices.set(gateway, { fetchedAt, prices })
    const ids = listed.get(gateway) ?? []
    const cached = previous.catalogs.get(gateway)
    const catalog = cached && cached.fetchedAt === fetchedAt && cached.listed === ids.length ? cached.catalog : buildGatewayCatalog(gateway, fetchedAt, ids, prices)
    caches.catalogs.set(gateway, { fetchedAt, listed: ids.length, catalog })
    catalogs.set(gateway, catalog)
  }
  const budgets = new Map<string, number>()
  for (const row of rows.budgets) budgets.set(row.gateway, row.ttfbBudgetMs)
  return { snapshot: { keysByPrefix, workspaces, providers, gatewayEnabled, catalogs, budgets, tokenCache: new Map(), planCache: new Map(), planCacheSize: 0 }, caches }
}

/**
 * The snapshot after one row changed, made in constant time: the row's entry replaced in the maps,
 * which are changed in place (the serving thread does nothing between a request's reads of them, and
 * a request keeps the entries it already took), and a new snapshot object with empty token and plan
 * caches, so no token or plan of the old entry is used again. `before`: the key's row until now.
 */
function patchSnapshot(snapshot: Snapshot, store: SnapshotRowStore, change: Exclude<ConfigChange, { table: 'none' }>, before: KeyRow | undefined, make: EntryMaker): Snapshot {
  if (change.table === 'workspaces') {
    const row = store.workspaces.get(change.id)
    if (row) snapshot.workspaces.set(row.id, make.workspace(row))
    else snapshot.workspaces.delete(change.id)
    // The workspace's keys compiled again: their pipelines read its steering and capture settings.
    const workspace = snapshot.workspaces.get(change.id)
    for (const keyRow of store.keys.values()) if (keyRow.workspaceId === change.id) replaceKey(snapshot, keyRow.id, keyRow, keyRow, make.key(keyRow, workspace))
  } else if (change.table === 'providers') {
    const row = store.providers.get(change.id)
    const entry = row && make.provider(row)
    if (entry) snapshot.providers.set(change.id, entry)
    else snapshot.providers.delete(change.id)
  } else {
    // The new entry made first: a row that cannot be made leaves the maps as they were.
    const row = store.keys.get(change.id)
    const entry = row && make.key(row, snapshot.workspaces.get(row.workspaceId))
    replaceKey(snapshot, change.id, before, row, entry)
  }
  return { ...snapshot, tokenCache: new Map(), planCache: new Map(), planCacheSize: 0 }
}

/** A key's entry swapped in the prefix lists: the one found under `before`'s prefixes out, `entry` in under `row`'s. */
function replaceKey(snapshot: Snapshot, id: string, before: KeyRow | undefined, row: KeyRow | undefined, entry: KeyEntry | undefined) {
  if (before) {
    for (const prefix of [before.keyPrefix, before.previousKeyPrefix]) {
      const list = prefix === null ? undefined : snapshot.keysByPrefix.get(prefix)
      if (!list) continue
      const kept = list.filter((listed) => listed.id !== id)
      if (kept.length) snapshot.keysByPrefix.set(prefix!, kept)
      else snapshot.keysByPrefix.delete(prefix!)
    }
  }
  if (row && entry) addKey(snapshot.keysByPrefix, row, entry)
}

export function createSnapshotStore(deps: Deps): SnapshotStore {
  let snapshot: Snapshot | undefined
  let caches: Caches = { secrets: new Map(), allowlists: new Map(), prices: new Map(), catalogs: new Map() }
  /** The rows the snapshot was built from, kept so a rebuild receives only what changed. */
  const rowStore = new SnapshotRowStore()
  /**
   * This connection's data_version and the configuration counter as of the last look that the
   * snapshot, or the rebuild under way, covers: a commit after it is another connection's change.
   */
  let lookedVersion = -1
  let lookedConfigVersion = -1
  /** Changes known (own writes, noticed commits), counted; `built` is how many the snapshot covers. */
  let wanted = 0
  let built = 0
  let building = false
  let buildCount = 0
  let waits = 0
  let lastFailure: string | undefined
  let retryTimer: ReturnType<typeof setTimeout> | undefined
  let waiters: { target: number; resolve(snapshot: Snapshot): void }[] = []
  let watcher: FSWatcher | undefined
  let poll: ReturnType<typeof setInterval> | undefined
  let closed = false

  /** Notes the versions a rebuild starting now will cover. */
  const look = () => {
    lookedVersion = deps.storage.dataVersion()
    lookedConfigVersion = deps.storage.configVersion()
  }
  const knownPrices = (): KnownPrices => {
    const known: KnownPrices = {}
    for (const [gateway, entry] of caches.prices) known[gateway] = entry.fetchedAt
    return known
  }
  const swap = (rows: SnapshotRows, known: KnownPrices, target: number) => {
    // Changes read for another state than the rows held: read again, whole (the waiters go on waiting).
    if (!rowStore.apply(rows)) return false
    const next = buildSnapshot(rowStore, rows, known, caches, deps)
    snapshot = next.snapshot
    caches = next.caches
    built = Math.max(built, target)
    buildCount++
    lastFailure = undefined
    return true
  }
  /** The first snapshot, before anything was served: read in place. */
  const buildNow = (): Snapshot => {
    const known = knownPrices()
    look()
    rowStore.forget()
    swap(new SnapshotRowReader().read(deps.storage.sqlite, rowStore.request(known)), known, wanted)
    follow()
    return snapshot!
  }
  /** Requests waiting for a change: answered with each swap that covers it, or the old snapshot when a rebuild failed. */
  const settle = (failed: boolean) => {
    if (waiters.length === 0) return
    const still: typeof waiters = []
    for (const waiter of waiters) {
      if (failed || waiter.target <= built) waiter.resolve(snapshot!)
      else still.push(waiter)
    }
    waiters = still
  }

  /** Starts a background rebuild covering every change known now; one at a time. */
  const rebuild = () => {
    if (building || closed || retryTimer) return
    building = true
    const target = wanted
    // Looked before the thread reads: a commit this connection saw is in the rows the thread reads.
    try {
      look()
    } catch (error) {
      building = false
      rowStore.forget()
      return failed(error)
    }
    const known = knownPrices()
    deps.reads.ask<SnapshotRows>({ op: 'snapshot', request: rowStore.request(known) }).then(
      (rows) => {
        building = false
        let swapped: boolean
        try {
          swapped = swap(rows, known, target)
        } catch (error) {
          rowStore.forget()
          return failed(error)
        }
        if (swapped) settle(false)
        if (wanted > built) rebuild()
      },
      (error) => {
        building = false
        rowStore.forget()
        failed(error)
      },
    )
  }
  // The old snapshot keeps serving (a replica on a database its primary has not migrated yet answers
  // from it); tried again after a second. Logged once per distinct failure, not once per try.
  const failed = (error: unknown) => {
    const message = error instanceof Error ? error.message : String(error)
    if (message !== lastFailure) deps.logger.error('snapshot_rebuild_failed', { error: message })
    lastFailure = message
    settle(true)
    if (closed) return
    retryTimer = setTimeout(() => {
      retryTimer = undefined
      rebuild()
    }, 1000)
    retryTimer.unref?.()
  }

  /**
   * Another connection committed (the CLI, another role, or LiteFS applying the primary's changes on
   * a replica): a rebuild if it was a configuration write. Request-log flushes change data_version
   * too; they cost these two small reads and no rebuild. True when a rebuild is wanted.
   */
  const noticeCommits = (): boolean => {
    if (snapshot === undefined) return false
    try {
      const version = deps.storage.dataVersion()
      if (version === lookedVersion) return wanted > built
      lookedVersion = version
      const configVersion = deps.storage.configVersion()
      if (configVersion === lookedConfigVersion) return wanted > built
      lookedConfigVersion = configVersion
    } catch (error) {
      failed(error)
      return false
    }
    // Also while a rebuild is under way: its rows may have been read before this commit, so the
    // rebuild that follows it (see rebuild) covers it, and a waiting request waits for that one.
    wanted++
    rebuild()
    return true
  }

  function stopFollowing() {
    watcher?.close()
    watcher = undefined
    if (poll) clearInterval(poll)
    poll = undefined
  }

  /**
   * Follows commits of other connections between requests: the database's folder is watched (a
   * commit writes the -wal file: the event comes before a request sent after the commit), and polled
   * in case the file system sends no events (LiteFS's FUSE mount).
   */
  let noticeScheduled = false
  const scheduleNotice = () => {
    if (noticeScheduled) return
    noticeScheduled = true
    setImmediate(() => {
      noticeScheduled = false
      noticeCommits()
    })
  }
  const follow = () => {
    const path = deps.config.dbPath === ':memory:' ? undefined : deps.config.dbPath
    if (path === undefined || watcher || poll || closed) return
    const name = basename(path)
    try {
      watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
        if (file === null || String(file).startsWith(name)) scheduleNotice()
      })
      watcher.on('error', () => {})
    } catch {
      watcher = undefined
    }
    poll = setInterval(scheduleNotice, followPollMs)
    poll.unref?.()
  }

  /**
   * One row this process just wrote, read again on this connection and the snapshot rebuilt from the
   * rows held (no thread round trip, no request waits). Not while a background rebuild is reading
   * or owed: its rows could be older than the patch, so the write waits for a rebuild as others do.
   */
  const patch = (change: Exclude<ConfigChange, { table: 'none' }>): boolean => {
    if (building || wanted > built || retryTimer || !snapshot) return false
    try {
      const configVersion = deps.storage.configVersion()
      const before = change.table === 'keys' ? rowStore.keys.get(change.id) : undefined
      rowStore.patch(deps.storage.sqlite, change)
      snapshot = patchSnapshot(snapshot, rowStore, change, before, new EntryMaker(caches, deps, caches))
      buildCount++
      // This write's bump alone since the last look: nothing else to read. Otherwise another
      // connection wrote as well, and the next look at data_version rebuilds for it.
      if (configVersion === lookedConfigVersion + 1) lookedConfigVersion = configVersion
    } catch (error) {
      rowStore.forget()
      failed(error)
      return false
    }
    return true
  }

  let checkedAt = 0
  const waitForRebuild = (): Promise<Snapshot> => {
    waits++
    return new Promise<Snapshot>((resolve) => waiters.push({ target: wanted, resolve }))
  }
  return {
    fresh() {
      if (snapshot === undefined) return buildNow()
      // A change this request must see is being rebuilt (not after a failed rebuild: the old
      // snapshot serves until the retry succeeds).
      if (wanted > built && !retryTimer) return waitForRebuild()
      // Another connection committed a moment before this request, its folder event not delivered
      // yet: data_version is read at most once a millisecond for that.
      const now = performance.now()
      if (now - checkedAt < 1) return snapshot
      checkedAt = now
      return noticeCommits() && !retryTimer ? waitForRebuild() : snapshot
    },
    current: () => snapshot ?? buildNow(),
    invalidate(change) {
      // Not built yet (the CLI, a thread that never serves): the first read builds it whole.
      if (snapshot === undefined) return
      if (change?.table === 'none') return
      if (change && patch(change)) return
      wanted++
      rebuild()
    },
    builds: () => buildCount,
    requestWaits: () => waits,
    close() {
      closed = true
      stopFollowing()
      if (retryTimer) clearTimeout(retryTimer)
      settle(true)
    },
  }
}

/** The poll behind the folder watch: how stale a snapshot may get where no event comes. */
const followPollMs = 50
