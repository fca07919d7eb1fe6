/**
 * A key's response cache setting (CONTRACT §15): off (null, the default), or how long an answer is
 * kept, whose requests share it (the key's own, or every workspace-scoped key of its workspace), and
 * the optional semantic lookup (an embeddings model that finds a near enough earlier question).
 * Stored as JSON with the wire names and every default filled in; a key without one never looks.
 */
import { presentStoredSetting, storedSetting, type SettingCodec } from './stored-setting'

export type CacheScope = 'key' | 'workspace'

export interface SemanticCacheSettings {
  /** The least cosine similarity served, 0.8 to 1.0. */
  readonly threshold: number
  /** The provider key the last user turn is embedded with (its gateway serves embeddings). */
  readonly providerKeyId: string
  readonly model: string
}

export interface CacheSettings {
  readonly ttlSeconds: number
  readonly scope: CacheScope
  readonly semantic: SemanticCacheSettings | null
  /**
   * Entries made before this (Unix ms; 0: never purged) are not served: the last purge of the
   * key's own entries, or of its workspace's shared ones for scope `workspace`. A purge is a write
   * every node sees, so it holds on nodes whose files it did not touch.
   */
  readonly purgedAt: number
}

/** The setting as the key object shows it (wire names, defaults filled in). */
export interface CacheView {
  ttl_seconds: number
  scope: CacheScope
  semantic: { threshold: number; provider_key_id: string; model: string } | null
}

export const cacheScopes = ['key', 'workspace'] as const
export const defaultCacheTtlSeconds = 3600
/** 30 days. */
export const maxCacheTtlSeconds = 2_592_000
export const minSemanticThreshold = 0.8
export const maxSemanticModelLength = 200

const cacheFields = ['ttl_seconds', 'scope', 'semantic'] as const
const semanticFields = ['threshold', 'provider_key_id', 'model'] as const

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Why a `cache` value is refused, naming the field (as limits do, key-limits.ts); undefined when it is
 * good. Null turns the cache off; an object is the whole setting (fields not named take their
 * defaults). Whether the semantic provider key may embed is the management rule's check: it needs
 * the workspace's provider keys.
 */
export function cacheProblem(value: unknown): string | undefined {
  if (value === null) return undefined
  if (!isObject(value)) return 'Invalid cache: expected an object {ttl_seconds, scope, semantic}, or null to turn the cache off.'
  for (const name of Object.keys(value)) {
    if (!(cacheFields as readonly string[]).includes(name)) return `Invalid cache.${name}: unknown field; expected ttl_seconds, scope or semantic.`
  }
  const ttl = value.ttl_seconds
  if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl < 1 || ttl > maxCacheTtlSeconds)) {
    return `Invalid cache.ttl_seconds: expected a whole number of seconds from 1 to ${maxCacheTtlSeconds} (30 days).`
  }
  const scope = value.scope
  if (scope !== undefined && !(cacheScopes as readonly unknown[]).includes(scope)) return "Invalid cache.scope: expected 'key' or 'workspace'."
  return semanticProblem(value.semantic)
}

function semanticProblem(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined
  if (!isObject(value)) return 'Invalid cache.semantic: expected an object {threshold, provider_key_id, model}, or null for exact matches only.'
  for (const name of Object.keys(value)) {
    if (!(semanticFields as readonly string[]).includes(name)) return `Invalid cache.semantic.${name}: unknown field; expected threshold, provider_key_id or model.`
  }
  const threshold = value.threshold
  if (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < minSemanticThreshold || threshold > 1) {
    return `Invalid cache.semantic.threshold: required, a number from ${minSemanticThreshold} to 1.0.`
  }
  if (typeof value.provider_key_id !== 'string' || value.provider_key_id === '') return 'Invalid cache.semantic.provider_key_id: required, a provider key UUID of this workspace.'
  const model = value.model
  if (typeof model !== 'string' || model.trim() === '' || model.length > maxSemanticModelLength) {
    return `Invalid cache.semantic.model: required, a non-empty string of at most ${maxSemanticModelLength} characters.`
  }
  return undefined
}

/** A value cacheProblem accepted, as the key object shows it: the whole setting, defaults filled in; null: off. */
export function cacheViewOf(value: unknown): CacheView | null {
  if (!isObject(value)) return null
  const semantic = isObject(value.semantic) ? value.semantic : null
  return {
    ttl_seconds: typeof value.ttl_seconds === 'number' ? value.ttl_seconds : defaultCacheTtlSeconds,
    scope: value.scope === 'workspace' ? 'workspace' : 'key',
    semantic: semantic ? { threshold: semantic.threshold as number, provider_key_id: semantic.provider_key_id as string, model: semantic.model as string } : null,
  }
}

const codec: SettingCodec<CacheView> = { problem: cacheProblem, viewOf: cacheViewOf }

/** The stored JSON of a value cacheProblem accepted (null: off). A change replaces the whole setting. */
export function storedCache(value: unknown): string | null {
  return storedSetting(codec, value)
}

/** The stored JSON as the key object shows it; null when off (or the text is unreadable). */
export function presentStoredCache(text: string | null | undefined): CacheView | null {
  return presentStoredSetting(codec, text)
}

/**
 * The stored JSON → the setting the key's requests use; undefined when off (or unreadable).
 * `keyPurgedAt`, `workspacePurgedAt`: the last purges of the key's own and its workspace's shared
 * entries (Unix ms), whichever the scope reads.
 */
export function parseStoredCache(text: string | null | undefined, keyPurgedAt?: number | null, workspacePurgedAt?: number | null): CacheSettings | undefined {
  const view = presentStoredCache(text)
  if (!view) return undefined
  const semantic = view.semantic ? Object.freeze({ threshold: view.semantic.threshold, providerKeyId: view.semantic.provider_key_id, model: view.semantic.model }) : null
  const purgedAt = (view.scope === 'workspace' ? workspacePurgedAt : keyPurgedAt) ?? 0
  return Object.freeze({ ttlSeconds: view.ttl_seconds, scope: view.scope, semantic, purgedAt })
}
