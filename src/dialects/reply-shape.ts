/**
 * Whether a buffered 2xx answer is the shape its call expects (issue 11: a 200 with an unusable body
 * is a failed attempt, never a success): a JSON object with `choices` for chat, `data` for
 * embeddings, `output` for a Response. Only the kind is checked here; what a translator needs
 * beyond it is the translator's own check.
 */

export type ReplyKind = 'chat' | 'embeddings' | 'response'

/** A 2xx answer that cannot be used: the attempt failed and the next target is tried. */
export class UnusableReply extends Error {}

const decoder = new TextDecoder()

/** The list field each kind of answer must carry. */
const listField: Record<ReplyKind, string> = { chat: 'choices', embeddings: 'data', response: 'output' }
const kindName: Record<ReplyKind, string> = { chat: 'chat completion', embeddings: 'embeddings list', response: 'Response object' }

/** Checks a parsed answer; throws UnusableReply naming what is wrong. */
export function checkReply(kind: ReplyKind, value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UnusableReply(`the body is not a JSON object (a ${kindName[kind]} was expected)`)
  if (!Array.isArray((value as Record<string, unknown>)[listField[kind]])) throw new UnusableReply(`the body is not a ${kindName[kind]}: it has no \`${listField[kind]}\` array`)
}

/** The parsed answer of a buffered body, checked; throws UnusableReply when it cannot be used. */
export function readReply(kind: ReplyKind, body: ArrayBuffer): unknown {
  let value: unknown
  try {
    value = JSON.parse(decoder.decode(body))
  } catch {
    throw new UnusableReply(body.byteLength === 0 ? 'the body is empty' : 'the body is not JSON (cut short, malformed or a page)')
  }
  checkReply(kind, value)
  return value
}
