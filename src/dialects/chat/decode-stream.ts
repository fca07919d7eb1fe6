/**
 * Chat SSE → stream parts. Reads content, reasoning (`reasoning_content`, `reasoning`), tool-call
 * fragments, the finish reason and usage (which may come after the finish chunk), comments and
 * vendor fields ignored. An upstream break, an in-stream error or a stream with no finish becomes
 * an `error` part; a clean end becomes `finish`.
 */
import type { EventSourceMessage } from 'eventsource-parser'
import { decodeSse, parseJson } from '../sse/decode'
import { mapChatFinishReason, readChatUsage } from './convert-response'
import type { ByteChunk, FinishReason, StreamPart, Usage } from '../stream-parts'

interface ChatChunk {
  id?: string
  model?: string
  created?: number
  error?: { message?: string; code?: unknown }
  choices?: {
    delta?: {
      content?: unknown
      reasoning_content?: unknown
      reasoning?: unknown
      reasoning_details?: { signature?: unknown }[]
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]
      refusal?: unknown
    }
    finish_reason?: unknown
  }[]
  usage?: unknown
}

export function decodeChatStream(): TransformStream<ByteChunk, StreamPart> {
  let started = false
  let finished = false
  let failed = false
  let finishReason: FinishReason | undefined
  let usage: Usage | undefined
  /** chat tool-call index → our part index */
  const tools = new Map<number, number>()
  let output: TransformStreamDefaultController<StreamPart>

  const finish = () => {
    if (finished || failed) return
    finished = true
    output.enqueue({ type: 'finish', reason: finishReason ?? 'stop', usage })
  }
  const fail = (message: string) => {
    if (finished || failed) return
    failed = true
    output.enqueue({ type: 'error', message, code: 'stream_aborted' })
  }

  const onEvent = (event: EventSourceMessage) => {
    if (finished || failed) return
    if (event.data === '[DONE]') return finish()
    const chunk = parseJson(event.data) as ChatChunk | undefined
    if (!chunk || typeof chunk !== 'object') return fail('The upstream sent an unreadable stream event.')
    if (chunk.error || event.event === 'error') return fail(chunk.error?.message ?? 'The upstream reported an error mid-stream.')
    if (!started && (chunk.id || chunk.model)) {
      started = true
      output.enqueue({ type: 'start', id: chunk.id || undefined, model: chunk.model || undefined, created: chunk.created })
    }
    const choice = chunk.choices?.[0]
    const delta = choice?.delta
    if (delta) {
      const reasoning = typeof delta.reasoning_content === 'string' ? delta.reasoning_content : typeof delta.reasoning === 'string' ? delta.reasoning : ''
      if (reasoning) output.enqueue({ type: 'reasoning-delta', delta: reasoning })
      for (const detail of delta.reasoning_details ?? []) {
        if (typeof detail?.signature === 'string' && detail.signature) output.enqueue({ type: 'reasoning-signature', signature: detail.signature })
      }
      if (typeof delta.content === 'string' && delta.content) output.enqueue({ type: 'text-delta', delta: delta.content })
      if (typeof delta.refusal === 'string' && delta.refusal) {
        output.enqueue({ type: 'text-delta', delta: delta.refusal })
        finishReason = 'refusal'
      }
      for (const call of delta.tool_calls ?? []) {
        const chatIndex = call.index ?? 0
        let index = tools.get(chatIndex)
        if (index === undefined) {
          index = tools.size
          tools.set(chatIndex, index)
          output.enqueue({ type: 'tool-input-start', index, id: call.id ?? `call_${crypto.randomUUID().slice(0, 8)}`, name: call.function?.name ?? '' })
        }
        if (call.function?.arguments) output.enqueue({ type: 'tool-input-delta', index, delta: call.function.arguments })
      }
    }
    if (choice?.finish_reason && finishReason !== 'refusal') finishReason = mapChatFinishReason(choice.finish_reason)
    const chunkUsage = readChatUsage(chunk.usage)
    if (chunkUsage) usage = chunkUsage
  }

  return decodeSse<StreamPart>({
    start(controller) {
      output = controller
    },
    event: onEvent,
    broke(message) {
      fail(message)
    },
    end() {
      // A stream that gave a finish reason but no [DONE] still counts as complete.
      if (finishReason !== undefined) finish()
      else fail('The upstream stream ended before it was complete.')
    },
  })
}
