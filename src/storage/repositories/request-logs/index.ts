/**
 * Request-log rows: batched inserts from the log queue (with their hour and day roll-ups, in the same
 * transaction), the usage aggregates read from them, and their retention. One repository made of its
 * parts, each preparing its statements once.
 */
import type { Db } from '../../client'
import { prepareRowInserts } from './insert-rows'
import { prepareRetention } from './retention'
import { prepareRollUp } from './rollups'
import { prepareUsageQueries } from './usage-queries'

export type { KeyWindows, RecentFilter, RequestLogRow, UsageFilter } from './types'

export function createRequestLogRepository(db: Db) {
  return { ...prepareRowInserts(db, prepareRollUp(db)), ...prepareUsageQueries(db), ...prepareRetention(db) }
}

export type RequestLogRepository = ReturnType<typeof createRequestLogRepository>
