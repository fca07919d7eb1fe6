/**
 * The one answer path of every routed inference endpoint (/chat/completions, /embeddings,
 * /responses and its retrieval, /messages, :generateContent, /decisions). A client dialect is one
 * object (ClientDialect) and one handler runs it: parse → the key's pre-routing hooks → its
 * enrichment stages → the routed call → the answer, which is finished in pipeline/answer/finish.ts.
 *
 * What applies is the key's compiled pipeline (stages/registry.ts), decided when its read-model
 * entry was built:
 * - nothing (a plain key), and the upstream answered in the client's own kind: the bytes pass
 *   through (a buffered answer as it came, a stream record by record once checked), or the
 *   dialect's own pass-through where it must rewrite something (Responses ids);
 * - otherwise decode → stages → encode over the stream-parts vocabulary, buffered or streamed
 *   alike. A reply in another dialect (a messages client on a chat gateway, a chat client on the
 *   responses-only gateway kind) is decoded and encoded once.
 *
 * Stages: a tool-offering stage (MCP tools) makes the answer a loop of model rounds: when a round's
 * tool calls are all the stages' own, they are run, the round is appended and the model is called
 * again (at most 8 rounds, each a routed call that can fail over). The client sees one answer: the
 * prose of every round in order, streamed as it comes, no server-run tool calls, usage summed.
 * Attaching stages (companion ads, keyterm links) add their fields to a successful answer: beside a
 * buffered answer, on the last event of a stream (held until they are in, within their limits).
 *
 * An upstream error, a failed run and a reply the translator cannot map are answered here too, in
 * the key's envelope.
 */
import { RouterError } from '../../errors/router-error'
import { upstreamErrorBody } from '../../errors/render'
import { readChatCompletion } from '../../dialects/chat/convert-response'
import { decodeChatStream } from '../../dialects/chat/decode-stream'
import { readResponseObject } from '../../dialects/responses/convert-response'
import { decodeResponsesStream } from '../../dialects/responses/decode-stream'
import { UntranslatableReply, type AssistantResult } from '../../dialects/assistant-result'
import { breakSafe, UpstreamEnding, type StreamPart, type Usage } from '../../dialects/stream-parts'
import type { ReplyKind } from '../../dialects/reply-shape'
import { clientToolNames, extendChatBody, extendResponsesBody, type FinishedRound } from '../../dialects/tool-rounds'
import { scrubSecret } from '../../gateways/scrub-secret'
import { upstreamMessage } from '../routing/classify-failure'
import type { AuthenticatedContext } from '../request/context'
import { failWith, finishAnswer, finishFailedRun, finishJson, finishStream, recordServingAttempt, type StreamEnded } from './finish'
import type { Operation, PlannedAttempt } from '../routing/plan-route'
import { noteResponseModel, noteResponseModelIn, readUsage, readUsageFromBody, relayChatStream } from './respond'
import { runRoutedCall, type RoutedCallInput, type UpstreamCall } from '../routing/routed-call'
import type { RunResult } from '../routing/run-attempts'
import { startStages, type ActiveStage, type EnrichmentStage, type OfferedTool, type RoutePreference, type StageSiblings, type ToolCallRequest } from '../stages/registry'
import type { EndpointHandler, InferenceDeps, InferenceRoute } from '../types'
import { admitLimited } from '../limits/admission'

export type SuccessResult = Extract<RunResult, { kind: 'success' }>
export type RelayResult = Extract<RunResult, { kind: 'relay' }>

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
  /** A pinned Responses chain: only this provider key, no remaps. */
  pinnedProviderKeyId?: string
  /** The one step to run, instead of a plan (a call pinned to the provider key that holds a response: retrieval). */
  pinnedStep?: PlannedAttempt
  /** `ad_request` and `link_request`, taken out of the body for the stages. */
  siblings: StageSiblings
}

/** A set of tool names (the tools the service offered). */
export interface ToolNames {
  has(name: string): boolean
}

