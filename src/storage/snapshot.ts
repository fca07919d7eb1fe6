/**
 * Read-mostly configuration in memory for the hot path: keys, workspaces, provider keys (secrets
 * decrypted), gateway switches, model catalogs and learned budgets. Rebuilt between requests, never
 * by one: right after this process writes (invalidate()), and when another connection committed a
 * configuration write (PRAGMA data_version, then the config counter), noticed by a watch on the
 * database's folder with a poll behind it. Requests read the snapshot in place, without a check.
 */
import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import { findGateway, providerBaseUrl, type GatewayDefinition } from '../gateways/catalog'
import { buildGatewayCatalog, type GatewayCatalog } from '../gateways/model-catalog'
import { pricingOfStoredObject, type ModelPricing } from '../gateways/model-prices'
import { compileAllowlist, type CompiledAllowlist } from '../management/ip-allowlist'
import type { Config } from '../config/env'
import type { Logger } from '../observability/logger'
import type { Storage } from './client'
import type { SecretBox } from './crypto'
import type { Repositories } from './repositories'
import type { StoredRule } from './repositories/inference-keys'

export interface ProviderEntry {
  id: string
  workspaceId: string
  gateway: GatewayDefinition
  secret: string
  baseUrl: string
  disabled: boolean
  /** Prebuilt upstream headers for POSTs without forwarded headers (JSON and SSE answers). */
  postHeaders: { json: Record<string, string>; stream: Record<string, string> }
}

export interface KeyEntry {
  id: string
  workspaceId: string
  apiShape: string
  secretHash: string
  previous: { hash: string; untilMs: number; untilIso: string } | undefined
  revoked: boolean
  allowlist: CompiledAllowlist
  steeringMessage: string | null
  failoverTtfbMs: number | null
  upstreamTimeoutMs: number | null
  companionAds: boolean
  keyterms: boolean
  rule: StoredRule
  /** MCP servers attached to the key (SPEC "MCP tools"), in attach order; empty for most keys. */
  mcpServers: readonly McpServerEntry[]
}

export interface McpServerEntry {
  id: string
  name: string | null
  url: string
}

const noMcpServers: readonly McpServerEntry[] = Object.freeze([])

export interface WorkspaceEntry {
  id: string
  suspended: boolean
  allowlist: CompiledAllowlist
  steeringMessage: string | null
  captureBodies: boolean
}

export interface Snapshot {
  keysByPrefix: Map<string, KeyEntry[]>
  workspaces: Map<string, WorkspaceEntry>
  providers: Map<string, ProviderEntry>
  gatewayEnabled: Map<string, boolean>
  catalogs: Map<string, GatewayCatalog>
  budgets: Map<string, number>
  /** Verified tokens of this snapshot: token → key and whether it was the rotated-out secret. */
  tokenCache: Map<string, { key: KeyEntry; previous: boolean }>
  /** Route plans of this snapshot by key entry, then operation and model (see routed-call's cachedPlan). */
  planCache: Map<KeyEntry, Map<string, unknown>>
  planCacheSize: number
}

function authHeaders(gateway: GatewayDefinition, secret: string, accept: string): Record<string, string> {
  const credential = gateway.authHeader === 'authorization' ? `Bearer ${secret}` : secret
  return { 'content-type': 'application/json', accept, [gateway.authHeader]: credential }
}

export interface SnapshotStore {
  current(): Snapshot
  /** This process wrote configuration: rebuilt before the next request reads it. */
  invalidate(): void
  /** How many times the snapshot was rebuilt (exposed on /metrics). */
  builds(): number
  /** Of those, the rebuilds a request waited for: another connection's change not yet noticed between requests. */
  requestPathBuilds(): number
  /** Stops following the database's changes. */
  close(): void
}

