/** Stream parts → chat SSE (`chat.completion.chunk` records ending `data: [DONE]`). */
import { sseComment, sseData } from '../sse/encode'
import type { StreamPart } from '../stream-parts'
import { writeChatUsage } from './convert-response'

/**
 * `withUsage` false: the usage chunk is left out (the router asked the upstream for usage on a
 * limited key's stream; the client did not, CONTRACT §11); the finish chunk carries the attached fields then.
 */
export function encodeChatStream(fallback: { id: string; model: string }, withUsage = true): TransformStream<StreamPart, Uint8Array> {
  let id = fallback.id
  let model = fallback.model
  let created = Math.floor(Date.now() / 1000)
  let opened = false
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  })
  const open = (controller: TransformStreamDefaultController<Uint8Array>) => {
    if (opened) return
    opened = true
    controller.enqueue(sseData(chunk({ role: 'assistant', content: '' })))
  }
  return new TransformStream<StreamPart, Uint8Array>({
    transform(part, controller) {
      switch (part.type) {
        case 'start':
          if (part.id) id = part.id
          if (part.model) model = part.model
          if (part.created) created = part.created
          open(controller)
          return
        case 'text-delta':
          open(controller)
          controller.enqueue(sseData(chunk({ content: part.delta })))
          return
        case 'reasoning-delta':
          open(controller)
          controller.enqueue(sseData(chunk({ reasoning_content: part.delta })))
          return
        case 'reasoning-signature':
          // Chat has no field for reasoning signatures; they are dropped on this path.
          return
        case 'tool-input-start':
          open(controller)
          controller.enqueue(
            sseData(chunk({ tool_calls: [{ index: part.index, id: part.id, type: 'function', function: { name: part.name, arguments: '' } }] })),
          )
          return
        case 'tool-input-delta':
          controller.enqueue(sseData(chunk({ tool_calls: [{ index: part.index, function: { arguments: part.delta } }] })))
          return
        case 'finish': {
          open(controller)
          // Attached fields (CONTRACT §7) are extra fields of the last chunk before [DONE].
          const last = part.extras
          const finishChunk = chunk({}, part.reason === 'refusal' ? 'content_filter' : part.reason)
          if (part.usage && withUsage) {
            controller.enqueue(sseData(finishChunk))
            controller.enqueue(sseData({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: writeChatUsage(part.usage), ...last }))
          } else controller.enqueue(sseData(last ? { ...finishChunk, ...last } : finishChunk))
          controller.enqueue(sseData('[DONE]'))
          return
        }
        case 'error':
          controller.enqueue(sseData({ error: { message: part.message, type: 'api_error', code: part.code } }))
          return
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
