/**
 * Billing rows survive kill -9 (SPEC "What the service does" 7): the real service under concurrent
 * buffered load is killed mid-load and started again on the same data dir; every request the client
 * got a 200 for has its request-log row, once. Also the owner-only modes of the files it made.
 */
import { expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { readSegment, requestJournalDirectory } from '../../src/storage/request-journal'
import { startMockGateway } from '../harness/mock-gateway'
import { startService, tempDir } from '../harness/service-process'

const requests = 400
const concurrency = 32
/** The kill comes after this many 200s, with the other loops' requests still in flight. */
const killAfter = 200

test('kill -9 under load loses no request-log row of a request answered 200, and replays none twice', async () => {
  await using mock = await startMockGateway()
  // A data dir that does not exist yet: the service makes it (0700).
  const dataDir = join(tempDir(), 'data')
  const environment = { RT_GATEWAY_URL_OPENAI: mock.url, RT_LOG_LEVEL: 'warn' }
  const first = startService(dataDir, environment)
  const { rootUrl } = await first.listening()
  const managementKey = await first.managementKey()
  const manage = async (path: string, body: unknown) => {
    const response = await fetch(`${rootUrl}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    expect(response.status).toBe(201)
    return ((await response.json()) as { data: any }).data
  }
  const provider = await manage('/providers', { gateway: 'openai', key: 'sk-upstream' })
  const key = await manage('/keys', { routing: { targets: [{ provider_key_id: provider.id }] } })
  const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })

  // Closed-loop clients; a request counts once its whole 200 answer has arrived.
  const answered: string[] = []
  let sent = 0
  const journalDir = requestJournalDirectory(dataDir)
  const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)
  /** Load until `killAfter` more 200s, then kill -9 with requests in flight; the rows the journal alone holds. */
  const crashUnderLoad = async (service: typeof first, serviceUrl: string): Promise<string[]> => {
    const goal = answered.length + killAfter
    const limit = sent + requests
    let killed = false
    const loop = async () => {
      while (sent < limit && !killed) {
        sent++
        try {
          const response = await fetch(`${serviceUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }, body })
          await response.arrayBuffer()
          if (response.status === 200) answered.push(response.headers.get('x-router-request-id')!)
        } catch {
          // Refused or cut by the kill: no answer, so no row is owed.
        }
        if (!killed && answered.length >= goal) {
          killed = true
          service.child.kill('SIGKILL')
        }
      }
    }
    await Promise.all(Array.from({ length: concurrency }, loop))
    expect(killed).toBe(true)
    expect(await service.child.exited).not.toBe(0)
    expect(service.child.signalCode).toBe('SIGKILL')
    // What the kill left: rows in SQLite, and rows only in the journal, in owner-only files.
    expect(mode(dataDir)).toBe('700')
    expect(mode(journalDir)).toBe('700')
    for (const file of ['router.db', 'router.db-wal', 'router.db-shm', 'master.key']) expect([file, mode(join(dataDir, file))]).toEqual([file, '600'])
    const segments = readdirSync(journalDir)
    expect(segments.length).toBeGreaterThan(0)
    for (const segment of segments) expect(mode(join(journalDir, segment))).toBe('600')
    return segments.flatMap((segment) => readSegment(join(journalDir, segment)).rows.map((row) => row.id))
  }
  // Under load the rows of the last flush window (up to 50 ms) are only in the journal at the kill:
  // the restart has something to replay, or this test would not test it. When the timer's flush
  // happened to come between the last answer and the kill, the crash is done again (a restart
  // replays nothing then, and the next round's rows are owed as well).
  let journaledIds = await crashUnderLoad(first, rootUrl)
  for (let round = 2; round <= 4 && journaledIds.length === 0; round++) {
    const again = startService(dataDir, environment)
    journaledIds = await crashUnderLoad(again, (await again.listening()).rootUrl)
  }
  expect(journaledIds.length).toBeGreaterThan(0)

  const second = startService(dataDir, environment)
  await second.listening()
  expect(await second.stop()).toBe(0)
  // A clean stop leaves an empty journal.
  expect(readdirSync(journalDir)).toEqual([])

  const database = new Database(join(dataDir, 'router.db'), { readonly: true })
  const ids = database.query<{ id: string }, []>('select id from request_logs').all().map((row) => row.id)
  database.close()
  const stored = new Set(ids)
  const lost = answered.filter((id) => !stored.has(id))
  expect(lost).toEqual([])
  expect(ids.length).toBe(stored.size)
  expect(ids.length).toBeGreaterThanOrEqual(answered.length)
  // Rows the journal alone held at the kill are among them.
  for (const id of journaledIds) expect(stored.has(id)).toBe(true)
  console.log(`kill -9 after ${answered.length} answers (${sent} sent): ${ids.length} rows, ${journaledIds.length} of them replayed from the journal, 0 lost`)
})
