/**
 * Costs in whole nano-dollars across the replica → primary path (CONTRACT §10, §11): the primary's
 * `/internal/v1/logs` takes `costNanoUsd` as an integer or null, turns the USD `costUsd` of a replica
 * of an earlier build into nano-dollars, and refuses costs and token counts that are not whole
 * non-negative numbers; rows an earlier build left in a spool read back the same way.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Database } from 'bun:sqlite'
import { LogSpool, spooledRows } from '../../src/cluster/spool'
import { startTestServer } from '../harness/server'
import type { RequestLogRow } from '../../src/storage/repositories/request-logs'

function logRow(id: string, workspaceId: string, values: Record<string, unknown> = {}) {
  return { id, workspaceId, keyId: null, createdAt: Date.now(), endpoint: 'chat', status: 200, latencyMs: 3.5, stream: false, attempts: 1, attemptPath: 'openai:ok', ...values }
}

describe('the primary takes rows with their cost in nano-dollars', () => {
  test('costNanoUsd as sent; costUsd of an earlier build to the nearest nano-dollar; a cost or token count that is not a whole non-negative number is 400 and writes nothing', async () => {
    await using server = await startTestServer({ RT_CLUSTER_SECRET: 'the-secret' })
    const send = (rows: unknown[]) =>
      fetch(`${server.rootUrl}/internal/v1/logs`, { method: 'POST', headers: { authorization: 'Bearer the-secret', 'content-type': 'application/json' }, body: JSON.stringify({ rows }) })
    const ws = server.workspaceId
    const stored = () =>
      new Map(server.runtime.storage.sqlite.query<{ id: string; cost_nano_usd: number | null; type: string }, []>('select id, cost_nano_usd, typeof(cost_nano_usd) as type from request_logs').all().map((row) => [row.id, row]))

    const accepted = await send([
      logRow('nano', ws, { costNanoUsd: 83_700, inputTokens: 75, outputTokens: 51 }),
      logRow('nano-null', ws, { costNanoUsd: null }),
      logRow('no-cost-field', ws),
      // A replica of an earlier build: USD, a float that is not the exact decimal (75 × 3e-7 + 51 × 1.2e-6).
      logRow('usd', ws, { costUsd: 75 * 0.0000003 + 51 * 0.0000012 }),
      logRow('usd-null', ws, { costUsd: null }),
      logRow('usd-zero', ws, { costUsd: 0 }),
      // Both: the nano-dollars stand.
      logRow('both', ws, { costUsd: 0.5, costNanoUsd: 7 }),
    ])
    expect([accepted.status, await accepted.json()]).toEqual([200, { accepted: 7, inserted: 7 }])
    const rows = stored()
    expect(rows.get('nano')).toEqual({ id: 'nano', cost_nano_usd: 83_700, type: 'integer' })
    expect(rows.get('nano-null')?.cost_nano_usd).toBeNull()
    expect(rows.get('no-cost-field')?.cost_nano_usd).toBeNull()
    expect(rows.get('usd')).toEqual({ id: 'usd', cost_nano_usd: 83_700, type: 'integer' })
    expect(rows.get('usd-null')?.cost_nano_usd).toBeNull()
    expect(rows.get('usd-zero')).toEqual({ id: 'usd-zero', cost_nano_usd: 0, type: 'integer' })
    expect(rows.get('both')?.cost_nano_usd).toBe(7)
    // The roll-ups add the integers: the usage API shows their USD.
    const summary = await server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(summary.body.data).toMatchObject({ requests: 7, cost_usd: 0.000167407, unpriced_requests: 3 })

    const count = () => server.runtime.storage.sqlite.query<{ n: number }, []>('select count(*) as n from request_logs').get()!.n
    for (const [values, message] of [
      [{ costNanoUsd: -1 }, 'rows[1].costNanoUsd must be a non-negative integer or null'],
      [{ costNanoUsd: 1.5 }, 'rows[1].costNanoUsd must be a non-negative integer or null'],
      [{ costNanoUsd: '100' }, 'rows[1].costNanoUsd must be a non-negative integer or null'],
      [{ costNanoUsd: 2 ** 53 }, 'rows[1].costNanoUsd must be a non-negative integer or null'],
      [{ costUsd: -0.000001 }, 'rows[1].costUsd must be a non-negative number or null'],
      [{ costUsd: '0.1' }, 'rows[1].costUsd must be a non-negative number or null'],
      [{ inputTokens: -3 }, 'rows[1].inputTokens must be a non-negative integer or null'],
      [{ inputTokens: 2.5 }, 'rows[1].inputTokens must be a non-negative integer or null'],
      [{ outputTokens: -1 }, 'rows[1].outputTokens must be a non-negative integer or null'],
      [{ outputTokens: 0.1 }, 'rows[1].outputTokens must be a non-negative integer or null'],
    ] as const) {
      const response = await send([logRow(crypto.randomUUID(), ws), logRow(crypto.randomUUID(), ws, values)])
      expect([values, response.status, await response.json()]).toEqual([values, 400, { error: message }])
    }
    // Not finite (JSON has no Infinity or NaN: a number too large to read is one).
    const huge = await fetch(`${server.rootUrl}/internal/v1/logs`, {
      method: 'POST',
      headers: { authorization: 'Bearer the-secret', 'content-type': 'application/json' },
      body: JSON.stringify({ rows: [logRow('huge', ws, { costNanoUsd: 0 })] }).replace('"costNanoUsd":0', '"costNanoUsd":1e999'),
    })
    expect([huge.status, await huge.json()]).toEqual([400, { error: 'rows[0].costNanoUsd must be a non-negative integer or null' }])
    expect(count()).toBe(7)
  })
})

describe('the spool', () => {
  test('a row an earlier build spooled with its cost in USD reads back in nano-dollars; a row of this build as it was written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-spool-cost-'))
    try {
      const path = join(dir, 'spool.db')
      const spool = new LogSpool(path)
      spool.add([logRow('new', 'w', { costNanoUsd: 39_000 }) as RequestLogRow])
      spool.close()
      // As an earlier build wrote its rows: JSON text with costUsd.
      const sqlite = new Database(path)
      sqlite.run('insert into spooled_logs (id, row) values (?, ?)', ['old', JSON.stringify(logRow('old', 'w', { costUsd: 11 * 0.000001 + 7 * 0.000004 }))])
      sqlite.run('insert into spooled_logs (id, row) values (?, ?)', ['old-unpriced', JSON.stringify(logRow('old-unpriced', 'w', { costUsd: null }))])
      sqlite.close()
      const reopened = new LogSpool(path)
      const rows = spooledRows(reopened.take(10)!)
      expect(rows.map((row) => [row.id, row.costNanoUsd, 'costUsd' in row])).toEqual([
        ['new', 39_000, false],
        ['old', 39_000, false],
        ['old-unpriced', null, false],
      ])
      reopened.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
