/**
 * The response cache's entry key (CONTRACT §15): the workspace, the key when the cache's scope is
 * `key`, the model as the client spelled it, and the request in the router's canonical form — chat,
 * after steering, whatever shape the client spoke (the dialects translate to it), with every field
 * that changes the answer and none that does not (`stream`, `stream_options`, `user`, `metadata`,
 * `store`). Made with its keys sorted at every depth and serialised by JSON.stringify, so the same
 * request is the same text whatever the order of its fields, and hashed with SHA-256. The semantic tier's key is the same
 * with the last user turn's text left out: entries that match in everything but that text.
 */
import { responsesToChat } from '../../../dialects/responses/convert-request'
import type { ParsedRequest } from '../../answer/dialect'

/** What a request is to the cache; undefined for a request it never serves (CONTRACT §15 "Never"). */
export interface CacheRequest {
  operation: 'chat' | 'embeddings'
  /** The canonical request (without the model). */
  canonical: Record<string, unknown>
  /** The last user turn's text, when the request ends with one (the semantic tier's query). */
  lastUserText: string | undefined
}

/** Fields that never change the answer. */
const dropped = new Set(['model', 'stream', 'stream_options', 'user', 'metadata', 'store'])

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** A message's content as one text when it is only text (`"Hi"` and `[{type: 'text', text: 'Hi'}]` are one content). */
function plainContent(content: unknown): unknown {
  if (!Array.isArray(content) || content.length === 0) return content
  let text = ''
  for (const part of content) {
    if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string' || Object.keys(part).length !== 2) return content
    text += part.text
  }
  return text
}

/**
 * A copy with every object's keys in sorted order (its fields that are undefined left out), so that
 * JSON.stringify writes the same text for the same value whatever the order its fields came in.
 */
function sortedCopy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedCopy)
  if (value === null || typeof value !== 'object') return value
  const sorted: Record<string, unknown> = {}
  for (const name of Object.keys(value).sort()) {
    const item = (value as Record<string, unknown>)[name]
    if (item !== undefined) sorted[name] = sortedCopy(item)
  }
  return sorted
}

/** A message with its synonyms made one: text-only content as one text, `developer` as `system` (what the translations send). */
function canonicalMessage(message: unknown): unknown {
  if (!isObject(message)) return sortedCopy(message)
  const sorted: Record<string, unknown> = {}
  for (const name of Object.keys(message).sort()) {
    const item = message[name]
    if (item === undefined) continue
    sorted[name] = name === 'role' && item === 'developer' ? 'system' : name === 'content' ? sortedCopy(plainContent(item)) : sortedCopy(item)
  }
  return sorted
}

/** The chat body without what does not change the answer, its synonyms made one, its keys sorted at every depth. */
function canonicalChat(body: Record<string, unknown>): Record<string, unknown> {
  // One output bound, whichever field named it (chat's two, Responses' and messages' as translated).
  let bound: number | undefined
  for (const name of ['max_completion_tokens', 'max_tokens']) {
    const value = body[name]
    if (typeof value === 'number') bound = bound === undefined ? value : Math.max(bound, value)
  }
  const canonical: Record<string, unknown> = {}
  for (const name of Object.keys(body).sort()) {
    const value = body[name]
    if (dropped.has(name) || value === undefined || value === null || name === 'max_completion_tokens') continue
    // One choice is the default.
    if (name === 'n' && value === 1) continue
    if (name === 'max_tokens') canonical.max_tokens = bound
    else if (name === 'messages' && Array.isArray(value)) canonical.messages = value.map(canonicalMessage)
    else canonical[name] = sortedCopy(value)
  }
  if (bound === undefined || canonical.max_tokens !== undefined) return canonical
  // Named only as max_completion_tokens: kept under max_tokens, in its sorted place.
  const entries = Object.entries(canonical)
  entries.push(['max_tokens', bound])
  return Object.fromEntries(entries.sort(([left], [right]) => (left < right ? -1 : 1)))
}

