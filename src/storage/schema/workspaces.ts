/** Workspaces, their members and management keys: the tenant boundary of every other row. */
import { sqliteTable, text, integer, index } from 'drizzle-orm/sqlite-core'

export const workspaces = sqliteTable('workspaces', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  kind: text('kind').notNull().default('team'),
  /** JSON array of allowlist entries (SPEC "Authentication" 5). */
  allowedIps: text('allowed_ips').notNull().default('[]'),
  steeringMessage: text('steering_message'),
  captureBodies: integer('capture_bodies', { mode: 'boolean' }).notNull().default(false),
  /** When the workspace's shared response cache entries were last purged (Unix ms): older ones are never served, on any node. */
  cachePurgedAt: integer('cache_purged_at'),
  suspended: integer('suspended', { mode: 'boolean' }).notNull().default(false),
  createdAt: text('created_at').notNull(),
})

export const members = sqliteTable(
  'members',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull().references(() => workspaces.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (table) => [index('members_workspace_idx').on(table.workspaceId)],
)

export const managementKeys = sqliteTable(
  'management_keys',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull().references(() => workspaces.id, { onDelete: 'cascade' }),
    prefix: text('prefix').notNull(),
    secretHash: text('secret_hash').notNull(),
    readOnly: integer('read_only', { mode: 'boolean' }).notNull().default(false),
    createdAt: text('created_at').notNull(),
  },
  (table) => [index('management_keys_prefix_idx').on(table.prefix)],
)
