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

/** The most requests a replica keeps waiting for its copy at once; beyond them, a request goes to the primary at once. */
export const maxTxidWaiters = 1000

interface Waiter {
  wanted: bigint
  until: number
  done: (reached: boolean) => void
}

/**
 * The requests waiting for this node's copy to reach a position: one timer reads the position for
 * all of them (one small file read per tick, whatever the number of waiters), and only while any
 * waits; a waiter leaves when the copy reached its position, or after `limitMs` without it. At most
 * `maxWaiters` wait at once: `reach` says `full` to the next (the caller replays it on the primary),
 * so no flood of requests can hold a replica's event loop or its memory.
 */
export class PositionWatch {
  private readonly waiters = new Set<Waiter>()
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(
    private readonly dbPath: string,
    private readonly options: { limitMs?: number; maxWaiters?: number; pollMs?: number; read?: (dbPath: string) => string | undefined } = {},
  ) {}

  private position(): bigint | undefined {
    const own = (this.options.read ?? readTxid)(this.dbPath)
    return own === undefined ? undefined : BigInt(`0x${own}`)
  }

  /** Resolves `true` once the copy has reached `wanted`, `false` after the time limit; `full` at once when too many wait. */
  reach(wanted: bigint): Promise<boolean> | 'full' | true {
    const position = this.position()
    if (position !== undefined && position >= wanted) return true
    if (this.waiters.size >= (this.options.maxWaiters ?? maxTxidWaiters)) return 'full'
    return new Promise<boolean>((resolve) => {
      this.waiters.add({ wanted, until: performance.now() + (this.options.limitMs ?? txidWaitMs), done: resolve })
      this.timer ??= setInterval(() => this.tick(), this.options.pollMs ?? pollMs)
    })
  }

  /** How many wait now. */
  get waiting(): number {
    return this.waiters.size
  }

  private tick() {
    const position = this.position()
    const now = performance.now()
    for (const waiter of this.waiters) {
      const reached = position !== undefined && position >= waiter.wanted
      if (!reached && now < waiter.until) continue
      this.waiters.delete(waiter)
      waiter.done(reached)
    }
    if (this.waiters.size === 0) this.stop()
  }

  stop() {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }
}

/**
 * A key in the form the service issues (`rt_live_` or `rt_mgmt_` and 40 letters and digits), as a
 * replica tells a key it may not know yet (replayed on the primary) from one that is no key at all
 * (refused where it came).
 */
export function isWellFormedKey(token: string | undefined): boolean {
  return token !== undefined && /^rt_(?:live|mgmt)_[A-Za-z0-9]{40}$/.test(token)
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
