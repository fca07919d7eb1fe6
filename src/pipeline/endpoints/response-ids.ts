/**
 * `resp_rt_…` ids (SPEC "Responses chain"): they encode the provider key that holds the state, the
 * creating inference key, the creation time and the gateway's own id, signed so that an altered or
 * truncated id is refused.
 *
 * A native id is a function of those claims alone, with the creation time the gateway reports for
 * its response: the same gateway response always gets the same id, so a retrieved response and the
 * `previous_response_id` of a later turn can be given exactly the id the client was handed. A
 * translated response has no gateway id and cannot be chained or retrieved; its id carries a random
 * nonce instead, so that two translated responses never share an id.
 */
import { randomBytes } from 'node:crypto'
import { issueSignedId, readSignedId } from '../../http/signed-id'

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

/** Version 1 ids (no nonce) are still read; every id issued now is version 2. */
const currentVersion = 2

function issue(claims: ResponseIdClaims, nonce: string, sign: (text: string) => string): string {
  return issueSignedId(responseIdPrefix, [currentVersion, claims.providerKeyId, claims.keyId, claims.createdAt, claims.upstreamId, nonce], sign)
}

/** The id of a gateway's response: deterministic in its claims (see the module comment). */
export function issueNativeResponseId(claims: ResponseIdClaims, sign: (text: string) => string): string {
  return issue(claims, '', sign)
}

/** A fresh id for a translated response: no gateway id, a random nonce. */
/** The upstream id of a Responses answer the response cache gave and keeps (no gateway holds it). */
export const keptResponsePrefix = 'cache:'

export function issueTranslatedResponseId(claims: Omit<ResponseIdClaims, 'upstreamId'>, sign: (text: string) => string): string {
  return issue({ ...claims, upstreamId: '' }, randomBytes(9).toString('base64url'), sign)
}

/** How far a gateway's clock may be from ours before its `created_at` is not trusted for an id. */
const trustedClockSkewSeconds = 86_400

export function isUnixSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0
}

/**
 * The creation time to put in a native id: the gateway's `created_at` (so the id can be rebuilt
 * from the stored response), unless it is missing or too far from our clock to govern the 30-day
 * lifetime, in which case our own clock.
 */
export function responseCreatedAt(upstreamCreatedAt: unknown, nowMs: number): number {
  const now = Math.floor(nowMs / 1000)
  return isUnixSeconds(upstreamCreatedAt) && Math.abs(upstreamCreatedAt - now) <= trustedClockSkewSeconds ? upstreamCreatedAt : now
}

/** The claims of a valid id, or undefined for anything this service did not issue unchanged. */
export function readResponseId(id: unknown, sign: (text: string) => string): ResponseIdClaims | undefined {
  const claims = readSignedId(id, responseIdPrefix, sign)
  if (!claims) return undefined
  const [version, providerKeyId, keyId, createdAt, upstreamId, nonce] = claims
  if (version !== 1 && version !== currentVersion) return undefined
  if (typeof providerKeyId !== 'string' || typeof keyId !== 'string' || typeof createdAt !== 'number' || typeof upstreamId !== 'string') return undefined
  if (version === currentVersion && typeof nonce !== 'string') return undefined
  return { providerKeyId, keyId, createdAt, upstreamId }
}
