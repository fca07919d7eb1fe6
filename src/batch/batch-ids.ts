/**
 * `batch_rt_…` ids (SPEC "Batch object"): they encode the provider key that holds the batch, the
 * creating inference key and the creation time, with a random nonce, signed so that an altered or
 * truncated id is refused (404 invalid_batch_id) before anything is looked up. The gateway's own
 * batch id is not in it: it is known only after the upload, and lives in the batch's row.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'

export const batchIdPrefix = 'batch_rt_'
export const batchRetentionMs = 30 * 86_400_000

export interface BatchIdClaims {
  providerKeyId: string
  keyId: string
  /** Unix seconds. */
  createdAt: number
}

const version = 1

export function issueBatchId(claims: BatchIdClaims, sign: (text: string) => string): string {
  const payload = Buffer.from(JSON.stringify([version, claims.providerKeyId, claims.keyId, claims.createdAt, randomBytes(9).toString('base64url')])).toString('base64url')
  return `${batchIdPrefix}${payload}.${sign(payload)}`
}

/** The claims of an id this service issued unchanged, or undefined. */
export function readBatchId(id: unknown, sign: (text: string) => string): BatchIdClaims | undefined {
  if (typeof id !== 'string' || !id.startsWith(batchIdPrefix) || id.length > 512) return undefined
  const body = id.slice(batchIdPrefix.length)
  const dot = body.lastIndexOf('.')
  if (dot <= 0) return undefined
  const payload = body.slice(0, dot)
  const tag = Buffer.from(body.slice(dot + 1))
  const expected = Buffer.from(sign(payload))
  if (tag.length !== expected.length || !timingSafeEqual(tag, expected)) return undefined
  try {
    const [idVersion, providerKeyId, keyId, createdAt, nonce] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    if (idVersion !== version || typeof providerKeyId !== 'string' || typeof keyId !== 'string' || typeof createdAt !== 'number' || typeof nonce !== 'string') return undefined
    return { providerKeyId, keyId, createdAt }
  } catch {
    return undefined
  }
}
