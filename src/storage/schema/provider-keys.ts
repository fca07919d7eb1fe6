/** Provider keys (bring-your-own upstream secrets) and the platform-wide gateway switches. */
import { sqliteTable, text, index } from 'drizzle-orm/sqlite-core'
import { integer } from 'drizzle-orm/sqlite-core'
import { workspaces } from './workspaces'

export const providerKeys = sqliteTable(
  'provider_keys',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull().references(() => workspaces.id, { onDelete: 'cascade' }),
    gateway: text('gateway').notNull(),
    label: text('label').notNull().default(''),
    /** AES-256-GCM ciphertext under RT_MASTER_KEY; never leaves the storage layer in clear. */
    secretCiphertext: text('secret_ciphertext').notNull(),
    keyLast4: text('key_last4').notNull(),
    config: text('config').notNull().default('{}'),
    createdAt: text('created_at').notNull(),
    disabledAt: text('disabled_at'),
    /** Free text the workspace keeps about the key: dashboard-only (SPEC "Provider key"), never in the API's provider object. */
    notes: text('notes'),
  },
  (table) => [index('provider_keys_workspace_idx').on(table.workspaceId)],
)

export const gatewaySettings = sqliteTable('gateway_settings', {
  gateway: text('gateway').primaryKey(),
  enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
  updatedAt: text('updated_at').notNull(),
})
