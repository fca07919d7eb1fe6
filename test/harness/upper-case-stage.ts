/**
 * A toy stage (docs/ARCHITECTURE.md, "A feature a key can turn on"): it upper-cases the answer's
 * text, buffered and part by part, for the keys a test turns it on for. One file, and one line to
 * register it (`registerStage(upperCaseStage)`): the answer path knows nothing of it.
 */
import type { Stage } from '../../src/pipeline/stages/stage'

/** The ids of the keys the stage applies to (a test adds them before the keys' entries are built). */
export const shoutingKeys = new Set<string>()

export const upperCaseStage: Stage = {
  name: 'upper-case',
  appliesTo: (key) => shoutingKeys.has(key.id),
  open: () => ({
    name: 'upper-case',
    transformReply: (reply) => ({ ...reply, text: reply.text.toUpperCase() }),
    transformParts: () =>
      new TransformStream({
        transform(part, controller) {
          controller.enqueue(part.type === 'text-delta' ? { ...part, delta: part.delta.toUpperCase() } : part)
        },
      }),
    logRecord: () => ({ shouted: true }),
  }),
}
