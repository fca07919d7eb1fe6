/**
 * A buffered answer and its stream, each made from the other: the stream parts that write an
 * assistant reply out (a stored answer sent again as a stream), and the reply the parts of a stream
 * add up to (a streamed answer kept as a buffered one). Text goes out in pieces of a few hundred
 * characters, so a client reads a replayed answer as it reads any stream.
 */
import type { AssistantResult } from './assistant-result'
import type { StreamPart } from './stream-parts'

const pieceLength = 256

function* pieces(text: string): Generator<string> {
  for (let at = 0; at < text.length; at += pieceLength) yield text.slice(at, at + pieceLength)
}

/** The parts of a reply, start to finish (`start` carries no id: the dialect's encoder gives the answer its own). */
export function partsOf(reply: AssistantResult): StreamPart[] {
  const parts: StreamPart[] = [{ type: 'start', model: reply.model }]
  for (const delta of pieces(reply.reasoning)) parts.push({ type: 'reasoning-delta', delta })
  if (reply.reasoningSignature !== undefined) parts.push({ type: 'reasoning-signature', signature: reply.reasoningSignature })
  for (const delta of pieces(reply.text)) parts.push({ type: 'text-delta', delta })
  reply.toolCalls.forEach((call, index) => {
    parts.push({ type: 'tool-input-start', index, id: call.id, name: call.name })
    if (call.arguments !== '') parts.push({ type: 'tool-input-delta', index, delta: call.arguments })
  })
  parts.push({ type: 'finish', reason: reply.finishReason, usage: reply.usage })
  return parts
}

/** Adds parts up to a reply; undefined until the parts end with a finish (a stream cut short is no answer). */
export class ReplyAssembler {
  private id = ''
  private model = ''
  private created = Math.floor(Date.now() / 1000)
  private text = ''
  private reasoning = ''
  private signature: string | undefined
  private readonly calls: { id: string; name: string; arguments: string }[] = []
  reply: AssistantResult | undefined

  add(part: StreamPart) {
    switch (part.type) {
      case 'start':
        if (part.id) this.id = part.id
        if (part.model) this.model = part.model
        if (part.created) this.created = part.created
        return
      case 'text-delta':
        this.text += part.delta
        return
      case 'reasoning-delta':
        this.reasoning += part.delta
        return
      case 'reasoning-signature':
        this.signature = part.signature
        return
      case 'tool-input-start':
        this.calls[part.index] = { id: part.id, name: part.name, arguments: '' }
        return
      case 'tool-input-delta': {
        const call = this.calls[part.index]
        if (call) call.arguments += part.delta
        return
      }
      case 'finish':
        this.reply = {
          id: this.id,
          model: this.model,
          created: this.created,
          text: this.text,
          reasoning: this.reasoning,
          reasoningSignature: this.signature,
          toolCalls: this.calls.filter((call) => call !== undefined),
          finishReason: part.reason,
          usage: part.usage,
        }
        return
      case 'error':
      case 'comment':
        return
      default: {
        const exhaustive: never = part
        return exhaustive
      }
    }
  }
}
