/**
 * The answer that is not passed through as the upstream gave it: a reply in another dialect (decoded
 * and written once for the client), and the answer the key's stages shape. The tool loop: a
 * tool-offering stage (MCP tools) makes the answer a loop of model rounds: when a round's tool calls
 * are all the stages' own, they are run, the round is appended and the model is called again (at most
 * 8 rounds, each a routed call that can fail over). The client sees one answer: the prose of every
 * round in order, streamed as it comes, no server-run tool calls, usage summed. Attaching stages
 * (companion ads, keyterm links) add their fields to a successful answer: beside a buffered answer,
 * on the last event of a stream (held until they are in, within their limits). Transforming stages
 * rewrite the buffered answer, or the stream part by part, before it is encoded.
 */
import { RouterError } from '../../errors/router-error'
import { readChatCompletion } from '../../dialects/chat/convert-response'
import { decodeChatStream } from '../../dialects/chat/decode-stream'
import { readResponseObject } from '../../dialects/responses/convert-response'
import { decodeResponsesStream } from '../../dialects/responses/decode-stream'
import { UntranslatableReply, type AssistantResult } from '../../dialects/assistant-result'
import { addUsage, breakSafe, UpstreamEnding, type StreamPart, type Usage } from '../../dialects/stream-parts'
import { extendChatBody, extendResponsesBody, type FinishedRound } from '../../dialects/tool-rounds'
import { scrubSecret } from '../../gateways/scrub-secret'
import { upstreamMessage } from '../routing/classify-failure'
import type { AuthenticatedContext } from '../request/context'
import type { PlannedAttempt } from '../routing/plan-route'
import { runRoutedCall, type RoutedCallInput, type UpstreamCall } from '../routing/routed-call'
import type { RunResult } from '../routing/run-attempts'
import type { ChainRun } from '../stages/chain'
import type { OfferedTool, StageRun, StreamRound, ToolCallRequest } from '../stages/stage'
import type { InferenceDeps } from '../types'
import type { ClientDialect, ParsedRequest, Served, SuccessResult, ToolNames } from './dialect'
import { failWith, finishFailedRun, finishJson, finishStream, recordServingAttempt, type StreamEnded } from './finish'
import { relayReply, relayUpstreamError } from './relay'
import { noteResponseModel } from './respond'

/** The most model calls one answer makes (CONTRACT §7). */
export const maxModelRounds = 8
/** Between the prose of two rounds. */
const roundSeparator = '\n\n'

/**
 * The tool loop of one answer, and what the key's stages do to it: the tools they offer (a round
 * whose tool calls are all theirs is run and followed by the next model round, at most 8), the
 * fields they attach, and what the log row records of them (stages/chain.ts holds the stages).
 */
export class ToolLoop {
  round = 1
  private readonly finished: FinishedRound[] = []
  private readonly tools: OfferedTool[] = []
  private readonly owners = new Map<string, StageRun>()
  /** Aborts tool calls and later rounds' model calls when the client goes away mid-answer (a stream's cancel). */
  readonly hangUp = new AbortController()
  /** `hangUp`, or the client's own signal: what tool calls and later rounds listen to. */
  private signal: AbortSignal | undefined
  private begun = false

  constructor(
    private readonly context: AuthenticatedContext,
    private readonly deps: InferenceDeps,
    private readonly chain: ChainRun,
    private readonly deadlineAt: number,
    /** The client's own signal, for the stages' work beside the model call. */
    private readonly clientSignal: AbortSignal | undefined,
  ) {
    for (const { run, tool } of chain.toolOwners()) {
      this.tools.push(tool)
      this.owners.set(tool.name, run)
    }
  }

  /** The names of the tools the loop offered: never echoed back to the client. */
  get offeredNames(): ToolNames {
    return this.owners
  }

  /**
   * The fields the attaching stages add to a successful answer whose text is `text`, together; each
   * stage keeps its own limit. Also brings the log record up to date.
   */
  async attach(text: string): Promise<Record<string, unknown> | undefined> {
    const started = performance.now()
    const fields = await this.chain.attach(text)
    // Waiting on the plug-in services is waiting on the outside: not the router's overhead.
    this.context.upstreamWaitMs += performance.now() - started
    this.chain.record(this.round)
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
      this.chain.begin(this.listen(this.clientSignal))
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
   * of its own, through the chain). `finished`: the round that made the calls, with the usage it
   * reported; each round's cost is priced at the target that served it. A stage may refuse the next
   * round before it is sent (a spend cap's reservation): the loop ends there with the refusal.
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
    this.chain.record(this.round)
    const refusal = this.chain.beforeRound(this.context.snapshot, (step) => this.bodyFor(input.requestFor(step)).body, 'next')
    if (refusal) return { kind: 'failed', error: refusal, clientClosed: false, failures: [], attempts: 0, path: [] }
    const next = await this.chain.call({ ...input, clientSignal: signal }, (wrapped) => runRoutedCall(this.context, this.deps, wrapped))
    if (next.kind === 'success') rounds.push({ step: next.step, usage: undefined })
    return next
  }

  /**
   * A round's streamed parts, through the stages that wrap a round's stream (a continuation, which
   * may make further calls for the round: each reserved first, then made through the chain).
   */
  roundStream(result: SuccessResult, input: RoutedCallInput): ReadableStream<StreamPart> {
    const parts = roundParts(result, undefined)
    if (!this.chain.wrapsStream) return parts
    const round: StreamRound = {
      result,
      input,
      call: (further) => {
        const refusal = this.chain.beforeRound(this.context.snapshot, (step) => further.requestFor(step).body, 'continuation')
        if (refusal) return refusal
        return this.chain.call({ ...further, clientSignal: this.listen(further.clientSignal) }, (wrapped) => runRoutedCall(this.context, this.deps, wrapped))
      },
      parts: (begun) => roundParts(begun, undefined),
    }
    return this.chain.wrapStream(parts, round)
  }

