/**
 * An answer a stage gave before routing, in place of a model call (the response cache's, CONTRACT
 * §15): written in the client's shape with fresh ids, buffered or streamed as the client asked, and
 * through the stages after it that transform answers or attach fields to them. No gateway is
 * called for it: no attempt, no routing headers, no tokens of its own.
 */
import { RouterError } from '../../errors/router-error'
import { UntranslatableReply, type AssistantResult } from '../../dialects/assistant-result'
import { partsOf, ReplyAssembler } from '../../dialects/replay'
import type { StreamPart } from '../../dialects/stream-parts'
import type { AuthenticatedContext } from '../request/context'
import type { ChainRun } from '../stages/chain'
import type { StageAnswer } from '../stages/stage'
import type { InferenceDeps } from '../types'
import type { ClientDialect, ParsedRequest, Served } from './dialect'
import { failWith, finishJson, finishStream, type StreamEnded } from './finish'

const freshId = () => crypto.randomUUID().replaceAll('-', '')

/** A repeated answer's own ids: a new completion id and creation time, new tool-call ids. */
function fresh(reply: AssistantResult): AssistantResult {
  return {
    ...reply,
    id: `chatcmpl-${freshId()}`,
    created: Math.floor(Date.now() / 1000),
    toolCalls: reply.toolCalls.map((call) => ({ ...call, id: `call_${freshId().slice(0, 24)}` })),
  }
}

/** Parts of an answer made for another request (one in flight), with ids of their own: the encoder names the answer. */
function freshParts(): TransformStream<StreamPart, StreamPart> {
  const callIds = new Map<number, string>()
  return new TransformStream<StreamPart, StreamPart>({
    transform(part, controller) {
      if (part.type === 'start') controller.enqueue({ type: 'start', model: part.model })
      else if (part.type === 'tool-input-start') {
        const id = `call_${freshId().slice(0, 24)}`
        callIds.set(part.index, id)
        controller.enqueue({ ...part, id })
      } else controller.enqueue(part)
    },
  })
}

function listed(parts: StreamPart[]): ReadableStream<StreamPart> {
  let at = 0
  return new ReadableStream<StreamPart>({
    pull(controller) {
      if (at < parts.length) controller.enqueue(parts[at++]!)
      else controller.close()
    },
  })
}

/** The buffered reply in the client's dialect; undefined when this dialect cannot write it (then the answer fails). */
function written<P extends ParsedRequest>(dialect: ClientDialect<P>, context: AuthenticatedContext, deps: InferenceDeps, reply: AssistantResult, parsed: P, served: Served): unknown {
  if (!dialect.writeReply) throw new UntranslatableReply(`an answer cannot be written as ${dialect.name}`)
  return dialect.writeReply(context, deps, reply, parsed, served)
}

/** Writes the answer a stage gave (its stages after it are the chain's). */
export function givenAnswer<P extends ParsedRequest>(context: AuthenticatedContext, deps: InferenceDeps, dialect: ClientDialect<P>, parsed: P, chain: ChainRun, answer: StageAnswer): Response | Promise<Response> {
  // An answer of the client's own kind, sent as it is.
  if (answer.body !== undefined) {
    chain.record(1)
    return finishJson(context, deps, 200, answer.body)
  }
  const served: Served = { step: undefined, replyKind: 'chat', kept: answer.kept }
  return parsed.stream ? streamedAnswer(context, deps, dialect, parsed, chain, answer, served) : bufferedAnswer(context, deps, dialect, parsed, chain, answer, served)
}

/** What the stages after the giving one attach to an answer whose text is `text` (their time is waiting on the outside). */
async function attached(context: AuthenticatedContext, chain: ChainRun, text: string): Promise<Record<string, unknown> | undefined> {
  if (!chain.attaches) return undefined
  const started = performance.now()
  const fields = await chain.attach(text)
  context.upstreamWaitMs += performance.now() - started
  return fields
}

