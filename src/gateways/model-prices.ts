/**
 * Model prices as a gateway's catalog lists them (CONTRACT §9 "Prices"): `pricing.prompt` and
 * `pricing.completion` of a model object, USD per token, a string or a number (OpenRouter's form),
 * and `pricing.input_cache_read` (OpenRouter's name), the price of a prompt token read from the
 * provider's prompt cache. A missing, negative (OpenRouter's "variable") or unreadable price is
 * unknown — never zero.
 */
import { usdToNano } from '../storage/money'

export interface ModelPricing {
  /** USD per prompt token; undefined when the catalog does not say. */
  prompt: number | undefined
  /** USD per completion token; undefined when the catalog does not say. */
  completion: number | undefined
  /** USD per cached prompt token; undefined when not listed (cached tokens are then priced as prompt tokens). */
  cacheRead?: number | undefined
  /**
   * The most completion tokens the model answers with, where its entry lists it (OpenRouter's
   * `top_provider.max_completion_tokens`, or `max_output_tokens` / `max_completion_tokens`): the
   * bound a spend cap reserves when the request sets none (CONTRACT §11).
   */
  maxOutput?: number | undefined
  /** Its context window in tokens, where listed (`context_length`): the most a prompt can hold. */
  context?: number | undefined
}

function usdPerToken(value: unknown): number | undefined {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN
  return Number.isFinite(number) && number >= 0 ? number : undefined
}

/** The prices a listed model object carries; undefined when it carries neither. */
export function readModelPricing(object: unknown): ModelPricing | undefined {
  if (typeof object !== 'object' || object === null) return undefined
  const pricing = (object as { pricing?: unknown }).pricing
  if (typeof pricing !== 'object' || pricing === null) return undefined
  const prompt = usdPerToken((pricing as { prompt?: unknown }).prompt)
  const completion = usdPerToken((pricing as { completion?: unknown }).completion)
  if (prompt === undefined && completion === undefined) return undefined
  const cacheRead = usdPerToken((pricing as { input_cache_read?: unknown }).input_cache_read)
  const listed: ModelPricing = cacheRead === undefined ? { prompt, completion } : { prompt, completion, cacheRead }
  const model = object as { top_provider?: { max_completion_tokens?: unknown; context_length?: unknown } | null; max_output_tokens?: unknown; max_completion_tokens?: unknown; context_length?: unknown }
  const top = typeof model.top_provider === 'object' && model.top_provider !== null ? model.top_provider : undefined
  const maxOutput = tokenLimit(top?.max_completion_tokens) ?? tokenLimit(model.max_completion_tokens) ?? tokenLimit(model.max_output_tokens)
  const context = tokenLimit(model.context_length) ?? tokenLimit(top?.context_length)
  if (maxOutput !== undefined) listed.maxOutput = maxOutput
  if (context !== undefined) listed.context = context
  return listed
}

/** A listed token limit: a whole number of at least 1 (a string of one, too); else none. */
function tokenLimit(value: unknown): number | undefined {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN
  return Number.isSafeInteger(number) && number >= 1 ? number : undefined
}

/** A stored model object (JSON text) → its prices. */
export function pricingOfStoredObject(text: string): ModelPricing | undefined {
  try {
    return readModelPricing(JSON.parse(text))
  } catch {
    return undefined
  }
}

/** Token counts an answer reported (usage), as the cost needs them. */
export interface ReportedUsage {
  /** Prompt tokens in all, cached ones included (as the OpenAI-style `usage` counts them). */
  input: number | undefined
  /** Completion tokens, reasoning included. */
  output: number | undefined
  /** Of the prompt tokens, those read from the prompt cache. */
  cachedInput: number | undefined
}

/**
 * What an answer cost in whole nano-dollars (CONTRACT §11, storage/money.ts), from the prices listed
 * for the model on the gateway that answered: prompt tokens at the prompt price, the cached ones
 * among them at the cache-read price where one is listed, completion tokens (reasoning included) at
 * the completion price. Undefined when a side that was used has no listed price: unknown, never
 * counted as 0.
 */
export function costOf(usage: ReportedUsage, pricing: ModelPricing | undefined): number | undefined {
  const input = usage.input ?? 0
  const output = usage.output ?? 0
  const cached = Math.min(usage.cachedInput ?? 0, input)
  let cost = 0
  if (input > 0) {
    if (pricing?.prompt === undefined) return undefined
    const cachedPrice = pricing.cacheRead ?? pricing.prompt
    cost += (input - cached) * pricing.prompt + cached * cachedPrice
  }
  if (output > 0) {
    if (pricing?.completion === undefined) return undefined
    cost += output * pricing.completion
  }
  return usdToNano(cost)
}
