/**
 * Batches (SPEC "Batch API"), the outbox of their notifications, and the scheduler's job leases.
 *
 * A batch row is the service's record of one upstream batch: the id it issued, the provider key and
 * upstream id behind it, and the last state read from the upstream. Results stay with the gateway
 * that keeps them (CONTRACT §6) and are read through on GET. An outbox row is written in the same
 * transaction as the state change that causes it (a batch reaching a terminal state), so a crash
 * between "completed" and "notified" loses nothing and a delivery run never sends one twice.
 */
import { sqliteTable, text, integer, real, index } from 'drizzle-orm/sqlite-core'

export const batches = sqliteTable(
  'batches',
  {
    /** `batch_rt_…`, signed (batch/batch-ids.ts). */
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    keyId: text('key_id').notNull(),
    providerKeyId: text('provider_key_id').notNull(),
    /** The gateway's batch id; null until the gateway confirmed the submit. */
    upstreamId: text('upstream_id'),
    endpoint: text('endpoint').notNull(),
    /** The model as the client named it, and as it was sent (remap and `:batch` spelling applied). */
    model: text('model').notNull(),
    upstreamModel: text('upstream_model').notNull(),
    /**
     * `submitting` (upload under way), `unconfirmed` (uploaded, no answer in time), then the SPEC
     * states. Rows in the first two are not shown to clients.
     */
    status: text('status').notNull(),
    requestTotal: integer('request_total').notNull().default(0),
    requestCompleted: integer('request_completed').notNull().default(0),
    requestFailed: integer('request_failed').notNull().default(0),
    cost: real('cost'),
    /**
     * On a key with a USD cap (CONTRACT §11): the worst case of its items, nano-dollars, reserved at
     * submit and held here until the batch ends; null for a key without one.
     */
    reservedNanoUsd: integer('reserved_nano_usd'),
    /** What it settled to when it ended (its reported cost; its reservation when it reported none), nano-dollars; null while it runs. */
    chargedNanoUsd: integer('charged_nano_usd'),
    /** JSON error object or null. */
    error: text('error'),
    /** Unix seconds. */
    createdAt: integer('created_at').notNull(),
    finalizedAt: integer('finalized_at'),
    /** Unix milliseconds of the last read from the upstream. */
    refreshedAt: integer('refreshed_at'),
    /** Unix milliseconds: inputs and results purged (DELETE, or retention). */
    purgedAt: integer('purged_at'),
  },
  (table) => [index('batches_key_created_idx').on(table.keyId, table.createdAt), index('batches_status_idx').on(table.status)],
)

export const outbox = sqliteTable(
  'outbox',
  {
    /** Also the X-Router-Delivery header: the same on every retry. */
    id: text('id').primaryKey(),
    /** `webhook` or `email`. */
    kind: text('kind').notNull(),
    batchId: text('batch_id').notNull(),
    keyId: text('key_id').notNull(),
    /** The event type, e.g. `batch.completed`. */
    event: text('event').notNull(),
    /** What is sent, fixed when the event happened: the webhook body, or the e-mail's JSON. */
    payload: text('payload').notNull(),
    /** Unix milliseconds. */
    createdAt: integer('created_at').notNull(),
    /** Delivery runs that tried it (1 send, then at most two retries). */
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    deliveredAt: integer('delivered_at'),
    droppedAt: integer('dropped_at'),
  },
  (table) => [index('outbox_pending_idx').on(table.deliveredAt, table.droppedAt)],
)

/**
 * One row per scheduled job: whoever holds an unexpired lease runs it, in whichever process
 * (`RT_ROLE=proxy` beside `app`, or a CLI `jobs run` beside a server).
 */
export const jobLeases = sqliteTable('job_leases', {
  job: text('job').primaryKey(),
  holder: text('holder'),
  /** Unix milliseconds; a lease past it is free. */
  lockedUntil: integer('locked_until').notNull().default(0),
  /** Unix milliseconds of the next scheduled run. */
  nextRunAt: integer('next_run_at').notNull().default(0),
  lastFinishedAt: integer('last_finished_at'),
  /** JSON of the last run's result or error. */
  lastResult: text('last_result'),
})
