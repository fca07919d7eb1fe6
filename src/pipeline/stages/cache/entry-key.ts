/**
 * The response cache's entry key (CONTRACT §15): the workspace, the key when the cache's scope is
 * `key`, the model as the client spelled it, and the request in the router's canonical form — chat,
 * after steering, whatever shape the client spoke (the dialects translate to it), with every field
 * that changes the answer and none that does not (`stream`, `stream_options`, `user`, `metadata`,
 * `store`). Serialized with sorted keys (safe-stable-stringify), so the same request is the same
 * text whatever the order of its fields, and hashed with SHA-256. The semantic tier's key is the same
 * with the last user turn's text left out: entries that match in everything but that text.
 */
import stringify from 'safe-stable-stringify'
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

/** A message with its synonyms made one: text-only content as one text, `developer` as `system` (what the translations send). */
function canonicalMessage(message: unknown): unknown {
  if (!isObject(message)) return message
  const role = message.role === 'developer' ? 'system' : message.role
  if (role === message.role && !('content' in message)) return message
  return { ...message, role, ...('content' in message ? { content: plainContent(message.content) } : {}) }
}

/** The chat body without what does not change the answer, its synonyms made one. */
function canonicalChat(body: Record<string, unknown>): Record<string, unknown> {
  const canonical: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(body)) {
    if (dropped.has(name) || value === undefined || value === null) continue
    canonical[name] = value
  }
  // One output bound, whichever field named it (chat's two, Responses' and messages' as translated).
  const bounds = [canonical.max_completion_tokens, canonical.max_tokens].filter((value): value is number => typeof value === 'number')
  delete canonical.max_completion_tokens
  if (bounds.length > 0) canonical.max_tokens = Math.max(...bounds)
  // One choice is the default.
  if (canonical.n === 1) delete canonical.n
  if (Array.isArray(canonical.messages)) canonical.messages = canonical.messages.map(canonicalMessage)
  return canonical
}

/** The request as the cache sees it, or undefined when it is never cached. */
export function cacheRequest(parsed: ParsedRequest): CacheRequest | undefined {
  const body = parsed.upstreamBody
  if (parsed.operation === 'embeddings') {
    const canonical: Record<string, unknown> = {}
    for (const [name, value] of Object.entries(body)) if (!dropped.has(name) && value !== undefined && value !== null) canonical[name] = value
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

function digest(value: unknown): string {
  return Bun.SHA256.hash(stringify(value)!, 'hex') as string
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
