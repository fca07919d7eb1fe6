/** The master key's check value: proves at every start that RT_MASTER_KEY is the key the stored secrets were encrypted with. */
import { sqliteTable, text, integer } from 'drizzle-orm/sqlite-core'

/** One row (id 1), written on the first start with a master key; never changed afterwards. */
export const masterKeyCheck = sqliteTable('master_key_check', {
  id: integer('id').primaryKey(),
  /** HMAC-SHA256 of a fixed label under the master key (hex): tells a wrong key without revealing the key. */
  checkValue: text('check_value').notNull(),
  createdAt: text('created_at').notNull(),
})
