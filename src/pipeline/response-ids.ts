/**
 * `resp_rt_…` ids (SPEC "Responses chain"): they encode the provider key that holds the state, the
 * creating inference key, the creation time and the gateway's own id, signed so that an altered or
 * truncated id is refused. Translated responses carry no gateway id and cannot be chained.
 */
import { timingSafeEqual } from 'node:crypto'

export const responseIdPrefix = 'resp_rt_'
export const responseIdLifetimeMs = 30 * 86_400_000

export interface ResponseIdClaims {
  providerKeyId: string
  keyId: string
  /** Unix seconds. */
  createdAt: number
  /** The gateway's id, or '' for a translated response. */
  upstreamId: string
}

export function issueResponseId(claims: ResponseIdClaims, sign: (text: string) => string): string {
  const payload = Buffer.from(JSON.stringify([1, claims.providerKeyId, claims.keyId, claims.createdAt, claims.upstreamId])).toString('base64url')
  return `${responseIdPrefix}${payload}.${sign(payload)}`
}

/** The claims of a valid id, or undefined for anything this service did not issue unchanged. */
export function readResponseId(id: unknown, sign: (text: string) => string): ResponseIdClaims | undefined {
  if (typeof id !== 'string' || !id.startsWith(responseIdPrefix)) return undefined
  const body = id.slice(responseIdPrefix.length)
  const dot = body.lastIndexOf('.')
  if (dot <= 0) return undefined
  const payload = body.slice(0, dot)
  const tag = Buffer.from(body.slice(dot + 1))
  const expected = Buffer.from(sign(payload))
  if (tag.length !== expected.length || !timingSafeEqual(tag, expected)) return undefined
  try {
    const [version, providerKeyId, keyId, createdAt, upstreamId] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    if (version !== 1 || typeof providerKeyId !== 'string' || typeof keyId !== 'string' || typeof createdAt !== 'number' || typeof upstreamId !== 'string') {
      return undefined
    }
    return { providerKeyId, keyId, createdAt, upstreamId }
  } catch {
    return undefined
  }
}
