/**
 * The one answer path of every routed inference endpoint (/chat/completions, /embeddings,
 * /responses and its retrieval, /messages, :generateContent, /decisions). A client dialect is one
 * object (answer/dialect.ts) and one handler runs it: parse → the key's chain → the routed call →
 * the answer, finished in answer/finish.ts.
 *
 * What applies is the key's compiled chain (stages/registry.ts), decided when its read-model entry
 * was built:
 * - nothing (a plain key), and the upstream answered in the client's own kind: the bytes pass
 *   through (a buffered answer as it came, a stream record by record once checked), or the
 *   dialect's own pass-through where it must rewrite something (Responses ids);
 * - otherwise the chain's stages open in turn (stages/chain.ts): they may refuse the request before
 *   routing, answer it themselves (the response cache: answer/given-answer.ts), pick its first target, screen and bound its calls, wrap them; and where a stage shapes
 *   the answer (tools, attached fields, transforms) the answer is decoded into stream parts and
 *   encoded once for the client (answer/tool-loop.ts), buffered or streamed alike. A reply in
 *   another dialect (a messages client on a chat gateway) is decoded and encoded once too.
 */
import { ChainRun, stagesOf } from '../stages/chain'
import { runRoutedCall, type RoutedCallInput, type RoutePreference } from '../routing/routed-call'
import type { EndpointHandler } from '../types'
import type { ClientDialect, ParsedRequest } from './dialect'
import { failWith, finishFailedRun } from './finish'
import { givenAnswer } from './given-answer'
import { relayReply, relayUpstreamError } from './relay'
import { answerWith, ToolLoop } from './tool-loop'

/** The one handler of every endpoint of the answer path, for a dialect. */
export function dialectHandler<P extends ParsedRequest>(dialect: ClientDialect<P>): EndpointHandler {
  return async (context, request, route, deps) => {
    let parsed = await dialect.parse(context, request, route, deps)
    context.mark('body')
    const pipeline = context.key.pipeline
    const passThrough = dialect.passThrough ?? relayReply
    // A plain key's request: no stage to open, the straight path.
    if (pipeline.plain) {
      const plain = parsed
      const input = callInput(dialect, plain, request, (step) => dialect.toUpstream(step, plain), dialect.relaysBytes, undefined)
      const result = await runRoutedCall(context, deps, input)
      if (result.kind === 'failed') return finishFailedRun(context, deps, result)
      if (result.kind === 'relay') return dialect.errorEnvelope ? dialect.errorEnvelope(context, deps, result, parsed) : relayUpstreamError(context, deps, result)
      if (result.replyKind === dialect.replyKind) return passThrough(context, deps, result, parsed)
      return answerWith({ context, deps, dialect, parsed, loop: undefined, chain: undefined, input }, result)
    }

    const deadlineAt = context.startedAt + deps.config.deadlineMs
    const opened = await ChainRun.open(stagesOf(pipeline.stages), { context, deps, parsed, dialect, clientSignal: request.signal, deadlineAt, requestHeaders: request.headers })
    const chain = opened.chain
    context.chain = chain
    parsed = opened.parsed as P
    chain.record(1)
    if (opened.refusal) return failWith(context, deps, opened.refusal)
    // A stage answered in place of a model call (the response cache).
    if (opened.answer) return givenAnswer(context, deps, dialect, parsed, chain, opened.answer)
    // Tools, attached fields or a transform of the answer: the answer is the stages' to shape.
    const loop = chain.shapesAnswer ? new ToolLoop(context, deps, chain, deadlineAt, request.signal) : undefined
    if (loop?.offersTools) {
      // The stages' tools make the first round's prompt longer than it was when the request was read: a stage may refuse it now.
      const refusal = chain.beforeRound(context.snapshot, (step) => loop.bodyFor(dialect.toUpstream(step, parsed)).body, 'first')
      if (refusal) return failWith(context, deps, refusal)
    }
    const shaped = parsed
    const requestFor: RoutedCallInput['requestFor'] = loop ? (step) => loop.extend(dialect.toUpstream(step, shaped)) : (step) => dialect.toUpstream(step, shaped)
    const input = callInput(dialect, shaped, request, requestFor, loop === undefined && dialect.relaysBytes, opened.preference)
    const result = await chain.call(input, (wrapped) => runRoutedCall(context, deps, wrapped))
    if (result.kind === 'failed') return finishFailedRun(context, deps, result)
    if (result.kind === 'relay') return dialect.errorEnvelope ? dialect.errorEnvelope(context, deps, result, parsed) : relayUpstreamError(context, deps, result)
    if (result.replyKind === dialect.replyKind && !chain.transformsAnswer) {
      // The upstream answered in the client's own kind: passed through unless a stage must change it.
      if (!loop) return passThrough(context, deps, result, parsed)
      // Only fields to attach: the stream can stay the gateway's own where the dialect places them on it.
      if (result.stream && !loop.offersTools && dialect.attachesToStream) return passThrough(context, deps, result, parsed, { attach: (text) => loop.attach(text) })
    }
    return answerWith({ context, deps, dialect, parsed, loop, chain, input }, result)
  }
}

/** One model round's routed call, as the dialect and the request make it (`relays`: a reply in the client's kind may pass as bytes). */
function callInput<P extends ParsedRequest>(dialect: ClientDialect<P>, parsed: P, request: Request, requestFor: RoutedCallInput['requestFor'], relays: boolean, preference: RoutePreference | undefined): RoutedCallInput {
  return {
    operation: parsed.operation,
    requestFor,
    model: parsed.model,
    preference,
    stream: parsed.stream,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
    pinnedProviderKeyId: parsed.pinnedProviderKeyId,
    steps: parsed.pinnedStep ? [parsed.pinnedStep] : undefined,
    relayKind: relays ? dialect.replyKind : undefined,
    relaysErrors: dialect.relaysErrors,
    accept: dialect.accept ? (value) => dialect.accept!(value, parsed) : undefined,
  }
}