/** The attempt that serves an answer (the first round's, on a stream), for what the reply says of its origin. */
export interface Served {
  step: PlannedAttempt
  replyKind: ReplyKind
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
  /** The key's pre-routing hooks and enrichment stages act on this endpoint's answers. */
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

/** The most model calls one answer makes (CONTRACT §7). */
export const maxModelRounds = 8
/** Between the prose of two rounds. */
const roundSeparator = '\n\n'

/** The one handler of every endpoint of the answer path, for a dialect. */
export function dialectHandler<P extends ParsedRequest>(dialect: ClientDialect<P>): EndpointHandler {
  return async (context, request, route, deps) => {
    const parsed = await dialect.parse(context, request, route, deps)
    context.mark('body')
    // A key with limits is admitted before any upstream call; a key without any never looks further.
    const limits = context.key.limits
    if (limits) {
      let refusal = admitLimited(context, deps, limits, parsed)
      if (refusal instanceof Promise) refusal = await refusal
      if (refusal) return failWith(context, deps, refusal)
    }
    const pipeline = context.key.pipeline
    let preference: RoutePreference | undefined
    let enrichment: Enrichment | undefined
    // A plain key's request skips all of it: its pipeline was compiled empty.
    if (dialect.enriched && !pipeline.plain) {
      for (const hook of pipeline.hooks) preference = (await hook.run(context, deps, { model: parsed.model, pinned: parsed.pinnedProviderKeyId !== undefined })) ?? preference
      if (pipeline.stages.length > 0) enrichment = await Enrichment.start(context, deps, parsed, pipeline.stages, request.signal)
      // The stages' tools make the first round's prompt longer than admission priced: reserved before it is sent.
      if (enrichment && context.limited) {
        const grown = enrichment
        const refusal = context.limited.reserveRound(context.snapshot, (step) => grown.bodyFor(dialect.toUpstream(step, parsed)).body, true)
        if (refusal) return failWith(context, deps, refusal)
      }
    }
    const input: RoutedCallInput = {
      operation: parsed.operation,
      requestFor: enrichment ? (step) => enrichment.extend(dialect.toUpstream(step, parsed)) : (step) => dialect.toUpstream(step, parsed),
      model: parsed.model,
      preference,
      stream: parsed.stream,
      incomingHeaders: request.headers,
      clientSignal: request.signal,
      pinnedProviderKeyId: parsed.pinnedProviderKeyId,
      steps: parsed.pinnedStep ? [parsed.pinnedStep] : undefined,
      relayKind: enrichment === undefined && dialect.relaysBytes ? dialect.replyKind : undefined,
      relaysErrors: dialect.relaysErrors,
      accept: dialect.accept ? (value) => dialect.accept!(value, parsed) : undefined,
    }
    const result = await runRoutedCall(context, deps, input)
    if (result.kind === 'failed') return finishFailedRun(context, deps, result)
    if (result.kind === 'relay') return dialect.errorEnvelope ? dialect.errorEnvelope(context, deps, result, parsed) : relayUpstreamError(context, deps, result)
    if (result.replyKind === dialect.replyKind) {
      // The upstream answered in the client's own kind: passed through unless a stage must change it.
      const passThrough = dialect.passThrough ?? relayReply
      if (!enrichment) return passThrough(context, deps, result, parsed)
      // Only fields to attach: the stream can stay the gateway's own where the dialect places them on it.
      if (result.stream && !enrichment.offersTools && dialect.attachesToStream) return passThrough(context, deps, result, parsed, { attach: (text) => enrichment.attach(text) })
    }
    const answering: Answering<P> = { context, deps, dialect, parsed, enrichment, input }
    return result.stream ? streamedAnswer(answering, result) : bufferedAnswer(answering, result)
  }
}

/** A gateway's error relayed as it came (body and headers are the scrubbed copies run-attempts made). */
export function relayUpstreamError(context: AuthenticatedContext, deps: InferenceDeps, result: RelayResult): Response {
  recordServingAttempt(context, result)
  return finishAnswer(context, deps, result.status, result.body, result.headers.get('content-type') ?? 'application/json', `upstream_${result.status}`)
}

/** An upstream error re-enveloped in a translating dialect's envelope (the gateway's message kept). */
export function reenvelopedError(context: AuthenticatedContext, deps: InferenceDeps, result: RelayResult): Response {
  recordServingAttempt(context, result)
  const message = upstreamMessage(result.body) ?? `The gateway answered HTTP ${result.status}.`
  return finishJson(context, deps, result.status, upstreamErrorBody(context.envelope, result.status, message), `upstream_${result.status}`)
}

/**
 * The default pass-through: the upstream's own answer to the client. A buffered answer's checked bytes
 * (or, with fields to attach, its parsed object written again with them beside it); a stream piped
 * record by record once each is whole and checked.
 */
export function relayReply(context: AuthenticatedContext, deps: InferenceDeps, result: SuccessResult, parsed?: ParsedRequest, stages?: PassedStages): Response {
  const extras = stages?.extras
  recordServingAttempt(context, result)
  const upstream = result.response
  // Success answers carry our own content type: the body was checked to be JSON or an event stream.
  if (extras && !result.stream && result.value !== undefined) {
    readUsage((result.value as { usage?: unknown }).usage, context)
    noteResponseModel(context, (result.value as { model?: unknown }).model)
    return finishJson(context, deps, upstream.status, { ...(result.value as object), ...extras })
  }
  if (!result.stream) {
    const body = result.body ?? new ArrayBuffer(0)
    if (result.value === undefined) {
      readUsageFromBody(body, context)
      noteResponseModelIn(context, body)
    } else {
      readUsage((result.value as { usage?: unknown }).usage, context)
      noteResponseModel(context, (result.value as { model?: unknown }).model)
    }
    return finishAnswer(context, deps, upstream.status, body, 'application/json')
  }
  const started = result.stream
  noteResponseModelIn(context, started.checkedHead)
  // A chat stream of `n` choices is whole when each gave its finish reason.
  const choices = parsed?.upstreamBody.n
  return finishStream(context, deps, upstream.status, (ended) =>
    relayChatStream(
      started,
      result.controller,
      (end) => {
        // Usage for what was served, from the same records the relay checked.
        readUsage(started.records.usage, context)
        if (end.clientClosed) ended(499, 'client_closed')
        else ended(upstream.status, end.complete ? undefined : 'stream_aborted')
      },
      context.limited?.hidesUsage,
      typeof choices === 'number' && Number.isInteger(choices) && choices > 1 ? choices : 1,
    ),
  )
}

/**
 * The active stages of one answer: the tools they offer, the tool loop's rounds so far and its next
 * model call, the fields they attach, and what the log row records of them.
 */
class Enrichment {
  round = 1
  private readonly finished: FinishedRound[] = []
  private readonly tools: OfferedTool[] = []
  private readonly owners = new Map<string, ActiveStage>()
  /** Aborts tool calls and later rounds' model calls when the client goes away mid-answer (a stream's cancel). */
  readonly hangUp = new AbortController()
  /** `hangUp`, or the client's own signal: what tool calls and later rounds listen to. */
  private signal: AbortSignal | undefined

