/**
 * Heavy reads off the event loop that serves inference: the usage queries (issue: "they must never
 * block the event loop that serves inference") and the rows of a configuration snapshot's rebuild
 * ("background rebuild and swap"). Over 10⁷ log rows or 10,000 keys either is milliseconds of
 * SQLite work, and every millisecond on the serving thread is a millisecond of every request in
 * flight. So they run on one worker thread with its own read-only connection (read-worker.ts),
 * started on the first read; an in-memory database, which another connection cannot see, is read in
 * place.
 */
import type { Database } from 'bun:sqlite'
import type { RequestLogRepository } from './repositories/request-logs'
import { SnapshotRowReader, type SnapshotRowsRequest } from './snapshot-rows'
import { runUsageQuery, type UsageRead } from './usage-reader'
import { workerEntry } from '../worker-entry'

export type ReadQuery = UsageRead | { op: 'snapshot'; request: SnapshotRowsRequest }

/** What the reads read: the request log's repository (usage) and the connection (snapshot rows). */
export interface ReadSources {
  logs: RequestLogRepository
  sqlite: Database
}

export function runRead(sources: ReadSources, rows: SnapshotRowReader, query: ReadQuery): unknown {
  return query.op === 'usage' ? runUsageQuery(sources.logs, query.query) : rows.read(sources.sqlite, query.request)
}

export interface ReadThread {
  ask<T>(query: ReadQuery): Promise<T>
  /** Ends the thread (reads after this start a new one). */
  close(): void
}

type Reply = { type: 'opened' } | { type: 'failed'; error: string } | { type: 'answer'; id: number; result?: unknown; error?: string } | { type: 'closed' }

/**
 * `inPlace`: the serving connection's sources, read from directly for an in-memory database, or
 * when `threaded` is false (a thread that serves no requests: the scheduler's).
 */
export function createReadThread(dbPath: string, inPlace: () => ReadSources, threaded = dbPath !== ':memory:'): ReadThread {
  let worker: Worker | undefined
  let opened: Promise<void> | undefined
  let nextId = 1
  const inPlaceRows = new SnapshotRowReader()
  const waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>()

  const start = (): Promise<void> => {
    if (opened) return opened
    const thread = new Worker(workerEntry(new URL('./read-worker.ts', import.meta.url), './storage/read-worker.ts'), { ref: false })
    worker = thread
    opened = new Promise<void>((resolve, reject) => {
      thread.onmessage = (event: MessageEvent<Reply>) => {
        const reply = event.data
        if (reply.type === 'opened') resolve()
        else if (reply.type === 'failed') {
          reject(new Error(`The read thread could not open the database: ${reply.error}`))
          // The next read starts a new thread (the database may be there by then).
          thread.terminate()
          if (worker === thread) {
            worker = undefined
            opened = undefined
          }
        }
        else if (reply.type === 'answer') {
          const pending = waiting.get(reply.id)
          waiting.delete(reply.id)
          if (reply.error !== undefined) pending?.reject(new Error(reply.error))
          else pending?.resolve(reply.result)
        }
      }
      thread.onerror = (event) => {
        const error = new Error(`The read thread failed: ${event.message}`)
        reject(error)
        for (const pending of waiting.values()) pending.reject(error)
        waiting.clear()
        // The next read starts a new thread.
        worker = undefined
        opened = undefined
      }
    })
    thread.postMessage({ type: 'open', path: dbPath })
    return opened
  }

  return {
    async ask<T>(query: ReadQuery): Promise<T> {
      if (!threaded) return runRead(inPlace(), inPlaceRows, query) as T
      await start()
      const id = nextId++
      const answer = new Promise<T>((resolve, reject) => waiting.set(id, { resolve: resolve as (value: unknown) => void, reject }))
      worker!.postMessage({ type: 'query', id, query })
      return answer
    },
    close() {
      worker?.terminate()
      worker = undefined
      opened = undefined
      for (const pending of waiting.values()) pending.reject(new Error('The read thread was closed.'))
      waiting.clear()
    },
  }
}
