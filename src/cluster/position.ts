/**
 * Read-your-writes across nodes (CONTRACT §10): LiteFS keeps each database's replication position
 * in a file beside it, `<db>-pos`, as `TXID/checksum` (16 hex digits each). The primary tells a
 * writer the position its write reached (`X-Router-Txid`); a replica given that header waits until
 * its own copy has reached it (at most 5 s), else the request is replayed on the primary.
 */
import { readFileSync } from 'node:fs'

export const txidHeader = 'x-router-txid'
/** The longest a replica waits for its copy to reach a position it is shown. */
export const txidWaitMs = 5000
const pollMs = 10

/** The TXID of the database's LiteFS position (16 hex digits); undefined where LiteFS keeps none. */
export function readTxid(dbPath: string): string | undefined {
  let text: string
  try {
    text = readFileSync(`${dbPath}-pos`, 'utf8')
  } catch {
    return undefined
  }
  const txid = text.slice(0, 16)
  return /^[0-9a-f]{16}$/i.test(txid) ? txid.toLowerCase() : undefined
}

/** A TXID as the header carries it, or undefined when it is not one. */
export function parseTxid(value: string | null): bigint | undefined {
  if (!value || !/^[0-9a-fA-F]{1,16}$/.test(value)) return undefined
  return BigInt(`0x${value}`)
}

/** Waits until this node's copy of the database has reached `wanted`; false when 5 s passed first. */
export async function reachTxid(dbPath: string, wanted: bigint, limitMs = txidWaitMs): Promise<boolean> {
  const until = performance.now() + limitMs
  for (;;) {
    const own = readTxid(dbPath)
    if (own !== undefined && BigInt(`0x${own}`) >= wanted) return true
    if (performance.now() >= until) return false
    await Bun.sleep(pollMs)
  }
}

/**
 * A replica's lag behind the primary in milliseconds, from LiteFS's `.lag` in the mount (`+0000001234`;
 * +2147483647 until the first copy is done; 0 on the primary); undefined where there is no such file.
 */
export function readLagMs(litefsDir: string): number | undefined {
  let text: string
  try {
    text = readFileSync(`${litefsDir}/.lag`, 'utf8')
  } catch {
    return undefined
  }
  const lag = Number(text.trim())
  return Number.isFinite(lag) ? lag : undefined
}
