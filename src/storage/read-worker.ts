/**
 * The read thread (see read-thread.ts): its own read-only connection answers the usage queries
 * (`GET /usage/summary|series|breakdown` and their MCP tools) and reads a configuration snapshot's
 * rows, so neither a month of a large request log nor 10,000 keys ever holds the event loop that
 * serves inference.
 */
import { Database } from 'bun:sqlite'
import { drizzleOn } from './client'
import { createRequestLogRepository } from './repositories/request-logs'
import { runRead, type ReadQuery, type ReadSources } from './read-thread'
import { SnapshotRowReader } from './snapshot-rows'

declare const self: Worker

type Command = { type: 'open'; path: string } | { type: 'query'; id: number; query: ReadQuery } | { type: 'close' }

let database: Database | undefined
let sources: ReadSources | undefined
const rows = new SnapshotRowReader()

self.onmessage = (event: MessageEvent<Command>) => {
  const command = event.data
  if (command.type === 'open') {
    try {
      database = new Database(command.path, { readonly: true, strict: true })
      database.exec('PRAGMA busy_timeout = 5000')
      sources = { logs: createRequestLogRepository(drizzleOn(database)), sqlite: database }
      self.postMessage({ type: 'opened' })
    } catch (error) {
      self.postMessage({ type: 'failed', error: error instanceof Error ? error.message : String(error) })
    }
    return
  }
  if (command.type === 'query') {
    try {
      self.postMessage({ type: 'answer', id: command.id, result: runRead(sources!, rows, command.query) })
    } catch (error) {
      self.postMessage({ type: 'answer', id: command.id, error: error instanceof Error ? error.message : String(error) })
    }
    return
  }
  database?.close()
  database = undefined
  self.postMessage({ type: 'closed' })
}
