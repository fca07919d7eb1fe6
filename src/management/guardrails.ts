/**
 * Guardrails' management rule (CONTRACT §17): a key's `guardrails` setting, set whole (its checks are
 * the key's, keys.ts, with a moderation rule's provider key), as continuation's is (continuation.ts).
 */
import type { Actor, ManagementDeps } from './context'
import { setKeySetting, type KeyView } from './keys'

export interface SetGuardrailsInput {
  id: string
  /** The whole setting, or null (off). */
  guardrails: unknown
}

/** Sets a key's guardrails (the CLI's actor acts in the key's own workspace). Answers the key. */
export function setKeyGuardrails(deps: ManagementDeps, actor: Actor, input: SetGuardrailsInput): KeyView {
  return setKeySetting(deps, actor, input.id, 'guardrails', input.guardrails)
}
