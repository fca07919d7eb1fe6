/**
 * The scheduled jobs' lease rows (schema/batches.ts `job_leases`): which process may run a job now,
 * and when it is next due. Every change is one statement, so two processes (a server and a CLI
 * `jobs run`, or two servers on one database) racing for a job settle it inside SQLite's write lock.
 */
import { and, asc, eq, gt, lte, or, type SQL } from 'drizzle-orm'
import type { Db } from '../client'
import { jobLeases } from '../schema'

export type JobLeaseRow = typeof jobLeases.$inferSelect

export interface AcquireOptions {
  /** Only when the job is due (`next_run_at <= now`): the scheduler's take. The CLI runs it whenever the lease is free. */
  dueOnly: boolean
  /** The first due time of a job without a row yet; default `nowMs`. */
  firstRunAt?: number
}

export interface ReleaseOptions {
  /** When the job is next due; undefined leaves the schedule as it was (a run on a trigger of its own). */
  nextRunAt: number | undefined
  /** The run's result or `{error}`, stored as JSON. */
  result: unknown
  finishedAt: number
}

export function createJobLeaseRepository(db: Db) {
  return {
    /**
     * Takes the job's lease until `nowMs + leaseMs` when it is free (`locked_until <= now`) or this
     * holder's already, and with `dueOnly` only when the job is due. A job without a row gets one
     * (next run at `firstRunAt`), taken in the same statement when the conditions hold for it.
     */
    acquire(job: string, holder: string, nowMs: number, leaseMs: number, options: AcquireOptions): boolean {
      const lockedUntil = nowMs + leaseMs
      const firstRunAt = options.firstRunAt ?? nowMs
      // A new row is taken at once unless the scheduler asks and its first run lies ahead.
      const takenOnInsert = !options.dueOnly || firstRunAt <= nowMs
      const conditions: SQL[] = [or(lte(jobLeases.lockedUntil, nowMs), eq(jobLeases.holder, holder))!]
      if (options.dueOnly) conditions.push(lte(jobLeases.nextRunAt, nowMs))
      const row = db
        .insert(jobLeases)
        .values({ job, holder: takenOnInsert ? holder : null, lockedUntil: takenOnInsert ? lockedUntil : 0, nextRunAt: firstRunAt })
        .onConflictDoUpdate({ target: jobLeases.job, set: { holder, lockedUntil }, setWhere: and(...conditions) })
        // No row comes back when the conflict's WHERE refused the update.
        .returning({ holder: jobLeases.holder, lockedUntil: jobLeases.lockedUntil })
        .get()
      return row !== undefined && row.holder === holder && row.lockedUntil === lockedUntil
    },
    /** Extends a lease this holder still has; false when it has lost it (expired and taken by another). */
    renew(job: string, holder: string, untilMs: number): boolean {
      return (
        db
          .update(jobLeases)
          .set({ lockedUntil: untilMs })
          .where(and(eq(jobLeases.job, job), eq(jobLeases.holder, holder), gt(jobLeases.lockedUntil, 0)))
          .returning({ job: jobLeases.job })
          .all().length === 1
      )
    },
    /** Ends a run: the lease is free, the result and the next due time are recorded. The holder stays as the last one to run it. */
    release(job: string, holder: string, options: ReleaseOptions): boolean {
      return (
        db
          .update(jobLeases)
          .set({ lockedUntil: 0, ...(options.nextRunAt === undefined ? {} : { nextRunAt: options.nextRunAt }), lastFinishedAt: options.finishedAt, lastResult: JSON.stringify(options.result) })
          .where(and(eq(jobLeases.job, job), eq(jobLeases.holder, holder)))
          .returning({ job: jobLeases.job })
          .all().length === 1
      )
    },
    /**
     * Frees every lease a holder still has without recording a run (a process stopping mid-job):
     * `next_run_at` is left as it was, so the job is due again at once for whoever takes it.
     */
    abandon(holder: string): number {
      return db
        .update(jobLeases)
        .set({ lockedUntil: 0 })
        .where(and(eq(jobLeases.holder, holder), gt(jobLeases.lockedUntil, 0)))
        .returning({ job: jobLeases.job })
        .all().length
    },
    /** Creates the job's row unless it exists, first due at `nextRunAt`. */
    ensure(job: string, nextRunAt: number): void {
      db.insert(jobLeases).values({ job, nextRunAt }).onConflictDoNothing().run()
    },
    /** Moves a job's next run (an operator or a test asking for a run now). */
    setNextRunAt(job: string, nextRunAt: number): void {
      db.insert(jobLeases).values({ job, nextRunAt }).onConflictDoUpdate({ target: jobLeases.job, set: { nextRunAt } }).run()
    },
    get(job: string): JobLeaseRow | undefined {
      return db.select().from(jobLeases).where(eq(jobLeases.job, job)).get()
    },
    list(): JobLeaseRow[] {
      return db.select().from(jobLeases).orderBy(asc(jobLeases.job)).all()
    },
  }
}
