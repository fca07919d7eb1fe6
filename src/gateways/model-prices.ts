/**
 * Model prices as a gateway's catalog lists them (CONTRACT §9 "Prices"): `pricing.prompt` and
 * `pricing.completion` of a model object, USD per token, a string or a number (OpenRouter's form).
 * A missing, negative (OpenRouter's "variable") or unreadable price is unknown — never zero.
 */

export interface ModelPricing {
  /** USD per prompt token; undefined when the catalog does not say. */
  prompt: number | undefined
  /** USD per completion token; undefined when the catalog does not say. */
  completion: number | undefined
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
  return prompt === undefined && completion === undefined ? undefined : { prompt, completion }
}

/** A stored model object (JSON text) → its prices. */
export function pricingOfStoredObject(text: string): ModelPricing | undefined {
  try {
    return readModelPricing(JSON.parse(text))
  } catch {
    return undefined
  }
}
