/**
 * Usage roll-ups (usage_rollups by hour, usage_daily_rollups by UTC day): kept in the transaction that
 * writes request-log rows, so usage queries read hour and day buckets instead of rows. Whatever the rows, the answers are the ones a query over
 * the rows gives; replayed rows are counted once; rows written before the roll-ups existed are
 * rolled up by their migration, and costs recorded in USD become whole nano-dollars by theirs.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import { Database } from 'bun:sqlite'
import { openStorage } from '../../src/storage/client'
import { createRepositories } from '../../src/storage/repositories'
import { embeddedMigrations } from '../../src/storage/migrations'
import type { RequestLogRow, UsageFilter } from '../../src/storage/repositories/request-logs'

const hourMs = 3_600_000
const dayMs = 24 * hourMs

/**
 * A deterministic pseudo-random sequence (mulberry32), so a failure can be replayed. Successive values
 * are independent enough that every hour gets rows of each workspace (a plain linear congruential
 * sequence left whole hours of one workspace empty, where a bucket counted twice went unseen).
 */
function random(seed: number) {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let value = state
    value = Math.imul(value ^ (value >>> 15), value | 1)
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61)
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296
  }
}

function rows(count: number, now: number, seed = 7): RequestLogRow[] {
  const next = random(seed)
  const pick = <T>(values: readonly T[]) => values[Math.floor(next() * values.length)]!
  return Array.from({ length: count }, (_, index) => {
    // A fifth answered by the response cache (CONTRACT §15): cost 0, and what it saved (a fifth of those unpriced, so null).
    const cache = next() < 0.2 ? pick(['hit', 'semantic-hit', 'coalesced'] as const) : null
    return {
      id: `req-${seed}-${index}`,
      workspaceId: pick(['ws-a', 'ws-a', 'ws-b']),
      keyId: pick(['key-1', 'key-2', 'key-3', null]),
      createdAt: now - Math.floor(next() * 40 * dayMs),
      endpoint: 'chat',
      gateway: pick(['openai', 'groq', null]),
      providerKeyId: null,
      model: pick(['openai/gpt-4o-mini', 'meta/llama', 'anthropic/claude', null]),
      upstreamModel: null,
      status: pick([200, 200, 200, 429, 502, 400]),
      errorCode: null,
      stream: false,
      latencyMs: Math.round(next() * 5000) / 10,
      overheadMs: next() < 0.2 ? null : Math.round(next() * 100) / 100,
      ttfbMs: null,
      attempts: 1,
      attemptPath: null,
      stageTimings: null,
      inputTokens: next() < 0.3 ? null : Math.floor(next() * 1000),
      outputTokens: next() < 0.3 ? null : Math.floor(next() * 1000),
      // Whole nano-dollars (up to $1): integer sums are exact in any order, so the roll-ups' totals compare equal.
      costNanoUsd: cache ? 0 : next() < 0.25 ? null : Math.floor(next() * 1_000_000_000),
      clientIp: null,
      requestBody: null,
      enrichment: null,
      cache,
      savedNanoUsd: cache && next() >= 0.2 ? Math.floor(next() * 1_000_000_000) : null,
      // Not summed by the roll-ups: carried on the row only.
      continued: next() < 0.05 ? 1 : null,
      guardrails: next() < 0.05 ? '[{"rule":"email","where":"input","action":"mask","count":1}]' : null,
    }
  })
}

/** A row as a build before the response cache wrote it (a database migrated to before its columns). */
const beforeCache = (row: RequestLogRow): RequestLogRow => ({ ...row, cache: null, savedNanoUsd: null, continued: null, guardrails: null })

