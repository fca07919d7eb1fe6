/**
 * One limited key's windows (CONTRACT §11): what the database shows (requests and tokens per second
 * over the last minute, cost per UTC day this month: every node's rows, as this node's copy has
 * them), this node's own requests the database does not show yet, and the open reservations of the
 * requests still running, with their sums kept up to date as requests come and go. The limiter
 * (limits/ledger.ts) reads the database for it and decides admissions on its totals.
 */
import type { KeyWindows } from '../../storage/repositories/request-logs'
import { nanoToUsd } from '../../storage/money'
import type { KeyLimits } from '../../domain/key-limits'

export const dayMs = 86_400_000
/** The minute window, in seconds. */
export const windowSeconds = 60

/** The last day asked about and its month's start: the same all day, so computed once a day. */
let knownDay = -1
let knownMonth = 0

export function monthStartOf(now: number): number {
  const day = now - (now % dayMs)
  if (day !== knownDay) {
    const date = new Date(now)
    knownMonth = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
    knownDay = day
  }
  return knownMonth
}

export function nextMonthStartOf(now: number): number {
  const date = new Date(now)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
}

/** One admitted request's share of its key's windows, until the database shows it. */
export interface LimitTicket {
  readonly ledger: KeyLedger
  readonly second: number
  readonly day: number
  /** The request's id: its request-log row's (X-Router-Request-Id). */
  readonly requestId: string
  /** Its row's `created_at` (the request's start, Unix ms). */
  readonly createdAt: number
  /** Nano-dollars held for it while it runs: its worst case, grown by later model rounds; 0 once settled. */
  reserved: number
  /** What it cost, nano-dollars, once settled. */
  spent: number
  tokens: number
  settled: boolean
  /** When it settled (Date.now()): a settled ticket whose row never shows leaves after a while. */
  settledAt: number
  /**
   * A batch submit's: the part of `spent` its batch's row holds (the items' reservation), and that
   * batch's id. It leaves as soon as a read shows the row, which may be before the request's own row.
   */
  held: number
  batchId: string | undefined
}

/** The key object's `limit_state` (CONTRACT §11). */
export interface LimitState {
  requests_last_minute: number
  tokens_last_minute: number
  usd_today: number
  usd_this_month: number
}

/** The windows' totals at a moment, with what the reset times need; money in nano-dollars. */
export interface Totals {
  requests: number
  tokens: number
  /** Settled spend and open reservations of the UTC day and month. */
  nanoToday: number
  nanoMonth: number
  /** The oldest second in the window that holds requests (tokens); Infinity when none does. */
  oldestRequests: number
  oldestTokens: number
}

type SecondSums = [requests: number, tokens: number]

/**
 * A key's windows. Money is whole nano-dollars throughout (storage/money.ts), and kept in three
 * parts: what the database shows (`shownDays`), this node's settled requests it does not show yet
 * (`ownDays`), and the open reservations of requests still running (`reservedDays`). A reservation
 * is never mixed into spend: it leaves exactly as it came when its request settles.
 */
export class KeyLedger {
  /** From the last read of the database. */
  private shownSeconds = new Map<number, SecondSums>()
  private shownDays = new Map<number, number>()
  /** This node's settled requests the last read did not show. */
  private ownSeconds = new Map<number, SecondSums>()
  private ownDays = new Map<number, number>()
  /** Open reservations, by the day their request counts in. */
  private reservedDays = new Map<number, number>()
  readonly open = new Set<LimitTicket>()
  /** The RateLimit-Policy field of the limits it was last built for (the same until the key's limits change). */
  policy: { limits: KeyLimits; text: string } | undefined
  /** When the last read began (Date.now()); 0: not read yet. */
  readAt = 0
  loading: Promise<void> | undefined
  usedAt = 0
  /** A coarse clock for settled tickets' wait (set by each read and sync): no clock read per request. */
  clock = Date.now()

  constructor(
    readonly keyId: string,
    readonly workspaceId: string,
  ) {}

  /** The own finished requests whose rows a read may find. */
  finished(): LimitTicket[] {
    const list: LimitTicket[] = []
    for (const ticket of this.open) if (ticket.settled) list.push(ticket)
    return list
  }

