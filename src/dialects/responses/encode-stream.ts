/**
 * Stream parts → Responses SSE (translated mode): one `response.created`, the item events with
 * continuous `sequence_number` and `output_index`, one terminal event (`response.completed` or
 * `response.incomplete`), or an `error` event on a mid-stream failure.
 */
import { sseEvent } from '../sse/encode'
import type { StreamPart, Usage } from '../stream-parts'
import { outputItemIds, responseEnvelope, writeResponsesUsage, type ResponseShell } from './convert-response'

type Json = Record<string, unknown>

export function encodeResponsesStream(shell: ResponseShell, extras: { onTerminal?: (response: Json) => void } = {}): TransformStream<StreamPart, Uint8Array> {
  let sequence = 0
  let outputIndex = -1
  const ids = outputItemIds()
  const items: Json[] = []
  type Open =
    | { kind: 'message'; item: Json; text: string }
    | { kind: 'reasoning'; item: Json; text: string }
    | { kind: 'tool'; item: Json; arguments: string; index: number }
  let open: Open | undefined
  const toolItems = new Map<number, Json>()
  let controller!: TransformStreamDefaultController<Uint8Array>
  const emit = (type: string, body: Json) => controller.enqueue(sseEvent(type, { type, sequence_number: sequence++, ...body }))

  const close = () => {
    if (!open) return
    const item = open.item
    if (open.kind === 'message') {
      emit('response.output_text.done', { item_id: item.id, output_index: outputIndex, content_index: 0, text: open.text })
      const part = { type: 'output_text', text: open.text, annotations: [] }
      emit('response.content_part.done', { item_id: item.id, output_index: outputIndex, content_index: 0, part })
      Object.assign(item, { status: 'completed', content: [part] })
    } else if (open.kind === 'reasoning') {
      emit('response.reasoning_summary_text.done', { item_id: item.id, output_index: outputIndex, summary_index: 0, text: open.text })
      const part = { type: 'summary_text', text: open.text }
      emit('response.reasoning_summary_part.done', { item_id: item.id, output_index: outputIndex, summary_index: 0, part })
      Object.assign(item, { summary: [part] })
    } else {
      emit('response.function_call_arguments.done', { item_id: item.id, output_index: outputIndex, arguments: open.arguments })
      Object.assign(item, { status: 'completed', arguments: open.arguments })
    }
    emit('response.output_item.done', { output_index: outputIndex, item })
    items.push(item)
    open = undefined
  }

  const openMessage = () => {
    if (open?.kind === 'message') return open
    close()
    outputIndex++
    const item: Json = { id: ids.message, type: 'message', status: 'in_progress', role: 'assistant', content: [] }
    emit('response.output_item.added', { output_index: outputIndex, item: { ...item } })
    emit('response.content_part.added', { item_id: item.id, output_index: outputIndex, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } })
    open = { kind: 'message', item, text: '' }
    return open
  }

  const terminal = (usage: Usage | undefined, incompleteReason: string | undefined) => {
    close()
    const response = responseEnvelope(shell, incompleteReason ? 'incomplete' : 'completed') as Json
    if (incompleteReason) response.incomplete_details = { reason: incompleteReason }
    response.output = items
    if (usage) response.usage = writeResponsesUsage(usage)
    extras.onTerminal?.(response)
    emit(incompleteReason ? 'response.incomplete' : 'response.completed', { response })
  }

  return new TransformStream<StreamPart, Uint8Array>({
    start(streamController) {
      controller = streamController
      const created = responseEnvelope(shell, 'in_progress')
      emit('response.created', { response: created })
      emit('response.in_progress', { response: created })
    },
    transform(part) {
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
          const item: Json = { id: ids.functionCall(), type: 'function_call', status: 'in_progress', call_id: part.id, name: part.name, arguments: '' }
          toolItems.set(part.index, item)
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
          if (part.reason === 'length') return terminal(part.usage, 'max_output_tokens')
          if (part.reason === 'content_filter') return terminal(part.usage, 'content_filter')
          return terminal(part.usage, undefined)
        case 'error':
          controller.enqueue(sseEvent('error', { type: 'error', sequence_number: sequence++, code: part.code, message: part.message, param: null }))
          return
        default: {
          const exhaustive: never = part
          return exhaustive
        }
      }
    },
  })
}
