/**
 * The feature registry: everything a key can turn on beyond routing, one entry each, and the
 * compiled pipeline of a key (which of them apply), made once when the key's read-model entry is
 * built (pipeline/read-model/snapshot.ts), never per request. A plain key's pipeline is empty and
 * its requests take the straight path (pipeline/answer/answer.ts: bytes relayed where the dialects match).
 *
 * - Pre-routing hooks run after the body is read and before the rule: the decisioner.
 * - Enrichment stages change an answer: MCP tools (offered to the model and run between model
 *   rounds), companion ads and keyterm links (fields attached to a successful answer: beside a
 *   buffered answer, on the last event of a stream).
 * - Steering (a system prompt or instructions put in front) and body capture (the request body kept
 *   for the log) are the key's and its workspace's settings, resolved here too.
 */
import type { Config } from '../../config/env'
import type { AuthenticatedContext } from '../request/context'
import type { KeyEntry, WorkspaceEntry } from '../read-model/snapshot'
import type { InferenceDeps } from '../types'
import { decisionerHook } from './decisioner'
import { mcpToolsStage } from './mcp-tools'
import { companionAdsStage } from './companion-ads'
import { keytermLinksStage } from './keyterm-links'

/** A function tool offered to the model, in the neutral form (dialects/tool-rounds.ts writes it per upstream dialect). */
export interface OfferedTool {
  name: string
  description: string | undefined
  parameters: Record<string, unknown>
}

/** A tool call the model made, as one round of the answer carried it. */
export interface ToolCallRequest {
  id: string
  name: string
  /** JSON text, as chat carries it. */
  arguments: string
}

/** A stage started for one request. */
export interface ActiveStage {
  readonly name: string
  /** The tools it offers beside the client's own (names already unique among them). */
  readonly tools?: readonly OfferedTool[]
  /** Runs one of its tools; never throws: a failure is an error text for the model. */
  runTool?(call: ToolCallRequest, deadlineAt: number, signal: AbortSignal): Promise<string>
  /**
   * Called once, when the first upstream attempt is built: the route was planned and a model call
   * goes out. Work meant to run beside the model call starts here (the ad call), never for a
   * request that fails before it. `hangUp` fires when the client goes away.
   */
  begin?(hangUp: AbortSignal): void
  /**
   * The fields it adds to a successful answer, given the answer's whole text (`{ads: …}` or
   * `{ads_error: …}`, say). Settles within the stage's own limit and never rejects.
   */
  attach?(answerText: string): Promise<Record<string, unknown>>
  /** What the request-log row records for this stage, given the model rounds the answer took. */
  logRecord(rounds: number): unknown
}

/** What the client sent beside its request for the stages (removed before the gateway call). */
export interface StageSiblings {
  /** `ad_request`, as sent (undefined when absent). */
  adRequest: unknown
  /** `link_request`, as sent (undefined when absent). */
  linkRequest: unknown
}

export interface StageRequest {
  context: AuthenticatedContext
  deps: InferenceDeps
  /** The model as the client named it. */
  model: string
  siblings: StageSiblings
  /** Function names of the client's own tools: offered names never collide with them. */
  clientToolNames: ReadonlySet<string>
  deadlineAt: number
}

/** The operator flags a feature may depend on (CONTRACT §4). */
export type FeatureFlags = Pick<Config, 'decisionerEnabled' | 'keytermsEnabled'>

/** What a feature reads of a key to say whether it applies. */
export type KeyFeatures = Pick<KeyEntry, 'rule' | 'companionAds' | 'keyterms' | 'mcpServers'>

export interface EnrichmentStage {
  readonly name: string
  /** Whether the stage applies to a key's requests at all (decided once, when the key's entry is built). */
  appliesTo(key: KeyFeatures, flags: FeatureFlags): boolean
  /** Starts it before the first model call; undefined when it has nothing to do after all (no live tools). */
  start(request: StageRequest): Promise<ActiveStage | undefined>
}

/** Where a pre-routing hook sends the request first: this provider key (with this model, when it overrode the client's). */
export interface RoutePreference {
  providerKeyId: string
  model: string | undefined
}

export interface PreRoutingHook {
  readonly name: string
  /** Whether the hook applies to a key's requests at all (decided once, when the key's entry is built). */
  appliesTo(key: KeyFeatures, flags: FeatureFlags): boolean
  /** Runs before the rule (it may set headers and the log's record of it); undefined: the rule as it is. */
  run(context: AuthenticatedContext, deps: InferenceDeps, request: { model: string; pinned: boolean }): Promise<RoutePreference | undefined>
}

/** Every pre-routing hook, in the order they run. */
export const preRoutingHooks: readonly PreRoutingHook[] = [decisionerHook]

/** Every enrichment stage, in the order they act on an answer. */
export const enrichmentStages: readonly EnrichmentStage[] = [mcpToolsStage, companionAdsStage, keytermLinksStage]

/** A key's compiled pipeline: what applies to its requests, decided when its read-model entry is built. */
export interface KeyPipeline {
  readonly hooks: readonly PreRoutingHook[]
  readonly stages: readonly EnrichmentStage[]
  /** The steering message put in front of the request (the key's, else its workspace's). */
  readonly steering: string | undefined
  /** The workspace keeps request bodies in the log. */
  readonly captureBodies: boolean
  /** No hook, no stage, no steering: the straight path. */
  readonly plain: boolean
}

const none: readonly never[] = Object.freeze([])

export function compileKeyPipeline(key: KeyFeatures & Pick<KeyEntry, 'steeringMessage'>, workspace: WorkspaceEntry | undefined, flags: FeatureFlags): KeyPipeline {
  const hooks = preRoutingHooks.filter((hook) => hook.appliesTo(key, flags))
  const stages = enrichmentStages.filter((stage) => stage.appliesTo(key, flags))
  // `??`: a key's own message, even empty, stands for the key (an empty one steers nothing).
  const steering = (key.steeringMessage ?? workspace?.steeringMessage) || undefined
  return Object.freeze({
    hooks: hooks.length ? hooks : none,
    stages: stages.length ? stages : none,
    steering,
    captureBodies: workspace?.captureBodies ?? false,
    plain: hooks.length === 0 && stages.length === 0 && steering === undefined,
  })
}

/** Starts a key's stages together; undefined when none has anything to do. */
export async function startStages(stages: readonly EnrichmentStage[], request: StageRequest): Promise<ActiveStage[] | undefined> {
  const started = await Promise.all(stages.map((stage) => stage.start(request)))
  const active = started.filter((stage): stage is ActiveStage => stage !== undefined)
  return active.length > 0 ? active : undefined
}
