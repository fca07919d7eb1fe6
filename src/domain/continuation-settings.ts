/**
 * A key's mid-stream continuation setting (CONTRACT §16): off (null, the default: a stream that
 * breaks ends with SPEC's in-stream error), or how many times a broken stream may be continued by
 * the next target of the plan. Stored as JSON with the wire names and the default filled in; a key
 * without one never continues.
 */
import { presentStoredSetting, storedSetting, type SettingCodec } from './stored-setting'

export interface ContinuationSettings {
  /** How many continuations one answer may take, 1 to 3. */
  readonly maxHops: number
}

/** The setting as the key object shows it (wire names, the default filled in). */
export interface ContinuationView {
  max_hops: number
}

export const defaultContinuationHops = 1
export const maxContinuationHops = 3

const continuationFields = ['max_hops'] as const

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Why a `continuation` value is refused, naming the field (as the cache's, cache-settings.ts);
 * undefined when it is good. Null turns continuation off; an object is the whole setting (`max_hops`
 * not named takes its default).
 */
export function continuationProblem(value: unknown): string | undefined {
  if (value === null) return undefined
  if (!isObject(value)) return 'Invalid continuation: expected an object {max_hops}, or null to turn continuation off.'
  for (const name of Object.keys(value)) {
    if (!(continuationFields as readonly string[]).includes(name)) return `Invalid continuation.${name}: unknown field; expected max_hops.`
  }
  const hops = value.max_hops
  if (hops !== undefined && (typeof hops !== 'number' || !Number.isSafeInteger(hops) || hops < 1 || hops > maxContinuationHops)) {
    return `Invalid continuation.max_hops: expected a whole number from 1 to ${maxContinuationHops}.`
  }
  return undefined
}

/** A value continuationProblem accepted, as the key object shows it: the default filled in; null: off. */
export function continuationViewOf(value: unknown): ContinuationView | null {
  if (!isObject(value)) return null
  return { max_hops: typeof value.max_hops === 'number' ? value.max_hops : defaultContinuationHops }
}

const codec: SettingCodec<ContinuationView> = { problem: continuationProblem, viewOf: continuationViewOf }

/** The stored JSON of a value continuationProblem accepted (null: off). A change replaces the whole setting. */
export function storedContinuation(value: unknown): string | null {
  return storedSetting(codec, value)
}

/** The stored JSON as the key object shows it; null when off (or the text is unreadable). */
export function presentStoredContinuation(text: string | null | undefined): ContinuationView | null {
  return presentStoredSetting(codec, text)
}

/** The stored JSON → the setting the key's streams use; undefined when off (or unreadable). */
export function parseStoredContinuation(text: string | null | undefined): ContinuationSettings | undefined {
  const view = presentStoredContinuation(text)
  return view ? Object.freeze({ maxHops: view.max_hops }) : undefined
}
