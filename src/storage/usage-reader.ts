/**
 * The usage queries (`GET /usage/summary|series|breakdown` and their MCP tools), answered on the
 * read thread (read-thread.ts). They read hourly roll-ups plus the edge hours' rows.
 */
import type { createRequestLogRepository, UsageFilter } from './repositories/request-logs'
import type { ReadThread } from './read-thread'

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
}

export function createUsageReader(reads: ReadThread): UsageReader {
  return {
    summary: (filter) => reads.ask({ op: 'usage', query: { op: 'summary', filter } }),
    series: (filter, bucketMs) => reads.ask({ op: 'usage', query: { op: 'series', filter, bucketMs } }),
    breakdown: (filter, by, limit) => reads.ask({ op: 'usage', query: { op: 'breakdown', filter, by, limit } }),
  }
}
