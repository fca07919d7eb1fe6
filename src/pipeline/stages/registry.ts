/**
 * Enrichment stages: the features that change an answer beyond routing it — MCP tools, companion
 * ads, keyterm links. Each stage says when it applies to a request — cheaply, from the key in the
 * snapshot and the request's siblings, with no I/O — and what it does once started: function tools
 * it offers the model and runs between model rounds, and fields it attaches to a successful answer
 * (beside a buffered answer, on the last event of a stream). A request no stage applies to is
 * answered by byte pass-through (pipeline/answer.ts); the list below is every feature a key can
 * turn on.
 */
import type { RequestContext } from '../context'
import type { InferenceDeps } from '../types'
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
  context: RequestContext
  deps: InferenceDeps
  /** The model as the client named it. */
  model: string
  siblings: StageSiblings
  /** Function names of the client's own tools: offered names never collide with them. */
  clientToolNames: ReadonlySet<string>
  deadlineAt: number
}

export interface EnrichmentStage {
  readonly name: string
  /** Whether the stage applies to this request at all: a field check, no I/O, no allocation. */
  appliesTo(context: RequestContext, deps: InferenceDeps): boolean
  /** Starts it before the first model call; undefined when it has nothing to do after all (no live tools). */
  start(request: StageRequest): Promise<ActiveStage | undefined>
}

/** Every enrichment stage, in the order they act on an answer. */
export const enrichmentStages: readonly EnrichmentStage[] = [mcpToolsStage, companionAdsStage, keytermLinksStage]

/** The stages that apply to a request; undefined (nothing allocated) for a plain request. */
export function applicableStages(context: RequestContext, deps: InferenceDeps): EnrichmentStage[] | undefined {
  let found: EnrichmentStage[] | undefined
  for (const stage of enrichmentStages) if (stage.appliesTo(context, deps)) (found ??= []).push(stage)
  return found
}

/** Starts the applicable stages together; undefined when none has anything to do. */
export async function startStages(stages: readonly EnrichmentStage[], request: StageRequest): Promise<ActiveStage[] | undefined> {
  const started = await Promise.all(stages.map((stage) => stage.start(request)))
  const active = started.filter((stage): stage is ActiveStage => stage !== undefined)
  return active.length > 0 ? active : undefined
}