  private constructor(
    private readonly context: AuthenticatedContext,
    private readonly deps: InferenceDeps,
    private readonly stages: readonly ActiveStage[],
    private readonly deadlineAt: number,
    /** The client's own signal, for the stages' work beside the model call. */
    private readonly clientSignal: AbortSignal | undefined,
  ) {
    for (const stage of stages) {
      for (const tool of stage.tools ?? []) {
        this.tools.push(tool)
        this.owners.set(tool.name, stage)
      }
    }
    this.record()
  }

  static async start(context: AuthenticatedContext, deps: InferenceDeps, parsed: ParsedRequest, applicable: readonly EnrichmentStage[], clientSignal: AbortSignal | undefined): Promise<Enrichment | undefined> {
    const deadlineAt = context.startedAt + deps.config.deadlineMs
    const started = performance.now()
    const active = await startStages(applicable, { context, deps, model: parsed.model, siblings: parsed.siblings, clientToolNames: clientToolNames(parsed.upstreamBody), deadlineAt })
    // Waiting on tool servers is waiting on the outside, like an upstream: not the router's overhead.
    context.upstreamWaitMs += performance.now() - started
    if (!active) return undefined
    return new Enrichment(context, deps, active, deadlineAt, clientSignal)
  }

  private begun = false

  /** The names of the tools the loop offered: never echoed back to the client. */
  get offeredNames(): ToolNames {
    return this.owners
  }

  /**
   * The fields the attaching stages add to a successful answer whose text is `text`, together; each
   * stage keeps its own limit. Also brings the log record up to date.
   */
  async attach(text: string): Promise<Record<string, unknown> | undefined> {
    let fields: Record<string, unknown> | undefined
    const started = performance.now()
    const attached = await Promise.all(this.stages.map((stage) => stage.attach?.(text)))
    // Waiting on the plug-in services is waiting on the outside: not the router's overhead.
    this.context.upstreamWaitMs += performance.now() - started
    for (const added of attached) if (added) fields = Object.assign(fields ?? {}, added)
    this.record()
    return fields
  }

