/**
 * LiteFS on one machine, for the several-node tests (CONTRACT §10): a mount folder per node, the
 * database in the primary's, a replica's mount holding `.primary`; and what the primary's database
 * holds of the request-log rows a test's answers are owed.
 */
import { Database } from 'bun:sqlite'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'bun:test'

/** A primary's mount (holding the database) and a replica's (its `.primary` naming `primaryHost`), under `root`. */
export function twoMounts(root: string, primaryHost: string): { primaryMount: string; replicaMount: string; dbPath: string } {
  const primaryMount = join(root, 'primary-litefs')
  const replicaMount = join(root, 'replica-litefs')
  mkdirSync(primaryMount)
  mkdirSync(replicaMount)
  writeFileSync(join(replicaMount, '.primary'), primaryHost)
  return { primaryMount, replicaMount, dbPath: join(primaryMount, 'router.db') }
}

/** How many times each of these request ids has its row in the database (ids without one are absent). */
export function rowCounts(dbPath: string, ids: readonly string[]): Map<string, number> {
  const db = new Database(dbPath, { readonly: true })
  try {
    const counts = new Map<string, number>()
    for (let start = 0; start < ids.length; start += 500) {
      const slice = ids.slice(start, start + 500)
      const query = db.query<{ id: string; n: number }, string[]>(`select id, count(*) as n from request_logs where id in (${slice.map(() => '?').join(',')}) group by id`)
      for (const row of query.all(...slice)) counts.set(row.id, row.n)
    }
    return counts
  } finally {
    db.close()
  }
}

/** Waits (up to `withinMs`) until every id has its row; then the ids still without one, and those found more than once. */
export async function owedRows(dbPath: string, ids: readonly string[], withinMs = 20_000): Promise<{ lost: string[]; doubled: string[] }> {
  const deadline = Date.now() + withinMs
  let counts = rowCounts(dbPath, ids)
  while (counts.size < ids.length && Date.now() < deadline) {
    await Bun.sleep(100)
    counts = rowCounts(dbPath, ids)
  }
  return { lost: ids.filter((id) => !counts.has(id)), doubled: [...counts].filter(([, n]) => n !== 1).map(([id]) => id) }
}

/** Every id gets its row on the primary, exactly once. */
export async function expectRowsOnceEach(dbPath: string, ids: readonly string[], withinMs = 20_000): Promise<void> {
  expect(await owedRows(dbPath, ids, withinMs)).toEqual({ lost: [], doubled: [] })
}
