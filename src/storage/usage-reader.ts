/**
 * The usage queries (`GET /usage/summary|series|breakdown` and their MCP tools) and the dashboard's
 * request explorer, answered on the read thread (read-thread.ts). The usage queries read hourly
 * roll-ups plus the edge hours' rows; the explorer the newest rows of a window.
 */
import type { KeyWindows, RecentFilter, RequestLogRepository, UsageFilter } from './repositories/request-logs'

export type UsageQuery =
  | { op: 'summary'; filter: UsageFilter }
  | { op: 'series'; filter: UsageFilter; bucketMs: number }
  | { op: 'breakdown'; filter: UsageFilter; by: 'model' | 'gateway'; limit: number }
  | { op: 'recent'; filter: RecentFilter }
  | { op: 'tokens'; filter: UsageFilter }
  | { op: 'keyWindows'; workspaceId: string; keyIds: string[]; sinceMs: number; fromDayMs: number; own: { ids: string[]; sinceMs: number; batchIds?: string[] } }

/** A usage query as the read thread (read-thread.ts) is asked it. */
export type UsageRead = { op: 'usage'; query: UsageQuery }

/**
 * What the reader needs of the read thread: a usage query asked, its answer given back. The thread
 * (read-thread.ts) imports this module to answer the queries, so this module names no type of it.
 */
export interface UsageAsker {
  ask<T>(read: UsageRead): Promise<T>
}

export type SummaryRow = ReturnType<RequestLogRepository['summary']>
export type SeriesRow = ReturnType<RequestLogRepository['series']>[number]
export type BreakdownRow = ReturnType<RequestLogRepository['breakdown']>[number]
export type RecentRow = ReturnType<RequestLogRepository['recent']>[number]
export type TokensRow = ReturnType<RequestLogRepository['tokens']>[number]

export function runUsageQuery(logs: RequestLogRepository, query: UsageQuery): unknown {
  switch (query.op) {
    case 'summary':
      return logs.summary(query.filter)
    case 'series':
      return logs.series(query.filter, query.bucketMs)
    case 'breakdown':
      return logs.breakdown(query.filter, query.by, query.limit)
    case 'recent':
      return logs.recent(query.filter)
    case 'tokens':
      return logs.tokens(query.filter)
    case 'keyWindows': {
      // A Map does not cross the thread as one: sent as entries.
      const answer = logs.keyWindows(query.workspaceId, query.keyIds, query.sinceMs, query.fromDayMs, query.own)
      return { windows: [...answer.windows], found: answer.found, foundBatches: answer.foundBatches }
    }
  }
}

export interface UsageReader {
  summary(filter: UsageFilter): Promise<SummaryRow>
  series(filter: UsageFilter, bucketMs: number): Promise<SeriesRow[]>
  breakdown(filter: UsageFilter, by: 'model' | 'gateway', limit: number): Promise<BreakdownRow[]>
  /** The request explorer's rows (the dashboard). */
  recent(filter: RecentFilter): Promise<RecentRow[]>
  /** Tokens by model and gateway (the dashboard's cost table). */
  tokens(filter: UsageFilter): Promise<TokensRow[]>
  /** Keys' usage against their limits (pipeline/limits). */
  keyWindows(workspaceId: string, keyIds: string[], sinceMs: number, fromDayMs: number, own: { ids: string[]; sinceMs: number; batchIds?: string[] }): Promise<{ windows: [string, KeyWindows][]; found: string[]; foundBatches: string[] }>
}

export function createUsageReader(reads: UsageAsker): UsageReader {
  return {
    summary: (filter) => reads.ask({ op: 'usage', query: { op: 'summary', filter } }),
    series: (filter, bucketMs) => reads.ask({ op: 'usage', query: { op: 'series', filter, bucketMs } }),
    breakdown: (filter, by, limit) => reads.ask({ op: 'usage', query: { op: 'breakdown', filter, by, limit } }),
    recent: (filter) => reads.ask({ op: 'usage', query: { op: 'recent', filter } }),
    tokens: (filter) => reads.ask({ op: 'usage', query: { op: 'tokens', filter } }),
    keyWindows: (workspaceId, keyIds, sinceMs, fromDayMs, own) => reads.ask({ op: 'usage', query: { op: 'keyWindows', workspaceId, keyIds, sinceMs, fromDayMs, own } }),
  }
}