/** The request as the cache sees it, or undefined when it is never cached. */
export function cacheRequest(parsed: ParsedRequest): CacheRequest | undefined {
  const body = parsed.upstreamBody
  if (parsed.operation === 'embeddings') {
    const canonical: Record<string, unknown> = {}
    for (const name of Object.keys(body).sort()) {
      const value = body[name]
      if (!dropped.has(name) && value !== undefined && value !== null) canonical[name] = sortedCopy(value)
    }
    return { operation: 'embeddings', canonical, lastUserText: undefined }
  }
  let chat: Record<string, unknown>
  if (parsed.operation === 'chat') chat = body
  else if (parsed.operation === 'responses') {
    // A chained turn or a background one is never cached; the rest as its chat form.
    if (parsed.pinnedStep || parsed.pinnedProviderKeyId || (body.previous_response_id !== undefined && body.previous_response_id !== null) || body.background === true) return undefined
    try {
      chat = responsesToChat(body).chat
    } catch {
      return undefined
    }
  } else return undefined
  if (typeof chat.n === 'number' && chat.n > 1) return undefined
  const canonical = canonicalChat(chat)
  const messages = Array.isArray(canonical.messages) ? canonical.messages : []
  const last = messages.at(-1)
  const lastUserText = isObject(last) && last.role === 'user' && typeof last.content === 'string' ? last.content : undefined
  return { operation: 'chat', canonical, lastUserText }
}

/** The partition an entry belongs to: the workspace, and the key unless the scope is the workspace. */
export interface CachePartition {
  workspaceId: string
  keyId: string | undefined
}

/**
 * SHA-256 of the value's JSON, in hex (Uint8Array's toHex: the hash's own hex output costs more than the hash).
 * The value's fields are in a fixed order: the wrappers below name theirs in order, the canonical
 * request has its keys sorted.
 */
function digest(value: unknown): string {
  return (Bun.SHA256.hash(JSON.stringify(value)) as Uint8Array & { toHex(): string }).toHex()
}

/** The exact entry key. */
export function entryKey(partition: CachePartition, model: string, request: CacheRequest): string {
  return digest({ v: 1, w: partition.workspaceId, k: partition.keyId ?? null, m: model, op: request.operation, r: request.canonical })
}

/** The semantic tier's key: the exact key's parts with the last user turn's text left out. */
export function semanticKey(partition: CachePartition, model: string, request: CacheRequest): string {
  const messages = (request.canonical.messages as unknown[]).slice(0, -1)
  return digest({ v: 1, semantic: true, w: partition.workspaceId, k: partition.keyId ?? null, m: model, op: request.operation, r: { ...request.canonical, messages } })
}

/** The request's `Cache-Control` directives that the cache follows (CONTRACT §15). */
export interface CacheControl {
  /** `no-cache`: no read (the answer is stored); `no-store`: no read, no write. */
  read: boolean
  write: boolean
  /** `max-age=N`: only an entry at most N seconds old. */
  maxAgeSeconds: number | undefined
  /** `only-if-cached`: no upstream call; a miss is 504 `cache_miss`. */
  onlyIfCached: boolean
}

export function cacheControl(header: string | null): CacheControl {
  const control: CacheControl = { read: true, write: true, maxAgeSeconds: undefined, onlyIfCached: false }
  if (!header) return control
  for (const raw of header.split(',')) {
    const directive = raw.trim().toLowerCase()
    if (directive === 'no-cache') control.read = false
    else if (directive === 'no-store') {
      control.read = false
      control.write = false
    } else if (directive === 'only-if-cached') control.onlyIfCached = true
    else if (directive.startsWith('max-age=')) {
      const seconds = Number(directive.slice(8))
      if (Number.isInteger(seconds) && seconds >= 0) control.maxAgeSeconds = seconds
    }
  }
  return control
}
