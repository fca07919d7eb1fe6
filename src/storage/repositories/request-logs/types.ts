/** The request log's row, its readers' filters and answers, and the roll-ups' buckets: the types the repository's parts share. */
import type { requestLogs, usageRollups } from '../../schema'

export type RequestLogRow = typeof requestLogs.$inferInsert

export interface UsageFilter {
  workspaceId: string
  sinceMs: number
  keyIds?: string[]
}

/**
 * A key's usage as the database shows it: [second, requests, tokens] since a time, and [UTC day
 * start, its recorded cost in whole nano-dollars (storage/money.ts)].
 */
export interface KeyWindows {
  seconds: [second: number, requests: number, tokens: number][]
  days: [dayMs: number, nanoUsd: number][]
}

/** The request explorer's filter: a workspace's rows since a time, newest first. */
export interface RecentFilter {
  workspaceId: string
  sinceMs: number
  keyId?: string
  /** `ok`: below 400; `error`: 400 and above (what the usage summary counts as errors); a number: that status. */
  status?: 'ok' | 'error' | number
  model?: string
  limit: number
}

/** The roll-ups' buckets: an hour (usage_rollups) and a UTC day (usage_daily_rollups); writing and reading them agree on these. */
export const hourMs = 3_600_000
export const dayMs = 24 * hourMs

/** The hour and the day roll-ups: one table type (schema `rollupTable`), so one query serves both. */
export type RollupTable = typeof usageRollups
