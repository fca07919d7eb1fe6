/**
 * The continuation request of a broken stream (CONTRACT §16): the round's own request, plus the text
 * the client already got as the assistant's partial turn, to the plan's next target. Where the
 * target's gateway takes an assistant prefill (catalog data: `capabilities.prefill`), the partial
 * turn is the last message and the model goes on from it. Elsewhere (and on a Responses call, which
 * has no prefill) the partial turn is followed by a short user turn that asks for the rest only: a
 * model that rejects a prefill takes this form, and what it may still repeat is removed at the seam.
 */
import type { Prefill } from '../../../domain/gateway-definition'
import type { PlannedAttempt } from '../../routing/plan-route'
import type { RoutedCallInput, UpstreamCall } from '../../routing/routed-call'

/**
 * The user turn that asks for the rest of a cut message where no prefill is taken. It asks for the
 * same language, so an answer in another language than this text goes on in its own.
 */
export const continueInstruction =
  'Your previous message was cut off. Continue it from exactly where it stopped: write only the rest of it, in the same language and format, without repeating any of it and without any preamble or comment.'

/** The steps a continuation tries: the plan's attempts after the broken one, then those before it, then the broken one itself. */
export function continuationSteps(steps: readonly { kind: string }[], broken: PlannedAttempt): PlannedAttempt[] {
  const attempts = steps.filter((step): step is PlannedAttempt => step.kind === 'attempt')
  const at = attempts.indexOf(broken)
  if (at === -1) return [broken]
  return [...attempts.slice(at + 1), ...attempts.slice(0, at), broken]
}

/** How a step takes a prefill (false: not at all, or not on this call). */
export function prefillOf(step: PlannedAttempt): Prefill {
  return step.provider.gateway.capabilities.prefill
}

/** The round's call to a step, with the partial turn (`text`) and, without a prefill, the request for the rest. */
export function continuationCall(call: UpstreamCall, text: string, prefill: Prefill): UpstreamCall {
  const body = call.body
  if (text === '' || !body) return call
  if (call.path === '/chat/completions') {
    const messages = Array.isArray(body.messages) ? body.messages : []
    const partial: Record<string, unknown> = prefill === 'prefix' ? { role: 'assistant', content: text, prefix: true } : { role: 'assistant', content: text }
    const added = prefill ? [partial] : [partial, { role: 'user', content: continueInstruction }]
    return { path: call.path, method: call.method, body: { ...body, messages: [...messages, ...added] } }
  }
  if (call.path === '/responses') {
    const input = body.input
    const items = typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? input : []
    return { path: call.path, method: call.method, body: { ...body, input: [...items, { role: 'assistant', content: text }, { role: 'user', content: continueInstruction }] } }
  }
  return call
}

/** The routed call of a continuation: the round's, on these steps, with the partial turn (`prefill` false: never as a prefill). */
export function continuationInput(input: RoutedCallInput, steps: readonly PlannedAttempt[], text: string, prefill: boolean): RoutedCallInput {
  return {
    ...input,
    steps,
    preference: undefined,
    relayKind: undefined,
    requestFor: (step) => continuationCall(input.requestFor(step), text, prefill ? prefillOf(step) : false),
  }
}
