/**
 * Costs in whole nano-dollars across the replica → primary path (CONTRACT §10, §11): the primary's
 * `/internal/v1/logs` takes `costNanoUsd` as an integer or null, turns the USD `costUsd` of a replica
 * of an earlier build into nano-dollars, and refuses costs and token counts that are not whole
 * non-negative numbers; rows an earlier build left in a spool read back the same way. The cache
 * outcome, its saving, continuations and guardrail findings (CONTRACT §15–17) are checked the same way.
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

describe('the primary takes the cache, continuation and guardrail fields of a row (CONTRACT §15, §16, §17)', () => {
  test('each as sent, or null when left out; a value of the wrong kind is 400 naming the field and writes nothing', async () => {
    await using server = await startTestServer({ RT_CLUSTER_SECRET: 'the-secret' })
    const send = (rows: unknown[]) =>
      fetch(`${server.rootUrl}/internal/v1/logs`, { method: 'POST', headers: { authorization: 'Bearer the-secret', 'content-type': 'application/json' }, body: JSON.stringify({ rows }) })
    const ws = server.workspaceId
    const findings = JSON.stringify([{ rule: 'email', where: 'input', action: 'mask', count: 2 }])
    const accepted = await send([
      logRow('hit', ws, { cache: 'hit', savedNanoUsd: 83_700, costNanoUsd: 0 }),
      logRow('semantic', ws, { cache: 'semantic-hit', savedNanoUsd: null, costNanoUsd: 0 }),
      logRow('coalesced', ws, { cache: 'coalesced', savedNanoUsd: 1_000, costNanoUsd: 0 }),
      logRow('continued', ws, { continued: 2, guardrails: findings, costNanoUsd: 500 }),
      logRow('none', ws, { cache: null, savedNanoUsd: null, continued: null, guardrails: null }),
      // A replica of a build before these fields: none of them sent.
      logRow('older', ws),
    ])
    expect([accepted.status, await accepted.json()]).toEqual([200, { accepted: 6, inserted: 6 }])
    const stored = new Map(
      server.runtime.storage.sqlite
        .query<{ id: string; cache: string | null; saved_nano_usd: number | null; continued: number | null; guardrails: string | null }, []>('select id, cache, saved_nano_usd, continued, guardrails from request_logs')
        .all()
        .map(({ id, ...rest }) => [id, rest]),
    )
    expect(Object.fromEntries(stored)).toEqual({
      hit: { cache: 'hit', saved_nano_usd: 83_700, continued: null, guardrails: null },
      semantic: { cache: 'semantic-hit', saved_nano_usd: null, continued: null, guardrails: null },
      coalesced: { cache: 'coalesced', saved_nano_usd: 1_000, continued: null, guardrails: null },
      continued: { cache: null, saved_nano_usd: null, continued: 2, guardrails: findings },
      none: { cache: null, saved_nano_usd: null, continued: null, guardrails: null },
      older: { cache: null, saved_nano_usd: null, continued: null, guardrails: null },
    })
    // The roll-ups count the cache answers and sum their known savings: the summary shows them.
    const summary = await server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(summary.body.data).toMatchObject({ requests: 6, cache_hits: 3, saved_usd: 0.0000847 })

    const count = () => server.runtime.storage.sqlite.query<{ n: number }, []>('select count(*) as n from request_logs').get()!.n
    const cacheMessage = 'rows[1].cache must be one of hit, semantic-hit, coalesced or null'
    const guardrailsMessage = 'rows[1].guardrails must be the JSON text of an array, or null'
    for (const [values, message] of [
      // A miss or a bypass is no cache answer: the row says null.
      [{ cache: 'miss' }, cacheMessage],
      [{ cache: 'bypass' }, cacheMessage],
      [{ cache: 'HIT' }, cacheMessage],
      [{ cache: '' }, cacheMessage],
      [{ cache: true }, cacheMessage],
      [{ cache: 1 }, cacheMessage],
      [{ savedNanoUsd: -1 }, 'rows[1].savedNanoUsd must be a non-negative integer or null'],
      [{ savedNanoUsd: 0.5 }, 'rows[1].savedNanoUsd must be a non-negative integer or null'],
      [{ savedNanoUsd: '100' }, 'rows[1].savedNanoUsd must be a non-negative integer or null'],
      [{ savedNanoUsd: 2 ** 53 }, 'rows[1].savedNanoUsd must be a non-negative integer or null'],
      [{ continued: -1 }, 'rows[1].continued must be a non-negative integer or null'],
      [{ continued: 1.5 }, 'rows[1].continued must be a non-negative integer or null'],
      [{ continued: '2' }, 'rows[1].continued must be a non-negative integer or null'],
      [{ continued: true }, 'rows[1].continued must be a non-negative integer or null'],
      // The findings as text, never the array itself; and the text of an array, nothing else.
      [{ guardrails: [{ rule: 'email', where: 'input', action: 'mask', count: 1 }] }, guardrailsMessage],
      [{ guardrails: '{"rule":"email"}' }, guardrailsMessage],
      [{ guardrails: '"[]"' }, guardrailsMessage],
      [{ guardrails: 'null' }, guardrailsMessage],
      [{ guardrails: '[{"rule":' }, guardrailsMessage],
      [{ guardrails: '' }, guardrailsMessage],
      [{ guardrails: 3 }, guardrailsMessage],
    ] as const) {
      const response = await send([logRow(crypto.randomUUID(), ws), logRow(crypto.randomUUID(), ws, values)])
      expect([values, response.status, await response.json()]).toEqual([values, 400, { error: message }])
    }
    expect(count()).toBe(6)
  })
})

describe('the spool', () => {
  test('a row an earlier build spooled with its cost in USD reads back in nano-dollars; a row of this build as it was written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-spool-cost-'))
    try {
      const path = join(dir, 'spool.db')
      const spool = new LogSpool(path)
      const cacheFields = { cache: 'hit', savedNanoUsd: 41_000, continued: 1, guardrails: '[{"rule":"email","where":"output","action":"mask","count":1}]' }
      spool.add([logRow('new', 'w', { costNanoUsd: 39_000, ...cacheFields }) as RequestLogRow])
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
      // This build's cache, continuation and guardrail fields ride in the JSON as they are; an earlier build's rows have none (written as null).
      expect(rows[0]).toMatchObject(cacheFields)
      expect('cache' in rows[1]!).toBe(false)
      reopened.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
