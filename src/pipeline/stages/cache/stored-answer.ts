/**
 * A cache entry's stored form: a chat-like answer decoded into the neutral form (AssistantResult, so
 * any shape can be written from it), or an embeddings list as the gateway gave it; with the provider
 * key that served it. Only a whole answer is kept: a finish of stop, length or tool calls.
 *
 * A buffered answer is put raw (the gateway's text) and decoded on the cache's writer thread
 * (writer-thread.ts runs storedValueOf), off the serving thread; until the writer has written it, a
 * read gets it raw and decodes it here.
 */
import type { AssistantResult } from '../../../dialects/assistant-result'
import { readChatCompletion } from '../../../dialects/chat/convert-response'
import { readResponseObject } from '../../../dialects/responses/convert-response'
import type { CachedEntry, RawValue } from '../../../storage/cache-store'

export interface StoredAnswer {
  reply?: AssistantResult
  body?: unknown
  providerKeyId: string
}

/** The finishes of a whole answer. */
const wholeFinishes = new Set(['stop', 'length', 'tool_calls'])

/** A chat-like answer, kept when whole. */
export function wholeReply(reply: AssistantResult, providerKeyId: string): StoredAnswer | undefined {
  return wholeFinishes.has(reply.finishReason) ? { reply, providerKeyId } : undefined
}

/** A gateway's answer (its kind: `chat`, `response`, `embeddings`), parsed, as it is stored; undefined when it is not one to keep. */
export function storedAnswerOf(kind: string, value: unknown, providerKeyId: string): StoredAnswer | undefined {
  if (kind === 'embeddings') return typeof value === 'object' && value !== null && Array.isArray((value as { data?: unknown }).data) ? { body: value, providerKeyId } : undefined
  if (kind === 'chat') return wholeReply(readChatCompletion(value), providerKeyId)
  if (kind === 'response') return wholeReply(readResponseObject(value), providerKeyId)
  return undefined
}

const decoder = new TextDecoder()

/** A raw answer, parsed, as it is stored; undefined when it is not one to keep. */
export function storedAnswerOfRaw(raw: RawValue): StoredAnswer | undefined {
  return storedAnswerOf(raw.form, JSON.parse(decoder.decode(raw.bytes)), raw.origin)
}

/** A raw answer as it is stored (JSON); undefined when it is not one to keep. The writer thread's `prepare`. */
export function storedValueOf(raw: RawValue): string | undefined {
  const stored = storedAnswerOfRaw(raw)
  return stored ? JSON.stringify(stored) : undefined
}

/**
 * The answers of entries read lately, decoded: the store hands the same entry object to each hit
 * on an entry it holds in memory (CacheStore's recent entries), so its JSON is parsed once, not on
 * every hit. Nothing downstream changes a stored answer: a hit's answer is a copy with fresh ids.
 */
const decoded = new WeakMap<CachedEntry, StoredAnswer>()

/** An entry's answer; undefined when it cannot be read (then it is a miss). */
export function readStored(entry: CachedEntry): StoredAnswer | undefined {
  if (entry.raw) return parseStored(entry)
  let stored = decoded.get(entry)
  if (stored === undefined) {
    stored = parseStored(entry)
    if (stored !== undefined) decoded.set(entry, stored)
  }
  return stored
}

function parseStored(entry: CachedEntry): StoredAnswer | undefined {
  try {
    if (entry.raw) return storedAnswerOfRaw(entry.raw)
    if (entry.value === undefined) return undefined
    const stored = JSON.parse(entry.value) as StoredAnswer
    return typeof stored === 'object' && stored !== null && (stored.reply !== undefined || stored.body !== undefined) ? stored : undefined
  } catch {
    return undefined
  }
}
