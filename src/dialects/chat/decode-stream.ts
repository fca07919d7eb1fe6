/**
 * Chat SSE → stream parts. Reads content, reasoning (`reasoning_content`, `reasoning`), tool-call
 * fragments, the finish reason and usage (which may come after the finish chunk), comments and
 * vendor fields ignored. An upstream break, an in-stream error or a stream with no finish becomes
 * an `error` part; a clean end becomes `finish`. The answer is whole once every choice gave its
 * finish reason: an end without `[DONE]` after that (or a break, or an upstream let go after the
 * grace) is a clean end. An in-stream error ends the parts at once and lets the upstream go.
 */
import type { EventSourceMessage } from 'eventsource-parser'
import { decodeSse, parseJson } from '../sse/decode'
import { mapChatFinishReason, readChatUsage } from './convert-response'
import type { ByteChunk, FinishReason, StreamBreak, StreamPart, UpstreamEnding, Usage } from '../stream-parts'

interface ChatChunk {
  id?: string
  model?: string
  created?: number
  error?: { message?: string; code?: unknown }
  choices?: {
    index?: unknown
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

/**
 * `ending`: told when the answer is whole and when it failed (the reader of the upstream's bytes
 * then gives the upstream a short grace, or lets it go at once).
 */
export function decodeChatStream(ending?: UpstreamEnding): TransformStream<ByteChunk, StreamPart> {
  let started = false
  let finished = false
  let failed = false
  let finishReason: FinishReason | undefined
  let usage: Usage | undefined
  /** chat tool-call index → our part index */
  const tools = new Map<number, number>()
  /** Choice indexes that gave their finish reason, and those seen that have not (yet). */
  const finishedChoices = new Set<number>()
  const unfinishedChoices = new Set<number>()
  let output: TransformStreamDefaultController<StreamPart>

  /** Every choice seen gave its finish reason (n > 1: each of them). */
  const answered = () => finishedChoices.size > 0 && unfinishedChoices.size === 0

  const finish = () => {
    if (finished || failed) return
    finished = true
    output.enqueue({ type: 'finish', reason: finishReason ?? 'stop', usage })
  }
  const fail = (message: string, why: StreamBreak) => {
    if (finished || failed) return
    failed = true
    output.enqueue(usage ? { type: 'error', message, code: 'stream_aborted', why, usage } : { type: 'error', message, code: 'stream_aborted', why })
  }
  /** A failure the upstream itself reported (an error event, an unreadable one): the parts end now, and the upstream is let go. */
  const failNow = (message: string, why: StreamBreak) => {
    fail(message, why)
    ending?.letGo()
  }

  const onEvent = (event: EventSourceMessage) => {
    if (finished || failed) return
    if (event.data === '[DONE]') {
      finish()
      ending?.answer()
      return
    }
    const chunk = parseJson(event.data) as ChatChunk | undefined
    if (!chunk || typeof chunk !== 'object') return failNow('The upstream sent an unreadable stream event.', 'malformed')
    if (chunk.error || event.event === 'error') return failNow(chunk.error?.message ?? 'The upstream reported an error mid-stream.', 'error')
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
    const choices = chunk.choices
    if (Array.isArray(choices)) {
      for (let position = 0; position < choices.length; position++) {
        const seen = choices[position]
        const index = typeof seen?.index === 'number' ? seen.index : position
        if (seen?.finish_reason) {
          finishedChoices.add(index)
          unfinishedChoices.delete(index)
        } else if (!finishedChoices.has(index)) unfinishedChoices.add(index)
      }
      if (answered()) ending?.answer()
    }
  }

  return decodeSse<StreamPart>({
    start(controller) {
      output = controller
    },
    event: onEvent,
    broke(message, why) {
      // What breaks after a whole answer (every choice finished) is not the client's concern.
      if (answered()) finish()
      else fail(message, why)
    },
    end() {
      // A stream whose every choice gave its finish reason is whole without [DONE] (SPEC "Stream
      // events": only a stream that breaks before its end is stream_aborted).
      if (answered()) finish()
      else fail('The upstream stream ended before it was complete.', 'cut')
    },
  })
}