  /** The database's view, read at `startedAt`, and which of the own requests (`asked`) it holds: those leave. */
  shown(windows: KeyWindows | undefined, startedAt: number, asked: readonly LimitTicket[], found: ReadonlySet<string>, foundBatches: ReadonlySet<string> = new Set()) {
    this.shownSeconds = new Map((windows?.seconds ?? []).map(([second, requests, tokens]) => [second, [requests, tokens]]))
    this.shownDays = new Map(windows?.days ?? [])
    this.readAt = startedAt
    this.clock = startedAt
    // Counted afresh at the next admission, from the new view.
    this.countedFirst = Number.NaN
    this.countedDay = Number.NaN
    for (const ticket of asked) {
      if (found.has(ticket.requestId)) this.forget(ticket)
      else if (ticket.held !== 0 && ticket.batchId !== undefined && foundBatches.has(ticket.batchId)) {
        // The batch's row holds its reservation now, and the sums count it: the own copy goes.
        this.addDay(this.ownDays, ticket.day, -ticket.held)
        ticket.spent -= ticket.held
        ticket.held = 0
      }
    }
    // Own seconds out of the window and days before this month hold nothing that counts.
    const oldest = Math.floor(startedAt / 1000) - windowSeconds
    for (const second of this.ownSeconds.keys()) if (second < oldest) this.ownSeconds.delete(second)
    const month = monthStartOf(startedAt)
    for (const day of this.ownDays.keys()) if (day < month) this.ownDays.delete(day)
    for (const [day, nano] of this.reservedDays) if (nano === 0 && day < startedAt - dayMs) this.reservedDays.delete(day)
  }

  /**
   * The windows' sums as of the last count, kept up to date as requests come and go, so an admission
   * does not walk the minute's seconds and the month's days: they are counted again only when the
   * minute window moves on a second (or the day changes), after a read of the database, and after a
   * share leaves (the oldest second holding any may change then).
   */
  private countedFirst = Number.NaN
  private countedDay = Number.NaN
  private countedMonth = 0
  private readonly counted: Totals = { requests: 0, tokens: 0, nanoToday: 0, nanoMonth: 0, oldestRequests: Infinity, oldestTokens: Infinity }

  private addSecond(second: number, requests: number, tokens: number) {
    const sums = this.ownSeconds.get(second)
    if (sums) {
      sums[0] += requests
      sums[1] += tokens
    } else this.ownSeconds.set(second, [requests, tokens])
    if (second < this.countedFirst) return
    if (requests < 0 || tokens < 0) {
      this.countedFirst = Number.NaN
      return
    }
    const counted = this.counted
    counted.requests += requests
    counted.tokens += tokens
    if (requests > 0 && second < counted.oldestRequests) counted.oldestRequests = second
    if (tokens > 0 && second < counted.oldestTokens) counted.oldestTokens = second
  }

  /**
   * Adds `amount` to a day's sum. A sum that comes back to 0 stays (a request's reservation comes and
   * goes on every request: deleting and adding the entry each time churns the map); days out of the
   * month leave with each read of the database.
   */
  private addDay(days: Map<number, number>, day: number, amount: number) {
    days.set(day, (days.get(day) ?? 0) + amount)
    if (day === this.countedDay) this.counted.nanoToday += amount
    if (day >= this.countedMonth) this.counted.nanoMonth += amount
  }

  /** Counts a request in and holds `reserve` nano-dollars for it (a whole number, checked by the limiter). */
  take(reserve: number, requestId: string, createdAt: number): LimitTicket {
    // Counted in the second and day its row will be counted in (its created_at).
    const second = Math.floor(createdAt / 1000)
    const day = createdAt - (createdAt % dayMs)
    const ticket: LimitTicket = { ledger: this, second, day, requestId, createdAt, reserved: reserve, spent: 0, tokens: 0, settled: false, settledAt: 0, held: 0, batchId: undefined }
    this.addSecond(second, 1, 0)
    if (reserve !== 0) this.addDay(this.reservedDays, day, reserve)
    this.open.add(ticket)
    return ticket
  }

  /** Holds `more` nano-dollars for an open request (a later model round, a side call). */
  grow(ticket: LimitTicket, more: number) {
    if (ticket.settled || more === 0) return
    ticket.reserved += more
    this.addDay(this.reservedDays, ticket.day, more)
  }

  /**
   * The request ended: its reservation is let go, and what it cost (nano-dollars) and its tokens count
   * instead. `held`: of `spent`, what a batch's row holds from now on (`batchId`).
   */
  settle(ticket: LimitTicket, tokens: number, spent: number, held?: { nano: number; batchId: string }) {
    if (ticket.settled) return
    if (held && held.nano !== 0) {
      ticket.held = held.nano
      ticket.batchId = held.batchId
    }
    ticket.settled = true
    ticket.settledAt = this.clock
    if (ticket.reserved !== 0) this.addDay(this.reservedDays, ticket.day, -ticket.reserved)
    ticket.reserved = 0
    if (tokens !== 0) this.addSecond(ticket.second, 0, tokens)
    if (spent !== 0) this.addDay(this.ownDays, ticket.day, spent)
    ticket.tokens = tokens
    ticket.spent = spent
  }

