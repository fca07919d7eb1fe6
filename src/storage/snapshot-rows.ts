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
import type { ConfigChange } from './repositories/config-change'

export interface WorkspaceRow {
  id: string
  suspended: number
  allowedIps: string
  steeringMessage: string | null
  captureBodies: number
  /** When its shared response cache entries were last purged (Unix ms), or null. */
  cachePurgedAt: number | null
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
  /** Spend caps and rate limits as stored (JSON), or null. */
  limits: string | null
  /** The response cache setting as stored (JSON), or null (off). */
  cache: string | null
  /** When the key's own response cache entries were last purged (Unix ms), or null. */
  cachePurgedAt: number | null
  /** The mid-stream continuation setting as stored (JSON), or null (off). */
  continuation: string | null
  /** The guardrails setting as stored (JSON), or null (off). */
  guardrails: string | null
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
  workspaces: 'select id, suspended, allowed_ips as allowedIps, steering_message as steeringMessage, capture_bodies as captureBodies, cache_purged_at as cachePurgedAt from workspaces',
  providers: 'select id, workspace_id as workspaceId, gateway, secret_ciphertext as secretCiphertext, config, disabled_at is not null as disabled from provider_keys',
  // The key columns in KeyValues' order, read as value arrays (see readKeys).
  keys: `select id, workspace_id, api_shape, key_prefix, secret_hash, previous_key_prefix, previous_secret_hash, previous_secret_until,
    revoked_at is not null, allowed_ips, steering_message, failover_ttfb_ms, upstream_timeout_ms, companion_ads, keyterms, routing_strategy,
    decisioner, limits, cache, cache_purged_at, continuation, guardrails from inference_keys`,
  // Unordered (a table scan, three times quicker than the primary key's index at 20,000 rows): each
  // row carries its position, and readKeys puts them in order.
  targets: 'select key_id, position, provider_key_id, weight, ttfb_ms from routing_targets',
  remaps: 'select key_id, position, match, percent, provider_key_id, upstream_model, enabled from model_remaps',
  mcpServers: 'select key_id, id, name, url from key_mcp_servers order by created_at, id',
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
      const keys = readKeys(sqlite)
      const rows: SnapshotRows = {
        token: ++this.token,
        base: full ? null : request.base,
        // Inside the transaction: the version of exactly the state read.
        configVersion: sqlite.query<{ version: number }, []>(queries.configVersion).get()?.version ?? 0,
        workspaces: changes(this.sent.workspaces, all<WorkspaceRow>(queries.workspaces), byId, asIs),
        providers: changes(this.sent.providers, all<ProviderRow>(queries.providers), byId, asIs),
        keys: changes(this.sent.keys, keys, (row) => row.key[0], keyRowOf),
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

type KeyValues = [
  id: string,
  workspaceId: string,
  apiShape: string,
  keyPrefix: string,
  secretHash: string,
  previousKeyPrefix: string | null,
  previousSecretHash: string | null,
  previousSecretUntil: string | null,
  revoked: number,
  allowedIps: string,
  steeringMessage: string | null,
  failoverTtfbMs: number | null,
  upstreamTimeoutMs: number | null,
  companionAds: number,
  keyterms: number,
  strategy: string,
  decisioner: string | null,
  limits: string | null,
  cache: string | null,
  cachePurgedAt: number | null,
  continuation: string | null,
  guardrails: string | null,
]
type TargetValues = [keyId: string, position: number, providerKeyId: string, weight: number | null, ttfbMs: number | null]
type RemapValues = [keyId: string, position: number, match: string, percent: number, providerKeyId: string, upstreamModel: string, enabled: number]
type McpValues = [keyId: string, id: string, name: string | null, url: string]

/** A key as read: value arrays, made into a KeyRow only when it is sent (most rows of most reads are not). */
interface KeyValuesRow {
  key: KeyValues
  targets: TargetValues[]
  remaps: RemapValues[]
  mcpServers: McpValues[]
}

const byPosition = (left: { 1: number }, right: { 1: number }) => left[1] - right[1]

/**
 * Keys with their targets, remaps and MCP servers, as value arrays (no object per row: at 10,000
 * keys and 20,000 targets the objects cost more than the reading). `id`: one key only.
 */
function readKeys(sqlite: Database, id?: string): KeyValuesRow[] {
  const where = (sql: string, column: string) => (id === undefined ? sql : `${sql} where ${column} = ?`)
  const values = <T>(sql: string) => (id === undefined ? sqlite.query(sql).values() : sqlite.query(sql).values(id)) as unknown as T[]
  const rows = new Map<string, KeyValuesRow>()
  for (const key of values<KeyValues>(where(queries.keys, 'id'))) rows.set(key[0], { key, targets: [], remaps: [], mcpServers: [] })
  for (const target of values<TargetValues>(where(queries.targets, 'key_id'))) rows.get(target[0])?.targets.push(target)
  for (const remap of values<RemapValues>(where(queries.remaps, 'key_id'))) rows.get(remap[0])?.remaps.push(remap)
  const mcpSql = id === undefined ? queries.mcpServers : queries.mcpServers.replace(' order by', ' where key_id = ? order by')
  for (const server of values<McpValues>(mcpSql)) rows.get(server[0])?.mcpServers.push(server)
  for (const row of rows.values()) {
    // A rule is written whole in position order, so the table scan almost always has them in order.
    if (!inOrder(row.targets)) row.targets.sort(byPosition)
    if (!inOrder(row.remaps)) row.remaps.sort(byPosition)
  }
  return [...rows.values()]
}

function inOrder(list: readonly { 1: number }[]): boolean {
  for (let index = 1; index < list.length; index++) if (list[index - 1]![1] > list[index]![1]) return false
  return true
}

function keyRowOf({ key, targets, remaps, mcpServers }: KeyValuesRow): KeyRow {
  const [id, workspaceId, apiShape, keyPrefix, secretHash, previousKeyPrefix, previousSecretHash, previousSecretUntil, revoked, allowedIps, steeringMessage, failoverTtfbMs, upstreamTimeoutMs, companionAds, keyterms, strategy, decisioner, limits, cache, cachePurgedAt, continuation, guardrails] = key
  return {
    id,
    workspaceId,
    apiShape,
    keyPrefix,
    secretHash,
    previousKeyPrefix,
    previousSecretHash,
    previousSecretUntil,
    revoked,
    allowedIps,
    steeringMessage,
    failoverTtfbMs,
    upstreamTimeoutMs,
    companionAds,
    keyterms,
    strategy,
    decisioner,
    limits,
    cache,
    cachePurgedAt,
    continuation,
    guardrails,
    targets: targets.map(([, , providerKeyId, weight, ttfbMs]) => ({ providerKeyId, weight, ttfbMs })),
    remaps: remaps.map(([, , match, percent, providerKeyId, upstreamModel, enabled]) => ({ match, percent, providerKeyId, upstreamModel, enabled })),
    mcpServers: mcpServers.map(([, serverId, name, url]) => ({ id: serverId, name, url })),
  }
}

/**
 * The rows whose JSON differs from what was sent last (remembered), made into what is sent, and the
 * sent ids no longer there. Keys are compared as their value arrays and made objects only when sent.
 */
function changes<Row, Sent>(sent: Map<string, string>, rows: readonly Row[], idOf: (row: Row) => string, toSent: (row: Row) => Sent): TableChanges<Sent> {
  const upsert: Sent[] = []
  const present = new Set<string>()
  for (const row of rows) {
    const id = idOf(row)
    present.add(id)
    const json = JSON.stringify(row)
    if (sent.get(id) === json) continue
    sent.set(id, json)
    upsert.push(toSent(row))
  }
  return { upsert, remove: removed(sent, present) }
}

const byId = (row: { id: string }) => row.id
const asIs = <Row>(row: Row) => row

/** The sent ids not present any more, forgotten. */
function removed(sent: Map<string, string>, present: ReadonlySet<string>): string[] {
  const remove: string[] = []
  for (const id of sent.keys()) {
    if (!present.has(id)) remove.push(id)
  }
  for (const id of remove) sent.delete(id)
  return remove
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
    let one: { id: string } | null | undefined
    if (change.table === 'keys') {
      const [row] = readKeys(sqlite, change.id)
      one = row && keyRowOf(row)
    } else one = sqlite.query<WorkspaceRow & ProviderRow, [string]>(`${queries[change.table]} where id = ?`).get(change.id)
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
