/**
 * Responses SSE → stream parts (the responses-only gateway kind). Text and reasoning deltas,
 * function calls, and the terminal event with usage; encrypted reasoning is dropped; `error` and
 * `response.failed` become an `error` part, which ends the parts at once and lets the upstream go
 * (the error event is the break, whether or not the upstream closes after it).
 */
import type { EventSourceMessage } from 'eventsource-parser'
import { decodeSse, parseJson } from '../sse/decode'
import type { ByteChunk, FinishReason, StreamBreak, StreamPart, UpstreamEnding } from '../stream-parts'
import { readResponsesUsage } from './convert-response'

type Json = Record<string, any>

/**
 * `ending`: told when the answer is whole (the terminal event) and when it failed (the reader of the
 * upstream's bytes then gives the upstream a short grace to end its body, or lets it go at once).
 */
export function decodeResponsesStream(ending?: UpstreamEnding): TransformStream<ByteChunk, StreamPart> {
  let ended = false
  let sawFunctionCall = false
  /** item id → tool index */
  const tools = new Map<string, number>()
  /** tool index → whether argument deltas arrived (else the done event carries them) */
  const streamedArguments = new Set<number>()
  let output: TransformStreamDefaultController<StreamPart>

  const fail = (message: string, why: StreamBreak) => {
    if (ended) return
    ended = true
    output.enqueue({ type: 'error', message, code: 'stream_aborted', why })
  }
  /** A failure the upstream itself reported (an error event, an unreadable one): the parts end now, and the upstream is let go. */
  const failNow = (message: string, why: StreamBreak) => {
    fail(message, why)
    ending?.letGo()
  }

  const onEvent = (event: EventSourceMessage) => {
    if (ended || event.data === '[DONE]') return
    const data = parseJson(event.data) as Json | undefined
    if (!data || typeof data !== 'object') return failNow('The upstream sent an unreadable stream event.', 'malformed')
    const type = String(data.type ?? event.event ?? '')
    switch (type) {
      case 'response.created':
        output.enqueue({ type: 'start', id: data.response?.id, model: data.response?.model, created: data.response?.created_at })
        return
      case 'response.output_text.delta':
        if (typeof data.delta === 'string' && data.delta) output.enqueue({ type: 'text-delta', delta: data.delta })
        return
      case 'response.refusal.delta':
        if (typeof data.delta === 'string' && data.delta) output.enqueue({ type: 'text-delta', delta: data.delta })
        return
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta':
        if (typeof data.delta === 'string' && data.delta) output.enqueue({ type: 'reasoning-delta', delta: data.delta })
        return
      case 'response.output_item.added':
        if (data.item?.type === 'function_call') {
          const index = tools.size
          tools.set(String(data.item.id ?? data.item.call_id), index)
          sawFunctionCall = true
          output.enqueue({ type: 'tool-input-start', index, id: String(data.item.call_id ?? data.item.id), name: String(data.item.name ?? '') })
        }
        return
      case 'response.function_call_arguments.delta': {
        const index = tools.get(String(data.item_id))
        if (index !== undefined && typeof data.delta === 'string' && data.delta) {
          streamedArguments.add(index)
          output.enqueue({ type: 'tool-input-delta', index, delta: data.delta })
        }
        return
      }
      case 'response.output_item.done': {
        // Some implementations send a function call's arguments only with the finished item.
        const index = data.item?.type === 'function_call' ? tools.get(String(data.item.id ?? data.item.call_id)) : undefined
        if (index !== undefined && !streamedArguments.has(index) && typeof data.item.arguments === 'string' && data.item.arguments) {
          output.enqueue({ type: 'tool-input-delta', index, delta: data.item.arguments })
        }
        return
      }
      case 'response.completed':
      case 'response.incomplete': {
        ended = true
        const response = data.response ?? {}
        const incomplete = type === 'response.incomplete' || response.status === 'incomplete'
        const reason: FinishReason = incomplete
          ? response.incomplete_details?.reason === 'content_filter'
            ? 'content_filter'
            : 'length'
          : sawFunctionCall
            ? 'tool_calls'
            : 'stop'
        output.enqueue({ type: 'finish', reason, usage: readResponsesUsage(response.usage) })
        ending?.answer()
        return
      }
      case 'response.failed':
        return failNow(String(data.response?.error?.message ?? 'The upstream response failed.'), 'error')
      case 'error':
        return failNow(String(data.error?.message ?? data.message ?? 'The upstream reported an error mid-stream.'), 'error')
      default:
        return
    }
  }

  return decodeSse<StreamPart>({
    start(controller) {
      output = controller
    },
    event: onEvent,
    broke(message, why) {
      fail(message, why)
    },
    end() {
      fail('The upstream stream ended before it was complete.', 'cut')
    },
  })
}
