/**
 * The rows a configuration snapshot is built from (snapshot.ts), read in one read transaction so
 * they are one consistent state. Plain SQL returning plain objects: at 10,000 keys the ORM's row
 * mapping alone cost more than the whole read does now.
 *
 * They are read on the read thread (read-thread.ts) and cross to the serving thread as a message,
 * and copying 10,000 keys between threads costs more than reading them. So the reader remembers
 * what it last sent (each row's JSON, by id) and sends only the rows that changed and the ids that
 * went away: a key's write moves one key. The serving thread keeps the rows it was sent
 * (SnapshotRowStore) and applies each change to them. A reader that does not hold the state the
 * store asks from (a new thread, a store that lost track) sends everything.
 */
import type { Database } from 'bun:sqlite'
import type { ConfigChange } from './repositories'

export interface WorkspaceRow {
  id: string
  suspended: number
  allowedIps: string
  steeringMessage: string | null
  captureBodies: number
}
export interface ProviderRow {
  id: string
  workspaceId: string
  gateway: string
  secretCiphertext: string
  config: string
  disabled: number
}
export interface TargetRow {
  providerKeyId: string
  weight: number | null
  ttfbMs: number | null
}
export interface RemapRow {
  match: string
  percent: number
  providerKeyId: string
  upstreamModel: string
  enabled: number
}
export interface McpServerRow {
  id: string
  name: string | null
  url: string
}
/** A key with its rule's targets and remaps (in position order) and its MCP servers (in attach order). */
export interface KeyRow {
  id: string
  workspaceId: string
  apiShape: string
  keyPrefix: string
  secretHash: string
  previousKeyPrefix: string | null
  previousSecretHash: string | null
  previousSecretUntil: string | null
  revoked: number
  allowedIps: string
  steeringMessage: string | null
  failoverTtfbMs: number | null
  upstreamTimeoutMs: number | null
  companionAds: number
  keyterms: number
  strategy: string
  decisioner: string | null
  targets: TargetRow[]
  remaps: RemapRow[]
  mcpServers: McpServerRow[]
}

/** Rows of a table by id that changed (or are new), and the ids that are gone. */
export interface TableChanges<Row> {
  upsert: Row[]
  remove: string[]
}

export interface SnapshotRows {
  /** The reader's state after this read; the next read asks for changes from it. */
  token: number
  /** The state these changes apply to; null: everything was sent. */
  base: number | null
  /** The configuration counter of the state read (PRAGMA data_version is per connection: the caller reads its own). */
  configVersion: number
  workspaces: TableChanges<WorkspaceRow>
  providers: TableChanges<ProviderRow>
  keys: TableChanges<KeyRow>
  // The small tables, whole every time.
  gatewaySettings: { gateway: string; enabled: number }[]
  catalogs: { gateway: string; fetchedAt: number }[]
  modelIds: { gateway: string; modelId: string }[]
  /** Priced model objects, only for the gateways whose catalog is not the one the caller already holds prices for. */
  pricedModels: { gateway: string; modelId: string; object: string }[]
  budgets: { gateway: string; ttfbBudgetMs: number }[]
}

/** Each gateway's catalog crawl time the caller holds prices for: those gateways' prices are not read again. */
export type KnownPrices = Record<string, number>

