/**
 * The spend cap's arithmetic (CONTRACT §11 "USD caps are hard on one node"): whole nano-dollars,
 * reservations apart from settled spend, admission only when settled + open reservations + the
 * request's worst case fit under the cap. A property test drives a key's ledger through admissions,
 * further reservations, settlements (at most what was reserved: the worst case is an upper bound)
 * and rows showing, in random orders and amounts, and checks after every step that the USD windows
 * never hold more than the cap, never go negative, and hold exactly what the model says.
 */
import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { KeyLimiter, type LimitTicket } from '../../src/pipeline/limits/ledger'
import type { KeyLimits } from '../../src/domain/key-limits'

const emptyReader = async (_workspace: string, keyIds: string[]) => ({ windows: keyIds.map((id) => [id, { seconds: [], days: [] }] as [string, { seconds: []; days: [] }]), found: [] })

function limiterFor(): KeyLimiter {
  const limiter = new KeyLimiter(emptyReader, { syncMs: 60_000 })
  limiter.stop()
  return limiter
}

const capOf = (usd: number): KeyLimits => ({ requestsPerMinute: null, tokensPerMinute: null, usdPerDay: usd, usdPerMonth: usd * 10 })

type Command =
  | { kind: 'admit'; worst: number }
  | { kind: 'more'; ticket: number; more: number }
  | { kind: 'settle'; ticket: number; share: number }
  | { kind: 'shown'; ticket: number }
  | { kind: 'expire' }

const nano = fc.oneof(fc.integer({ min: 0, max: 400_000_000 }), fc.integer({ min: 0, max: 2_000_000_000 }), fc.constantFrom(0, 1, 999_999_999, 1_000_000_000, 1_000_000_001))
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('admit' as const), worst: fc.oneof(nano, fc.constantFrom(1e300, Number.MAX_SAFE_INTEGER + 2, 0.5, -1, Number.NaN)) }),
  fc.record({ kind: fc.constant('more' as const), ticket: fc.nat(40), more: fc.oneof(nano, fc.constantFrom(1e300, 0.25, Number.NaN)) }),
  fc.record({ kind: fc.constant('settle' as const), ticket: fc.nat(40), share: fc.double({ min: 0, max: 1, noNaN: true }) }),
  fc.record({ kind: fc.constant('shown' as const), ticket: fc.nat(40) }),
  fc.constant({ kind: 'expire' as const }),
)

