/**
 * `./scripts/cli backup --to PATH` (src/storage/backup.ts, issue 37 item 3): the copy holds the
 * database's encrypted secrets and key hashes, so it is owner-only (0600) from its first byte, not
 * only once it has been checked, whatever the umask. The database handed to the backup is a real
 * one, wrapped so the test sees the temporary file at the moment SQLite starts writing into it and
 * right after it has written the whole copy.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { backupDatabase } from '../../src/storage/backup'

const directories: string[] = []
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true })
})

function tempDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), 'router-backup-mode-'))
  directories.push(directory)
  return directory
}

/** A WAL database with some rows, as the service keeps it. */
function sourceDatabase(directory: string): Database {
  const database = new Database(join(directory, 'router.db'), { create: true })
  database.run('PRAGMA journal_mode = WAL')
  database.run('CREATE TABLE secrets (id INTEGER PRIMARY KEY, value TEXT)')
  const insert = database.prepare('INSERT INTO secrets (value) VALUES (?)')
  for (let index = 0; index < 500; index++) insert.run(`encrypted-${index}-${'x'.repeat(200)}`)
  return database
}

interface Seen {
  path: string
  /** The temporary file's mode when VACUUM INTO started, or null when it did not exist yet. */
  modeBefore: number | null
  sizeBefore: number | null
  /** Its mode right after VACUUM INTO wrote the whole copy, before the integrity check. */
  modeAfter: number
}

/** The database with its `VACUUM INTO` watched: what the target file was just before and just after. */
function watchedVacuum(database: Database, seen: Seen[]): Database {
  return new Proxy(database, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver)
      return (sql: string) => {
        const statement = target.query(sql)
        if (!/^VACUUM INTO/i.test(sql)) return statement
        return {
          run(path: string) {
            const before = existsSync(path) ? statSync(path) : undefined
            const result = statement.run(path)
            seen.push({ path, modeBefore: before ? before.mode & 0o777 : null, sizeBefore: before ? before.size : null, modeAfter: statSync(path).mode & 0o777 })
            return result
          },
        }
      }
    },
  })
}

describe('backup file mode', () => {
  for (const umask of [0o022, 0o000, 0o077]) {
    test(`umask ${umask.toString(8).padStart(3, '0')}: the copy is 0600 before SQLite writes its first byte, after the copy is written, and in place`, () => {
      const directory = tempDirectory()
      const database = sourceDatabase(directory)
      const seen: Seen[] = []
      const target = join(directory, 'copy.db')
      const previous = process.umask(umask)
      let result: { path: string; bytes: number }
      try {
        result = backupDatabase(watchedVacuum(database, seen), target)
      } finally {
        process.umask(previous)
        database.close()
      }
      expect(seen).toHaveLength(1)
      // Created owner-only and empty before VACUUM INTO, which then writes into that file.
      expect(seen[0]).toMatchObject({ modeBefore: 0o600, sizeBefore: 0, modeAfter: 0o600 })
      expect(seen[0]!.path.startsWith(`${target}.partial-`)).toBe(true)
      expect(result).toEqual({ path: target, bytes: statSync(target).size })
      expect(statSync(target).mode & 0o777).toBe(0o600)
      expect(readdirSync(directory).filter((name) => name.startsWith('copy.db'))).toEqual(['copy.db'])
      const copy = new Database(target, { readonly: true })
      expect(copy.query('SELECT count(*) AS n FROM secrets').get()).toEqual({ n: 500 })
      copy.close()
    })
  }

  test('a copy that cannot be made leaves no temporary file behind', () => {
    const directory = tempDirectory()
    const database = sourceDatabase(directory)
    const failing = new Proxy(database, {
      get(target, property, receiver) {
        if (property !== 'query') return Reflect.get(target, property, receiver)
        return () => ({
          run() {
            throw new Error('disk full')
          },
        })
      },
    })
    try {
      expect(() => backupDatabase(failing, join(directory, 'copy.db'))).toThrow(/the backup failed: disk full/)
    } finally {
      database.close()
    }
    expect(readdirSync(directory).filter((name) => name.startsWith('copy.db'))).toEqual([])
  })
})