  /** Whether the stages offer tools (a tool loop may follow the first round). */
  get offersTools(): boolean {
    return this.tools.length > 0
  }

  /**
   * An attempt's upstream call with the offered tools and the finished rounds (a new body; the
   * client's bytes no longer apply). The first one tells the stages the model call goes out.
   */
  extend(call: UpstreamCall): UpstreamCall {
    if (!this.begun) {
      this.begun = true
      const hangUp = this.listen(this.clientSignal)
      for (const stage of this.stages) stage.begin?.(hangUp)
    }
    return this.bodyFor(call)
  }

  /** The call as `extend` makes it, without telling the stages anything (what a round's reservation is priced on). */
  bodyFor(call: UpstreamCall): UpstreamCall {
    if (this.tools.length === 0 || call.body === undefined) return call
    const last = this.round >= maxModelRounds
    const body = call.path === '/responses' ? extendResponsesBody(call.body, this.tools, this.finished, last) : extendChatBody(call.body, this.tools, this.finished, last)
    return { path: call.path, body }
  }

  /** Whether every one of these calls (some) is to a tool the stages run. */
  ownsAll(calls: readonly ToolCallRequest[]): boolean {
    if (calls.length === 0) return false
    for (const call of calls) if (!this.owners.has(call.name)) return false
    return true
  }

  /** Whether the loop goes on after a round with these calls: all the stages' own, and a round left. */
  runsCalls(calls: readonly ToolCallRequest[]): boolean {
    return this.round < maxModelRounds && this.ownsAll(calls)
  }

  /**
   * Server calls the last round made anyway (it was asked to answer without tools): never shown to
   * the client, who cannot answer them; the round ends as an answer.
   */
  strayCalls(calls: readonly ToolCallRequest[]): boolean {
    return this.round >= maxModelRounds && this.ownsAll(calls)
  }

  private listen(clientSignal: AbortSignal | undefined): AbortSignal {
    return (this.signal ??= clientSignal ? AbortSignal.any([clientSignal, this.hangUp.signal]) : this.hangUp.signal)
  }

  /**
   * Runs a round's calls in parallel, appends the round, and makes the next model call (a routed call
   * of its own). `finished`: the round that made the calls, with the usage it reported; each round's
   * cost is priced at the target that served it. On a key with a USD cap the next round is reserved
   * before it is sent: one that does not fit is not sent, and the loop ends with the refusal.
   */
  async nextRound(text: string, calls: readonly ToolCallRequest[], input: RoutedCallInput, finished: { step: PlannedAttempt; usage: Usage | undefined }): Promise<RunResult> {
    const rounds = (this.context.rounds ??= [])
    if (rounds.length === 0) rounds.push({ step: finished.step, usage: finished.usage })
    else rounds[rounds.length - 1]!.usage = finished.usage
    const signal = this.listen(input.clientSignal)
    const started = performance.now()
    const results = await Promise.all(calls.map((call) => this.owners.get(call.name)!.runTool!(call, this.deadlineAt, signal)))
    this.context.upstreamWaitMs += performance.now() - started
    this.finished.push({ text, calls: calls.map((call, index) => ({ id: call.id, name: call.name, arguments: call.arguments, result: results[index]! })) })
    this.round++
    this.record()
    const refusal = this.context.limited?.reserveRound(this.context.snapshot, (step) => this.bodyFor(input.requestFor(step)).body, false)
    if (refusal) return { kind: 'failed', error: refusal, clientClosed: false, failures: [], attempts: 0, path: [] }
    const next = await runRoutedCall(this.context, this.deps, { ...input, clientSignal: signal })
    if (next.kind === 'success') rounds.push({ step: next.step, usage: undefined })
    return next
  }

  /** A round of the loop reported its usage (the one in progress; nothing before a second round began). */
  roundUsage(usage: Usage | undefined) {
    const rounds = this.context.rounds
    if (rounds && rounds.length > 0) rounds[rounds.length - 1]!.usage = usage
  }

