/**
 * A key's spend caps and rate limits (CONTRACT §11): requests and tokens per minute, USD per UTC day
 * and per UTC calendar month. Each is a positive number or null (no limit); a key with none set has
 * no limits at all, and its requests take the path they took before limits existed.
 */

export interface KeyLimits {
  readonly requestsPerMinute: number | null
  readonly tokensPerMinute: number | null
  readonly usdPerDay: number | null
  readonly usdPerMonth: number | null
}

/** The wire names, in the order the key object shows them. */
export const limitFields = ['requests_per_minute', 'tokens_per_minute', 'usd_per_day', 'usd_per_month'] as const
export type LimitField = (typeof limitFields)[number]
export type LimitsView = Record<LimitField, number | null>

const property: Record<LimitField, keyof KeyLimits> = {
  requests_per_minute: 'requestsPerMinute',
  tokens_per_minute: 'tokensPerMinute',
  usd_per_day: 'usdPerDay',
  usd_per_month: 'usdPerMonth',
}

export const noLimitsView: LimitsView = Object.freeze({ requests_per_minute: null, tokens_per_minute: null, usd_per_day: null, usd_per_month: null })

/** The stored JSON (wire names) → the limits; undefined when none is set (or the text is unreadable). */
export function parseStoredLimits(text: string | null | undefined): KeyLimits | undefined {
  if (!text) return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const view = value as Record<string, unknown>
  const read = (name: LimitField) => (typeof view[name] === 'number' && Number.isFinite(view[name]) && (view[name] as number) > 0 ? (view[name] as number) : null)
  const limits: KeyLimits = {
    requestsPerMinute: read('requests_per_minute'),
    tokensPerMinute: read('tokens_per_minute'),
    usdPerDay: read('usd_per_day'),
    usdPerMonth: read('usd_per_month'),
  }
  return hasAnyLimit(limits) ? Object.freeze(limits) : undefined
}

export function hasAnyLimit(limits: KeyLimits): boolean {
  return limits.requestsPerMinute !== null || limits.tokensPerMinute !== null || limits.usdPerDay !== null || limits.usdPerMonth !== null
}

/** The stored JSON as the key object shows it (every field, null where not set). */
export function presentStoredLimits(text: string | null | undefined): LimitsView {
  const limits = parseStoredLimits(text)
  if (!limits) return { ...noLimitsView }
  const view = {} as LimitsView
  for (const name of limitFields) view[name] = limits[property[name]]
  return view
}

/** Why a `limits` value is refused, naming the field (CONTRACT §11); undefined when it is good. */
export function limitsProblem(value: unknown): string | undefined {
  if (value === null) return undefined
  if (typeof value !== 'object' || Array.isArray(value)) return 'Invalid limits: expected an object with requests_per_minute, tokens_per_minute, usd_per_day or usd_per_month, or null.'
  for (const [name, field] of Object.entries(value as Record<string, unknown>)) {
    if (!(limitFields as readonly string[]).includes(name)) return `Invalid limits.${name}: unknown field; expected requests_per_minute, tokens_per_minute, usd_per_day or usd_per_month.`
    if (field === null) continue
    if (name === 'requests_per_minute' || name === 'tokens_per_minute') {
      if (typeof field !== 'number' || !Number.isSafeInteger(field) || field < 1) return `Invalid limits.${name}: expected a whole number of at least 1, or null for no limit.`
    } else if (typeof field !== 'number' || !Number.isFinite(field) || field <= 0) return `Invalid limits.${name}: expected a positive number, or null for no limit.`
  }
  return undefined
}

/**
 * The stored JSON after a change (checked by limitsProblem first): fields not named stay, null clears
 * one, and `null` for the whole clears them all. Null when none is left set.
 */
export function mergeLimits(stored: string | null, change: Record<string, unknown> | null): string | null {
  if (change === null) return null
  const view = presentStoredLimits(stored)
  for (const name of limitFields) if (name in change) view[name] = change[name] as number | null
  return limitFields.some((name) => view[name] !== null) ? JSON.stringify(view) : null
}
