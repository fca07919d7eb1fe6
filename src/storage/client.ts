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
  /**
   * Moves WAL checkpoints to a worker thread: this connection stops checkpointing on commit (a
   * checkpoint copies megabytes and would stall every request in flight for milliseconds).
   */
  startBackgroundCheckpoints(options: BackgroundCheckpointOptions): Promise<BackgroundCheckpoints>
  close(): void
}

export interface BackgroundCheckpointOptions {
  intervalMs?: number
  onCheckpoint?(pages: number): void
  onError?(message: string): void
}

export interface BackgroundCheckpoints {
  /** Runs a last checkpoint, closes the worker's connection and ends the thread. */
  stop(): Promise<void>
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
    startBackgroundCheckpoints: (options) => startCheckpointWorker(sqlite, path, options),
    close: () => sqlite.close(),
  }
}

async function startCheckpointWorker(sqlite: Database, path: string, options: BackgroundCheckpointOptions): Promise<BackgroundCheckpoints> {
  // An in-memory database has no WAL: nothing to move.
  if (path === ':memory:') return { stop: async () => {} }
  const worker = new Worker(new URL('./checkpoint-worker.ts', import.meta.url).href)
  const waiting = new Map<string, () => void>()
  worker.onmessage = (event: MessageEvent<{ type: string; pages?: number; error?: string }>) => {
    const message = event.data
    if (message.type === 'checkpointed') options.onCheckpoint?.(message.pages ?? 0)
    else if (message.type === 'failed') options.onError?.(message.error ?? 'checkpoint failed')
    waiting.get(message.type)?.()
  }
  const reply = (type: string) => new Promise<void>((resolve) => waiting.set(type, resolve))
  const started = reply('started')
  worker.postMessage({ type: 'start', path, intervalMs: options.intervalMs ?? 250 })
  await started
  sqlite.exec('PRAGMA wal_autocheckpoint = 0')
  let stopped: Promise<void> | undefined
  return {
    stop() {
      stopped ??= (async () => {
        sqlite.exec('PRAGMA wal_autocheckpoint = 1000')
        const done = reply('stopped')
        worker.postMessage({ type: 'stop' })
        await done
        worker.terminate()
      })()
      return stopped
    },
  }
}
