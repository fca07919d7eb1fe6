/**
 * Steering (SPEC "Steering"): a system message put in front of every request of a key, the key's own
 * or else its workspace's. Each dialect places it where its shape keeps such a message (chat's first
 * system message, Responses' instructions, a batch item's body), reading it from the key's compiled
 * chain: the stage sets it there, decided when the key's entry is built.
 */
import type { Stage } from './stage'

/** The key's message, else its workspace's (`??`: a key's own message, even empty, stands for the key; an empty one steers nothing). */
const steeringOf = (key: { steeringMessage: string | null; workspace: { steeringMessage: string | null } | undefined }) => (key.steeringMessage ?? key.workspace?.steeringMessage) || undefined

export const steeringStage: Stage = {
  name: 'steering',
  appliesTo: (key) => steeringOf(key) !== undefined,
  settings: (key) => ({ steering: steeringOf(key) }),
}