/** The usage of a window computed from the rows themselves (what the API answered before the roll-ups). */
function fromRows(all: readonly RequestLogRow[], filter: UsageFilter, bucketMs: number) {
  const inWindow = all.filter((row) => row.workspaceId === filter.workspaceId && row.createdAt >= filter.sinceMs && (!filter.keyIds || filter.keyIds.includes(row.keyId ?? '')))
  const average = (values: number[]) => (values.length ? values.reduce((sum, value) => sum + value, 0) / values.length : null)
  const summary = {
    requests: inWindow.length,
    errors: inWindow.filter((row) => row.status >= 400).length,
    avgLatency: average(inWindow.map((row) => row.latencyMs)),
    avgOverhead: average(inWindow.filter((row) => row.overheadMs !== null).map((row) => row.overheadMs!)),
    models: new Set(inWindow.filter((row) => row.model !== null).map((row) => row.model)).size,
    costNanoUsd: inWindow.reduce((sum, row) => sum + (row.costNanoUsd ?? 0), 0),
    unpriced: inWindow.filter((row) => row.costNanoUsd === null || row.costNanoUsd === undefined).length,
    cacheHits: inWindow.filter((row) => row.cache !== null && row.cache !== undefined).length,
    savedNanoUsd: inWindow.reduce((sum, row) => sum + (row.savedNanoUsd ?? 0), 0),
  }
  const buckets = new Map<number, RequestLogRow[]>()
  for (const row of inWindow) {
    const bucket = Math.floor(row.createdAt / bucketMs) * bucketMs
    buckets.set(bucket, [...(buckets.get(bucket) ?? []), row])
  }
  const series = [...buckets]
    .map(([bucket, group]) => ({
      bucket,
      requests: group.length,
      errors: group.filter((row) => row.status >= 400).length,
      avgLatency: average(group.map((row) => row.latencyMs)),
      avgOverhead: average(group.filter((row) => row.overheadMs !== null).map((row) => row.overheadMs!)),
    }))
    .sort((left, right) => left.bucket - right.bucket)
  const breakdown = (by: 'model' | 'gateway') => {
    const counts = new Map<string, { requests: number; costNanoUsd: number; unpriced: number }>()
    for (const row of inWindow) {
      if (row[by] === null) continue
      const entry = counts.get(row[by]!) ?? { requests: 0, costNanoUsd: 0, unpriced: 0 }
      entry.requests++
      if (row.costNanoUsd === null || row.costNanoUsd === undefined) entry.unpriced++
      else entry.costNanoUsd += row.costNanoUsd
      counts.set(row[by]!, entry)
    }
    return [...counts]
      .sort((left, right) => right[1].requests - left[1].requests || (left[0] < right[0] ? -1 : 1))
      .slice(0, 12)
      .map(([name, sums]) => ({ name, ...sums }))
  }
  const tokens = new Map<string, { model: string; gateway: string; requests: number; inputTokens: number; outputTokens: number; costNanoUsd: number; unpriced: number }>()
  for (const row of inWindow) {
    const name = `${row.model ?? ''}\u0000${row.gateway ?? ''}`
    const entry = tokens.get(name) ?? { model: row.model ?? '', gateway: row.gateway ?? '', requests: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0, unpriced: 0 }
    entry.requests++
    entry.inputTokens += row.inputTokens ?? 0
    entry.outputTokens += row.outputTokens ?? 0
    if (row.costNanoUsd === null || row.costNanoUsd === undefined) entry.unpriced++
    else entry.costNanoUsd += row.costNanoUsd
    tokens.set(name, entry)
  }
  const byName = (left: { model: string; gateway: string }, right: { model: string; gateway: string }) => `${left.model} ${left.gateway}`.localeCompare(`${right.model} ${right.gateway}`)
  return { summary, series, byModel: breakdown('model'), byGateway: breakdown('gateway'), tokens: [...tokens.values()].sort(byName), byName }
}

type Averaged = { avgLatency: number | null; avgOverhead: number | null }

/** Equal counts, and averages equal but for the order of a floating-point sum. */
function expectSameUsage<T extends Averaged>(actual: T, expected: T) {
  const { avgLatency, avgOverhead, ...counts } = actual
  const { avgLatency: expectedLatency, avgOverhead: expectedOverhead, ...expectedCounts } = expected
  expect(counts).toEqual(expectedCounts)
  for (const [value, wanted] of [
    [avgLatency, expectedLatency],
    [avgOverhead, expectedOverhead],
  ] as const) {
    if (wanted === null) expect(value).toBeNull()
    else expect(value!).toBeCloseTo(wanted, 9)
  }
}

