/**
 * Admission against a key's limits (CONTRACT §11), and what counts against them.
 *
 * Each limited key has a ledger: what the database shows (requests and tokens per second over the
 * last minute, cost per UTC day this month: every node's rows, as this node's copy has them), read
 * on the read thread, plus this node's own requests the database does not show yet (admitted, in
 * flight, or logged but not yet in this node's copy: on a replica the rows go to the primary and
 * come back through LiteFS). A request is refused when a window is full, or (USD caps) when the
 * settled spend, the open reservations and its own worst case would not fit under the cap; otherwise
 * it counts at once: one request, and for USD caps its worst case as a reservation, kept apart from
 * spend, which its finish replaces with what it cost and its tokens. Money is whole nano-dollars
 * (storage/money.ts), so reserving and settling in any order never drifts. The read also looks for the own finished requests'
 * rows by their ids, in the same read transaction as the sums: those found leave the ledger, since
 * the sums hold them now. So nothing is counted twice or missed, whatever the time the rows take to
 * arrive. Limited keys in use are read again every `RT_LIMIT_SYNC_MS`, which is what bounds what
 * another node may admit unseen. Keys without limits have no ledger and pay nothing.
 *
 * The sums are kept per second and per day, so an admission costs a few map reads, whatever the rate.
 */
import { RouterError } from '../../errors/router-error'
import type { KeyWindows } from '../../storage/repositories/request-logs'
import type { KeyLimits } from '../../domain/key-limits'
import { nanoToUsd, usdToNano } from '../../storage/money'
import { dayMs, KeyLedger, monthStartOf, nextMonthStartOf, windowSeconds, type LimitState, type LimitTicket, type Totals } from './key-ledger'

export { KeyLedger, monthStartOf, shownState, type LimitState, type LimitTicket } from './key-ledger'

/** Reads what the database shows for some of a workspace's keys (the read thread); money in nano-dollars. */
export type KeyWindowsReader = (
  workspaceId: string,
  keyIds: string[],
  sinceMs: number,
  fromDayMs: number,
  own: { ids: string[]; sinceMs: number; batchIds?: string[] },
) => Promise<{ windows: [string, KeyWindows][]; found: string[]; foundBatches?: string[] }>


/** The headers every answer of a limited key carries. */
export interface LimitHeaders {
  'ratelimit-policy': string
  ratelimit: string
}

/** The headers every answer of a limited key carries, and a refusal when a window is full or the request does not fit. */
export interface Admission {
  ticket: LimitTicket | undefined
  headers: LimitHeaders
  refusal: RouterError | undefined
}

/** A structured-field decimal (at most three fractional digits), rounded down for what is left. */
function decimal(value: number, down = false): string {
  const scaled = down ? Math.floor(value * 1000 + 1e-9) : Math.round(value * 1000)
  return String(Math.max(0, scaled) / 1000)
}

