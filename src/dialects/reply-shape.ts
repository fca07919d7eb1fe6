/**
 * Whether a buffered 2xx answer is the shape its call expects (issue 11: a 200 with an unusable body
 * is a failed attempt, never a success): a JSON object with `choices` for chat, `data` for
 * embeddings, `output` for a Response. Only the kind is checked here; what a translator needs
 * beyond it is the translator's own check.
 */
import { JsonScan, scanJsonObject } from './json-scan'

export type ReplyKind = 'chat' | 'embeddings' | 'response' | 'decision'

/** A 2xx answer that cannot be used: the attempt failed and the next target is tried. */
export class UnusableReply extends Error {}

const decoder = new TextDecoder()
const notJson = 'the body is not JSON (cut short, malformed or a page)'

/** The list field each kind of answer must carry. */
const listField: Record<ReplyKind, string> = { chat: 'choices', embeddings: 'data', response: 'output', decision: 'answers' }
const kindName: Record<ReplyKind, string> = { chat: 'a chat completion', embeddings: 'an embeddings list', response: 'a Response object', decision: 'a decision' }

/** Checks a parsed answer; throws UnusableReply naming what is wrong. */
export function checkReply(kind: ReplyKind, value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UnusableReply(`the body is not a JSON object (${kindName[kind]} was expected)`)
  if (!Array.isArray((value as Record<string, unknown>)[listField[kind]])) throw new UnusableReply(`the body is not ${kindName[kind]}: it has no \`${listField[kind]}\` array`)
}

/** The list-field names as bytes, for comparing keys without decoding them. */
const listFieldBytes: Record<ReplyKind, Uint8Array> = {
  chat: new TextEncoder().encode(listField.chat),
  embeddings: new TextEncoder().encode(listField.embeddings),
  response: new TextEncoder().encode(listField.response),
  decision: new TextEncoder().encode(listField.decision),
}

/**
 * Checks a buffered 2xx body without building it (dialects/json-scan.ts; the relayed path sends
 * these bytes as they are, so a parse would be garbage made for nothing): one JSON object with the
 * kind's list field an array at its top level. The translators, which parse the body, refuse the
 * finer grammar faults the scan lets through.
 */
export function scanReply(kind: ReplyKind, body: ArrayBuffer): void {
  const bytes = new Uint8Array(body)
  switch (scanJsonObject(bytes, 0, bytes.length, listFieldBytes[kind])) {
    case JsonScan.Object:
      return
    case JsonScan.Empty:
      throw new UnusableReply('the body is empty')
    case JsonScan.NotObject:
      throw new UnusableReply(`the body is not a JSON object (${kindName[kind]} was expected)`)
    case JsonScan.NoListField:
      throw new UnusableReply(`the body is not ${kindName[kind]}: it has no \`${listField[kind]}\` array`)
    case JsonScan.NotJson:
      throw new UnusableReply(notJson)
  }
}

/** The parsed answer of a buffered body, checked; throws UnusableReply when it cannot be used. */
export function readReply(kind: ReplyKind, body: ArrayBuffer): unknown {
  let value: unknown
  try {
    value = JSON.parse(decoder.decode(body))
  } catch {
    throw new UnusableReply(body.byteLength === 0 ? 'the body is empty' : notJson)
  }
  checkReply(kind, value)
  return value
}
