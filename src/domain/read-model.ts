/**
 * The read model's entries (pipeline/read-model/snapshot.ts builds them): a provider key with its
 * secret decrypted, an inference key with what applies to its requests, a workspace. Plain data,
 * below every folder that reads them (the gateway client, batch, the pipeline).
 */
import type { CompiledAllowlist } from './allowlist'
import type { CacheSettings } from './cache-settings'
import type { ContinuationSettings } from './continuation-settings'
import type { GatewayDefinition } from './gateway-definition'
import type { GuardrailSettings } from './guardrail-settings'
import type { KeyLimits } from './key-limits'
import type { StoredRule } from './routing-rule'

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

/**
 * An inference key's entry. `Pipeline` is the type of its compiled pipeline, which the pipeline
 * declares (stages/registry.ts `KeyPipeline`) and instantiates (read-model/snapshot.ts `KeyEntry`):
 * the floor knows that a key carries one, not what it holds. Code that never reads it says
 * `KeyEntry<unknown>`.
 */
export interface KeyEntry<Pipeline> {
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
  /** Spend caps and rate limits (CONTRACT §11); undefined for a key without any, whose requests never look further. */
  limits: KeyLimits | undefined
  /** The response cache (CONTRACT §15); undefined for a key without one (off, the default). */
  cache: CacheSettings | undefined
  /** Mid-stream continuation (CONTRACT §16); undefined for a key without it (off, the default). */
  continuation: ContinuationSettings | undefined
  /** Guardrails (CONTRACT §17), patterns compiled; undefined for a key without them (off, the default, or no rule). */
  guardrails: GuardrailSettings | undefined
  /** What applies to the key's requests (stages/registry.ts), with its workspace's settings. */
  pipeline: Pipeline
}

/** One entry of a key's compiled chain, as the floor sees it: a stage by its name (stages/stage.ts says the rest). */
export interface ChainEntry {
  readonly name: string
}

/**
 * A key's compiled chain as code below the pipeline sees it (stages/registry.ts compiles it): the
 * stages its requests open, those run for any of its requests, and what its stages set. Plain data.
 */
export interface CompiledChain {
  readonly stages: readonly ChainEntry[]
  /** No stage to open: the straight path. */
  readonly plain: boolean
  readonly onAuthenticated: readonly ChainEntry[]
  readonly onAnswered: readonly ChainEntry[]
  /** The steering message put in front of the request (the key's, else its workspace's). */
  readonly steering: string | undefined
  /** The request-log rows keep the request body. */
  readonly captureBodies: boolean
}

export interface McpServerEntry {
  id: string
  name: string | null
  url: string
}

export interface WorkspaceEntry {
  id: string
  suspended: boolean
  allowlist: CompiledAllowlist
  steeringMessage: string | null
  captureBodies: boolean
  /** When its shared response cache entries were last purged (Unix ms; 0: never): older ones are not served. */
  cachePurgedAt: number
}