  /** The ticket's row is in the database's view now (or it waited too long for it): its own share goes. */
  forget(ticket: LimitTicket) {
    if (!this.open.delete(ticket)) return
    this.addSecond(ticket.second, -1, -ticket.tokens)
    if (ticket.spent !== 0) this.addDay(this.ownDays, ticket.day, -ticket.spent)
  }

  /** Settled tickets that have waited for their row since before `before` leave (returns how many). */
  expire(before: number): number {
    let expired = 0
    for (const ticket of this.open) {
      if (ticket.settled && ticket.settledAt < before) {
        this.forget(ticket)
        expired++
      }
    }
    return expired
  }

  /** The windows' totals at `now` (an object the ledger reuses: read it before the next call). */
  totals(now: number): Totals {
    const first = Math.floor(now / 1000) - windowSeconds + 1
    if (first !== this.countedFirst) this.countSeconds(first)
    const today = now - (now % dayMs)
    if (today !== this.countedDay) this.countDays(now, today)
    return this.counted
  }

  private countSeconds(first: number) {
    let requests = 0
    let tokens = 0
    let oldestRequests = Infinity
    let oldestTokens = Infinity
    for (const [second, sums] of this.shownSeconds) {
      if (second < first) continue
      requests += sums[0]
      tokens += sums[1]
      if (sums[0] > 0 && second < oldestRequests) oldestRequests = second
      if (sums[1] > 0 && second < oldestTokens) oldestTokens = second
    }
    for (const [second, sums] of this.ownSeconds) {
      if (second < first) continue
      requests += sums[0]
      tokens += sums[1]
      if (sums[0] > 0 && second < oldestRequests) oldestRequests = second
      if (sums[1] > 0 && second < oldestTokens) oldestTokens = second
    }
    const counted = this.counted
    counted.requests = requests
    counted.tokens = tokens
    counted.oldestRequests = oldestRequests
    counted.oldestTokens = oldestTokens
    this.countedFirst = first
  }

  private countDays(now: number, today: number) {
    const month = monthStartOf(now)
    let nanoMonth = 0
    for (const [day, nano] of this.shownDays) if (day >= month) nanoMonth += nano
    for (const [day, nano] of this.ownDays) if (day >= month) nanoMonth += nano
    for (const [day, nano] of this.reservedDays) if (day >= month) nanoMonth += nano
    this.counted.nanoToday = (this.shownDays.get(today) ?? 0) + (this.ownDays.get(today) ?? 0) + (this.reservedDays.get(today) ?? 0)
    this.counted.nanoMonth = nanoMonth
    this.countedDay = today
    this.countedMonth = month
  }

  /** The open reservations in all (nano-dollars): what the ledger holds for requests still running. */
  reservedTotal(): number {
    let total = 0
    for (const nano of this.reservedDays.values()) total += nano
    return total
  }

  /** The windows' totals as the key object's `limit_state` shows them (USD). */
  state(now: number): LimitState {
    const totals = this.totals(now)
    return { requests_last_minute: totals.requests, tokens_last_minute: totals.tokens, usd_today: nanoToUsd(totals.nanoToday), usd_this_month: nanoToUsd(totals.nanoMonth) }
  }

  /**
   * Seconds until the minute window frees room for `over` more (requests or tokens: `index`): the
   * oldest seconds leave first. At least 1.
   */
  secondsUntilFreed(now: number, index: 0 | 1, over: number): number {
    const nowSecond = Math.floor(now / 1000)
    const first = nowSecond - windowSeconds + 1
    const bySecond = new Map<number, number>()
    for (const source of [this.shownSeconds, this.ownSeconds]) {
      for (const [second, sums] of source) if (second >= first && sums[index] !== 0) bySecond.set(second, (bySecond.get(second) ?? 0) + sums[index])
    }
    let freed = 0
    for (const second of [...bySecond.keys()].sort((left, right) => left - right)) {
      freed += bySecond.get(second)!
      if (freed >= over) return Math.max(1, second + windowSeconds - nowSecond)
    }
    return windowSeconds
  }
}

/** What the database shows of a key, as `limit_state` (a key this node keeps no ledger of). */
export function shownState(keyId: string, workspaceId: string, windows: KeyWindows | undefined, now: number): LimitState {
  const ledger = new KeyLedger(keyId, workspaceId)
  ledger.shown(windows, now, [], new Set())
  return ledger.state(now)
}