function unwritable(context: AuthenticatedContext, deps: InferenceDeps, dialect: { name: string }, error: unknown): Response {
  if (!(error instanceof UntranslatableReply)) deps.logger.warn('given_answer_unwritable', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) })
  return failWith(context, deps, new RouterError('upstream_unreadable', `The stored answer could not be written as ${dialect.name}${error instanceof UntranslatableReply ? `: ${error.message}` : '.'}`))
}

async function bufferedAnswer<P extends ParsedRequest>(context: AuthenticatedContext, deps: InferenceDeps, dialect: ClientDialect<P>, parsed: P, chain: ChainRun, answer: StageAnswer, served: Served): Promise<Response> {
  let reply = answer.reply
  if (!reply) {
    // Parts as they come, gathered: a buffered client of a streamed answer in flight.
    const assembler = new ReplyAssembler()
    const reader = answer.parts!().getReader()
    let failure: StreamPart | undefined
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      if (value.type === 'error') failure = value
      else assembler.add(value)
    }
    reply = assembler.reply
    if (!reply) {
      const message = failure?.type === 'error' ? failure.message : 'The answer ended before it was whole.'
      return failWith(context, deps, new RouterError('upstream_unreadable', message))
    }
  }
  const answerReply = chain.transformReply(fresh(reply))
  let body: unknown
  try {
    body = written(dialect, context, deps, answerReply, parsed, served)
  } catch (error) {
    return unwritable(context, deps, dialect, error)
  }
  answer.written?.(body)
  const extras = await attached(context, chain, answerReply.text)
  chain.record(1)
  if (extras && typeof body === 'object' && body !== null) body = { ...body, ...extras }
  return finishJson(context, deps, 200, body)
}

function streamedAnswer<P extends ParsedRequest>(context: AuthenticatedContext, deps: InferenceDeps, dialect: ClientDialect<P>, parsed: P, chain: ChainRun, answer: StageAnswer, served: Served): Response {
  if (!dialect.encodeStream) return unwritable(context, deps, dialect, new UntranslatableReply(`the ${dialect.name} dialect does not stream`))
  const encode = dialect.encodeStream(context, deps, parsed, served)
  return finishStream(context, deps, 200, (end) => {
    let parts = answer.reply ? listed(partsOf(fresh(answer.reply))) : answer.parts!().pipeThrough(freshParts())
    if (chain.transformsAnswer) parts = chain.transformParts(parts)
    return givenParts(context, deps, dialect, parsed, chain, answer, served, parts, end).pipeThrough(encode)
  })
}

/**
 * The parts as the client gets them: the attached fields on the finish (which waits for them), the
 * log row's end when the parts end (a stream in flight ends after its answer is settled), the
 * written answer handed to the stage once whole.
 */
function givenParts<P extends ParsedRequest>(
  context: AuthenticatedContext,
  deps: InferenceDeps,
  dialect: ClientDialect<P>,
  parsed: P,
  chain: ChainRun,
  answer: StageAnswer,
  served: Served,
  parts: ReadableStream<StreamPart>,
  end: StreamEnded,
): ReadableStream<StreamPart> {
  const reader = parts.getReader()
  const assembler = answer.written ? new ReplyAssembler() : undefined
  let text = ''
  let ending: string | undefined = 'stream_aborted'
  return new ReadableStream<StreamPart>({
    async pull(controller) {
      const read = await reader.read()
      if (read.done) {
        chain.record(1)
        end(200, ending)
        if (ending === undefined && assembler?.reply) {
          try {
            answer.written!(written(dialect, context, deps, assembler.reply, parsed, served))
          } catch {
            // Kept only when it can be written: the client had its stream either way.
          }
        }
        controller.close()
        return
      }
      let part = read.value
      if (part.type === 'text-delta') text += part.delta
      else if (part.type === 'finish') {
        const extras = await attached(context, chain, text)
        if (extras) part = { ...part, extras }
        ending = undefined
      } else if (part.type === 'error') ending = part.code
      assembler?.add(part)
      controller.enqueue(part)
    },
    cancel(reason) {
      reader.cancel(reason).catch(() => {})
      end(499, 'client_closed')
    },
  })
}
