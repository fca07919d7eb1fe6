/**
 * A guardrail rule of detector `moderation` (CONTRACT §17): the request's texts (as they go upstream,
 * masked) checked with a gateway's `/moderations` through the one upstream client, as a request of
 * the key of its own (stages/side-call.ts: its row in the request log). A category the rule names
 * that the gateway flags (a rule's `self-harm` covers `self-harm/intent`) is a finding; in enforce
 * mode it blocks the request. A check that cannot be made fails closed: the request is not sent.
 */
import type { GuardrailRule } from '../../../domain/guardrail-settings'
import { RouterError } from '../../../errors/router-error'
import type { AuthenticatedContext } from '../../request/context'
import type { InferenceDeps } from '../../types'
import { sideCall } from '../side-call'

/** The model each gateway with `/moderations` is asked with. */
const moderationModels: Record<string, string> = { openai: 'omni-moderation-latest', mistral: 'mistral-moderation-latest' }

/** The flagged categories of a moderation answer (every input's together); undefined when it is not one. */
export function flaggedCategories(value: unknown): Set<string> | undefined {
  const results = (value as { results?: unknown } | null)?.results
  if (!Array.isArray(results)) return undefined
  const flagged = new Set<string>()
  for (const result of results) {
    const categories = (result as { categories?: unknown } | null)?.categories
    if (typeof categories !== 'object' || categories === null) return undefined
    for (const [name, on] of Object.entries(categories)) if (on === true) flagged.add(name)
  }
  return flagged
}

/** The rule's categories among the flagged ones (a rule's category covers its sub-categories). */
export function matchedCategories(rule: GuardrailRule, flagged: ReadonlySet<string>): string[] {
  const named = rule.categories ?? []
  return [...flagged].filter((category) => named.some((name) => category === name || category.startsWith(`${name}/`)))
}

const unavailable = (rule: GuardrailRule, why: string) => new RouterError('guardrail_unavailable', `The moderation check of the guardrail rule '${rule.name}' could not be made (${why}); the request was not sent.`)

/** Checks the texts: the categories of the rule the gateway flagged, or the error that stops the request. */
export async function moderate(context: AuthenticatedContext, deps: InferenceDeps, rule: GuardrailRule, texts: readonly string[], deadlineAt: number, signal: AbortSignal | undefined): Promise<string[] | RouterError> {
  if (texts.length === 0) return []
  const provider = rule.providerKeyId === undefined ? undefined : context.snapshot.providers.get(rule.providerKeyId)
  if (!provider || provider.disabled || provider.workspaceId !== context.key.workspaceId) return unavailable(rule, 'its provider key is gone or disabled')
  const model = moderationModels[provider.gateway.id] ?? 'omni-moderation-latest'
  const input = { endpoint: 'moderations', provider, model, upstreamModel: model, path: '/moderations', body: { model, input: [...texts] }, pricing: 'free' as const }
  const result = await sideCall(context, deps, input, deadlineAt, signal, (value) => flaggedCategories(value) !== undefined)
  if (result.kind === 'refused') return unavailable(rule, "the key's limits do not admit the check now")
  if (result.kind === 'failed') return unavailable(rule, `the gateway ${provider.gateway.id} did not answer`)
  const flagged = result.status >= 200 && result.status < 300 ? flaggedCategories(result.value) : undefined
  if (!flagged) return unavailable(rule, `the gateway ${provider.gateway.id} answered ${result.status >= 200 && result.status < 300 ? 'something that is not a moderation result' : `HTTP ${result.status}`}`)
  return matchedCategories(rule, flagged)
}
