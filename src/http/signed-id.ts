/**
 * The form of every id the service issues with claims in it (`resp_rt_…`, `batch_rt_…`): a prefix,
 * the claims as a base64url JSON array, a dot and the signature of that payload. Reading one checks
 * the signature in constant time before anything in it is believed.
 */
import { timingSafeEqual } from 'node:crypto'

export function issueSignedId(prefix: string, claims: readonly unknown[], sign: (text: string) => string): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url')
  return `${prefix}${payload}.${sign(payload)}`
}

/** The claims of an id issued with `prefix` and unchanged since, or undefined. */
export function readSignedId(id: unknown, prefix: string, sign: (text: string) => string): unknown[] | undefined {
  if (typeof id !== 'string' || !id.startsWith(prefix) || id.length > 2048) return undefined
  const body = id.slice(prefix.length)
  const dot = body.lastIndexOf('.')
  if (dot <= 0) return undefined
  const payload = body.slice(0, dot)
  const tag = Buffer.from(body.slice(dot + 1))
  const expected = Buffer.from(sign(payload))
  if (tag.length !== expected.length || !timingSafeEqual(tag, expected)) return undefined
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown
    return Array.isArray(claims) ? claims : undefined
  } catch {
    return undefined
  }
}
