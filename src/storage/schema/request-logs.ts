/** One row per inference request (SPEC "What the service does" 7). Response bodies are never stored. */
import { sql } from 'drizzle-orm'
import { primaryKey, sqliteTable, text, integer, real, index } from 'drizzle-orm/sqlite-core'

export const requestLogs = sqliteTable(
  'request_logs',
  {
    /** Row order; an integer key keeps inserts cheap (random text keys scatter the B-tree). */
    seq: integer('seq').primaryKey(),
    /** The request id (X-Router-Request-Id). */
    id: text('id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    keyId: text('key_id'),
    /** Unix milliseconds: usage buckets are computed from it. */
    createdAt: integer('created_at').notNull(),
    endpoint: text('endpoint').notNull(),
    gateway: text('gateway'),
    providerKeyId: text('provider_key_id'),
    model: text('model'),
    upstreamModel: text('upstream_model'),
    status: integer('status').notNull(),
    errorCode: text('error_code'),
    stream: integer('stream', { mode: 'boolean' }).notNull().default(false),
    latencyMs: real('latency_ms').notNull(),
    overheadMs: real('overhead_ms'),
    ttfbMs: real('ttfb_ms'),
    attempts: integer('attempts').notNull().default(0),
    attemptPath: text('attempt_path'),
    stageTimings: text('stage_timings'),
    inputTokens: integer('input_tokens'),
    outputTokens: integer('output_tokens'),
    /**
     * What the request cost in whole nano-dollars (1e-9 USD, storage/money.ts; CONTRACT §11: money is
     * counted exactly), from the listed prices of the model on the gateway that answered; null when
     * that model lists no price for tokens it used (unknown, never 0). The API shows it as USD.
     */
    costNanoUsd: integer('cost_nano_usd'),
    clientIp: text('client_ip'),
    requestBody: text('request_body'),
    /** What enrichment stages did (JSON), e.g. `{"mcp":{"rounds":2,"calls":[…]}}`; null when none ran. */
    enrichment: text('enrichment'),
    /** The response cache's part (CONTRACT §15): `hit`, `semantic-hit` or `coalesced` when the answer came from it; null otherwise. */
    cache: text('cache'),
    /** What a cached answer saved: the cost of the answer it repeats, nano-dollars; null when that was unpriced or the row is no cache answer. */
    savedNanoUsd: integer('saved_nano_usd'),
    /** Mid-stream continuations the answer took (CONTRACT §16); null: none. */
    continued: integer('continued'),
    /** Guardrail findings (CONTRACT §17) as JSON `[{rule, where, action, count}]`; null: none. */
    guardrails: text('guardrails'),
  },
  (table) => [
    // One index: every usage query filters by workspace and time (a key filter narrows within it).
    // Each extra index, or a wider unique one, costs every logged request its B-tree work (a unique
    // index with the request id measured a microsecond a row). Rows replayed from the request journal
    // after a crash, the only ones that may be there already, are checked through this index instead
    // (insertManyIfAbsent: same workspace and time, then the id).
    index('request_logs_workspace_time_idx').on(table.workspaceId, table.createdAt),
    // Captured bodies by time, for their retention (CONTRACT §14): a partial index holds only the
    // rows that still have a body, so a row logged without one costs it nothing but the condition,
    // and a cleared body leaves it. The daily prune finds the bodies to clear without a scan.
    index('request_logs_body_time_idx')
      .on(table.createdAt)
      .where(sql`request_body is not null`),
  ],
)

/**
 * A roll-up table: one row per workspace, bucket, key, model and gateway with the sums of its rows
 * (averages are sums over counts). `start` is the bucket's first millisecond, stored in the column
 * `startColumn`. '' stands for a row without key, model or gateway (a primary key column cannot be
 * null). Both roll-up tables come from here, so they have one type and one query serves both.
 */
function rollupTable(name: string, startColumn: string) {
  return sqliteTable(
    name,
    {
      workspaceId: text('workspace_id').notNull(),
      start: integer(startColumn).notNull(),
      keyId: text('key_id').notNull().default(''),
      model: text('model').notNull().default(''),
      gateway: text('gateway').notNull().default(''),
      requests: integer('requests').notNull().default(0),
      errors: integer('errors').notNull().default(0),
      latencySum: real('latency_sum').notNull().default(0),
      latencyCount: integer('latency_count').notNull().default(0),
      overheadSum: real('overhead_sum').notNull().default(0),
      overheadCount: integer('overhead_count').notNull().default(0),
      inputTokens: integer('input_tokens').notNull().default(0),
      outputTokens: integer('output_tokens').notNull().default(0),
      /** The rows' known costs summed, whole nano-dollars; the rows whose cost is unknown are counted in `unpriced`. */
      costNanoUsd: integer('cost_nano_usd').notNull().default(0),
      unpriced: integer('unpriced').notNull().default(0),
      /** Answers the response cache gave (CONTRACT §15), and what they saved, nano-dollars. */
      cacheHits: integer('cache_hits').notNull().default(0),
      savedNanoUsd: integer('saved_nano_usd').notNull().default(0),
    },
    (table) => [primaryKey({ columns: [table.workspaceId, table.start, table.keyId, table.model, table.gateway] })],
  )
}

/**
 * Request-log roll-ups by hour, kept up to date in the transaction that writes the rows
 * (storage/repositories/request-logs/rollups.ts). Usage queries read these buckets, not the rows: their cost
 * follows the time asked for, not the traffic.
 */
export const usageRollups = rollupTable('usage_rollups', 'hour')

/**
 * The same sums per UTC day, kept in the same transaction: a window of whole days reads a
 * twenty-fourth of its hour buckets (the hours before its first midnight come from usage_rollups,
 * the part of an hour it starts in from the rows).
 */
export const usageDailyRollups = rollupTable('usage_daily_rollups', 'day')
