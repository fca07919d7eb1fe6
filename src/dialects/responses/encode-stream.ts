/**
 * Stream parts → Responses SSE (translated mode): one `response.created`, the item events with
 * continuous `sequence_number` and `output_index`, and exactly one terminal event:
 * `response.completed`, `response.incomplete`, or — on a mid-stream failure — an `error` event
 * followed by `response.failed`, as the real API sends them
 * (the vendor's recorded stream of an insufficient-quota error).
 */
import { sseComment, sseEvent } from '../sse/encode'
import type { StreamPart, Usage } from '../stream-parts'
import { outputItemIds, outputText, responseEnvelope, writeResponsesUsage, type ResponseShell } from './convert-response'

type Json = Record<string, unknown>

/** The `error` event of a failed Responses stream, in the real API's nested form. */
export function streamErrorEvent(sequence: number, code: string, message: string): Uint8Array {
  return sseEvent('error', { type: 'error', sequence_number: sequence, error: { type: 'server_error', code, message, param: null } })
}

/** The terminal `response.failed`: the response as far as it got, with the error on it. */
export function failedResponseEvent(response: Json, sequence: number, code: string, message: string): Uint8Array {
  const failed = { ...response, status: 'failed', completed_at: null, error: { code, message } }
  return sseEvent('response.failed', { type: 'response.failed', sequence_number: sequence, response: failed })
}

export function encodeResponsesStream(shell: ResponseShell, extras: { onTerminal?: (response: Json) => void } = {}): TransformStream<StreamPart, Uint8Array> {
  let sequence = 0
  let outputIndex = -1
  let ended = false
  const ids = outputItemIds()
  const items: Json[] = []
  type Open =
    | { kind: 'message'; item: Json; text: string }
    | { kind: 'reasoning'; item: Json; text: string }
    | { kind: 'tool'; item: Json; arguments: string; index: number }
  let open: Open | undefined
  let controller!: TransformStreamDefaultController<Uint8Array>
  const emit = (type: string, body: Json) => controller.enqueue(sseEvent(type, { type, sequence_number: sequence++, ...body }))

  /** The open item's content so far, with the given status. */
  const settle = (current: Open, status: 'completed' | 'incomplete') => {
    const item = current.item
    if (current.kind === 'message') Object.assign(item, { status, content: [outputText(current.text)] })
    else if (current.kind === 'reasoning') Object.assign(item, { summary: [{ type: 'summary_text', text: current.text }] })
    else Object.assign(item, { status, arguments: current.arguments })
    return item
  }

  const close = () => {
    if (!open) return
    const item = open.item
    if (open.kind === 'message') {
      emit('response.output_text.done', { item_id: item.id, output_index: outputIndex, content_index: 0, text: open.text, logprobs: [] })
      emit('response.content_part.done', { item_id: item.id, output_index: outputIndex, content_index: 0, part: outputText(open.text) })
    } else if (open.kind === 'reasoning') {
      emit('response.reasoning_summary_text.done', { item_id: item.id, output_index: outputIndex, summary_index: 0, text: open.text })
      emit('response.reasoning_summary_part.done', { item_id: item.id, output_index: outputIndex, summary_index: 0, part: { type: 'summary_text', text: open.text } })
    } else {
      emit('response.function_call_arguments.done', { item_id: item.id, output_index: outputIndex, arguments: open.arguments })
    }
    emit('response.output_item.done', { output_index: outputIndex, item: settle(open, 'completed') })
    items.push(item)
    open = undefined
  }

  const openMessage = () => {
    if (open?.kind === 'message') return open
    close()
    outputIndex++
    const item: Json = { id: ids.message, type: 'message', status: 'in_progress', content: [], role: 'assistant' }
    emit('response.output_item.added', { output_index: outputIndex, item: { ...item } })
    emit('response.content_part.added', { item_id: item.id, output_index: outputIndex, content_index: 0, part: outputText('') })
    open = { kind: 'message', item, text: '' }
    return open
  }

  const terminal = (usage: Usage | undefined, incompleteReason: string | undefined, attached: Json | undefined) => {
    close()
    ended = true
    const response = responseEnvelope(shell, incompleteReason ? 'incomplete' : 'completed') as Json
    if (incompleteReason) response.incomplete_details = { reason: incompleteReason }
    response.output = items
    if (usage) response.usage = writeResponsesUsage(usage)
    // Attached fields (CONTRACT §7) go in the terminal event's response object, not a new event.
    if (attached) Object.assign(response, attached)
    extras.onTerminal?.(response)
    emit(incompleteReason ? 'response.incomplete' : 'response.completed', { response })
  }

  const fail = (code: string, message: string) => {
    ended = true
    // The item that was open when the stream broke is part of the failed response, unfinished.
    const output = open ? [...items, settle(open, 'incomplete')] : items
    const response = { ...responseEnvelope(shell, 'failed'), output } as Json
    controller.enqueue(streamErrorEvent(sequence++, code, message))
    controller.enqueue(failedResponseEvent(response, sequence++, code, message))
  }

  return new TransformStream<StreamPart, Uint8Array>({
    start(streamController) {
      controller = streamController
      const created = responseEnvelope(shell, 'in_progress')
      emit('response.created', { response: created })
      emit('response.in_progress', { response: created })
    },
    transform(part) {
      // One terminal event: anything after it (a late error, say) is not the client's concern.
      if (ended) return
      switch (part.type) {
        case 'start':
        case 'reasoning-signature':
          return
        case 'text-delta': {
          const message = openMessage()
          message.text += part.delta
          emit('response.output_text.delta', { item_id: message.item.id, output_index: outputIndex, content_index: 0, delta: part.delta, logprobs: [] })
          return
        }
        case 'reasoning-delta': {
          if (open?.kind !== 'reasoning') {
            close()
            outputIndex++
            const item: Json = { id: ids.reasoning, type: 'reasoning', summary: [] }
            emit('response.output_item.added', { output_index: outputIndex, item: { ...item } })
            emit('response.reasoning_summary_part.added', { item_id: item.id, output_index: outputIndex, summary_index: 0, part: { type: 'summary_text', text: '' } })
            open = { kind: 'reasoning', item, text: '' }
          }
          open.text += part.delta
          emit('response.reasoning_summary_text.delta', { item_id: open.item.id, output_index: outputIndex, summary_index: 0, delta: part.delta })
          return
        }
        case 'tool-input-start': {
          close()
          outputIndex++
          const item: Json = { id: ids.functionCall(), type: 'function_call', status: 'in_progress', arguments: '', call_id: part.id, name: part.name }
          emit('response.output_item.added', { output_index: outputIndex, item: { ...item } })
          open = { kind: 'tool', item, arguments: '', index: part.index }
          return
        }
        case 'tool-input-delta': {
          if (open?.kind === 'tool' && open.index === part.index) {
            open.arguments += part.delta
            emit('response.function_call_arguments.delta', { item_id: open.item.id, output_index: outputIndex, delta: part.delta })
          }
          return
        }
        case 'finish':
          if (part.reason === 'length') return terminal(part.usage, 'max_output_tokens', part.extras)
          if (part.reason === 'content_filter') return terminal(part.usage, 'content_filter', part.extras)
          return terminal(part.usage, undefined, part.extras)
        case 'error':
          return fail(part.code, part.message)
        case 'comment':
          controller.enqueue(sseComment(part.text))
          return
        default: {
          const exhaustive: never = part
          return exhaustive
        }
      }
    },
  })
}
