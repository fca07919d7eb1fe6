/**
 * Answers the upstream gave, passed on: a gateway's error relayed as it came or re-enveloped in the
 * client's envelope, and the default pass-through of a reply in the client's own kind (a buffered
 * answer's checked bytes, a stream piped record by record once each is whole and checked).
 */
import { upstreamErrorBody } from '../../errors/render'
import { upstreamMessage } from '../routing/classify-failure'
import type { AuthenticatedContext } from '../request/context'
import type { InferenceDeps } from '../types'
import type { ParsedRequest, PassedStages, RelayResult, SuccessResult } from './dialect'
import { finishAnswer, finishJson, finishStream, recordServingAttempt } from './finish'
import { noteResponseModel, noteResponseModelIn, readUsage, readUsageFromBody, relayChatStream } from './respond'

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
      context.hideUsageChunk,
      typeof choices === 'number' && Number.isInteger(choices) && choices > 1 ? choices : 1,
    ),
  )
}
