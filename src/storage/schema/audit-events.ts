/**
 * The audit log (CONTRACT §12): one event per management write, through any transport, appended in
 * the write's own transaction. Secrets and key values are never stored: `changes` holds
 * "[redacted]" in their place.
 */
import { sqliteTable, text, integer, index } from 'drizzle-orm/sqlite-core'

export const auditEvents = sqliteTable(
  'audit_events',
  {
    /** Row order: newest first is `seq` descending. */
    seq: integer('seq').primaryKey(),
    id: text('id').notNull().unique(),
    /** ISO 8601. */
    time: text('time').notNull(),
    workspaceId: text('workspace_id').notNull(),
    /** `management_key` or `cli`. */
    actorKind: text('actor_kind').notNull(),
    actorId: text('actor_id'),
    actorPrefix: text('actor_prefix'),
    /** `rest`, `mcp`, `cli` or `dashboard`. */
    via: text('via').notNull(),
    /** The operation's name, e.g. `keys.create`. */
    action: text('action').notNull(),
    targetType: text('target_type').notNull(),
    targetId: text('target_id').notNull(),
    /** JSON: the fields the write set. */
    changes: text('changes').notNull(),
    callerIp: text('caller_ip'),
    requestId: text('request_id'),
  },
  (table) => [index('audit_events_workspace_seq_idx').on(table.workspaceId, table.seq), index('audit_events_target_idx').on(table.workspaceId, table.targetId)],
)
