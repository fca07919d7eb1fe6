/**
 * The one interface of a feature a key can turn on (STYLE 14, "a feature is a stage"). A stage is an
 * entry of the registry (stages/registry.ts) that says, when the key's read-model entry is built,
 * whether it applies to the key; the ones that do make the key's chain, in the registry's order.
 * For each request the chain opens them in turn (stages/chain.ts), and each one's part in the
 * request (a StageRun) uses only the hooks it needs:
 *
 * - rewrite the request (steering puts its message in front);
 * - before routing, answer first (a spend cap's refusal) or name the target tried first (the decisioner);
 * - offer tools and run them between model rounds (MCP tools: the tool loop);
 * - reserve each model round before it is sent, screen the plan's steps, rewrite an attempt's call,
 *   watch each attempt (a spend cap; traces);
 * - wrap the model call (each round's routed call);
 * - transform the answer, buffered or part by part, and attach fields to it (ads, keyterms);
 * - observe the finished request (a spend cap's settlement).
 *
 * The answer path calls the hooks the chain holds and never names a feature; a plain key's chain is
 * empty and its requests take the straight path.
 */
import type { AssistantResult } from '../../dialects/assistant-result'
import type { StreamPart } from '../../dialects/stream-parts'
import type { RouterError } from '../../errors/router-error'
import type { Config } from '../../config/env'
import type { ClientDialect, KeptAnswer, ParsedRequest, SuccessResult } from '../answer/dialect'
import type { KeyEntry, Snapshot, WorkspaceEntry } from '../read-model/entries'
import type { AuthenticatedContext, RequestContext } from '../request/context'
import type { PlannedAttempt, PlanStep, RoutePlan } from '../routing/plan-route'
import type { AttemptWatch, RoutedCallInput, RoutePreference, UpstreamCall } from '../routing/routed-call'
import type { RunResult } from '../routing/run-attempts'
import type { InferenceDeps } from '../types'

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

/** The operator flags a stage may depend on (CONTRACT §4, §13). */
export type FeatureFlags = Pick<Config, 'decisionerEnabled' | 'keytermsEnabled'> & Partial<Pick<Config, 'tracing'>>

/** What a stage reads of a key to say whether it applies: the key's entry, and its workspace's settings. */
export type KeyFeatures = Omit<KeyEntry, 'pipeline'> & { workspace: WorkspaceEntry | undefined }

/** A request as the chain opens its stages: past authentication, its body read. */
export interface StageRequest {
  context: AuthenticatedContext
  deps: InferenceDeps
  /** The request as the dialect read it (and as the stages before this one rewrote it). */
  parsed: ParsedRequest
  /** The endpoint's dialect: a stage that shapes answers sits out where it does not act (`enriched`). */
  dialect: Pick<ClientDialect, 'name' | 'enriched'>
  /** The client's own signal, for a stage's work beside the model call. */
  clientSignal: AbortSignal | undefined
  /** The request deadline (performance.now() time). */
  deadlineAt: number
  /** The client's request headers (the response cache reads `Cache-Control`). */
  requestHeaders: Headers
  /**
   * A stage before this one answered the request (the response cache): no model call follows, so a
   * stage that acts on calls sits out, and one that counts requests counts it as one that calls nothing.
   */
  answered: boolean
}

/**
 * An answer a stage gives before routing, in place of a model call (the response cache's): a reply
 * in neutral form, written in the client's shape and streamed from it when the client streams; or
 * parts as they come (an identical request's answer in flight); or a body of the client's own kind
 * sent as it is (an embeddings list, a kept Response). The answer path (answer/given-answer.ts)
 * writes it with fresh ids, through the transforming and attaching stages after this one.
 */
export interface StageAnswer {
  reply?: AssistantResult
  /** The parts, called once when the answer is written (never for a request refused after this stage answered). */
  parts?: () => ReadableStream<StreamPart>
  body?: unknown
  /** A Responses answer is given an id that names this provider key and upstream id (`kept`: the answer is kept for retrieval). */
  kept?: KeptAnswer
  /** Given the answer as written for the client, buffered (for a stream: once it ended whole). */
  written?(body: unknown): void
}


/** What a stage decides before routing: a refusal that answers the request now, an answer of its own, or the target tried first. */
export interface RouteOutcome {
  refusal?: RouterError
  answer?: StageAnswer
  prefer?: RoutePreference
}

/**
 * A model round's stream as a stage that wraps it sees it (a continuation's): the attempt that
 * answers, the round's routed call, and how to make another call for the round and read its stream.
 */
export interface StreamRound {
  /** The attempt whose stream it is (its step, the plan's steps). */
  readonly result: SuccessResult
  /** The round's routed call: `requestFor` gives the body the round sends to a step. */
  readonly input: RoutedCallInput
  /**
   * Another routed call for the round, made through the chain (its attempts are the request's): a
   * stage may refuse it first (a spend cap that cannot reserve it), and then nothing is sent.
   */
  call(input: RoutedCallInput): RouterError | Promise<RunResult>
  /** A begun stream's parts, decoded (a break becomes an `error` part that says what broke). */
  parts(result: SuccessResult): ReadableStream<StreamPart>
}

