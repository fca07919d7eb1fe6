/**
 * What a client dialect is to the answer path (answer/handler.ts): the parsed request, and the one
 * object per endpoint that says everything that differs between the endpoints, and nothing else.
 * Types only: the dialects (endpoints/), the handler and the stages build on them.
 */
import type { AssistantResult } from '../../dialects/assistant-result'
import type { ReplyKind } from '../../dialects/reply-shape'
import type { StreamPart } from '../../dialects/stream-parts'
import type { AuthenticatedContext } from '../request/context'
import type { Operation, PlannedAttempt } from '../routing/plan-route'
import type { UpstreamCall } from '../routing/routed-call'
import type { RunResult } from '../routing/run-attempts'
import type { InferenceDeps, InferenceRoute } from '../types'

export type SuccessResult = Extract<RunResult, { kind: 'success' }>
export type RelayResult = Extract<RunResult, { kind: 'relay' }>

/** What the client sent beside its request for the stages (removed before the gateway call). */
export interface StageSiblings {
  /** `ad_request`, as sent (undefined when absent). */
  adRequest: unknown
  /** `link_request`, as sent (undefined when absent). */
  linkRequest: unknown
}

/** A client's request as its dialect read it. */
export interface ParsedRequest {
  model: string
  stream: boolean
  operation: Operation
  /**
   * The body as it goes upstream before per-attempt changes (chat form, or Responses form on
   * /responses); its `tools` are the client's own.
   */
  upstreamBody: Record<string, unknown>
  /**
   * The client's bytes, while they can go upstream unchanged (the same body, nothing added or
   * removed); a stage that rewrites the body drops them.
   */
  raw?: Uint8Array<ArrayBuffer>
  /** A pinned Responses chain: only this provider key, no remaps. */
  pinnedProviderKeyId?: string
  /** The one step to run, instead of a plan (a call pinned to the provider key that holds a response: retrieval). */
  pinnedStep?: PlannedAttempt
  /** `ad_request` and `link_request`, taken out of the body for the stages. */
  siblings: StageSiblings
  /** A retrieval of an answer a stage keeps (a Responses answer the response cache gave): that stage answers it. */
  keptAnswerId?: string
}

/** A set of tool names (the tools the service offered). */
export interface ToolNames {
  has(name: string): boolean
}

/** Where a stage's answer is kept for retrieval (the response cache's): the id a Responses answer is issued under. */
export interface KeptAnswer {
  providerKeyId: string
  upstreamId: string
  /** Unix seconds. */
  createdAt: number
}

/** The attempt that serves an answer (the first round's, on a stream), for what the reply says of its origin. */
export interface Served {
  /** Undefined for an answer a stage gave (the response cache's): no gateway serves it now. */
  step: PlannedAttempt | undefined
  replyKind: ReplyKind
  /** A stage's answer kept for retrieval: a Responses answer's id names it (stages/stage.ts). */
  kept?: KeptAnswer
}

/** Fields the stages attach to a stream's last event, fetched once its text is known. */
export type Attach = (text: string) => Promise<Record<string, unknown> | undefined>

/** What the key's stages make of an answer that is otherwise passed through as the upstream gave it. */
export interface PassedStages {
  /** Tools the service offered (MCP): never echoed back to the client. */
  hiddenTools?: ToolNames
  /** Fields attached beside a buffered answer (top-level siblings of the answer object). */
  extras?: Record<string, unknown>
  /** A stream's attached fields, fetched for its last event. */
  attach?: Attach
}

/** A client dialect: everything that differs between the endpoints of the answer path, and nothing else. */
export interface ClientDialect<P extends ParsedRequest = ParsedRequest> {
  readonly name: string
  /**
   * The kind of upstream reply the client speaks (chat completions, embeddings lists, decisions,
   * Responses): such a reply, unchanged by any stage, is passed through. Undefined: always translated.
   */
  readonly replyKind: ReplyKind | undefined
  /** The pass-through sends the upstream's bytes unparsed (a buffered reply is only scanned). */
  readonly relaysBytes: boolean
  /** The key's stages that shape an answer (tools, attached fields, the pick of a target) act on this endpoint's answers. */
  readonly enriched: boolean
  /** Reads and checks the client's body (errors are RouterErrors); sets the context's model, stream and logged body. */
  parse(context: AuthenticatedContext, request: Request, route: InferenceRoute, deps: InferenceDeps): Promise<P>
  /** One attempt's upstream call (its model spelling is `step.model`). */
  toUpstream(step: PlannedAttempt, parsed: P): UpstreamCall
  /** A further check of a parsed buffered reply: a problem fails the attempt over (decisions). */
  accept?(value: unknown, parsed: P): string | undefined
  /** Every upstream error is relayed as it came, none failed over (retrieval, pinned to one provider key). */
  readonly relaysErrors?: boolean
  /** An upstream error that is not retried, answered in the dialect's envelope (default: relayed as it came). */
  errorEnvelope?(context: AuthenticatedContext, deps: InferenceDeps, result: RelayResult, parsed: P): Response
  /** The dialect's own pass-through of a reply in its kind (default: relayReply, the bytes as they came). */
  passThrough?(context: AuthenticatedContext, deps: InferenceDeps, result: SuccessResult, parsed: P, stages?: PassedStages): Response | Promise<Response>
  /**
   * The pass-through can place the stages' attached fields on the last event of the upstream's own
   * stream (a Responses stream's terminal event can hold them; a relayed chat stream has no place to
   * hold its last chunk, so such a stream is decoded and encoded instead).
   */
  readonly attachesToStream: boolean
  /** Called with the attempt that answers, before anything of the answer is written (headers that name it). */
  served?(context: AuthenticatedContext, served: Served): void
  /** The buffered reply in the dialect (may throw UntranslatableReply); required unless every reply passes through. */
  writeReply?(context: AuthenticatedContext, deps: InferenceDeps, reply: AssistantResult, parsed: P, served: Served): unknown
  /** Stream parts → the dialect's SSE; required unless every reply passes through. */
  encodeStream?(context: AuthenticatedContext, deps: InferenceDeps, parsed: P, served: Served): TransformStream<StreamPart, Uint8Array>
}
