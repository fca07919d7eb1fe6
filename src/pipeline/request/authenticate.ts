/**
 * Inference authentication (SPEC "Authentication" 1–6): the key from any accepted header (or
 * `?key=` on :generateContent), constant-time hash comparison, rotation grace, revocation,
 * workspace suspension and the two IP allowlists. Reads only the in-memory snapshot.
 */
import { timingSafeEqual } from 'node:crypto'
import { RouterError } from '../../errors/router-error'
import { isProxyPeer, parseCallerAddress } from '../../net/ip-allowlist'
import { bearerToken } from '../../http/bearer-token'
import type { KeyEntry, Snapshot, WorkspaceEntry } from '../read-model/entries'

export const inferenceKeyPrefix = 'rt_live_'
const displayPrefixLength = inferenceKeyPrefix.length + 8

export interface Authenticated {
  key: KeyEntry
  workspace: WorkspaceEntry
  /** Set when the request used a rotated key's previous secret (X-Router-Key-Grace-Until). */
  graceUntil: string | undefined
}

/** The presented key: Bearer, x-api-key, x-goog-api-key, x-content-api-key, or `?key=` where allowed. */
export function presentedKey(headers: Headers, queryKey: string | null): string | undefined {
  const authorization = headers.get('authorization')
  if (authorization) {
    const token = bearerToken(authorization)
    if (token !== undefined) return token
  }
  return headers.get('x-api-key') ?? headers.get('x-goog-api-key') ?? headers.get('x-content-api-key') ?? queryKey ?? undefined
}

function sha256Hex(text: string): string {
  return new Bun.CryptoHasher('sha256').update(text).digest('hex')
}

function sameHash(left: string, right: string): boolean {
  return left.length === right.length && timingSafeEqual(Buffer.from(left), Buffer.from(right))
}

function verify(snapshot: Snapshot, token: string, now: number): { key: KeyEntry; previous: boolean } | undefined {
  const cached = snapshot.tokenCache.get(token)
  if (cached) return cached
  const candidates = snapshot.keysByPrefix.get(token.slice(0, displayPrefixLength))
  if (!candidates) return undefined
  const hash = sha256Hex(token)
  for (const key of candidates) {
    if (sameHash(key.secretHash, hash)) {
      const found = { key, previous: false }
      if (snapshot.tokenCache.size < 10_000) snapshot.tokenCache.set(token, found)
      return found
    }
    if (key.previous && key.previous.untilMs > now && sameHash(key.previous.hash, hash)) {
      // Not cached: the grace window ends on its own clock, not on a snapshot rebuild.
      return { key, previous: true }
    }
  }
  return undefined
}

export function authenticate(snapshot: Snapshot, token: string | undefined, caller: () => string | undefined, now: number): Authenticated {
  if (!token || !token.startsWith(inferenceKeyPrefix)) throw new RouterError('invalid_api_key')
  const found = verify(snapshot, token, now)
  if (!found) throw new RouterError('invalid_api_key')
  const { key } = found
  if (found.previous && (!key.previous || key.previous.untilMs <= now)) throw new RouterError('invalid_api_key')
  if (key.revoked) throw new RouterError('revoked_api_key')
  const workspace = snapshot.workspaces.get(key.workspaceId)
  if (!workspace) throw new RouterError('invalid_api_key')
  if (workspace.suspended) throw new RouterError('workspace_suspended')
  if (!workspace.allowlist.empty || !key.allowlist.empty) {
    const seen = caller()
    const address = parseCallerAddress(seen)
    if (!workspace.allowlist.allows(address) || !key.allowlist.allows(address)) {
      throw new RouterError('ip_not_allowed', `The address ${seen ?? 'unknown'} is not allowed to use this key.`)
    }
  }
  return { key, workspace, graceUntil: found.previous ? key.previous!.untilIso : undefined }
}

/**
 * The caller address per RT_TRUST_PROXY (CONTRACT §4): Fly-Client-IP, else the first X-Forwarded-For
 * entry, when the socket's peer can be the proxy; else the peer's own address.
 */
export function callerAddress(headers: Headers, socketAddress: () => string | undefined, trustProxy: boolean): string | undefined {
  const peer = socketAddress()
  // The forwarding headers only from a peer that can be the proxy (net/ip-allowlist.ts isProxyPeer):
  // anyone else who sends them is taken at its socket address.
  if (trustProxy && isProxyPeer(peer)) {
    const fly = headers.get('fly-client-ip')
    if (fly) return fly.trim()
    const forwarded = headers.get('x-forwarded-for')
    if (forwarded) return forwarded.split(',')[0]!.trim()
  }
  return peer
}