const queries = {
  workspaces: 'select id, suspended, allowed_ips as allowedIps, steering_message as steeringMessage, capture_bodies as captureBodies from workspaces',
  providers: 'select id, workspace_id as workspaceId, gateway, secret_ciphertext as secretCiphertext, config, disabled_at is not null as disabled from provider_keys',
  keys: `select id, workspace_id as workspaceId, api_shape as apiShape, key_prefix as keyPrefix, secret_hash as secretHash,
    previous_key_prefix as previousKeyPrefix, previous_secret_hash as previousSecretHash, previous_secret_until as previousSecretUntil,
    revoked_at is not null as revoked, allowed_ips as allowedIps, steering_message as steeringMessage, failover_ttfb_ms as failoverTtfbMs,
    upstream_timeout_ms as upstreamTimeoutMs, companion_ads as companionAds, keyterms, routing_strategy as strategy, decisioner
    from inference_keys`,
  targets: 'select key_id, provider_key_id, weight, ttfb_ms from routing_targets order by key_id, position',
  remaps: 'select key_id, match, percent, provider_key_id, upstream_model, enabled from model_remaps order by key_id, position',
  mcpServers: 'select key_id, id, name, url from key_mcp_servers order by created_at, id',
  keyTargets: 'select key_id, provider_key_id, weight, ttfb_ms from routing_targets where key_id = ? order by position',
  keyRemaps: 'select key_id, match, percent, provider_key_id, upstream_model, enabled from model_remaps where key_id = ? order by position',
  keyMcpServers: 'select key_id, id, name, url from key_mcp_servers where key_id = ? order by created_at, id',
  gatewaySettings: 'select gateway, enabled from gateway_settings',
  catalogs: 'select gateway, fetched_at as fetchedAt from gateway_catalogs',
  modelIds: 'select gateway, model_id as modelId from gateway_models',
  // A text match: most listings carry no price.
  pricedModels: `select gateway, model_id as modelId, object from gateway_models where gateway = ? and instr(object, '"pricing"') > 0`,
  budgets: 'select gateway, ttfb_budget_ms as ttfbBudgetMs from gateway_budgets',
  configVersion: 'select version from config_version where id = 1',
} as const

/**
 * What the serving thread asks for: changes since `base` (null: everything), the prices it holds,
 * and the rows it patched itself since (each sent again, or its removal, whatever the reader sent
 * last: the database may since hold what the reader sent, a patch ago).
 */
export interface SnapshotRowsRequest {
  base: number | null
  known: KnownPrices
  patched: Record<PatchedTable, string[]>
}

type PatchedTable = 'workspaces' | 'providers' | 'keys'

/** Reads a snapshot's rows in one read transaction and sends what changed since the asker's state. */
export class SnapshotRowReader {
  // Random to start with: a new reader never matches a state a store holds from an earlier one.
  private token = Math.floor(Math.random() * 2 ** 31)
  private sent = { workspaces: new Map<string, string>(), providers: new Map<string, string>(), keys: new Map<string, string>() }

  read(sqlite: Database, request: SnapshotRowsRequest): SnapshotRows {
    const all = <T>(sql: string, ...parameters: string[]) => sqlite.query<T, string[]>(sql).all(...parameters)
    const full = request.base === null || request.base !== this.token
    if (full) for (const table of Object.values(this.sent)) table.clear()
    else {
      // Never equal to a row's JSON: a patched row is sent whatever it holds, or removed if gone.
      for (const table of Object.keys(this.sent) as PatchedTable[]) for (const id of request.patched[table]) this.sent[table].set(id, '')
    }
    return sqlite.transaction((): SnapshotRows => {
      const catalogs = all<SnapshotRows['catalogs'][number]>(queries.catalogs)
      const pricedModels: SnapshotRows['pricedModels'] = []
      for (const catalog of catalogs) {
        if (request.known[catalog.gateway] !== catalog.fetchedAt) pricedModels.push(...all<SnapshotRows['pricedModels'][number]>(queries.pricedModels, catalog.gateway))
      }
      const keys = readKeys(sqlite, queries.keys, queries.targets, queries.remaps, queries.mcpServers)
      const rows: SnapshotRows = {
        token: ++this.token,
        base: full ? null : request.base,
        // Inside the transaction: the version of exactly the state read.
        configVersion: sqlite.query<{ version: number }, []>(queries.configVersion).get()?.version ?? 0,
        workspaces: changes(this.sent.workspaces, all<WorkspaceRow>(queries.workspaces)),
        providers: changes(this.sent.providers, all<ProviderRow>(queries.providers)),
        keys: changes(this.sent.keys, keys),
        gatewaySettings: all<SnapshotRows['gatewaySettings'][number]>(queries.gatewaySettings),
        catalogs,
        modelIds: all<SnapshotRows['modelIds'][number]>(queries.modelIds),
        pricedModels,
        budgets: all<SnapshotRows['budgets'][number]>(queries.budgets),
      }
      return rows
    })()
  }
}

/**
 * Keys with their targets, remaps and MCP servers: the key rows, then each child table's rows
 * (ordered) attached by key id. Rows as value arrays, each made into its object once (no spread:
 * at 20,000 targets it shows).
 */