/** USD for a message: cents, or enough digits to show a small amount. */
function dollars(nano: number): string {
  const usd = nano / 1e9
  return usd >= 0.01 || usd === 0 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(2)}`
}

interface Window {
  name: 'rpm' | 'tpm' | 'usd-day' | 'usd-month'
  /** The limit: requests, tokens, or nano-dollars. */
  limit: number
  used: number
  windowSeconds: number
  resetSeconds: number
}

/** How long a settled ticket waits for its row before it leaves the ledger anyway (CONTRACT §11: bounded memory). */
export const ticketRowWaitMs = 5 * 60_000

export class KeyLimiter {
  private readonly ledgers = new Map<string, KeyLedger>()
  private timer: ReturnType<typeof setInterval> | undefined
  private syncing = false

  constructor(
    private readonly read: KeyWindowsReader,
    private readonly options: { syncMs: number; onError?: (error: unknown) => void; onExpired?: (tickets: number) => void; rowWaitMs?: number },
  ) {}

  private ledger(keyId: string, workspaceId: string): KeyLedger {
    let ledger = this.ledgers.get(keyId)
    if (!ledger) this.ledgers.set(keyId, (ledger = new KeyLedger(keyId, workspaceId)))
    return ledger
  }

  /** Reads what the database shows for these ledgers (one workspace), and which of their own finished requests it holds. */
  private async readShown(workspaceId: string, ledgers: KeyLedger[]): Promise<void> {
    const startedAt = Date.now()
    const asked = ledgers.map((ledger) => ledger.finished())
    let ownSince = startedAt
    const ids: string[] = []
    const batchIds: string[] = []
    for (const list of asked) {
      for (const ticket of list) {
        ids.push(ticket.requestId)
        if (ticket.held !== 0 && ticket.batchId !== undefined) batchIds.push(ticket.batchId)
        if (ticket.createdAt < ownSince) ownSince = ticket.createdAt
      }
    }
    const answer = await this.read(workspaceId, ledgers.map((ledger) => ledger.keyId), (Math.floor(startedAt / 1000) - windowSeconds) * 1000, monthStartOf(startedAt), { ids, sinceMs: ownSince, ...(batchIds.length ? { batchIds } : {}) })
    const windows = new Map(answer.windows)
    const found = new Set(answer.found)
    const foundBatches = new Set(answer.foundBatches ?? [])
    ledgers.forEach((ledger, index) => ledger.shown(windows.get(ledger.keyId), startedAt, asked[index]!, found, foundBatches))
  }

  private ready(ledger: KeyLedger): Promise<void> | undefined {
    if (ledger.readAt !== 0) return undefined
    ledger.loading ??= this.readShown(ledger.workspaceId, [ledger]).finally(() => (ledger.loading = undefined))
    return ledger.loading
  }

  /**
   * Makes sure a limited key's ledger has been read (the first request of a key on this node waits
   * for it; the others find it read): a promise only while it has not been.
   */
  prepare(keyId: string, workspaceId: string): Promise<void> | undefined {
    return this.ready(this.prepared(keyId, workspaceId))
  }

  private prepared(keyId: string, workspaceId: string): KeyLedger {
    // The reads again start with the first limited key's first request: a node without any never reads.
    if (!this.timer) this.start()
    const ledger = this.ledger(keyId, workspaceId)
    // The ledger is in use (for its idle drop, checked once per sync: a coarse clock does).
    ledger.usedAt = ledger.clock
    return ledger
  }

  /**
   * Admits a request of a limited key, or says why not. `worst`: its worst-case cost in nano-dollars
   * (0 when the key has no USD cap); a worst case that is not a whole number of nano-dollars a plain
   * number holds exactly (a request asking for more than any cap) is refused, never added. Awaits
   * the first read of the key's ledger. `requestsOnly`: a request answered without a model call (the
   * response cache's), which counts toward the requests per minute and no other window (CONTRACT §15).
   */
  admit(keyId: string, workspaceId: string, limits: KeyLimits, worst: number, requestId: string, createdAt: number, requestsOnly = false): Admission | Promise<Admission> {
    const ledger = this.prepared(keyId, workspaceId)
    const loading = this.ready(ledger)
    // Synchronous once the ledger has been read: no promise on a limited key's every request.
    return loading
      ? loading.then(() => this.decide(ledger, limits, worst, requestId, createdAt, requestsOnly))
      : this.decide(ledger, limits, worst, requestId, createdAt, requestsOnly)
  }

  private decide(ledger: KeyLedger, limits: KeyLimits, worst: number, requestId: string, createdAt: number, requestsOnly: boolean): Admission {
    const now = Date.now()
    ledger.usedAt = now
    const totals = ledger.totals(now)
    const windows = this.windows(limits, totals, now)
    const refusal = this.refusal(ledger, requestsOnly ? windows.filter((window) => window.name === 'rpm') : windows, worst, now, true)
    if (refusal) return { ticket: undefined, headers: this.headers(ledger, limits, windows), refusal }
    const ticket = ledger.take(worst, requestId, createdAt)
    // The headers count this request (and its reservation) in.
    for (const window of windows) {
      if (window.name === 'rpm') {
        window.used += 1
        if (window.resetSeconds === 0) window.resetSeconds = windowSeconds
      } else if (window.name === 'usd-day' || window.name === 'usd-month') window.used += worst
    }
    return { ticket, headers: this.headers(ledger, limits, windows), refusal: undefined }
  }

  /**
   * Why a request (`counts`: one more request) or a further reservation of `worst` nano-dollars is
   * refused: a full minute window, or a USD window whose settled spend and open reservations leave
   * less than `worst` (a cap of $1 takes exactly $1, no more).
   */
  private refusal(ledger: KeyLedger, windows: readonly Window[], worst: number, now: number, counts: boolean): RouterError | undefined {
    const countable = Number.isSafeInteger(worst) && worst >= 0
    for (const window of windows) {
      if (window.name === 'rpm' || window.name === 'tpm') {
        if (!counts || window.used < window.limit) continue
        const retryAfter = ledger.secondsUntilFreed(now, window.name === 'rpm' ? 0 : 1, window.used - window.limit + 1)
        const message = window.name === 'rpm' ? `This key's limit of ${window.limit} requests per minute is reached.` : `This key's limit of ${window.limit} tokens per minute is reached.`
        return new RouterError('key_rate_limited', message, { 'Retry-After': String(retryAfter) })
      }
      // A full window refuses even a request that costs nothing; otherwise the request must fit whole.
      if (countable && window.used < window.limit && window.used + worst <= window.limit) continue
      const cap = `${dollars(window.limit)} per UTC ${window.name === 'usd-day' ? 'day' : 'month'}`
      const message = !countable
        ? `This request's worst-case cost is beyond what a spend cap can count (an output-token bound or n far too large): this key's spend cap is ${cap}.`
        : window.used >= window.limit
          ? `This key's spend cap of ${cap} is reached.`
          : `This request's worst-case cost (${dollars(worst)}) does not fit under this key's spend cap of ${cap}: ${dollars(window.limit - window.used)} is left, counting requests still running. Ask for fewer output tokens (max_tokens) or retry later.`
      return new RouterError('key_budget_exhausted', message, { 'Retry-After': String(window.resetSeconds) })
    }
    return undefined
  }

  /**
   * Holds `more` nano-dollars for an admitted request that has not settled (a later model round of a
   * tool loop, the decisioner's call), when the USD windows still fit it; else the refusal.
   */
  reserveMore(ticket: LimitTicket, limits: KeyLimits, more: number): RouterError | undefined {
    if (more === 0) return undefined
    const ledger = ticket.ledger
    const now = Date.now()
    const refusal = this.refusal(ledger, this.windows(limits, ledger.totals(now), now), more, now, false)
    if (refusal) return refusal
    ledger.grow(ticket, more)
    return undefined
  }

  private windows(limits: KeyLimits, totals: Totals, now: number): Window[] {
    const windows: Window[] = []
    // Until the oldest second that holds any leaves the window (0 when none does).
    const nowSecond = Math.floor(now / 1000)
    const minuteReset = (oldest: number) => (oldest === Infinity ? 0 : Math.max(1, oldest + windowSeconds - nowSecond))
    if (limits.requestsPerMinute !== null) windows.push({ name: 'rpm', limit: limits.requestsPerMinute, used: totals.requests, windowSeconds: 60, resetSeconds: minuteReset(totals.oldestRequests) })
    if (limits.tokensPerMinute !== null) windows.push({ name: 'tpm', limit: limits.tokensPerMinute, used: totals.tokens, windowSeconds: 60, resetSeconds: minuteReset(totals.oldestTokens) })
    if (limits.usdPerDay !== null) {
      windows.push({ name: 'usd-day', limit: usdToNano(limits.usdPerDay), used: totals.nanoToday, windowSeconds: 86_400, resetSeconds: Math.ceil((now - (now % dayMs) + dayMs - now) / 1000) })
    }
    if (limits.usdPerMonth !== null) {
      const month = monthStartOf(now)
      const next = nextMonthStartOf(now)
      windows.push({ name: 'usd-month', limit: usdToNano(limits.usdPerMonth), used: totals.nanoMonth, windowSeconds: (next - month) / 1000, resetSeconds: Math.ceil((next - now) / 1000) })
    }
    return windows
  }

  /** IETF RateLimit fields: every limit set, and the one with the least room left. */
  private headers(ledger: KeyLedger, limits: KeyLimits, windows: Window[]): LimitHeaders {
    // The month's window length changes with the month: the field is built again when it does.
    let policy = ledger.policy?.limits === limits ? ledger.policy.text : undefined
    const text = () => windows.map((window) => `"${window.name}";q=${window.name.startsWith('usd') ? decimal(nanoToUsd(window.limit)) : window.limit};w=${window.windowSeconds}`).join(', ')
    if (policy === undefined || limits.usdPerMonth !== null) {
      policy = text()
      ledger.policy = { limits, text: policy }
    }
    let tightest = windows[0]!
    for (const window of windows) if ((window.limit - window.used) / window.limit < (tightest.limit - tightest.used) / tightest.limit) tightest = window
    const left = Math.max(0, tightest.limit - tightest.used)
    const remaining = tightest.name.startsWith('usd') ? decimal(nanoToUsd(left), true) : String(Math.floor(left))
    return { 'ratelimit-policy': policy, ratelimit: `"${tightest.name}";r=${remaining};t=${tightest.resetSeconds}` }
  }

  /**
   * The RateLimit fields of an answer that took no ticket (a request refused before admission, a
   * model list): the windows as they stand. Synchronous: the key's ledger was prepared when the
   * request was authenticated (until its first read ends, it counts only this node's own requests).
   */
  peekHeaders(keyId: string, workspaceId: string, limits: KeyLimits): LimitHeaders {
    const ledger = this.ledger(keyId, workspaceId)
    const now = Date.now()
    return this.headers(ledger, limits, this.windows(limits, ledger.totals(now), now))
  }

  /** The request finished: its tokens and what it cost (nano-dollars) replace its reservation; `held`: the part a batch's row holds. */
  settle(ticket: LimitTicket, tokens: number, spent: number, held?: { nano: number; batchId: string }) {
    ticket.ledger.settle(ticket, tokens, spent, held)
  }

  /** The key object's `limit_state`: what admission counts now; undefined for a key this node keeps no ledger of. */
  liveState(keyId: string, now = Date.now()): LimitState | undefined {
    const ledger = this.ledgers.get(keyId)
    return ledger && ledger.readAt !== 0 ? ledger.state(now) : undefined
  }

  /** Whether any limited key has a ledger here (nothing to do for a node whose keys have no limits). */
  get active(): boolean {
    return this.ledgers.size > 0
  }

  /**
   * Reads the database's view again for the ledgers in use. A ledger idle for two minutes with nothing
   * of its own left is dropped (its key's next request reads it afresh), so a key whose limits were
   * removed, whose requests no longer come here, stops being read. A settled ticket whose row has not
   * shown within `rowWaitMs` (a replica whose rows cannot reach the primary) leaves, so the ledger's
   * memory stays bounded whatever happens to the rows; the metric counts them.
   */
  async sync(): Promise<void> {
    if (this.syncing) return
    this.syncing = true
    try {
      const now = Date.now()
      const byWorkspace = new Map<string, KeyLedger[]>()
      let expired = 0
      for (const [keyId, ledger] of this.ledgers) {
        ledger.clock = now
        expired += ledger.expire(now - (this.options.rowWaitMs ?? ticketRowWaitMs))
        if (ledger.open.size === 0 && now - ledger.usedAt > 120_000) {
          this.ledgers.delete(keyId)
          continue
        }
        if (ledger.readAt === 0) continue
        const list = byWorkspace.get(ledger.workspaceId)
        if (list) list.push(ledger)
        else byWorkspace.set(ledger.workspaceId, [ledger])
      }
      if (expired > 0) this.options.onExpired?.(expired)
      for (const [workspaceId, ledgers] of byWorkspace) await this.readShown(workspaceId, ledgers)
    } catch (error) {
      this.options.onError?.(error)
    } finally {
      this.syncing = false
    }
  }

  start() {
    if (this.timer) return
    this.timer = setInterval(() => {
      if (this.ledgers.size > 0) void this.sync()
    }, this.options.syncMs)
    this.timer.unref?.()
  }

  stop() {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }
}
