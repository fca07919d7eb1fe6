/**
 * Retention (CONTRACT §14): the daily `log-prune` job deletes request-log rows older than
 * RT_LOG_RETENTION_DAYS and clears captured bodies older than RT_BODY_RETENTION_DAYS (the row
 * stays), in small transactions; the usage roll-ups stay, so usage over older windows still
 * answers; the freed pages are reused. A bad value stops the start.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { startTestServer, type TestServer } from '../harness/server'
import { runJob } from '../../src/scheduler/jobs'
import { pruneLogs } from '../../src/scheduler/jobs/log-prune'
import type { RequestLogRow } from '../../src/storage/repositories/request-logs'

const repoRoot = resolve(import.meta.dir, '../..')
const dayMs = 86_400_000

function logRow(server: TestServer, id: string, ageMs: number, fields: Partial<RequestLogRow> = {}): RequestLogRow {
  return { id, workspaceId: server.workspaceId, createdAt: Date.now() - ageMs, endpoint: 'chat', gateway: 'openai', model: 'openai/gpt-4o-mini', status: 200, latencyMs: 100, inputTokens: 10, outputTokens: 5, ...fields }
}

const explorer = async (server: TestServer) => {
  const answer = await server.call('GET', '/dashboard/api/requests?range=30d')
  expect(answer.status).toBe(200)
  return answer.body.data as { id: string; request_body: unknown }[]
}

describe('log-prune: request logs and captured bodies', () => {
  test('rows older than the retention go, bodies older than theirs are cleared, roll-ups keep the usage', async () => {
    await using server = await startTestServer({ RT_LOG_RETENTION_DAYS: '3', RT_BODY_RETENTION_DAYS: '1' })
    const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'kept a day' }] })
    server.runtime.repositories.requestLogs.insertMany([
      logRow(server, 'fresh', 0.5 * dayMs, { requestBody: body }),
      logRow(server, 'two-days', 2 * dayMs, { requestBody: body }),
      logRow(server, 'four-days', 4 * dayMs, { requestBody: body }),
      logRow(server, 'six-days', 6 * dayMs, { status: 502 }),
      // A request no key was found for is logged under workspace '': its old rows go too.
      logRow(server, 'anonymous-old', 5 * dayMs, { workspaceId: '', status: 401 }),
      logRow(server, 'anonymous-new', 0.5 * dayMs, { workspaceId: '', status: 401 }),
    ])
    const before = await server.call('GET', '/api/v1/usage/summary?range=7d')
    expect(before.body.data).toMatchObject({ requests: 4, errors: 1 })

    const result = (await runJob(server.runtime, 'log-prune')) as any
    expect(result.request_logs).toMatchObject({ deleted: 3, retention_days: 3 })
    expect(result.request_bodies).toMatchObject({ cleared: 1, retention_days: 1 })
    expect(Date.parse(result.request_logs.before)).toBeCloseTo(Date.now() - 3 * dayMs, -4)

    const rows = await explorer(server)
    expect(rows.map((row) => [row.id, row.request_body !== null])).toEqual([
      ['fresh', true],
      ['two-days', false],
    ])
    const left = server.runtime.storage.sqlite.query('select id from request_logs order by id').all() as { id: string }[]
    expect(left.map((row) => row.id)).toEqual(['anonymous-new', 'fresh', 'two-days'])
    // The roll-ups stay: the week's usage is what it was. The day roll-ups are kept for good; the
    // hour ones as long as the rows (no usage window reads an hour bucket older than a day and an hour).
    const after = await server.call('GET', '/api/v1/usage/summary?range=7d')
    expect(after.body.data).toEqual(before.body.data)
    expect((await server.call('GET', '/api/v1/usage/summary?range=24h')).body.data).toMatchObject({ requests: 1, errors: 0 })
    const cutoff = Date.now() - 3 * dayMs
    const rolled = (table: string, column: string) => (server.runtime.storage.sqlite.query(`select sum(requests) as n from ${table} where ${column} < ?`).get(cutoff) as { n: number | null }).n ?? 0
    expect(rolled('usage_rollups', 'hour')).toBe(0)
    expect(rolled('usage_daily_rollups', 'day')).toBeGreaterThanOrEqual(2)
    expect(result.hour_rollups.deleted).toBeGreaterThanOrEqual(2)

    // A second run finds nothing more to do.
    const again = (await runJob(server.runtime, 'log-prune')) as any
    expect([again.request_logs.deleted, again.request_bodies.cleared]).toEqual([0, 0])
  })

  test('works in transactions of a small batch, and the pages it frees are reused by the next rows', async () => {
    await using server = await startTestServer({ RT_LOG_RETENTION_DAYS: '1' })
    const sqlite = server.runtime.storage.sqlite
    const pragma = (name: string) => (sqlite.query(`pragma ${name}`).get() as Record<string, number>)[name]!
    const padding = 'x'.repeat(400)
    const write = (prefix: string, ageMs: number) => {
      for (let chunk = 0; chunk < 10; chunk++) {
        server.runtime.repositories.requestLogs.insertMany(Array.from({ length: 300 }, (_, index) => logRow(server, `${prefix}-${chunk}-${index}`, ageMs, { requestBody: padding })))
      }
    }
    write('old', 2 * dayMs)
    const pagesFull = pragma('page_count')
    const batches: number[] = []
    let last = 0
    const result = await pruneLogs(server.runtime, (done) => {
      batches.push(done - last)
      last = done
    }, { batch: 100, pauseMs: 0 })
    expect(result.request_logs).toMatchObject({ deleted: 3000 })
    // 3,000 rows in 30 transactions of 100 (and one that finds none), never more at once.
    expect(Math.max(...batches)).toBe(100)
    expect(batches.filter((size) => size === 100)).toHaveLength(30)
    expect(pragma('freelist_count')).toBeGreaterThan(0)

    // The same traffic again: the file does not grow, the free pages are taken.
    write('new', 0)
    expect(pragma('page_count')).toBeLessThanOrEqual(pagesFull)
    expect(pragma('freelist_count')).toBeLessThan(pagesFull / 10)
  })

  test("without the server's checkpointer (a CLI run alone) the WAL stays near its limit during a long prune", async () => {
    await using server = await startTestServer({ RT_LOG_RETENTION_DAYS: '1' })
    const padding = 'x'.repeat(400)
    for (let chunk = 0; chunk < 20; chunk++) {
      server.runtime.repositories.requestLogs.insertMany(Array.from({ length: 500 }, (_, index) => logRow(server, `old-${chunk}-${index}`, 2 * dayMs, { requestBody: padding })))
    }
    const sqlite = server.runtime.storage.sqlite
    sqlite.exec('PRAGMA wal_checkpoint(TRUNCATE)')
    const walBytes = () => statSync(`${server.runtime.config.dbPath}-wal`).size
    const limit = 256 * 1024
    let largest = 0
    const result = await pruneLogs(server.runtime, () => (largest = Math.max(largest, walBytes())), { batch: 100, pauseMs: 0, walLimitBytes: limit, walCheckEvery: 1 })
    expect(result.request_logs).toMatchObject({ deleted: 10_000 })
    // Deleting 10,000 rows of about 600 bytes writes several MB of pages to the log; checkpointed
    // as it passes the limit and truncated back when it restarts, it never holds much more.
    expect(largest).toBeGreaterThan(0)
    expect(largest).toBeLessThan(limit * 4)
    // The connection is as it was: it checkpoints on commit again, with no size limit.
    expect(sqlite.query('PRAGMA wal_autocheckpoint').get()).toEqual({ wal_autocheckpoint: 1000 })
    expect(sqlite.query('PRAGMA journal_size_limit').get()).toEqual({ journal_size_limit: -1 })
  })

  test('a retention that is not a whole number of at least 1 stops the start, naming the variable', async () => {
    for (const [name, value] of [
      ['RT_LOG_RETENTION_DAYS', '0'],
      ['RT_BODY_RETENTION_DAYS', '2.5'],
      ['RT_LOG_RETENTION_DAYS', 'ninety'],
    ] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), 'router-retention-'))
      try {
        const child = Bun.spawn(['bun', 'run', 'src/main.ts'], {
          cwd: repoRoot,
          env: { ...process.env, RT_DATA_DIR: dataDir, PORT: '0', [name]: value },
          stdout: 'pipe',
          stderr: 'pipe',
        })
        const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
        expect([name, value, exitCode]).toEqual([name, value, 1])
        expect(stdout).not.toContain('listening on')
        const failure = JSON.parse(stderr.trim().split('\n').at(-1)!)
        expect(failure).toMatchObject({ level: 'error', event: 'startup_failed' })
        expect(failure.message).toContain(name)
      } finally {
        rmSync(dataDir, { recursive: true, force: true })
      }
    }
  }, 30_000)
})