  /** A round of the loop reported its usage (the one in progress; nothing before a second round began). */
  roundUsage(usage: Usage | undefined) {
    const rounds = this.context.rounds
    if (rounds && rounds.length > 0) rounds[rounds.length - 1]!.usage = usage
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
export interface Answering<P extends ParsedRequest> {
  context: AuthenticatedContext
  deps: InferenceDeps
  dialect: ClientDialect<P>
  parsed: P
  /** The tool loop, where the stages shape the answer. */
  loop: ToolLoop | undefined
  /** The key's chain opened for the request (none on a plain key). */
  chain: ChainRun | undefined
  /** The routed call's input, for a tool loop's later rounds. */
  input: RoutedCallInput
}

/** The answer the stages may shape, or a reply in another dialect: decoded, and written once for the client. */
export function answerWith<P extends ParsedRequest>(answering: Answering<P>, first: SuccessResult): Response | Promise<Response> {
  return first.stream ? streamedAnswer(answering, first) : bufferedAnswer(answering, first)
}

async function bufferedAnswer<P extends ParsedRequest>({ context, deps, dialect, parsed, loop, chain, input }: Answering<P>, first: SuccessResult): Promise<Response> {
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
    loop?.roundUsage(reply.usage)
    if (loop?.runsCalls(reply.toolCalls)) {
      const round = { ...reply, toolCalls: [] }
      before = before ? mergeRounds(before, round) : round
      const next = await loop.nextRound(reply.text, reply.toolCalls, input, { step: result.step, usage: reply.usage })
      if (next.kind === 'failed') return finishFailedRun(context, deps, next)
      if (next.kind === 'relay') return dialect.errorEnvelope ? dialect.errorEnvelope(context, deps, next, parsed) : relayUpstreamError(context, deps, next)
      result = next
      continue
    }
    if (loop?.strayCalls(reply.toolCalls)) reply = { ...reply, toolCalls: [], finishReason: reply.finishReason === 'tool_calls' ? 'stop' : reply.finishReason }
    const merged = before ? mergeRounds(before, reply) : reply
    const answer = chain ? chain.transformReply(merged) : merged
    // The answer is written before anything is attached to it: a reply that cannot be written fails
    // without a plug-in call.
    let body: unknown
    try {
      body = writeReply(dialect, context, deps, answer, parsed, served)
    } catch (error) {
      return untranslatable(context, deps, result, error)
    }
    const extras = loop ? await loop.attach(answer.text) : undefined
    // A first round that called no server tool is the upstream's answer as it came: passed through
    // where the client speaks the upstream's dialect (what a translation would lose, kept), with the
    // attached fields beside it; not where a stage transformed it. (The last round's stray calls come
    // after earlier rounds: never here.)
    if (!before && loop && result.replyKind === dialect.replyKind && !chain?.transformsAnswer) {
      return (dialect.passThrough ?? relayReply)(context, deps, result, parsed, { hiddenTools: loop.offeredNames, extras })
    }
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

function streamedAnswer<P extends ParsedRequest>({ context, deps, dialect, parsed, loop, chain, input }: Answering<P>, first: SuccessResult): Response {
  recordServingAttempt(context, first)
  const served = { step: first.step, replyKind: first.replyKind }
  dialect.served?.(context, served)
  if (!dialect.encodeStream) throw new Error(`The ${dialect.name} dialect has no stream encoder for a ${first.replyKind} reply.`)
  const encode = dialect.encodeStream(context, deps, parsed, served)
  return finishStream(context, deps, 200, (end) => {
    let parts = loop
      ? enrichedParts(context, deps, first, loop, input, end)
      : roundParts(first, () => {
          first.controller.abort('client-closed')
          end(499, 'client_closed')
        })
    // The stages that transform the answer part by part, before it is watched and encoded.
    if (chain?.transformsAnswer) parts = chain.transformParts(parts)
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
 * where the stages offer tools, its tool calls are held until the round ends — then either run (all
 * the stages' own: the next round's parts follow) or sent as they are with the finish (a client tool
 * among them); where they offer none, the client's tool calls go out as they come. One
 * `start`, one `finish` with the usage of every round and the attached fields (the finish waits for
 * them). A failure inside ends the stream with an `error` part, never a broken pipe.
 */
function enrichedParts(context: AuthenticatedContext, deps: InferenceDeps, first: SuccessResult, loop: ToolLoop, input: RoutedCallInput, end: StreamEnded): ReadableStream<StreamPart> {
  let current = first
  let reader = loop.roundStream(current, input).getReader()
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
    reader = loop.roundStream(next, input).getReader()
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
          // Without tools of the stages' own, no call is run here: the client's calls stream as they come.
          if (!loop.offersTools) {
            controller.enqueue(part)
            return
          }
          held.push(part)
          calls[part.index] = { id: part.id, name: part.name, arguments: '' }
          continue
        case 'tool-input-delta': {
          if (!loop.offersTools) {
            controller.enqueue(part)
            return
          }
          held.push(part)
          const call = calls[part.index]
          if (call) call.arguments += part.delta
          continue
        }
        case 'finish': {
          usage = addUsage(usage, part.usage)
          // What the log keeps if a later round fails: the rounds so far were billed.
          setTokens(context, usage)
          // A continued round's usage is its attempts' sum; the last attempt's own is priced at its target.
          const own = part.lastUsage ?? part.usage
          loop.roundUsage(own)
          const made = calls.filter((call) => call !== undefined)
          if (loop.runsCalls(made)) {
            if (await goOn(controller, made, own)) continue
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

