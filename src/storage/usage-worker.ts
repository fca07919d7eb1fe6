/**
 * The usage queries' thread (see usage-reader.ts): its own read-only connection answers
 * `GET /usage/summary|series|breakdown` (and their MCP tools), so a query over a month of a large
 * request log never holds the event loop that serves inference.
 */
import { Database } from 'bun:sqlite'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import * as schema from './schema'
import type { Db } from './client'
import { createRequestLogRepository } from './repositories/request-logs'
import { runUsageQuery, type UsageQuery } from './usage-reader'

declare const self: Worker

type Command = { type: 'open'; path: string } | { type: 'query'; id: number; query: UsageQuery } | { type: 'close' }

let database: Database | undefined
let logs: ReturnType<typeof createRequestLogRepository> | undefined

self.onmessage = (event: MessageEvent<Command>) => {
  const command = event.data
  if (command.type === 'open') {
    try {
      database = new Database(command.path, { readonly: true, strict: true })
      database.exec('PRAGMA busy_timeout = 5000')
      logs = createRequestLogRepository(drizzle(database, { schema }) as Db)
      self.postMessage({ type: 'opened' })
    } catch (error) {
      self.postMessage({ type: 'failed', error: error instanceof Error ? error.message : String(error) })
    }
    return
  }
  if (command.type === 'query') {
    try {
      self.postMessage({ type: 'answer', id: command.id, result: runUsageQuery(logs!, command.query) })
    } catch (error) {
      self.postMessage({ type: 'answer', id: command.id, error: error instanceof Error ? error.message : String(error) })
    }
    return
  }
  database?.close()
  database = undefined
  self.postMessage({ type: 'closed' })
}