export function createSnapshotStore(deps: { storage: Storage; repositories: Repositories; secretBox: SecretBox; config: Config; logger: Logger }): SnapshotStore {
  let snapshot: Snapshot | undefined
  let seenVersion = -1
  let seenConfigVersion = -1
  let buildCount = 0
  /** Rebuilds a request had to wait for (the change not seen between requests yet). */
  let onPathBuilds = 0
  /**
   * Each gateway's prices as of its catalog's crawl: read again only when a crawl replaced the
   * catalog, not on every rebuild (a key or provider write does not touch them).
   */
  const priceCache = new Map<string, { fetchedAt: number; listed: number; prices: Map<string, ModelPricing> }>()
  // Prices only where a listing carries them (the decisioner's facts; missing is unknown, never zero).
  function pricesOf(gateway: string, fetchedAt: number, listed: number): Map<string, ModelPricing> {
    const cached = priceCache.get(gateway)
    if (cached?.fetchedAt === fetchedAt && cached.listed === listed) return cached.prices
    const prices = new Map<string, ModelPricing>()
    for (const row of deps.repositories.gatewayCatalogs.listPricedModels(gateway)) {
      const pricing = pricingOfStoredObject(row.object)
      if (pricing) prices.set(row.modelId, pricing)
    }
    priceCache.set(gateway, { fetchedAt, listed, prices })
    return prices
  }

  function build(): Snapshot {
    const { repositories, secretBox, config, logger } = deps
    const workspaces = new Map<string, WorkspaceEntry>()
    for (const row of repositories.workspaces.listAll()) {
      workspaces.set(row.id, {
        id: row.id,
        suspended: row.suspended,
        allowlist: compileAllowlist(JSON.parse(row.allowedIps) as string[]),
        steeringMessage: row.steeringMessage,
        captureBodies: row.captureBodies,
      })
    }
    const providers = new Map<string, ProviderEntry>()
    for (const row of repositories.providerKeys.listAll()) {
      const gateway = findGateway(row.gateway)
      if (!gateway) continue
      let secret: string
      try {
        secret = secretBox.decrypt(row.secretCiphertext)
      } catch {
        logger.error('provider_secret_unreadable', { provider_key_id: row.id })
        continue
      }
      providers.set(row.id, {
        id: row.id,
        workspaceId: row.workspaceId,
        gateway,
        secret,
        baseUrl: providerBaseUrl(gateway, config.gatewayUrlOverrides, JSON.parse(row.config) as Record<string, unknown>),
        disabled: row.disabledAt !== null,
        postHeaders: {
          json: authHeaders(gateway, secret, 'application/json'),
          stream: authHeaders(gateway, secret, 'text/event-stream'),
        },
      })
    }
    const keysByPrefix = new Map<string, KeyEntry[]>()
    const add = (prefix: string, entry: KeyEntry) => {
      const list = keysByPrefix.get(prefix)
      if (list) list.push(entry)
      else keysByPrefix.set(prefix, [entry])
    }
    const mcpServers = new Map<string, McpServerEntry[]>()
    for (const row of repositories.inferenceKeys.listAllMcpServers()) {
      const entry = { id: row.id, name: row.name, url: row.url }
      const list = mcpServers.get(row.keyId)
      if (list) list.push(entry)
      else mcpServers.set(row.keyId, [entry])
    }
    for (const { key, rule } of repositories.inferenceKeys.listAllWithRules()) {
      const previousUntil = key.previousSecretUntil ? Date.parse(key.previousSecretUntil) : undefined
      const entry: KeyEntry = {
        id: key.id,
        workspaceId: key.workspaceId,
        apiShape: key.apiShape,
        secretHash: key.secretHash,
        previous:
          key.previousSecretHash && key.previousSecretUntil && previousUntil !== undefined
            ? { hash: key.previousSecretHash, untilMs: previousUntil, untilIso: key.previousSecretUntil }
            : undefined,
        revoked: key.revokedAt !== null,
        allowlist: compileAllowlist(JSON.parse(key.allowedIps) as string[]),
        steeringMessage: key.steeringMessage,
        failoverTtfbMs: key.failoverTtfbMs,
        upstreamTimeoutMs: key.upstreamTimeoutMs,
        companionAds: key.companionAds,
        keyterms: key.keyterms,
        rule,
        mcpServers: mcpServers.get(key.id) ?? noMcpServers,
      }
      add(key.keyPrefix, entry)
      if (entry.previous && key.previousKeyPrefix && key.previousKeyPrefix !== key.keyPrefix) add(key.previousKeyPrefix, entry)
    }
    const gatewayEnabled = new Map<string, boolean>()
    for (const row of repositories.providerKeys.listGatewaySettings()) gatewayEnabled.set(row.gateway, row.enabled)

    const listed = new Map<string, string[]>()
    for (const row of repositories.gatewayCatalogs.listModelIds()) {
      const ids = listed.get(row.gateway)
      if (ids) ids.push(row.modelId)
      else listed.set(row.gateway, [row.modelId])
    }
    const catalogs = new Map<string, GatewayCatalog>()
    for (const row of repositories.gatewayCatalogs.listCatalogs()) {
      catalogs.set(row.gateway, buildGatewayCatalog(row.gateway, row.fetchedAt, listed.get(row.gateway) ?? [], pricesOf(row.gateway, row.fetchedAt, listed.get(row.gateway)?.length ?? 0)))
    }
    const budgets = new Map<string, number>()
    for (const row of repositories.gatewayCatalogs.listBudgets()) budgets.set(row.gateway, row.ttfbBudgetMs)
    return { keysByPrefix, workspaces, providers, gatewayEnabled, catalogs, budgets, tokenCache: new Map(), planCache: new Map(), planCacheSize: 0 }
  }

  /** This process wrote configuration: the next read must see it (read-your-writes). */
  let ownWrite = false
  let refreshScheduled = false
  let lastFailure: string | undefined
  let retryAt = 0
  let watcher: FSWatcher | undefined
  let poll: ReturnType<typeof setInterval> | undefined

  const rebuild = () => {
    const version = deps.storage.dataVersion()
    const configVersion = deps.storage.configVersion()
    snapshot = build()
    // Only once built: a build that failed leaves the change to be rebuilt again.
    seenVersion = version
    seenConfigVersion = configVersion
    ownWrite = false
    buildCount++
    follow()
  }

  /**
   * Another connection committed (the CLI, another role, or LiteFS applying the primary's changes on
   * a replica): rebuild if it was a configuration write. Request-log flushes change data_version too;
   * they cost these two small reads and no rebuild.
   */
  const refresh = (retry = false) => {
    refreshScheduled = false
    // After a failed build, tried again by its timer, not by every poll or request meanwhile.
    if (!retry && performance.now() < retryAt) return
    try {
      if (ownWrite || snapshot === undefined) return rebuild()
      const version = deps.storage.dataVersion()
      if (version === seenVersion) return
      if (deps.storage.configVersion() !== seenConfigVersion) rebuild()
      else seenVersion = version
    } catch (error) {
      // The old snapshot keeps serving (a replica on a database its primary has not migrated yet
      // answers from it). Logged once per distinct failure, not once per try.
      const message = error instanceof Error ? error.message : String(error)
      if (message !== lastFailure) deps.logger.error('snapshot_rebuild_failed', { error: message })
      lastFailure = message
      retryAt = performance.now() + 1000
      setTimeout(() => refresh(true), 1000).unref?.()
      return
    }
    lastFailure = undefined
  }
  const scheduleRefresh = () => {
    if (refreshScheduled) return
    refreshScheduled = true
    setImmediate(() => refresh())
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
  const follow = () => {
    const path = deps.config.dbPath === ':memory:' ? undefined : deps.config.dbPath
    if (path === undefined || watcher || poll) return
    const name = basename(path)
    try {
      watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
        if (file === null || String(file).startsWith(name)) scheduleRefresh()
      })
      watcher.on('error', () => {})
    } catch {
      watcher = undefined
    }
    poll = setInterval(scheduleRefresh, followPollMs)
    poll.unref?.()
  }

  let checkedAt = 0
  return {
    current() {
      // The snapshot is swapped by refresh, between requests. A read builds it only the first time,
      // or when the write it must see (CONTRACT §3: a change is seen by the next request) has not
      // been noticed between requests yet: this process wrote in this same turn, or another
      // connection committed a moment before (its folder event not delivered yet). data_version is
      // read at most once a millisecond for that.
      if (snapshot === undefined || ownWrite) {
        rebuild()
        return snapshot!
      }
      const now = performance.now()
      if (now - checkedAt < 1) return snapshot
      checkedAt = now
      if (deps.storage.dataVersion() !== seenVersion) {
        const before = buildCount
        refresh()
        onPathBuilds += buildCount - before
      }
      return snapshot!
    },
    invalidate() {
      ownWrite = true
      scheduleRefresh()
    },
    builds: () => buildCount,
    requestPathBuilds: () => onPathBuilds,
    close: stopFollowing,
  }
}

/** The poll behind the folder watch: how stale a snapshot may get where no event comes. */
const followPollMs = 50
