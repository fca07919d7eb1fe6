/** Crawled per-gateway model catalogs, learned first-byte budgets, and the configuration version. */
import { sqliteTable, text, integer, primaryKey } from 'drizzle-orm/sqlite-core'

export const gatewayCatalogs = sqliteTable('gateway_catalogs', {
  gateway: text('gateway').primaryKey(),
  /** Unix milliseconds of the last successful crawl. */
  fetchedAt: integer('fetched_at').notNull(),
  modelCount: integer('model_count').notNull(),
})

export const gatewayModels = sqliteTable(
  'gateway_models',
  {
    gateway: text('gateway').notNull(),
    /** The id exactly as the gateway lists it. */
    modelId: text('model_id').notNull(),
    /** The canonical `provider/model` id it maps to. */
    canonicalId: text('canonical_id').notNull(),
    /** The model object as listed, JSON. */
    object: text('object').notNull(),
  },
  (table) => [primaryKey({ columns: [table.gateway, table.modelId] })],
)

export const gatewayBudgets = sqliteTable('gateway_budgets', {
  gateway: text('gateway').primaryKey(),
  ttfbBudgetMs: integer('ttfb_budget_ms').notNull(),
  computedAt: integer('computed_at').notNull(),
})

/**
 * One row counting configuration writes. Other processes' request-log writes also change
 * PRAGMA data_version; this counter tells a snapshot whether the configuration itself changed.
 */
export const configVersion = sqliteTable('config_version', {
  id: integer('id').primaryKey(),
  version: integer('version').notNull(),
})
