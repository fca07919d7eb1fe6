/**
 * The chat body as it goes upstream (SPEC "Body processing"): validated, `ad_request` and
 * `link_request` removed, the steering message put in front of the system prompt. The model is
 * set per attempt.
 */
import { RouterError } from '../../errors/router-error'
import { isObject } from '../../http/read-body'
import type { StageSiblings } from '../answer/dialect'

/** Model ids are bounded: they key caches and log rows. */
export const maxModelIdLength = 256

/** The body's `model`: a non-empty string of at most 256 characters (else missing_model / 400). */
export function requireModel(value: unknown, field = 'model'): string {
  if (typeof value !== 'string' || value === '') throw new RouterError('missing_model')
  if (value.length > maxModelIdLength) throw new RouterError('invalid_request', `${field}: at most ${maxModelIdLength} characters.`)
  return value
}

export function validateChatBody(value: unknown): Record<string, unknown> & { model: string; messages: unknown[] } {
  if (!isObject(value)) throw new RouterError('invalid_request', 'The request body must be a JSON object.')
  requireModel(value.model)
  if (!Array.isArray(value.messages) || value.messages.length === 0) throw new RouterError('missing_messages')
  for (let index = 0; index < value.messages.length; index++) {
    const message = value.messages[index]
    if (!isObject(message) || typeof message.role !== 'string') {
      throw new RouterError('invalid_request', `messages[${index}]: expected an object with a string \`role\`.`)
    }
  }
  return value as Record<string, unknown> & { model: string; messages: unknown[] }
}

const noSiblings: StageSiblings = Object.freeze({ adRequest: undefined, linkRequest: undefined })

/** The companion-ad and keyterm siblings the client sent (for the enrichment stages). */
export function siblingsOf(body: Record<string, unknown>): StageSiblings {
  if (!('ad_request' in body) && !('link_request' in body)) return noSiblings
  return { adRequest: body.ad_request, linkRequest: body.link_request }
}

/** Removes the companion-ad and keyterm siblings, which never go upstream. */
export function stripRouterFields(body: Record<string, unknown>): Record<string, unknown> {
  if (!('ad_request' in body) && !('link_request' in body)) return body
  const { ad_request: _ads, link_request: _links, ...rest } = body
  return rest
}

/** Puts the steering message in front of the system prompt, creating one when there is none. */
export function applySteering(body: Record<string, unknown>, steering: string | null | undefined): Record<string, unknown> {
  if (!steering) return body
  const messages = body.messages as unknown[]
  const first = messages[0] as { role?: unknown; content?: unknown } | undefined
  if (first && (first.role === 'system' || first.role === 'developer')) {
    let content: unknown
    if (typeof first.content === 'string') content = `${steering}\n\n${first.content}`
    else if (Array.isArray(first.content)) content = [{ type: 'text', text: steering }, ...first.content]
    else content = steering
    return { ...body, messages: [{ ...first, content }, ...messages.slice(1)] }
  }
  return { ...body, messages: [{ role: 'system', content: steering }, ...messages] }
}
