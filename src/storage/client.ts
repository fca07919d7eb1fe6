/** Opens the SQLite database (WAL, foreign keys) with drizzle and applies db/migrations. */
import { Database } from 'bun:sqlite'
import { drizzle, type BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import { migrate } from 'drizzle-orm/bun-sqlite/migrator'
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import * as schema from './schema'

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database }

export const migrationsFolder = join(import.meta.dir, '../../db/migrations')

export interface Storage {
  sqlite: Database
  db: Db
  /** PRAGMA data_version: changes when another connection commits (cheap, no table read). */
  dataVersion(): number
  /** The configuration write counter (bumped by every configuration write, in any process). */
  configVersion(): number
  bumpConfigVersion(): void
  close(): void
}

export function openStorage(path: string, options: { migrate?: boolean } = {}): Storage {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const sqlite = new Database(path, { create: true, strict: true })
  sqlite.exec('PRAGMA journal_mode = WAL')
  sqlite.exec('PRAGMA foreign_keys = ON')
  sqlite.exec('PRAGMA busy_timeout = 5000')
  sqlite.exec('PRAGMA synchronous = NORMAL')
  const db = drizzle(sqlite, { schema }) as Db
  if (options.migrate !== false) migrate(db, { migrationsFolder })
  const versionQuery = sqlite.prepare<{ data_version: number }, []>('PRAGMA data_version')
  sqlite.exec('insert or ignore into config_version (id, version) values (1, 0)')
  const configQuery = sqlite.prepare<{ version: number }, []>('select version from config_version where id = 1')
  const bump = sqlite.prepare('update config_version set version = version + 1 where id = 1')
  return {
    sqlite,
    db,
    dataVersion: () => versionQuery.get()!.data_version,
    configVersion: () => configQuery.get()?.version ?? 0,
    bumpConfigVersion: () => void bump.run(),
    close: () => sqlite.close(),
  }
}
