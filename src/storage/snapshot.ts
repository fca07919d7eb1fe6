/**
 * Read-mostly configuration in memory for the hot path: keys, workspaces, provider keys (secrets
 * decrypted), gateway switches, model catalogs and learned budgets. Rebuilt lazily when this
 * process writes (invalidate()) or when another connection committed (PRAGMA data_version).
 */
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
  invalidate(): void
  /** How many times the snapshot was rebuilt (exposed on /metrics). */
  builds(): number
}

export function createSnapshotStore(deps: { storage: Storage; repositories: Repositories; secretBox: SecretBox; config: Config; logger: Logger }): SnapshotStore {
  let snapshot: Snapshot | undefined
  let seenVersion = -1
  let seenConfigVersion = -1
  let buildCount = 0
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

  let checkedAt = 0
  return {
    current() {
      // PRAGMA data_version changes when another connection (the CLI, another role) commits. It is
      // read at most once per millisecond: a write from another process is still seen by the next
      // request, without a SQLite call on every request under load.
      const now = performance.now()
      if (snapshot !== undefined && now - checkedAt < 1) return snapshot
      checkedAt = now
      const version = deps.storage.dataVersion()
      if (snapshot !== undefined && version === seenVersion) return snapshot
      seenVersion = version
      // Another connection committed: rebuild only if it was a configuration write (request-log
      // flushes of other processes change data_version too).
      const configVersion = deps.storage.configVersion()
      if (snapshot === undefined || configVersion !== seenConfigVersion) {
        seenConfigVersion = configVersion
        snapshot = build()
        buildCount++
      }
      return snapshot
    },
    invalidate() {
      snapshot = undefined
    },
    builds: () => buildCount,
  }
}