describe('the ledger of a USD cap', () => {
  test('reserve, grow, settle and forget in any order never let settled + reserved pass the cap, and never go negative', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { maxLength: 120 }), async (commands) => {
        const limiter = limiterFor()
        const limits = capOf(1)
        const cap = 1_000_000_000
        const tickets: LimitTicket[] = []
        // The model: what the day holds, settled (not yet shown: shown rows leave with their share) and reserved.
        let settled = 0
        let reserved = 0
        for (const [index, step] of commands.entries()) {
          if (step.kind === 'admit') {
            // A full window refuses even a request of $0; otherwise it must fit whole.
            const fits = Number.isSafeInteger(step.worst) && step.worst >= 0 && settled + reserved < cap && settled + reserved + step.worst <= cap
            const admission = await limiter.admit('key', 'workspace', limits, step.worst, `request-${index}`, Date.now())
            expect(admission.refusal === undefined).toBe(fits)
            if (admission.refusal) expect(admission.refusal.code).toBe('key_budget_exhausted')
            else {
              tickets.push(admission.ticket!)
              reserved += step.worst
            }
          } else if (step.kind === 'more') {
            const ticket = tickets[step.ticket % Math.max(1, tickets.length)]
            if (!ticket || ticket.settled) continue
            const fits = step.more === 0 || (Number.isSafeInteger(step.more) && step.more > 0 && settled + reserved + step.more <= cap)
            const refusal = limiter.reserveMore(ticket, limits, step.more)
            expect(refusal === undefined).toBe(fits)
            if (!refusal) reserved += step.more
          } else if (step.kind === 'settle') {
            const ticket = tickets[step.ticket % Math.max(1, tickets.length)]
            if (!ticket || ticket.settled) continue
            // A request costs at most what it reserved (its worst case is an upper bound).
            const spent = Math.floor(ticket.reserved * step.share)
            reserved -= ticket.reserved
            settled += spent
            limiter.settle(ticket, 10, spent)
          } else if (step.kind === 'shown') {
            // Its row reached the database: the own share leaves (a read here shows nothing, as if the rows were pruned).
            const ticket = tickets[step.ticket % Math.max(1, tickets.length)]
            if (!ticket || !ticket.settled || !ticket.ledger.open.has(ticket)) continue
            settled -= ticket.spent
            ticket.ledger.forget(ticket)
          } else {
            // Nothing settled long enough ago: expiry changes nothing.
            const ledger = tickets[0]?.ledger
            if (ledger) expect(ledger.expire(Date.now() - 60_000)).toBe(0)
          }
          const ledger = tickets[0]?.ledger
          if (!ledger) continue
          const totals = ledger.totals(Date.now())
          expect(totals.nanoToday).toBe(settled + reserved)
          expect(totals.nanoToday).toBeLessThanOrEqual(cap)
          expect(totals.nanoToday).toBeGreaterThanOrEqual(0)
          expect(ledger.reservedTotal()).toBe(reserved)
          expect(Number.isSafeInteger(totals.nanoToday)).toBe(true)
        }
        // Everything settled and shown: nothing is left, not a nano-dollar.
        for (const ticket of tickets) {
          if (!ticket.settled) limiter.settle(ticket, 0, 0)
          ticket.ledger.forget(ticket)
        }
        if (tickets[0]) {
          expect(tickets[0].ledger.totals(Date.now()).nanoToday).toBe(0)
          expect(tickets[0].ledger.open.size).toBe(0)
        }
      }),
      { numRuns: 300 },
    )
  })

  test('a cap of $1 admits exactly $1 (>=, not >), and one nano-dollar more is refused', async () => {
    const limiter = limiterFor()
    const limits = capOf(1)
    const first = await limiter.admit('key', 'workspace', limits, 600_000_000, 'a', Date.now())
    expect(first.refusal).toBeUndefined()
    const over = await limiter.admit('key', 'workspace', limits, 400_000_001, 'b', Date.now())
    expect(over.refusal?.code).toBe('key_budget_exhausted')
    expect(over.refusal?.message).toContain('does not fit under this key')
    const exact = await limiter.admit('key', 'workspace', limits, 400_000_000, 'c', Date.now())
    expect(exact.refusal).toBeUndefined()
    expect(exact.headers.ratelimit).toMatch(/^"usd-day";r=0;t=\d+$/)
    const full = await limiter.admit('key', 'workspace', limits, 0, 'd', Date.now())
    expect(full.refusal?.message).toBe("This key's spend cap of $1.00 per UTC day is reached.")
  })

  test('a worst case a plain number cannot count (max_tokens: 1e300) is refused, never added: the ledger is unchanged', async () => {
    const limiter = limiterFor()
    const limits = capOf(1)
    const inFlight = await limiter.admit('key', 'workspace', limits, 800_000_000, 'a', Date.now())
    const ledger = inFlight.ticket!.ledger
    for (const worst of [6e293, 1e300, Number.POSITIVE_INFINITY, Number.NaN, 2 ** 53 + 2]) {
      const refused = await limiter.admit('key', 'workspace', limits, worst, `huge-${worst}`, Date.now())
      expect(refused.refusal?.code).toBe('key_budget_exhausted')
      expect(ledger.totals(Date.now()).nanoToday).toBe(800_000_000)
    }
    // The in-flight request failing upstream releases its own reservation, and only that.
    limiter.settle(inFlight.ticket!, 0, 0)
    expect(ledger.totals(Date.now()).nanoToday).toBe(0)
  })

  test('a settled ticket whose row never shows leaves after the wait, counted; an open one never does', async () => {
    const expired: number[] = []
    const limiter = new KeyLimiter(emptyReader, { syncMs: 60_000, rowWaitMs: 0, onExpired: (count) => expired.push(count) })
    const limits = capOf(1)
    const done = await limiter.admit('key', 'workspace', limits, 10, 'a', Date.now())
    const running = await limiter.admit('key', 'workspace', limits, 20, 'b', Date.now())
    limiter.settle(done.ticket!, 5, 7)
    await Bun.sleep(2)
    await limiter.sync()
    limiter.stop()
    expect(expired).toEqual([1])
    const ledger = running.ticket!.ledger
    expect(ledger.open.size).toBe(1)
    expect(ledger.totals(Date.now()).nanoToday).toBe(20)
  })
})
