/**
 * `batch_rt_…` ids (SPEC "Batch object"): they encode the provider key that holds the batch, the
 * creating inference key and the creation time, with a random nonce, signed so that an altered or
 * truncated id is refused (404 invalid_batch_id) before anything is looked up. The gateway's own
 * batch id is not in it: it is known only after the upload, and lives in the batch's row.
 */
import { randomBytes } from 'node:crypto'
import { issueSignedId, readSignedId } from '../http/signed-id'

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
  return issueSignedId(batchIdPrefix, [version, claims.providerKeyId, claims.keyId, claims.createdAt, randomBytes(9).toString('base64url')], sign)
}

/** The claims of an id this service issued unchanged, or undefined. */
export function readBatchId(id: unknown, sign: (text: string) => string): BatchIdClaims | undefined {
  const claims = readSignedId(id, batchIdPrefix, sign)
  if (!claims) return undefined
  const [idVersion, providerKeyId, keyId, createdAt, nonce] = claims
  if (idVersion !== version || typeof providerKeyId !== 'string' || typeof keyId !== 'string' || typeof createdAt !== 'number' || typeof nonce !== 'string') return undefined
  return { providerKeyId, keyId, createdAt }
}
