/**
 * A replica's log spool (CONTRACT §10): `$RT_DATA_DIR/spool.db`, a SQLite file of its own outside
 * the LiteFS mount, holding the request-log rows this node served until the primary has
 * acknowledged them. A row is keyed by its id, so a row spooled twice (the journal replayed after
 * a crash) is kept once, and the primary inserts by id, so a batch shipped twice lands once.
 */
import { Database } from 'bun:sqlite'
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { RequestLogRow } from '../storage/repositories/request-logs'
import { withNanoCost } from '../storage/request-journal'

export function spoolPath(dataDir: string): string {
  return join(dataDir, 'spool.db')
}

export interface SpooledBatch {
  /** The spool's sequence number of the last row taken: `remove(upTo)` drops the batch. */
  upTo: number
  /** Each row as the JSON text it was spooled as (the shipper sends them as they are). */
  texts: string[]
}

/** The rows of a batch (a row an earlier build spooled with its cost in USD, in nano-dollars). */
export function spooledRows(batch: SpooledBatch): RequestLogRow[] {
  return batch.texts.map((text) => withNanoCost(JSON.parse(text) as Record<string, unknown>) as unknown as RequestLogRow)
}

export class LogSpool {
  private readonly sqlite: Database
  private readonly insert
  private readonly takeQuery
  private readonly removeQuery
  private readonly countQuery
  private readonly addMany

  constructor(readonly path: string) {
    // Owner-only like the database: the rows carry client addresses and, with capture on, bodies.
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
    try {
      closeSync(openSync(path, 'wx', 0o600))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    this.sqlite = new Database(path, { create: true, strict: true })
    this.sqlite.exec('PRAGMA journal_mode = WAL')
    // FULL: a row acknowledged to nobody yet must outlive the machine, not only the process.
    this.sqlite.exec('PRAGMA synchronous = FULL')
    this.sqlite.exec('PRAGMA busy_timeout = 5000')
    this.sqlite.exec('create table if not exists spooled_logs (seq integer primary key autoincrement, id text not null unique, row text not null)')
    this.insert = this.sqlite.prepare<unknown, [string, string]>('insert or ignore into spooled_logs (id, row) values (?, ?)')
    this.takeQuery = this.sqlite.prepare<{ seq: number; row: string }, [number]>('select seq, row from spooled_logs order by seq limit ?')
    this.removeQuery = this.sqlite.prepare<unknown, [number]>('delete from spooled_logs where seq <= ?')
    this.countQuery = this.sqlite.prepare<{ n: number }, []>('select count(*) as n from spooled_logs')
    this.addMany = this.sqlite.transaction((rows: readonly RequestLogRow[]) => {
      let added = 0
      for (const row of rows) added += this.insert.run(row.id, JSON.stringify(row)).changes
      return added
    })
  }

  /** Keeps rows (one transaction); returns how many were new. */
  add(rows: readonly RequestLogRow[]): number {
    return rows.length === 0 ? 0 : this.addMany(rows)
  }

  /**
   * The oldest rows, up to `limit` rows and about `maxBytes` of JSON (never less than one row), or
   * undefined when the spool is empty.
   */
  take(limit: number, maxBytes = Number.POSITIVE_INFINITY): SpooledBatch | undefined {
    const found = this.takeQuery.all(limit)
    if (found.length === 0) return undefined
    const texts: string[] = []
    let bytes = 0
    let upTo = 0
    for (const entry of found) {
      if (texts.length > 0 && bytes + entry.row.length > maxBytes) break
      texts.push(entry.row)
      bytes += entry.row.length
      upTo = entry.seq
    }
    return { upTo, texts }
  }

  /** Drops the rows of an acknowledged batch. */
  remove(upTo: number): void {
    this.removeQuery.run(upTo)
  }

  count(): number {
    return this.countQuery.get()!.n
  }

  close(): void {
    this.sqlite.close()
  }
}