function withStorage(run: (storage: ReturnType<typeof openStorage>, path: string) => void) {
  const dir = mkdtempSync(join(tmpdir(), 'router-rollups-'))
  const path = join(dir, 'router.db')
  const storage = openStorage(path)
  try {
    run(storage, path)
  } finally {
    storage.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** A new database at `path` migrated up to (not including) the first migration whose SQL contains `marker`. */
function databaseBefore(path: string, marker: string): Database {
  const sqlite = new Database(path, { create: true, strict: true })
  const db = drizzle(sqlite) as unknown as { dialect: { migrate(migrations: unknown[], session: unknown, config: unknown): void }; session: unknown }
  const migrations = embeddedMigrations()
  const before = migrations.findIndex((migration) => migration.sql.join('').includes(marker))
  expect(before).toBeGreaterThan(0)
  db.dialect.migrate(migrations.slice(0, before), db.session, { migrationsFolder: 'db/migrations' })
  return sqlite
}

describe('usage roll-ups', () => {
  test('usage from the roll-ups equals usage from the rows: windows on the hour and inside one, key filters, every bucket size', () => {
    withStorage((storage) => {
      const repositories = createRepositories(storage)
      const now = Date.UTC(2026, 10, 23, 15, 37, 12)
      // Enough rows that every hour of the windows holds some (a bucket counted twice or missed shows).
      const all = rows(12_000, now)
      // In batches, as the log queue writes them.
      for (let start = 0; start < all.length; start += 128) repositories.requestLogs.insertMany(all.slice(start, start + 128))
      const windows: [UsageFilter, number][] = [
        [{ workspaceId: 'ws-a', sinceMs: Math.floor(now / hourMs) * hourMs - 23 * hourMs }, hourMs],
        [{ workspaceId: 'ws-a', sinceMs: Math.floor(now / dayMs) * dayMs - 6 * dayMs }, dayMs],
        [{ workspaceId: 'ws-b', sinceMs: Math.floor(now / dayMs) * dayMs - 29 * dayMs }, dayMs],
        [{ workspaceId: 'ws-a', sinceMs: Math.floor(now / dayMs) * dayMs - 29 * dayMs, keyIds: ['key-1', 'key-3'] }, dayMs],
        // Not on the hour: the first, partial hour comes from the rows.
        [{ workspaceId: 'ws-a', sinceMs: now - 3 * dayMs - 1234567 }, hourMs],
        [{ workspaceId: 'ws-a', sinceMs: now - 10 * dayMs - 777, keyIds: ['key-2'] }, dayMs],
        // Hours before the first midnight, then whole days; and a series of two-day buckets.
        [{ workspaceId: 'ws-b', sinceMs: Math.floor(now / hourMs) * hourMs - 29 * dayMs }, 2 * dayMs],
        [{ workspaceId: 'ws-a', sinceMs: Math.floor(now / hourMs) * hourMs - 12 * dayMs - 5 * hourMs }, 6 * hourMs],
      ]
      for (const [filter, bucketMs] of windows) {
        const expected = fromRows(all, filter, bucketMs)
        // Each window holds cache answers, and savings to sum.
        expect(expected.summary.cacheHits).toBeGreaterThan(0)
        expect(expected.summary.savedNanoUsd).toBeGreaterThan(0)
        expectSameUsage(repositories.requestLogs.summary(filter), expected.summary)
        const series = repositories.requestLogs.series(filter, bucketMs).sort((left, right) => left.bucket - right.bucket)
        expect(series.map((bucket) => bucket.bucket)).toEqual(expected.series.map((bucket) => bucket.bucket))
        series.forEach((bucket, index) => expectSameUsage(bucket, expected.series[index]!))
        expect(repositories.requestLogs.breakdown(filter, 'model', 12)).toEqual(expected.byModel)
        expect(repositories.requestLogs.breakdown(filter, 'gateway', 12)).toEqual(expected.byGateway)
        expect(repositories.requestLogs.tokens(filter).sort(expected.byName)).toEqual(expected.tokens)
      }
    })
  })

  test('replayed rows are rolled up once: a row already written is skipped, and so is its count', () => {
    withStorage((storage) => {
      const repositories = createRepositories(storage)
      const now = Date.UTC(2026, 10, 23, 12)
      const batch = rows(200, now, 11)
      repositories.requestLogs.insertMany(batch.slice(0, 120))
      // A journal replay after a crash: the first 120 were committed, the rest were not.
      expect(repositories.requestLogs.insertManyIfAbsent(batch)).toBe(80)
      const filter = { workspaceId: 'ws-a', sinceMs: Math.floor(now / dayMs) * dayMs - 40 * dayMs }
      expectSameUsage(repositories.requestLogs.summary(filter), fromRows(batch, filter, dayMs).summary)
      for (const table of ['usage_rollups', 'usage_daily_rollups']) {
        expect(storage.sqlite.query<{ requests: number; hits: number; saved: number }, []>(`select sum(requests) as requests, sum(cache_hits) as hits, sum(saved_nano_usd) as saved from ${table}`).get()).toEqual({
          requests: 200,
          hits: batch.filter((row) => row.cache !== null).length,
          saved: batch.reduce((sum, row) => sum + (row.savedNanoUsd ?? 0), 0),
        })
      }
    })
  })

  test('rows written before the roll-ups existed are rolled up by their migration', () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-rollups-'))
    const path = join(dir, 'router.db')
    try {
      // A database at the migration before the roll-ups, with rows in it.
      const sqlite = databaseBefore(path, 'CREATE TABLE `usage_rollups`')
      const now = Date.UTC(2026, 10, 23, 9, 30)
      // Written before costs were recorded: each cost unknown.
      const before = rows(500, now, 5).map((row) => ({ ...beforeCache(row), costNanoUsd: null }))
      const insert = sqlite.prepare(
        'insert into request_logs (id, workspace_id, key_id, created_at, endpoint, gateway, model, status, stream, latency_ms, overhead_ms, attempts, input_tokens, output_tokens) values (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 1, ?, ?)',
      )
      for (const row of before) {
        insert.run(row.id, row.workspaceId, row.keyId ?? null, row.createdAt, row.endpoint, row.gateway ?? null, row.model ?? null, row.status, row.latencyMs, row.overheadMs ?? null, row.inputTokens ?? null, row.outputTokens ?? null)
      }
      sqlite.close()

      // The service opens it: the roll-ups' migration (and any after it) rolls up what is there.
      const storage = openStorage(path)
      try {
        const repositories = createRepositories(storage)
        const filter = { workspaceId: 'ws-a', sinceMs: Math.floor(now / dayMs) * dayMs - 40 * dayMs }
        expectSameUsage(repositories.requestLogs.summary(filter), fromRows(before, filter, dayMs).summary)
        expect(repositories.requestLogs.breakdown(filter, 'model', 12)).toEqual(fromRows(before, filter, dayMs).byModel)
      } finally {
        storage.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('costs recorded in USD (rows and roll-ups) become whole nano-dollars by their migration, and the USD columns go', () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-rollups-'))
    const path = join(dir, 'router.db')
    try {
      // A database at the migration before nano-dollars, written as the build of that time wrote it.
      const sqlite = databaseBefore(path, 'ADD `cost_nano_usd`')
      const now = Date.UTC(2026, 10, 23, 9, 30)
      // Costs as that build computed them: tokens at $0.30 and $1.20 per million, in USD (a float, not
      // always the exact decimal); here the same in whole nano-dollars. A quarter unpriced.
      const written = rows(500, now, 9).map((row, index) => ({ ...beforeCache(row), costNanoUsd: index % 4 === 0 ? null : (row.inputTokens ?? 0) * 300 + (row.outputTokens ?? 0) * 1200 }))
      const usdOf = (row: RequestLogRow) => (row.costNanoUsd === null || row.costNanoUsd === undefined ? null : (row.inputTokens ?? 0) * 0.0000003 + (row.outputTokens ?? 0) * 0.0000012)
      const insert = sqlite.prepare(
        'insert into request_logs (id, workspace_id, key_id, created_at, endpoint, gateway, model, status, stream, latency_ms, overhead_ms, attempts, input_tokens, output_tokens, cost_usd) values (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 1, ?, ?, ?)',
      )
      for (const row of written) {
        insert.run(row.id, row.workspaceId, row.keyId ?? null, row.createdAt, row.endpoint, row.gateway ?? null, row.model ?? null, row.status, row.latencyMs, row.overheadMs ?? null, row.inputTokens ?? null, row.outputTokens ?? null, usdOf(row))
      }
      // Its roll-ups: the rows' sums, the costs summed in USD.
      for (const [table, start, size] of [
        ['usage_rollups', 'hour', hourMs],
        ['usage_daily_rollups', 'day', dayMs],
      ] as const) {
        sqlite.run(
          `insert into ${table} (workspace_id, ${start}, key_id, model, gateway, requests, errors, latency_sum, latency_count, overhead_sum, overhead_count, input_tokens, output_tokens, cost_usd, unpriced)
           select workspace_id, (created_at / ${size}) * ${size}, coalesce(key_id, ''), coalesce(model, ''), coalesce(gateway, ''), count(*), sum(case when status >= 400 then 1 else 0 end),
             coalesce(sum(latency_ms), 0), count(latency_ms), coalesce(sum(overhead_ms), 0), count(overhead_ms), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
             coalesce(sum(cost_usd), 0), sum(case when cost_usd is null then 1 else 0 end)
           from request_logs group by 1, 2, 3, 4, 5`,
        )
      }
      // Not every USD cost is a whole number of nano-dollars as a float: the migration takes the nearest.
      expect(written.some((row) => usdOf(row) !== null && !Number.isInteger(usdOf(row)! * 1e9))).toBe(true)
      sqlite.close()

      const storage = openStorage(path)
      try {
        // Each row's cost in whole nano-dollars, an unknown one still null.
        const stored = new Map(storage.sqlite.query<{ id: string; cost_nano_usd: number | null }, []>('select id, cost_nano_usd from request_logs').all().map((row) => [row.id, row.cost_nano_usd]))
        expect(stored.size).toBe(written.length)
        for (const row of written) expect(stored.get(row.id)).toBe(row.costNanoUsd!)
        for (const table of ['request_logs', 'usage_rollups', 'usage_daily_rollups']) {
          const columns = storage.sqlite.query<{ name: string; type: string }, []>(`pragma table_info(${table})`).all()
          expect(columns.map((column) => column.name)).not.toContain('cost_usd')
          expect(columns.find((column) => column.name === 'cost_nano_usd')?.type.toLowerCase()).toBe('integer')
        }
        // Both roll-up tables hold integers, the sums of the rows' nano-dollars.
        for (const table of ['usage_rollups', 'usage_daily_rollups']) {
          const total = storage.sqlite.query<{ nano: number; integers: number; buckets: number }, []>(`select sum(cost_nano_usd) as nano, sum(typeof(cost_nano_usd) = 'integer') as integers, count(*) as buckets from ${table}`).get()!
          expect(total.integers).toBe(total.buckets)
          expect(total.nano).toBe(written.reduce((sum, row) => sum + (row.costNanoUsd ?? 0), 0))
        }
        const repositories = createRepositories(storage)
        for (const filter of [
          { workspaceId: 'ws-a', sinceMs: Math.floor(now / dayMs) * dayMs - 40 * dayMs },
          { workspaceId: 'ws-b', sinceMs: Math.floor(now / hourMs) * hourMs - 3 * dayMs },
          { workspaceId: 'ws-a', sinceMs: now - 5 * dayMs - 4321, keyIds: ['key-2'] },
        ]) {
          const expected = fromRows(written, filter, dayMs)
          expectSameUsage(repositories.requestLogs.summary(filter), expected.summary)
          expect(repositories.requestLogs.breakdown(filter, 'model', 12)).toEqual(expected.byModel)
          expect(repositories.requestLogs.breakdown(filter, 'gateway', 12)).toEqual(expected.byGateway)
          expect(repositories.requestLogs.tokens(filter).sort(expected.byName)).toEqual(expected.tokens)
        }
      } finally {
        storage.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
