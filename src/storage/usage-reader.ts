/**
 * Usage queries off the event loop (issue: "they must never block the event loop that serves
 * inference"). The queries read hourly roll-ups plus the edge hours' rows; over 10⁷ rows that is
 * still milliseconds of SQLite work, and every millisecond on the serving thread is a millisecond
 * of every request in flight. So they run on a worker thread with its own read-only connection
 * (usage-worker.ts), started on the first usage query; an in-memory database, which another
 * connection cannot see, is queried in place.
 */
import type { createRequestLogRepository, UsageFilter } from './repositories/request-logs'
import { workerEntry } from '../worker-entry'

type RequestLogRepository = ReturnType<typeof createRequestLogRepository>

export type UsageQuery =
  | { op: 'summary'; filter: UsageFilter }
  | { op: 'series'; filter: UsageFilter; bucketMs: number }
  | { op: 'breakdown'; filter: UsageFilter; by: 'model' | 'gateway'; limit: number }

export type SummaryRow = ReturnType<RequestLogRepository['summary']>
export type SeriesRow = ReturnType<RequestLogRepository['series']>[number]
export type BreakdownRow = ReturnType<RequestLogRepository['breakdown']>[number]

export function runUsageQuery(logs: RequestLogRepository, query: UsageQuery): unknown {
  switch (query.op) {
    case 'summary':
      return logs.summary(query.filter)
    case 'series':
      return logs.series(query.filter, query.bucketMs)
    case 'breakdown':
      return logs.breakdown(query.filter, query.by, query.limit)
  }
}

export interface UsageReader {
  summary(filter: UsageFilter): Promise<SummaryRow>
  series(filter: UsageFilter, bucketMs: number): Promise<SeriesRow[]>
  breakdown(filter: UsageFilter, by: 'model' | 'gateway', limit: number): Promise<BreakdownRow[]>
  /** Ends the thread (queries after this start a new one). */
  close(): void
}

type Reply = { type: 'opened' } | { type: 'failed'; error: string } | { type: 'answer'; id: number; result?: unknown; error?: string } | { type: 'closed' }

/** `inPlace`: the serving connection's repository, for an in-memory database. */
export function createUsageReader(dbPath: string, inPlace: () => RequestLogRepository): UsageReader {
  let worker: Worker | undefined
  let opened: Promise<void> | undefined
  let nextId = 1
  const waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>()

  const start = (): Promise<void> => {
    if (opened) return opened
    const thread = new Worker(workerEntry(new URL('./usage-worker.ts', import.meta.url), './storage/usage-worker.ts'), { ref: false })
    worker = thread
    opened = new Promise<void>((resolve, reject) => {
      thread.onmessage = (event: MessageEvent<Reply>) => {
        const reply = event.data
        if (reply.type === 'opened') resolve()
        else if (reply.type === 'failed') reject(new Error(`The usage query thread could not open the database: ${reply.error}`))
        else if (reply.type === 'answer') {
          const pending = waiting.get(reply.id)
          waiting.delete(reply.id)
          if (reply.error !== undefined) pending?.reject(new Error(reply.error))
          else pending?.resolve(reply.result)
        }
      }
      thread.onerror = (event) => {
        const error = new Error(`The usage query thread failed: ${event.message}`)
        reject(error)
        for (const pending of waiting.values()) pending.reject(error)
        waiting.clear()
        // The next query starts a new thread.
        worker = undefined
        opened = undefined
      }
    })
    thread.postMessage({ type: 'open', path: dbPath })
    return opened
  }

  const ask = async <T>(query: UsageQuery): Promise<T> => {
    if (dbPath === ':memory:') return runUsageQuery(inPlace(), query) as T
    await start()
    const id = nextId++
    const answer = new Promise<T>((resolve, reject) => waiting.set(id, { resolve: resolve as (value: unknown) => void, reject }))
    worker!.postMessage({ type: 'query', id, query })
    return answer
  }

  return {
    summary: (filter) => ask({ op: 'summary', filter }),
    series: (filter, bucketMs) => ask({ op: 'series', filter, bucketMs }),
    breakdown: (filter, by, limit) => ask({ op: 'breakdown', filter, by, limit }),
    close() {
      worker?.terminate()
      worker = undefined
      opened = undefined
      for (const pending of waiting.values()) pending.reject(new Error('The usage query thread was closed.'))
      waiting.clear()
    },
  }
}
