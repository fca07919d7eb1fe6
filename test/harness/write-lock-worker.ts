/**
 * Another connection, on a thread of its own, that takes a database's write lock and keeps it for a
 * while: what a job's long transaction looks like to the serving thread. Told `{ path, holdMs }`, it
 * answers 'held' once the lock is its own and 'released' after it commits.
 */
import { Database } from 'bun:sqlite'

declare const self: Worker

self.onmessage = (event: MessageEvent<{ path: string; holdMs: number }>) => {
  const sqlite = new Database(event.data.path)
  sqlite.exec('PRAGMA busy_timeout = 5000')
  sqlite.exec('BEGIN IMMEDIATE')
  self.postMessage('held')
  Bun.sleepSync(event.data.holdMs)
  sqlite.exec('COMMIT')
  sqlite.close()
  self.postMessage('released')
}
