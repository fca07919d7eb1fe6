/** Inference keys with their routing rule: targets, model remaps, decisioner, attached MCP servers. */
import { sqliteTable, text, integer, index, primaryKey } from 'drizzle-orm/sqlite-core'
import { workspaces } from './workspaces'
import { providerKeys } from './provider-keys'

export const inferenceKeys = sqliteTable(
  'inference_keys',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull().references(() => workspaces.id, { onDelete: 'cascade' }),
    label: text('label'),
    keyPrefix: text('key_prefix').notNull(),
    secretHash: text('secret_hash').notNull(),
    /** Rotation grace (SPEC "Authentication" 6): the old secret's hash and prefix until the grace ends. */
    previousKeyPrefix: text('previous_key_prefix'),
    previousSecretHash: text('previous_secret_hash'),
    previousSecretUntil: text('previous_secret_until'),
    apiShape: text('api_shape').notNull().default('chat'),
    companionAds: integer('companion_ads', { mode: 'boolean' }).notNull().default(false),
    keyterms: integer('keyterms', { mode: 'boolean' }).notNull().default(false),
    allowedIps: text('allowed_ips').notNull().default('[]'),
    steeringMessage: text('steering_message'),
    failoverTtfbMs: integer('failover_ttfb_ms'),
    upstreamTimeoutMs: integer('upstream_timeout_ms'),
    routingStrategy: text('routing_strategy').notNull().default('priority'),
    /** JSON decisioner config or null (SPEC "Resources": Decisioner). */
    decisioner: text('decisioner'),
    webhookUrl: text('webhook_url'),
    webhookSecretCiphertext: text('webhook_secret_ciphertext'),
    notifyEmail: integer('notify_email', { mode: 'boolean' }).notNull().default(false),
    /**
     * Spend caps and rate limits (CONTRACT §11) as JSON `{requests_per_minute, tokens_per_minute,
     * usd_per_day, usd_per_month}` (each a positive number or null); null when none is set.
     */
    limits: text('limits'),
    /** The response cache (CONTRACT §15) as JSON `{ttl_seconds, scope, semantic}`; null: off. */
    cache: text('cache'),
    /** When the key's own cache entries were last purged (Unix ms): older entries are never served, on any node. */
    cachePurgedAt: integer('cache_purged_at'),
    /** Mid-stream continuation (CONTRACT §16) as JSON `{max_hops}`; null: off. */
    continuation: text('continuation'),
    /** Guardrails (CONTRACT §17) as JSON `{mode, input, output}`; null: off. */
    guardrails: text('guardrails'),
    createdAt: text('created_at').notNull(),
    lastUsedAt: text('last_used_at'),
    revokedAt: text('revoked_at'),
  },
  (table) => [
    index('inference_keys_workspace_idx').on(table.workspaceId),
    index('inference_keys_prefix_idx').on(table.keyPrefix),
    index('inference_keys_previous_prefix_idx').on(table.previousKeyPrefix),
  ],
)

export const routingTargets = sqliteTable(
  'routing_targets',
  {
    keyId: text('key_id').notNull().references(() => inferenceKeys.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
    providerKeyId: text('provider_key_id').notNull().references(() => providerKeys.id, { onDelete: 'cascade' }),
    weight: integer('weight'),
    ttfbMs: integer('ttfb_ms'),
  },
  (table) => [primaryKey({ columns: [table.keyId, table.position] }), index('routing_targets_provider_idx').on(table.providerKeyId)],
)

export const modelRemaps = sqliteTable(
  'model_remaps',
  {
    keyId: text('key_id').notNull().references(() => inferenceKeys.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
    match: text('match').notNull(),
    percent: integer('percent').notNull().default(100),
    providerKeyId: text('provider_key_id').notNull().references(() => providerKeys.id, { onDelete: 'cascade' }),
    upstreamModel: text('upstream_model').notNull(),
    enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
  },
  (table) => [primaryKey({ columns: [table.keyId, table.position] }), index('model_remaps_provider_idx').on(table.providerKeyId)],
)

export const keyMcpServers = sqliteTable(
  'key_mcp_servers',
  {
    id: text('id').primaryKey(),
    keyId: text('key_id').notNull().references(() => inferenceKeys.id, { onDelete: 'cascade' }),
    name: text('name'),
    url: text('url').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (table) => [index('key_mcp_servers_key_idx').on(table.keyId)],
)