function readKeys(sqlite: Database, keysSql: string, targetsSql: string, remapsSql: string, mcpSql: string, ...parameters: string[]): KeyRow[] {
  const keys = sqlite.query<KeyRow, string[]>(keysSql).all(...parameters)
  const byId = new Map<string, KeyRow>()
  for (const key of keys) {
    key.targets = []
    key.remaps = []
    key.mcpServers = []
    byId.set(key.id, key)
  }
  const values = <T>(sql: string) => sqlite.query(sql).values(...parameters) as unknown as T[]
  for (const [keyId, providerKeyId, weight, ttfbMs] of values<[string, string, number | null, number | null]>(targetsSql)) {
    byId.get(keyId)?.targets.push({ providerKeyId, weight, ttfbMs })
  }
  for (const [keyId, match, percent, providerKeyId, upstreamModel, enabled] of values<[string, string, number, string, string, number]>(remapsSql)) {
    byId.get(keyId)?.remaps.push({ match, percent, providerKeyId, upstreamModel, enabled })
  }
  for (const [keyId, id, name, url] of values<[string, string, string | null, string]>(mcpSql)) byId.get(keyId)?.mcpServers.push({ id, name, url })
  return keys
}

/** The rows whose JSON differs from what was sent last (remembered), and the sent ids no longer there. */
function changes<Row extends { id: string }>(sent: Map<string, string>, rows: readonly Row[]): TableChanges<Row> {
  const upsert: Row[] = []
  const present = new Set<string>()
  for (const row of rows) {
    present.add(row.id)
    const json = JSON.stringify(row)
    if (sent.get(row.id) === json) continue
    sent.set(row.id, json)
    upsert.push(row)
  }
  const remove: string[] = []
  for (const id of sent.keys()) {
    if (!present.has(id)) remove.push(id)
  }
  for (const id of remove) sent.delete(id)
  return { upsert, remove }
}

/** The serving thread's copy of the rows: every change applied in turn. */
export class SnapshotRowStore {
  /** The reader's state this copy matches; null: none yet (ask for everything). */
  token: number | null = null
  readonly workspaces = new Map<string, WorkspaceRow>()
  readonly providers = new Map<string, ProviderRow>()
  readonly keys = new Map<string, KeyRow>()
  private patched: Record<PatchedTable, Set<string>> = { workspaces: new Set(), providers: new Set(), keys: new Set() }

  /** The next read's request (it carries, and so forgets, the rows patched since the last one). */
  request(known: KnownPrices): SnapshotRowsRequest {
    const patched = { workspaces: [...this.patched.workspaces], providers: [...this.patched.providers], keys: [...this.patched.keys] }
    for (const ids of Object.values(this.patched)) ids.clear()
    return { base: this.token, known, patched }
  }

  /** Applies changes read for this copy's state; false (and the copy dropped) for changes read for another. */
  apply(rows: SnapshotRows): boolean {
    if (rows.base !== null && rows.base !== this.token) {
      this.forget()
      return false
    }
    if (rows.base === null) {
      this.workspaces.clear()
      this.providers.clear()
      this.keys.clear()
    }
    applyChanges(this.workspaces, rows.workspaces)
    applyChanges(this.providers, rows.providers)
    applyChanges(this.keys, rows.keys)
    this.token = rows.token
    return true
  }

  /**
   * Reads again, on `sqlite` (this thread's connection: one row is microseconds), the one row a
   * write of this process touched. The next request names it, so the reader sends it again (or its
   * removal) with its next changes, which are no older than this.
   */
  patch(sqlite: Database, change: Exclude<ConfigChange, { table: 'none' }>) {
    const where = ' where id = ?'
    const one =
      change.table === 'keys'
        ? readKeys(sqlite, queries.keys + where, queries.keyTargets, queries.keyRemaps, queries.keyMcpServers, change.id)[0]
        : sqlite.query<WorkspaceRow & ProviderRow, [string]>(queries[change.table] + where).get(change.id)
    const table: Map<string, { id: string }> = this[change.table]
    if (one) table.set(change.id, one)
    else table.delete(change.id)
    this.patched[change.table].add(change.id)
  }

  /** The next read sends everything. */
  forget() {
    this.token = null
  }
}

function applyChanges<Row extends { id: string }>(table: Map<string, Row>, changes: TableChanges<Row>) {
  for (const id of changes.remove) table.delete(id)
  for (const row of changes.upsert) table.set(row.id, row)
}
