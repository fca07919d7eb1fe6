/**
 * `./scripts/cli backup --to PATH` (CONTRACT §14 "Retention and backup"): a consistent copy of the
 * database, made while the server serves.
 *
 * `VACUUM INTO` copies the database as one read transaction sees it. In WAL mode that read holds up
 * no writer, so the server goes on serving and logging meanwhile. The copy is compact: free pages are
 * left out.
 *
 * It is written beside the target under a temporary name and checked with `PRAGMA integrity_check`.
 * Only then is it renamed into place, so a PATH that exists is always a whole, checked copy. The
 * copy holds what the database holds: provider secrets encrypted with the master key, and our keys
 * as hashes. It is readable by its owner only from its first byte: the temporary file is created
 * empty with mode 0600 (set again after creation, whatever the umask) before `VACUUM INTO` writes
 * into it (SQLite takes an empty file and keeps its mode, and gives its own journal the same).
 *
 * Restoring: stop the service, put the copy at RT_DB_PATH with no `-wal` or `-shm` file beside it,
 * and start with the same master key.
 */
import type { Database } from 'bun:sqlite'
import { Database as SqliteDatabase } from 'bun:sqlite'
import { closeSync, existsSync, fchmodSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

export class BackupError extends Error {}

export function backupDatabase(sqlite: Database, to: string, random: () => number = Math.random): { path: string; bytes: number } {
  const path = resolve(to)
  if (existsSync(path)) throw new BackupError(`${path} already exists: a backup never overwrites a file; name a new one`)
  const directory = dirname(path)
  if (!existsSync(directory) || !statSync(directory).isDirectory()) throw new BackupError(`${directory} is not a directory`)
  const partial = `${path}.partial-${Math.floor(random() * 2 ** 32).toString(16)}`
  let created = false
  try {
    // Owner-only before anything is written: created exclusively (never a file someone put there)
    // with 0600, which the umask can only narrow, then set to exactly 0600 so SQLite can write it.
    const descriptor = openSync(partial, 'wx', 0o600)
    created = true
    try {
      fchmodSync(descriptor, 0o600)
    } finally {
      closeSync(descriptor)
    }
    sqlite.query('VACUUM INTO ?').run(partial)
    const copy = new SqliteDatabase(partial, { readonly: true })
    try {
      const problems = (copy.query('PRAGMA integrity_check').all() as { integrity_check: string }[]).map((row) => row.integrity_check)
      if (problems.length !== 1 || problems[0] !== 'ok') throw new BackupError(`the copy failed its integrity check: ${problems.slice(0, 3).join('; ')}`)
    } finally {
      copy.close()
    }
    renameSync(partial, path)
  } catch (error) {
    if (created) rmSync(partial, { force: true })
    if (error instanceof BackupError) throw error
    throw new BackupError(`the backup failed: ${error instanceof Error ? error.message : String(error)}`)
  }
  return { path, bytes: statSync(path).size }
}