  /** The log row's record of the stages, current after every round. */
  private record() {
    const log: Record<string, unknown> = this.context.decision ? { decisioner: this.context.decision } : {}
    for (const stage of this.stages) log[stage.name] = stage.logRecord(this.round)
    this.context.enrichment = JSON.stringify(log)
  }
}

/** Usage summed over rounds; unknown when no round reported any. */
function addUsage(sum: Usage | undefined, usage: Usage | undefined): Usage | undefined {
  if (!usage) return sum
  if (!sum) return { ...usage }
  return {
    inputTokens: sum.inputTokens + usage.inputTokens,
    outputTokens: sum.outputTokens + usage.outputTokens,
    ...(sum.reasoningTokens !== undefined || usage.reasoningTokens !== undefined ? { reasoningTokens: (sum.reasoningTokens ?? 0) + (usage.reasoningTokens ?? 0) } : {}),
    ...(sum.cachedInputTokens !== undefined || usage.cachedInputTokens !== undefined ? { cachedInputTokens: (sum.cachedInputTokens ?? 0) + (usage.cachedInputTokens ?? 0) } : {}),
  }
}

function setTokens(context: AuthenticatedContext, usage: Usage | undefined) {
  if (!usage) return
  context.inputTokens = usage.inputTokens
  context.outputTokens = usage.outputTokens
  context.cachedInputTokens = usage.cachedInputTokens
}

const joinProse = (before: string, after: string) => (before && after ? before + roundSeparator + after : before || after)

/** The rounds so far and a later round as one reply: prose in order, usage summed, the later round's id, times and ending. */
function mergeRounds(before: AssistantResult, after: AssistantResult): AssistantResult {
  return {
    ...after,
    text: joinProse(before.text, after.text),
    reasoning: joinProse(before.reasoning, after.reasoning),
    usage: addUsage(addUsage(undefined, before.usage), after.usage),
  }
}

/** A buffered upstream answer in neutral form (checked to be its kind by run-attempts). */
function readRound(result: SuccessResult): AssistantResult {
  return result.replyKind === 'response' ? readResponseObject(result.value) : readChatCompletion(result.value)
}

/** A reply the translator cannot map is the gateway's fault: 502 in the client's envelope. */
function untranslatable(context: AuthenticatedContext, deps: InferenceDeps, result: SuccessResult, error: unknown): Response {
  if (!(error instanceof UntranslatableReply)) {
    const detail = scrubSecret(error instanceof Error ? error.message : String(error), result.step.provider.secret)
    deps.logger.warn('reply_untranslatable', { request_id: context.requestId, gateway: result.step.gateway, error: detail })
  }
  const reason = error instanceof UntranslatableReply ? `: ${error.message}` : '.'
  return failWith(context, deps, new RouterError('upstream_unreadable', `The reply from ${result.step.gateway} could not be translated${reason}`))
}

/** One request's answer in the making: what both answer forms work with. */
interface Answering<P extends ParsedRequest> {
  context: AuthenticatedContext
  deps: InferenceDeps
  dialect: ClientDialect<P>
  parsed: P
  enrichment: Enrichment | undefined
  /** The routed call's input, for a tool loop's later rounds. */
  input: RoutedCallInput
}

async function bufferedAnswer<P extends ParsedRequest>({ context, deps, dialect, parsed, enrichment, input }: Answering<P>, first: SuccessResult): Promise<Response> {
  let result = first
  let before: AssistantResult | undefined
  for (;;) {
    recordServingAttempt(context, result)
    const served = { step: result.step, replyKind: result.replyKind }
    dialect.served?.(context, served)
    let reply: AssistantResult
    try {
      reply = readRound(result)
    } catch (error) {
      return untranslatable(context, deps, result, error)
    }
    noteResponseModel(context, reply.model)
    // The rounds' usage so far is what the log keeps even if a later round fails: it was billed.
    setTokens(context, addUsage(addUsage(undefined, before?.usage), reply.usage))
    enrichment?.roundUsage(reply.usage)
    if (enrichment?.runsCalls(reply.toolCalls)) {
      const round = { ...reply, toolCalls: [] }
      before = before ? mergeRounds(before, round) : round
      const next = await enrichment.nextRound(reply.text, reply.toolCalls, input, { step: result.step, usage: reply.usage })
      if (next.kind === 'failed') return finishFailedRun(context, deps, next)
      if (next.kind === 'relay') return dialect.errorEnvelope ? dialect.errorEnvelope(context, deps, next, parsed) : relayUpstreamError(context, deps, next)
      result = next
      continue
    }
    if (enrichment?.strayCalls(reply.toolCalls)) reply = { ...reply, toolCalls: [], finishReason: reply.finishReason === 'tool_calls' ? 'stop' : reply.finishReason }
    const answer = before ? mergeRounds(before, reply) : reply
    // The answer is written before anything is attached to it: a reply that cannot be written fails
    // without a plug-in call.
    let body: unknown
    try {
      body = writeReply(dialect, context, deps, answer, parsed, served)
    } catch (error) {
      return untranslatable(context, deps, result, error)
    }
    const extras = enrichment ? await enrichment.attach(answer.text) : undefined
    // A first round that called no server tool is the upstream's answer as it came: passed through
    // where the client speaks the upstream's dialect (what a translation would lose, kept), with the
    // attached fields beside it. (The last round's stray calls come after earlier rounds: never here.)
    if (!before && enrichment && result.replyKind === dialect.replyKind) return (dialect.passThrough ?? relayReply)(context, deps, result, parsed, { hiddenTools: enrichment.offeredNames, extras })
    // Attached fields are top-level siblings of the answer object (CONTRACT §7).
    if (extras && typeof body === 'object' && body !== null) body = { ...body, ...extras }
    return finishJson(context, deps, 200, body)
  }
}

/**
 * A begun upstream stream as parts (its dialect decoded; a break, stall or bad event becomes an
 * `error` part). The parts end with the answer: on an error event at once, the upstream let go; once
 * the answer is whole, when the upstream ends its body or after a short grace (stream-parts.ts).
 */
function roundParts(result: SuccessResult, onCancel: (() => void) | undefined): ReadableStream<StreamPart> {
  const ending = new UpstreamEnding(result.stream!)
  return breakSafe(result.stream!, onCancel, ending).pipeThrough(result.replyKind === 'response' ? decodeResponsesStream(ending) : decodeChatStream(ending))
}

/** Watches parts for usage and the end of the stream (for the log), passing them on unchanged. */
function tapParts(context: AuthenticatedContext, end: StreamEnded): TransformStream<StreamPart, StreamPart> {
  let ended = false
  return new TransformStream<StreamPart, StreamPart>({
    transform(part, controller) {
      if (part.type === 'start') noteResponseModel(context, part.model)
      else if (part.type === 'finish' && part.usage) setTokens(context, part.usage)
      if (!ended && (part.type === 'finish' || part.type === 'error')) {
        ended = true
        end(200, part.type === 'finish' ? undefined : part.code)
      }
      controller.enqueue(part)
    },
    flush() {
      if (!ended) {
        ended = true
        end(200, 'stream_aborted')
      }
    },
  })
}

function streamedAnswer<P extends ParsedRequest>({ context, deps, dialect, parsed, enrichment, input }: Answering<P>, first: SuccessResult): Response {
  recordServingAttempt(context, first)
  const served = { step: first.step, replyKind: first.replyKind }
  dialect.served?.(context, served)
  if (!dialect.encodeStream) throw new Error(`The ${dialect.name} dialect has no stream encoder for a ${first.replyKind} reply.`)
  const encode = dialect.encodeStream(context, deps, parsed, served)
  return finishStream(context, deps, 200, (end) => {
    const parts = enrichment
      ? enrichedParts(context, deps, first, enrichment, input, end)
      : roundParts(first, () => {
          first.controller.abort('client-closed')
          end(499, 'client_closed')
        })
    return parts.pipeThrough(tapParts(context, end)).pipeThrough(encode)
  })
}

/** The buffered reply in the client's dialect (a dialect without a writer takes only its own kind of reply). */
function writeReply<P extends ParsedRequest>(dialect: ClientDialect<P>, context: AuthenticatedContext, deps: InferenceDeps, reply: AssistantResult, parsed: P, served: Served): unknown {
  if (!dialect.writeReply) throw new UntranslatableReply(`a ${served.replyKind} reply cannot be written as ${dialect.name}`)
  return dialect.writeReply(context, deps, reply, parsed, served)
}

/** The error part a stream ends with when its next round cannot start (SPEC: `deadline_exceeded` past the deadline). */
function roundFailure(result: Exclude<RunResult, { kind: 'success' }>): StreamPart {
  if (result.kind === 'relay') return { type: 'error', code: 'upstream_error', message: upstreamMessage(result.body) ?? `The gateway answered HTTP ${result.status}.` }
  return { type: 'error', code: result.error.code, message: result.error.message }
}

/**
 * The parts of a stream with active stages: each round's prose and reasoning go out as they come;
 * its tool calls are held until the round ends — then either run (all the stages' own: the next
 * round's parts follow) or sent as they are with the finish (a client tool among them). One
 * `start`, one `finish` with the usage of every round and the attached fields (the finish waits for
 * them). A failure inside ends the stream with an `error` part, never a broken pipe.
 */
function enrichedParts(context: AuthenticatedContext, deps: InferenceDeps, first: SuccessResult, loop: Enrichment, input: RoutedCallInput, end: StreamEnded): ReadableStream<StreamPart> {
  let current = first
  let reader = roundParts(current, undefined).getReader()
  let cancelled = false
  let usage: Usage | undefined
  let sentProse = false
  /** The answer's whole text so far, as the client got it (for the attaching stages). */
  let answerText = ''
  let roundText = ''
  let held: StreamPart[] = []
  let calls: ToolCallRequest[] = []

  /** After a round's finish: true when the next round's parts follow; false when the stream ended (or was left). */
  const goOn = async (controller: ReadableStreamDefaultController<StreamPart>, made: ToolCallRequest[], roundUsage: Usage | undefined): Promise<boolean> => {
    const next = await loop.nextRound(roundText, made, input, { step: current.step, usage: roundUsage })
    if (cancelled || (next.kind === 'failed' && next.clientClosed)) {
      if (next.kind === 'success') next.controller.abort('client-closed')
      if (!cancelled) {
        end(499, 'client_closed')
        controller.close()
      }
      return false
    }
    if (next.kind !== 'success') {
      controller.enqueue(roundFailure(next))
      controller.close()
      return false
    }
    // The finished round's stream is let go before the next one is read.
    reader.cancel().catch(() => {})
    current = next
    reader = roundParts(next, undefined).getReader()
    roundText = ''
    held = []
    calls = []
    return true
  }

  const step = async (controller: ReadableStreamDefaultController<StreamPart>): Promise<void> => {
    for (;;) {
      const { value: part, done } = await reader.read()
      if (done) return controller.close()
      switch (part.type) {
        case 'start':
          if (loop.round > 1) continue
          controller.enqueue(part)
          return
        case 'text-delta':
          if (roundText === '' && sentProse) {
            controller.enqueue({ type: 'text-delta', delta: roundSeparator })
            answerText += roundSeparator
          }
          roundText += part.delta
          answerText += part.delta
          sentProse = true
          controller.enqueue(part)
          return
        case 'tool-input-start':
          held.push(part)
          calls[part.index] = { id: part.id, name: part.name, arguments: '' }
          continue
        case 'tool-input-delta': {
          held.push(part)
          const call = calls[part.index]
          if (call) call.arguments += part.delta
          continue
        }
        case 'finish': {
          usage = addUsage(usage, part.usage)
          // What the log keeps if a later round fails: the rounds so far were billed.
          setTokens(context, usage)
          loop.roundUsage(part.usage)
          const made = calls.filter((call) => call !== undefined)
          if (loop.runsCalls(made)) {
            if (await goOn(controller, made, part.usage)) continue
            return
          }
          const stray = loop.strayCalls(made)
          if (!stray) for (const heldPart of held) controller.enqueue(heldPart)
          const extras = await loop.attach(answerText)
          if (cancelled) return
          controller.enqueue({ type: 'finish', reason: stray && part.reason === 'tool_calls' ? 'stop' : part.reason, usage, ...(extras ? { extras } : {}) })
          continue
        }
        default:
          controller.enqueue(part)
          return
      }
    }
  }

  return new ReadableStream<StreamPart>({
    async pull(controller) {
      try {
        await step(controller)
      } catch (error) {
        if (cancelled) return
        current.controller.abort('unusable')
        controller.enqueue({ type: 'error', code: 'internal', message: 'The answer could not be completed.' })
        controller.close()
        deps.logger.error('tool_loop_failed', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) })
      }
    },
    cancel() {
      cancelled = true
      loop.hangUp.abort()
      current.controller.abort('client-closed')
      reader.cancel().catch(() => {})
      end(499, 'client_closed')
    },
  })
}
