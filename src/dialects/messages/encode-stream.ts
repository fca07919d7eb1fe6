/**
 * Stream parts → messages-dialect SSE: `message_start`, `content_block_start/delta/stop` for
 * thinking, text and tool-use blocks, `message_delta` with real `input_tokens`/`output_tokens`,
 * `message_stop`; `ping` after 10 s of silence; `event: error` on a mid-stream failure.
 */
import { sseComment, sseEvent } from '../sse/encode'
import type { StreamPart } from '../stream-parts'
import { messageId } from './convert-response'
import { detectStopSequence, mapStopReason } from './map-stop-reason'

export const pingAfterSilenceMs = 10_000

/**
 * `inputEstimate`: the prompt's tokens as the count_tokens estimator sees them, for `message_start`
 * (the real counts come with `message_delta`, SPEC; clients such as LangChain read the prompt count
 * from `message_start`, as Anthropic's API fills it).
 */
export function encodeMessagesStream(requestedModel: string, stopSequences: readonly string[] | undefined, silenceMs = pingAfterSilenceMs, inputEstimate = 0, omitThinking = false): TransformStream<StreamPart, Uint8Array> {
  let controller!: TransformStreamDefaultController<Uint8Array>
  let started = false
  let blockIndex = -1
  let openBlock: 'thinking' | 'text' | 'tool' | undefined
  let openTool: number | undefined
  let signature: string | undefined
  let textTail = ''
  let ended = false
  let timer: ReturnType<typeof setTimeout> | undefined

  const emit = (event: string, data: Record<string, unknown>) => {
    controller.enqueue(sseEvent(event, { type: event, ...data }))
    armPing()
  }
  const armPing = () => {
    if (timer) clearTimeout(timer)
    if (ended) return
    timer = setTimeout(() => {
      if (ended) return
      controller.enqueue(sseEvent('ping', { type: 'ping' }))
      armPing()
    }, silenceMs)
  }
  const start = (id?: string) => {
    if (started) return
    started = true
    emit('message_start', {
      message: {
        id: messageId(id),
        type: 'message',
        role: 'assistant',
        model: requestedModel,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: inputEstimate, output_tokens: 0 },
      },
    })
  }
  const closeBlock = () => {
    if (openBlock === undefined) return
    if (openBlock === 'thinking' && signature) emit('content_block_delta', { index: blockIndex, delta: { type: 'signature_delta', signature } })
    emit('content_block_stop', { index: blockIndex })
    openBlock = undefined
    openTool = undefined
  }
  const openNew = (kind: 'thinking' | 'text' | 'tool', contentBlock: Record<string, unknown>) => {
    closeBlock()
    blockIndex++
    openBlock = kind
    emit('content_block_start', { index: blockIndex, content_block: contentBlock })
  }
  const stop = () => {
    ended = true
    if (timer) clearTimeout(timer)
  }

  return new TransformStream<StreamPart, Uint8Array>({
    start(streamController) {
      controller = streamController
      armPing()
    },
    transform(part) {
      if (ended) return
      switch (part.type) {
        case 'start':
          return start(part.id)
        case 'reasoning-delta':
          start()
          if (openBlock !== 'thinking') openNew('thinking', { type: 'thinking', thinking: '', signature: '' })
          // thinking.display 'omitted': the block and its signature, not its text.
          if (omitThinking) return
          return emit('content_block_delta', { index: blockIndex, delta: { type: 'thinking_delta', thinking: part.delta } })
        case 'reasoning-signature':
          signature = part.signature
          return
        case 'text-delta':
          start()
          if (openBlock !== 'text') openNew('text', { type: 'text', text: '' })
          textTail = (textTail + part.delta).slice(-256)
          return emit('content_block_delta', { index: blockIndex, delta: { type: 'text_delta', text: part.delta } })
        case 'tool-input-start':
          start()
          openNew('tool', { type: 'tool_use', id: part.id, name: part.name, input: {} })
          openTool = part.index
          return
        case 'tool-input-delta':
          if (openBlock === 'tool' && openTool === part.index) emit('content_block_delta', { index: blockIndex, delta: { type: 'input_json_delta', partial_json: part.delta } })
          return
        case 'finish': {
          start()
          closeBlock()
          const stopSequence = part.reason === 'stop' ? detectStopSequence(textTail, stopSequences) : undefined
          emit('message_delta', {
            delta: { stop_reason: mapStopReason(part.reason, stopSequence), stop_sequence: stopSequence ?? null },
            usage: { input_tokens: part.usage?.inputTokens ?? 0, output_tokens: part.usage?.outputTokens ?? 0 },
            // Attached fields (CONTRACT §7) are extra fields of message_delta.
            ...part.extras,
          })
          emit('message_stop', {})
          return stop()
        }
        case 'error':
          controller.enqueue(sseEvent('error', { type: 'error', error: { type: 'api_error', message: part.message } }))
          return stop()
        case 'comment':
          controller.enqueue(sseComment(part.text))
          return
        default: {
          const exhaustive: never = part
          return exhaustive
        }
      }
    },
    flush() {
      stop()
    },
  })
}
