/**
 * The database migrations (db/migrations, written by drizzle-kit), imported into the program rather
 * than read from the folder at start: a one-file build (`bun run build`) carries them, and so does
 * a checkout. Applied with drizzle's own migrator over these texts, exactly as its folder reader
 * would build them (statements split at the breakpoints, a sha256 per file, the journal's times).
 * A migration drizzle-kit adds must be listed below: test/unit/migrations.test.ts compares this list
 * with the folder.
 */
import { createHash } from 'node:crypto'
import type { BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import journal from '../../db/migrations/meta/_journal.json' with { type: 'json' }
import m0000 from '../../db/migrations/0000_modern_chronomancer.sql' with { type: 'text' }
import m0001 from '../../db/migrations/0001_fresh_jocasta.sql' with { type: 'text' }
import m0002 from '../../db/migrations/0002_exotic_reptil.sql' with { type: 'text' }
import m0003 from '../../db/migrations/0003_robust_red_ghost.sql' with { type: 'text' }
import m0004 from '../../db/migrations/0004_chubby_matthew_murdock.sql' with { type: 'text' }
import m0005 from '../../db/migrations/0005_wet_doomsday.sql' with { type: 'text' }
import m0006 from '../../db/migrations/0006_sticky_nova.sql' with { type: 'text' }
import m0007 from '../../db/migrations/0007_blue_prism.sql' with { type: 'text' }
import m0008 from '../../db/migrations/0008_light_wong.sql' with { type: 'text' }
import m0009 from '../../db/migrations/0009_daffy_outlaw_kid.sql' with { type: 'text' }
import m0010 from '../../db/migrations/0010_wise_whizzer.sql' with { type: 'text' }
import m0011 from '../../db/migrations/0011_clear_wolf_cub.sql' with { type: 'text' }
import m0012 from '../../db/migrations/0012_silky_miek.sql' with { type: 'text' }
import m0013 from '../../db/migrations/0013_certain_ulik.sql' with { type: 'text' }
import m0014 from '../../db/migrations/0014_cost_nano_usd_copy.sql' with { type: 'text' }
import m0015 from '../../db/migrations/0015_sad_gamora.sql' with { type: 'text' }
import m0016 from '../../db/migrations/0016_batch_spend.sql' with { type: 'text' }
import m0017 from '../../db/migrations/0017_cache_continuation_guardrails.sql' with { type: 'text' }

/** Each migration's SQL by its journal tag. */
export const migrationTexts: Readonly<Record<string, string>> = {
  '0000_modern_chronomancer': m0000,
  '0001_fresh_jocasta': m0001,
  '0002_exotic_reptil': m0002,
  '0003_robust_red_ghost': m0003,
  '0004_chubby_matthew_murdock': m0004,
  '0005_wet_doomsday': m0005,
  '0006_sticky_nova': m0006,
  '0007_blue_prism': m0007,
  '0008_light_wong': m0008,
  '0009_daffy_outlaw_kid': m0009,
  '0010_wise_whizzer': m0010,
  '0011_clear_wolf_cub': m0011,
  '0012_silky_miek': m0012,
  '0013_certain_ulik': m0013,
  '0014_cost_nano_usd_copy': m0014,
  '0015_sad_gamora': m0015,
  '0016_batch_spend': m0016,
  '0017_cache_continuation_guardrails': m0017,
}

/** What drizzle's migrator applies, one entry per journal entry (drizzle-orm/migrator's MigrationMeta). */
export interface MigrationMeta {
  sql: string[]
  bps: boolean
  folderMillis: number
  hash: string
}

export function embeddedMigrations(): MigrationMeta[] {
  return journal.entries.map((entry) => {
    const text = migrationTexts[entry.tag]
    if (text === undefined) throw new Error(`The migration ${entry.tag} is in db/migrations/meta/_journal.json but not in src/storage/migrations.ts.`)
    return { sql: text.split('--> statement-breakpoint'), bps: entry.breakpoints, folderMillis: entry.when, hash: createHash('sha256').update(text).digest('hex') }
  })
}

/** Applies the migrations not applied yet (drizzle's own bookkeeping table). */
export function applyMigrations(db: BunSQLiteDatabase<Record<string, unknown>>) {
  const { dialect, session } = db as unknown as { dialect: { migrate(migrations: MigrationMeta[], session: unknown, config: { migrationsFolder: string }): void }; session: unknown }
  dialect.migrate(embeddedMigrations(), session, { migrationsFolder: 'db/migrations' })
}
