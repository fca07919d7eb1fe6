/**
 * The response cache's file (cache-store.ts): its layout, how it is opened (owner-only, WAL,
 * versioned), and the helpers both the store and its writer thread use on it (counts, chunked
 * deletes, the pages in use, giving free pages back).
 */
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs'
import { dirname } from 'node:path'

/** The layout's version (PRAGMA user_version): a file of another version is emptied and made anew. */
export const cacheSchemaVersion = 1
/** PRAGMA application_id of a cache file ("RTC1"): a file without it that holds tables is not ours. */
export const cacheApplicationId = 0x52544331
/** Counted per row besides the value and the embedding: the other columns and five index entries. */
export const cacheRowOverheadBytes = 512
export const cacheBusyTimeoutMs = 5000
/** Rows per transaction when deleting many (prune, purge of a large workspace). */
export const cacheDeleteChunk = 1000

/** `bytes` sits before `value`: the size sums never read a value's overflow pages. */
const schema = `
CREATE TABLE IF NOT EXISTS cache_entries (
  key TEXT PRIMARY KEY NOT NULL,
  workspace_id TEXT NOT NULL,
  key_id TEXT,
  model TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  gateway TEXT NOT NULL,
  cost_nano_usd INTEGER,
  bytes INTEGER NOT NULL,
  semantic_key TEXT,
  value TEXT NOT NULL,
  embedding BLOB
);
CREATE INDEX IF NOT EXISTS cache_entries_semantic ON cache_entries (semantic_key, created_at);
CREATE INDEX IF NOT EXISTS cache_entries_expiry ON cache_entries (expires_at);
-- bytes too: the eviction's scan and the size sum read only this index.
CREATE INDEX IF NOT EXISTS cache_entries_lru ON cache_entries (last_used_at, bytes);
CREATE INDEX IF NOT EXISTS cache_entries_owner ON cache_entries (workspace_id, key_id);
`

/** Creates the file owner-only before SQLite opens it (its -wal and -shm take the file's mode). */
function createPrivateFile(path: string) {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  try {
    closeSync(openSync(path, 'wx', 0o600))
    return
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  // A file made by hand or by an older release: it holds prompts and answers, so owner-only too.
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      if (statSync(file).mode & 0o077) chmodSync(file, 0o600)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
  }
}

const pragmaNumber = (database: Database, name: string): number => Object.values(database.query(`PRAGMA ${name}`).get() as Record<string, number>)[0]!

/**
 * Opens a connection to the cache file with its pragmas. `setUp`: creates the file (0600) and the
 * schema, or empties a file of another version; the writer thread opens a file already set up.
 */
export function openCacheDatabase(path: string, setUp: boolean): Database {
  if (setUp) createPrivateFile(path)
  const database = new Database(path, { create: setUp, strict: true })
  try {
    database.exec(`PRAGMA busy_timeout = ${cacheBusyTimeoutMs}`)
    // Before any table exists: a new file reuses and gives back freed pages (incremental_vacuum).
    if (setUp) database.exec('PRAGMA auto_vacuum = INCREMENTAL')
    database.exec('PRAGMA journal_mode = WAL')
    // A lost last transaction on power loss costs cache entries, nothing else.
    database.exec('PRAGMA synchronous = NORMAL')
    // The WAL goes back to this size after a checkpoint: the cache's disk use stays near its bound.
    database.exec(`PRAGMA journal_size_limit = ${4 * 1024 * 1024}`)
    if (setUp) setUpSchema(database, path)
    return database
  } catch (error) {
    database.close()
    throw error
  }
}

function setUpSchema(database: Database, path: string) {
  // A file already set up is only read: opening it (a CLI command, a second process) takes no write lock.
  const ready = () => pragmaNumber(database, 'application_id') === cacheApplicationId && pragmaNumber(database, 'user_version') === cacheSchemaVersion
  if (ready()) return
  database
    .transaction(() => {
      // Another process may have set it up since the look above.
      if (ready()) return
      const tables = database.query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all()
      const ours = pragmaNumber(database, 'application_id') === cacheApplicationId
      if (tables.length > 0 && !ours) {
        throw new Error(`${path} holds tables but is not a response cache file: RT_CACHE_PATH must name a file of its own, never the database`)
      }
      // Only a cache: a file of another layout is emptied, never migrated.
      if (ours && pragmaNumber(database, 'user_version') !== cacheSchemaVersion) {
        for (const { name } of tables) database.exec(`DROP TABLE IF EXISTS "${name.replaceAll('"', '""')}"`)
      }
      database.exec(schema)
      database.exec(`PRAGMA application_id = ${cacheApplicationId}`)
      database.exec(`PRAGMA user_version = ${cacheSchemaVersion}`)
    })
    .immediate()
  // A file that lost its tables to an older layout may not have incremental vacuum yet: VACUUM turns
  // it on (the table is empty, so it is quick). Another process reading at that moment only delays it.
  if (pragmaNumber(database, 'auto_vacuum') !== 2) {
    try {
      database.exec('PRAGMA auto_vacuum = INCREMENTAL')
      database.exec('VACUUM')
    } catch {}
  }
}

/** The rows' count and bytes, read from the LRU index (it holds `bytes`). */
export function countEntries(database: Database): { entries: number; bytes: number } {
  const row = database.query<{ entries: number; bytes: number }, []>('SELECT count(*) AS entries, coalesce(sum(bytes), 0) AS bytes FROM cache_entries INDEXED BY cache_entries_lru').get()!
  return { entries: row.entries, bytes: row.bytes }
}

/**
 * Deletes up to `cacheDeleteChunk` rows matching `where` per statement until none is left; each
 * statement is a transaction of its own when none is open, so another writer waits one chunk at most.
 */
export function deleteInChunks(database: Database, where: string, parameters: (string | number)[], keys?: string[]): { entries: number; bytes: number } {
  const statement = database.query<{ key: string; bytes: number }, (string | number)[]>(
    `DELETE FROM cache_entries WHERE rowid IN (SELECT rowid FROM cache_entries WHERE ${where} LIMIT ${cacheDeleteChunk}) RETURNING key, bytes`,
  )
  let entries = 0
  let bytes = 0
  for (;;) {
    const rows = statement.all(...parameters)
    entries += rows.length
    for (const row of rows) {
      bytes += row.bytes
      keys?.push(row.key)
    }
    if (rows.length < cacheDeleteChunk) return { entries, bytes }
  }
}

/** The file's pages in use, in bytes (free pages not counted). */
export function usedFileBytes(database: Database): number {
  return (pragmaNumber(database, 'page_count') - pragmaNumber(database, 'freelist_count')) * pragmaNumber(database, 'page_size')
}

/**
 * Gives free pages back to the file system when the file is over its bound, or when a quarter of it
 * is free (after a large purge or prune); a few are kept for the next writes to reuse.
 */
export function shrinkFile(database: Database, maxBytes: number) {
  const pageSize = pragmaNumber(database, 'page_size')
  const pages = pragmaNumber(database, 'page_count')
  const free = pragmaNumber(database, 'freelist_count')
  if (free === 0) return
  const overPages = Math.ceil((pages * pageSize - maxBytes) / pageSize)
  const keep = Math.floor(maxBytes / 64 / pageSize)
  const release = overPages > 0 ? Math.max(overPages, free - keep) : free * 4 > pages ? free - keep : 0
  if (release > 0) database.query(`PRAGMA incremental_vacuum(${Math.min(free, release)})`).run()
}
