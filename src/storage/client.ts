/** Opens the SQLite database (WAL, foreign keys) with drizzle and applies db/migrations. */
import { Database, type Statement } from 'bun:sqlite'
import { is } from 'drizzle-orm'
import { drizzle, type BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import { getTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core'
import { closeSync, mkdirSync, openSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import * as schema from './schema'
import { applyMigrations } from './migrations'
import { workerEntry } from '../worker-entry'

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database }

/**
 * The connection as drizzle's session sees it, with compiled statements kept by SQL text. drizzle's
 * bun-sqlite session prepares every query anew, and SQLite compiling the same SQL again was a sixth
 * of a management request's time. A statement runs synchronously to its end, so one is never used
 * twice at once. Bounded: the oldest is dropped (not finalized: a drizzle prepared query may hold it).
 */
class StatementCache {
  private readonly statements = new Map<string, Statement>()

  constructor(private readonly sqlite: Database) {}

  prepare(sql: string): Statement {
    let statement = this.statements.get(sql)
    if (statement) return statement
    statement = this.sqlite.prepare(sql)
    if (this.statements.size >= statementCacheSize) this.statements.delete(this.statements.keys().next().value!)
    this.statements.set(sql, statement)
    return statement
  }

  exec(sql: string) {
    this.sqlite.exec(sql)
  }

  transaction<A extends unknown[], R>(run: (...args: A) => R) {
    return this.sqlite.transaction(run)
  }
}

const statementCacheSize = 512

/** drizzle over `sqlite` with the statement cache; `$client` is the connection itself. */
export function drizzleOn(sqlite: Database): Db {
  const db = drizzle(new StatementCache(sqlite) as unknown as Database, { schema }) as Db
  db.$client = sqlite
  return db
}


/** Every column holding ciphertext under the master key: by the schema's naming rule, `…_ciphertext`. */
export const encryptedColumns: readonly { table: string; column: string }[] = (Object.values(schema) as unknown[])
  .filter((value): value is SQLiteTable => is(value, SQLiteTable))
  .flatMap((table) => {
    const config = getTableConfig(table)
    return config.columns.filter((column) => column.name.endsWith('_ciphertext')).map((column) => ({ table: config.name, column: column.name }))
  })

/** What the database says about the master key in use (storage/crypto.ts loadMasterKey decides). */
export interface MasterKeyRecord {
  /** The stored key check value, if a master key was ever used with this database. */
  checkValue(): string | undefined
  /** Stores the check value unless one is there already; returns the one stored afterwards. */
  saveCheckValue(value: string): string
  /** One ciphertext from any encrypted column, if the database holds any. */
  encryptedSample(): string | undefined
}

export interface Storage {
  sqlite: Database
  db: Db
  /** Opened read-only: a LiteFS replica's view of the primary's database (CONTRACT §10). */
  readonly: boolean
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
  /**
   * For a long run of small write transactions (the log prune): this connection stops
   * checkpointing on commit, so that a transaction's time is the time it holds the write lock.
   * Between two transactions the run calls `checkpointIfLarge()`, which copies the WAL into the
   * database only once the file has grown past `walLimitBytes` (default 64 MB); the connection's
   * journal_size_limit truncates it back to that size when the log restarts. With the server
   * running, its checkpointer thread keeps the WAL far below the limit, and the run adds no
   * checkpoint (and no fsync) of its own. Without it (a CLI run alone), the WAL stays bounded.
   * `end()` puts the connection back as it was.
   */
  batchedWrites(walLimitBytes?: number): BatchedWrites
  masterKeyRecord: MasterKeyRecord
  close(): void
}

export interface BackgroundCheckpointOptions {
  intervalMs?: number
  onCheckpoint?(pages: number): void
  onError?(message: string): void
}

export interface BatchedWrites {
  /** A PASSIVE checkpoint (it copies what it can, waiting for no writer) when the WAL is over 64 MB. */
  checkpointIfLarge(): void
  end(): void
}

/** How long a statement waits for another connection's write lock before SQLITE_BUSY. */
export const busyTimeoutMs = 5000

/** The WAL size past which a run of batched writes checkpoints on its own. */
const batchedWalLimitBytes = 64 * 1024 * 1024

export interface BackgroundCheckpoints {
  /** Runs a last checkpoint, closes the worker's connection and ends the thread. */
  stop(): Promise<void>
}

export interface OpenOptions {
  migrate?: boolean
  /**
   * A replica's connection: no migration, no pragma that writes, no config row; SQLite refuses every
   * write on it, so a write that slipped past the writer seam (cluster/writer.ts) fails, never lands.
   */
  readonly?: boolean
}

export function openStorage(path: string, options: OpenOptions = {}): Storage {
  if (options.readonly) return openReadonly(path)
  if (path !== ':memory:') {
    // Owner-only (0700 folders, 0600 files): the database holds key hashes, encrypted provider secrets
    // and request logs. SQLite creates -wal and -shm with the database file's mode, so creating the
    // file 0600 here covers all three. An existing file or folder keeps the mode it has.
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
    try {
      closeSync(openSync(path, 'wx', 0o600))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  const sqlite = new Database(path, { create: true, strict: true })
  sqlite.exec('PRAGMA journal_mode = WAL')
  sqlite.exec('PRAGMA foreign_keys = ON')
  sqlite.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
  sqlite.exec('PRAGMA synchronous = NORMAL')
  const db = drizzleOn(sqlite)
  if (options.migrate !== false) applyMigrations(db)
  const versionQuery = sqlite.prepare<{ data_version: number }, []>('PRAGMA data_version')
  sqlite.exec('insert or ignore into config_version (id, version) values (1, 0)')
  const configQuery = sqlite.prepare<{ version: number }, []>('select version from config_version where id = 1')
  const bump = sqlite.prepare('update config_version set version = version + 1 where id = 1')
  return {
    sqlite,
    db,
    readonly: false,
    dataVersion: () => versionQuery.get()!.data_version,
    configVersion: () => configQuery.get()?.version ?? 0,
    bumpConfigVersion: () => void bump.run(),
    startBackgroundCheckpoints: (options) => startCheckpointWorker(sqlite, path, options),
    batchedWrites(walLimitBytes = batchedWalLimitBytes) {
      const pages = sqlite.prepare<{ wal_autocheckpoint: number }, []>('PRAGMA wal_autocheckpoint').get()!.wal_autocheckpoint
      const sizeLimit = sqlite.prepare<{ journal_size_limit: number }, []>('PRAGMA journal_size_limit').get()!.journal_size_limit
      sqlite.exec('PRAGMA wal_autocheckpoint = 0')
      sqlite.exec(`PRAGMA journal_size_limit = ${Math.floor(walLimitBytes)}`)
      const walSize = () => {
        try {
          return statSync(`${path}-wal`).size
        } catch {
          return 0
        }
      }
      return {
        checkpointIfLarge: () => {
          if (walSize() > walLimitBytes) sqlite.exec('PRAGMA wal_checkpoint(PASSIVE)')
        },
        end: () => {
          sqlite.exec(`PRAGMA wal_autocheckpoint = ${pages}`)
          sqlite.exec(`PRAGMA journal_size_limit = ${sizeLimit}`)
        },
      }
    },
    masterKeyRecord: createMasterKeyRecord(sqlite),
    close: () => sqlite.close(),
  }
}

function openReadonly(path: string): Storage {
  const sqlite = new Database(path, { readonly: true, strict: true })
  sqlite.exec('PRAGMA busy_timeout = 5000')
  sqlite.exec('PRAGMA query_only = 1')
  const db = drizzleOn(sqlite)
  const versionQuery = sqlite.prepare<{ data_version: number }, []>('PRAGMA data_version')
  const configQuery = sqlite.prepare<{ version: number }, []>('select version from config_version where id = 1')
  const record = createMasterKeyRecord(sqlite)
  return {
    sqlite,
    db,
    readonly: true,
    dataVersion: () => versionQuery.get()!.data_version,
    configVersion: () => configQuery.get()?.version ?? 0,
    // The primary bumps the counter of the writes a replica sees; a replica writes none.
    bumpConfigVersion: () => {},
    // The primary checkpoints (LiteFS ships its pages); a read-only connection cannot.
    startBackgroundCheckpoints: async () => ({ stop: async () => {} }),
    // Nothing to batch: a read-only connection writes nothing.
    batchedWrites: () => ({ checkpointIfLarge: () => {}, end: () => {} }),
    // The primary stored the check value; a replica compares with it and stores nothing.
    masterKeyRecord: { ...record, saveCheckValue: (value) => record.checkValue() ?? value },
    close: () => sqlite.close(),
  }
}

function createMasterKeyRecord(sqlite: Database): MasterKeyRecord {
  const read = () => sqlite.query<{ check_value: string }, []>('select check_value from master_key_check where id = 1').get()?.check_value
  return {
    checkValue: read,
    saveCheckValue(value) {
      // `or ignore`: two processes starting at once on a new database keep the first value, and
      // the second compares against it.
      sqlite.query('insert or ignore into master_key_check (id, check_value, created_at) values (1, ?, ?)').run(value, new Date().toISOString())
      return read()!
    },
    encryptedSample() {
      for (const { table, column } of encryptedColumns) {
        const row = sqlite.query<{ value: string }, []>(`select "${column}" as value from "${table}" where "${column}" is not null limit 1`).get()
        if (row) return row.value
      }
      return undefined
    },
  }
}

async function startCheckpointWorker(sqlite: Database, path: string, options: BackgroundCheckpointOptions): Promise<BackgroundCheckpoints> {
  // An in-memory database has no WAL: nothing to move.
  if (path === ':memory:') return { stop: async () => {} }
  const worker = new Worker(workerEntry(new URL('./checkpoint-worker.ts', import.meta.url), './storage/checkpoint-worker.ts'))
  const waiting = new Map<string, () => void>()
  // A worker that cannot start is a failed start, never a wait without end.
  const failed = new Promise<never>((_, reject) => {
    worker.onerror = (event) => reject(new Error(`The WAL checkpoint worker failed: ${event.message}`))
  })
  worker.onmessage = (event: MessageEvent<{ type: string; pages?: number; error?: string }>) => {
    const message = event.data
    if (message.type === 'checkpointed') options.onCheckpoint?.(message.pages ?? 0)
    else if (message.type === 'failed') options.onError?.(message.error ?? 'checkpoint failed')
    waiting.get(message.type)?.()
  }
  const reply = (type: string) => new Promise<void>((resolve) => waiting.set(type, resolve))
  const started = reply('started')
  worker.postMessage({ type: 'start', path, intervalMs: options.intervalMs ?? 250 })
  await Promise.race([started, failed])
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
