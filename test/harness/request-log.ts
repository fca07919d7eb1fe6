/** Reading what the service logged, from its SQLite file (read-only), after flushing the log queue. */
import { Database } from 'bun:sqlite'
import type { TestServer } from './server'

/** The request-log row's `enrichment` of the key's latest request, parsed (null when the column is null). */
export async function enrichmentOf(server: TestServer, keyId: string): Promise<any> {
  for (let attempt = 0; attempt < 50; attempt++) {
    server.runtime.logQueue.flush()
    const db = new Database(server.runtime.config.dbPath, { readonly: true })
    try {
      const row = db.query('select enrichment from request_logs where key_id = ? order by created_at desc limit 1').get(keyId) as { enrichment: string | null } | null
      if (row) return row.enrichment === null ? null : JSON.parse(row.enrichment)
    } finally {
      db.close()
    }
    await Bun.sleep(20)
  }
  throw new Error(`no request-log row for key ${keyId}`)
}

/** The request-log row of an answer (by its X-Router-Request-Id), once the log queue has written it. */
export async function logRowOf(server: TestServer, answer: { headers: Headers }): Promise<any> {
  const id = answer.headers.get('x-router-request-id')
  for (let attempt = 0; attempt < 200; attempt++) {
    server.runtime.logQueue.flush()
    const row = server.runtime.storage.sqlite.query('select * from request_logs where id = ?').get(id)
    if (row) return row
    await Bun.sleep(10)
  }
  throw new Error(`no request-log row for request ${id}`)
}
