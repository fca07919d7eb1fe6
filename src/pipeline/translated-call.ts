/**
 * Answering a routed call in a dialect other than chat: the chat reply (or stream) from upstream is
 * read into the neutral form and written in the client's dialect; an upstream error is re-enveloped;
 * a reply the translator cannot map is a 502 in the client's envelope, never a half-written stream.
 * A stream that breaks, stalls past the idle limit or sends an unreadable event after it began ends
 * with the dialect's failure (the decoders turn each into an `error` part).
 */
import { RouterError } from '../errors/router-error'
import { upstreamErrorBody } from '../errors/render'
import { readChatCompletion } from '../dialects/chat/convert-response'
import { decodeChatStream } from '../dialects/chat/decode-stream'
import { UntranslatableReply, type AssistantResult } from '../dialects/assistant-result'
import { breakSafe, type ByteChunk, type StreamPart } from '../dialects/stream-parts'
import { scrubSecret } from '../gateways/scrub-secret'
import { upstreamMessage } from './classify-failure'
import type { RequestContext } from './context'
import { failWith, finishFailedRun, finishWith, recordServingAttempt, trackStream } from './finish'
import type { InferenceDeps } from './types'
import type { RunResult } from './run-attempts'

export interface Translation {
  /** The buffered reply in the client's dialect. */
  buffered(result: AssistantResult): unknown
  /** Parts → the client's SSE. */
  encode(): TransformStream<StreamPart, Uint8Array>
  /** Upstream bytes → parts (chat by default). */
  decode?(): TransformStream<ByteChunk, StreamPart>
  /** Reads a buffered upstream body (chat completion by default). */
  read?(value: unknown): AssistantResult
}

/** Watches parts for usage and the end of the stream (for the log), passing them on unchanged. */
function tapParts(context: RequestContext, onEnd: (status: 'complete' | 'aborted') => void): TransformStream<StreamPart, StreamPart> {
  let ended = false
  return new TransformStream<StreamPart, StreamPart>({
    transform(part, controller) {
      if (part.type === 'finish' && part.usage) {
        context.inputTokens = part.usage.inputTokens
        context.outputTokens = part.usage.outputTokens
      }
      if (!ended && (part.type === 'finish' || part.type === 'error')) {
        ended = true
        onEnd(part.type === 'finish' ? 'complete' : 'aborted')
      }
      controller.enqueue(part)
    },
    flush() {
      if (!ended) {
        ended = true
        onEnd('aborted')
      }
    },
  })
}

export function answerTranslated(context: RequestContext, deps: InferenceDeps, result: RunResult, translation: Translation): Response {
  if (result.kind === 'failed') return finishFailedRun(context, deps, result)
  recordServingAttempt(context, result)
  if (result.kind === 'relay') {
    const message = upstreamMessage(result.body) ?? `The gateway answered HTTP ${result.status}.`
    context.headers['content-type'] = 'application/json'
    return finishWith(context, deps, new Response(JSON.stringify(upstreamErrorBody(context.envelope, result.status, message)), { status: result.status, headers: context.responseHeaders() }), `upstream_${result.status}`)
  }
  if (!result.stream) {
    let translated: unknown
    try {
      // The body was parsed and checked to be a chat completion (or a Response) by run-attempts.
      const reply = (translation.read ?? readChatCompletion)(result.value)
      if (reply.usage) {
        context.inputTokens = reply.usage.inputTokens
        context.outputTokens = reply.usage.outputTokens
      }
      translated = translation.buffered(reply)
    } catch (error) {
      // Whatever the reply held, a reply the translator cannot map is the gateway's fault: 502.
      if (!(error instanceof UntranslatableReply)) {
        const detail = scrubSecret(error instanceof Error ? error.message : String(error), result.step.provider.secret)
        deps.logger.warn('reply_untranslatable', { request_id: context.requestId, gateway: result.step.gateway, error: detail })
      }
      const reason = error instanceof UntranslatableReply ? `: ${error.message}` : '.'
      return failWith(context, deps, new RouterError('upstream_unreadable', `The reply from ${result.step.gateway} could not be translated${reason}`))
    }
    context.headers['content-type'] = 'application/json'
    return finishWith(context, deps, new Response(JSON.stringify(translated), { status: 200, headers: context.responseHeaders() }))
  }
  const end = trackStream(context, deps)
  const body = breakSafe(result.stream, () => {
    result.controller.abort('client-closed')
    end(499, 'client_closed')
  })
    .pipeThrough((translation.decode ?? decodeChatStream)())
    .pipeThrough(tapParts(context, (outcome) => end(200, outcome === 'complete' ? undefined : 'stream_aborted')))
    .pipeThrough(translation.encode())
  context.headers['content-type'] = 'text/event-stream; charset=utf-8'
  context.headers['cache-control'] = 'no-cache'
  return new Response(body, { status: 200, headers: context.responseHeaders() })
}
