/**
 * The read model's types: the snapshot a request reads, its store, and its entries (plain data on
 * the floor, domain/read-model.ts, with a key's compiled chain as the floor describes it). Types
 * only, below the stages: a stage, the request's state and the snapshot's builder all import them,
 * and nothing here imports any of those.
 */
import type { KeyEntry as KeyEntryOf, CompiledChain, McpServerEntry, ProviderEntry, WorkspaceEntry } from '../../domain/read-model'
import type { GatewayCatalog } from '../../gateways/model-catalog'
import type { ConfigChange } from '../../storage/repositories'

export type { McpServerEntry, ProviderEntry, WorkspaceEntry } from '../../domain/read-model'

/** A key's entry with its compiled chain (stages/registry.ts compiles it; stages/chain.ts reads its stages). */
export type KeyEntry = KeyEntryOf<CompiledChain>

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


export interface SnapshotStore {
  /**
   * The snapshot a request reads: the current one, or, while a change the request must see is
   * being rebuilt (this process wrote, or another connection's commit was noticed), the rebuilt one
   * once it is swapped in.
   */
  fresh(): Snapshot | Promise<Snapshot>
  /** The snapshot as it is now (background work, and a request's later steps). */
  current(): Snapshot
  /**
   * This process wrote configuration. One row it names is read again here and the snapshot swapped
   * at once; anything else is rebuilt in the background, and requests from now on wait for it.
   */
  invalidate(change?: ConfigChange): void
  /** How many times the snapshot was rebuilt (exposed on /metrics). */
  builds(): number
  /** Requests that waited for a rebuild (a change they must see was still being read). */
  requestWaits(): number
  /** Stops following the database's changes. */
  close(): void
}