/** What a model round is reserved as before it is sent: the first round (made longer by the stages' tools), a tool loop's next round, a stream's continuation. */
export type RoundKind = 'first' | 'next' | 'continuation'

/** One stage's part in one request: every hook is optional. */
export interface StageRun {
  readonly name: string
  /** Rewrites the request (the chain passes the result to the next stage and to routing). */
  rewrite?(parsed: ParsedRequest): ParsedRequest
  /**
   * Before routing: a refusal answers the request now; an answer is given in place of a model call
   * (the stages after this one still open, with `answered` set, and may refuse it); a preference puts
   * a target first.
   */
  beforeRouting?(parsed: ParsedRequest): RouteOutcome | undefined | Promise<RouteOutcome | undefined>
  /** Tools it offers beside the client's own (names already unique among them), run between model rounds. */
  readonly tools?: readonly OfferedTool[]
  /** Runs one of its tools; never throws: a failure is an error text for the model. */
  runTool?(call: ToolCallRequest, deadlineAt: number, signal: AbortSignal): Promise<string>
  /**
   * Called once, when the first upstream attempt is built: the route was planned and a model call
   * goes out. Work meant to run beside the model call starts here (the ad call), never for a request
   * that fails before it. `hangUp` fires when the client goes away.
   */
  begin?(hangUp: AbortSignal): void
  /**
   * Before a model round is sent (`first`: the first round, whose body the stages' tools made
   * longer than it was when the request was read; `next`, a tool loop's next round;
   * `continuation`, a broken stream's continuation): a refusal ends the answer there. `bodyOf`
   * gives the round's body as it goes to an attempt.
   */
  beforeRound?(snapshot: Snapshot, bodyOf: (step: PlannedAttempt) => Record<string, unknown> | undefined, kind: RoundKind): RouterError | undefined
  /** The plan to run instead of planning one per model round (the plan a spend cap priced is the plan run). */
  plan?(): RoutePlan | undefined
  /** The plan's steps as they may run (a target passed over is a skip). */
  steps?(snapshot: Snapshot, steps: readonly PlanStep[]): PlanStep[]
  /** One attempt's upstream call, rewritten. */
  upstreamCall?(snapshot: Snapshot, step: PlannedAttempt, call: UpstreamCall): UpstreamCall
  /** Watches one attempt (its span): a header for the upstream call, and its end. */
  attempt?(step: PlannedAttempt): AttemptWatch | undefined
  /** Wraps each model round's routed call: `next` makes it (with the stages after this one). */
  wrapCall?(input: RoutedCallInput, next: (input: RoutedCallInput) => Promise<RunResult>): Promise<RunResult>
  /**
   * Wraps a model round's streamed parts as they come from the upstream, before the tool loop and
   * the transforming stages see them (a continuation goes on after a break on another target).
   */
  wrapStream?(parts: ReadableStream<StreamPart>, round: StreamRound): ReadableStream<StreamPart>
  /** Transforms a buffered answer before it is written in the client's dialect. */
  transformReply?(reply: AssistantResult): AssistantResult
  /** Transforms a streamed answer part by part, before it is encoded for the client. */
  transformParts?(): TransformStream<StreamPart, StreamPart>
  /** The fields it adds to a successful answer, given its whole text; settles within its own limit, never rejects. */
  attach?(answerText: string): Promise<Record<string, unknown> | undefined>
  /** What the request-log row records of it, given the model rounds the answer took. */
  logRecord?(rounds: number): unknown
  /** The request is finished and its row's state is final (its cost computed): the last word before the row is written. */
  finished?(context: AuthenticatedContext): void
}

/** What a stage sets on the key's compiled chain, for what reads it without a request's chain open (a dialect, the log row, a batch). */
export interface ChainSettings {
  /** The steering message put in front of the request (the key's, else its workspace's). */
  steering: string | undefined
  /** The request-log rows keep the request body. */
  captureBodies: boolean
}

/** A feature a key can turn on: one entry of the registry. */
export interface Stage {
  readonly name: string
  /** Whether it applies to a key's requests at all: decided once, when the key's read-model entry is built. */
  appliesTo(key: KeyFeatures, flags: FeatureFlags): boolean
  /** What it sets on the key's compiled chain (decided with `appliesTo`). */
  settings?(key: KeyFeatures): Partial<ChainSettings>
  /**
   * Runs as any request of the key is authenticated, whatever its endpoint (a promise: the request
   * waits for it, as the first request of a limited key waits for its ledger's first read).
   */
  authenticated?(context: RequestContext, deps: InferenceDeps): Promise<void> | undefined
  /** Runs as any answer of the key is finished, whatever its endpoint and status (fields every answer carries). */
  answered?(context: RequestContext, deps: InferenceDeps): void
  /** Its part in one request; undefined when it has nothing to do for this one (a stage of settings only has none). */
  open?(request: StageRequest): StageRun | undefined | Promise<StageRun | undefined>
}
