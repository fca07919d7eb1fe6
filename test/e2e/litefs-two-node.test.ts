/**
 * Two nodes on one machine, as LiteFS runs them on fly.io (CONTRACT §10): a primary, and a replica
 * that reads the primary's database file read-only (its own mount holds `.primary`), ships its
 * request-log rows to the primary through its spool, and replays writes with `fly-replay`.
 * Real service processes throughout; the replica's promotion is the removal of its `.primary`.
 */
import { expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { readdirSync, rmSync } from 'node:fs'
import { readSegment, requestJournalDirectory } from '../../src/storage/request-journal'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { startMockGateway } from '../harness/mock-gateway'
import { baseEnvironment, repoRoot, startService, tempDir, type ServiceProcess } from '../harness/service-process'
import { expectRowsOnceEach, twoMounts } from '../harness/litefs-simulation'

const clusterSecret = 'cluster-secret-for-the-test'
const primaryHost = 'primary-machine-1'

test('a primary and a LiteFS replica: reads and inference local, writes replayed, logs shipped once through outages and kill -9, jobs on the primary only, promotion', async () => {
  await using mock = await startMockGateway({ models: ['gpt-4o-mini'] })
  const root = tempDir()
  // The replica's mount says who the primary is; the primary's has no `.primary`.
  const { primaryMount, replicaMount, dbPath } = twoMounts(root, primaryHost)
  // No LiteFS API here (port 1 refuses): `.primary` alone decides the roles.
  const shared = { RT_MASTER_KEY: randomBytes(32).toString('base64'), RT_CLUSTER_SECRET: clusterSecret, RT_GATEWAY_URL_OPENAI: mock.url, RT_LOG_LEVEL: 'warn', RT_LITEFS_API_URL: 'http://127.0.0.1:1' }

  const startPrimary = (port = '0') => startService(join(root, 'primary-data'), { ...shared, RT_LITEFS_DIR: primaryMount, PORT: port })
  let primary = startPrimary()
  const primaryUrl = (await primary.listening()).rootUrl
  const primaryPort = new URL(primaryUrl).port
  const managementKey = await primary.managementKey()
  const manage = (base: string, method: string, path: string, body?: unknown) =>
    fetch(`${base}/api/v1${path}`, { method, headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
  const created = async (response: Response) => {
    expect(response.status).toBe(201)
    return ((await response.json()) as { data: any }).data
  }
  const provider = await created(await manage(primaryUrl, 'POST', '/providers', { gateway: 'openai', key: 'sk-upstream' }))
  const key = await created(await manage(primaryUrl, 'POST', '/keys', { routing: { targets: [{ provider_key_id: provider.id }] } }))

  const replicaEnvironment = { ...shared, RT_LITEFS_DIR: replicaMount, RT_DB_PATH: dbPath, RT_PRIMARY_URL: primaryUrl }
  const replicaData = join(root, 'replica-data')
  let replica: ServiceProcess = startService(replicaData, replicaEnvironment)
  const replicaUrl = (await replica.listening()).rootUrl
  const replicaPort = new URL(replicaUrl).port
  // The replica created no workspace and printed no key: the database is the primary's.
  expect(replica.stderr).not.toContain('management key:')

  const chat = async (base: string, secret = key.key) => {
    const response = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    })
    await response.arrayBuffer()
    expect(response.status).toBe(200)
    return response.headers.get('x-router-request-id')!
  }

  // Inference and management reads on the replica, from its local copy.
  const firstIds = [await chat(replicaUrl), await chat(replicaUrl)]
  const listed = await manage(replicaUrl, 'GET', '/keys')
  expect(listed.status).toBe(200)
  expect(((await listed.json()) as { data: { id: string }[] }).data.map((entry) => entry.id)).toContain(key.id)
  // A key made on the primary now is served by the replica on its next request.
  const second = await created(await manage(primaryUrl, 'POST', '/keys', { routing: { targets: [{ provider_key_id: provider.id }] } }))
  firstIds.push(await chat(replicaUrl, second.key))

  // Writes on the replica: 409, fly-replay to the primary, nothing written.
  for (const [method, path, body] of [
    ['POST', '/keys', { routing: { targets: [{ provider_key_id: provider.id }] } }],
    ['PATCH', `/keys/${key.id}`, { steering_message: 'no' }],
    ['DELETE', `/keys/${key.id}`, undefined],
    ['PUT', `/keys/${key.id}/routing`, { targets: [{ provider_key_id: provider.id }] }],
  ] as const) {
    const response = await manage(replicaUrl, method, path, body)
    expect([method, path, response.status]).toEqual([method, path, 409])
    expect(response.headers.get('fly-replay')).toBe(`instance=${primaryHost}`)
    expect(await response.json()).toEqual({ error: 'replaying on the primary' })
  }
  const batch = await fetch(`${replicaUrl}/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }, body: '{}' })
  expect(batch.status).toBe(409)
  expect(batch.headers.get('fly-replay')).toBe(`instance=${primaryHost}`)
  const mcp = (body: unknown) =>
    fetch(`${replicaUrl}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(body) })
  const mcpWrite = await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_api_key', arguments: {} } })
  expect(mcpWrite.status).toBe(409)
  expect(mcpWrite.headers.get('fly-replay')).toBe(`instance=${primaryHost}`)
  const mcpRead = await mcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_api_keys', arguments: {} } })
  expect(mcpRead.status).toBe(200)
  expect(((await mcpRead.json()) as { result: { isError?: boolean } }).result.isError).toBeUndefined()
  const keysOnPrimary = ((await (await manage(primaryUrl, 'GET', '/keys')).json()) as { data: unknown[] }).data
  expect(keysOnPrimary).toHaveLength(2)
  // The CLI on the replica: reads work, writes exit 1 naming the primary.
  const cliWith = (environment: Record<string, string>, ...args: string[]) =>
    Bun.spawnSync(['bun', 'run', 'src/cli/index.ts', ...args], { cwd: repoRoot, env: { ...baseEnvironment(), ...replicaEnvironment, RT_DATA_DIR: replicaData, ...environment } })
  const cli = (...args: string[]) => cliWith({}, ...args)
  const cliRead = cli('key', 'mcp', 'list', '--id', key.id)
  expect([cliRead.exitCode, JSON.parse(cliRead.stdout.toString())]).toEqual([0, { key_id: key.id, servers: [] }])
  const cliWrite = cli('key', 'rotate', '--id', key.id)
  expect(cliWrite.exitCode).toBe(1)
  expect(cliWrite.stderr.toString()).toContain(`writes go to the primary (${primaryHost})`)
  expect(cliWrite.stderr.toString()).toContain('litefs run -with-halt-lock-on')
  // Under LiteFS's halt lock (here the database file is writable as the lock would make it), RT_LITEFS_HALT_LOCK=1 writes.
  const halted = cliWith({ RT_LITEFS_HALT_LOCK: '1' }, 'key', 'limits', '--id', key.id, '--rpm', '100000')
  expect([halted.exitCode, halted.stderr.toString()]).toEqual([0, ''])
  const limited = ((await (await manage(primaryUrl, 'GET', `/keys/${key.id}`)).json()) as { data: { limits: unknown } }).data
  expect(limited.limits).toEqual({ requests_per_minute: 100000, tokens_per_minute: null, usd_per_day: null, usd_per_month: null })

  // The internal path takes the cluster secret only.
  for (const authorization of [undefined, 'Bearer wrong', `Basic ${clusterSecret}`]) {
    const response = await fetch(`${primaryUrl}/internal/v1/logs`, { method: 'POST', headers: authorization ? { authorization } : {}, body: '{"rows":[]}' })
    expect(response.status).toBe(401)
  }
  // The replica's rows reach the primary.
  await expectRowsOnceEach(dbPath, firstIds)

  // The primary away while the replica serves 1,000 requests: the rows wait in the spool.
  expect(await primary.stop()).toBe(0)
  const whileAway: string[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < 1000) {
        next++
        whileAway.push(await chat(replicaUrl))
      }
    }),
  )
  expect(new Set(whileAway).size).toBe(1000)
  // The shipper has tried and failed; the rows are in the spool (and the journal's last window).
  const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)![1])
  let metrics = ''
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await Bun.sleep(50)) {
    metrics = await (await fetch(`${replicaUrl}/metrics`)).text()
    if (metric(metrics, 'router_log_ship_failures_total') > 0 && metric(metrics, 'router_log_spool_rows') >= 1000) break
  }
  expect(metrics).toContain('router_node_replica 1')
  expect(metric(metrics, 'router_log_ship_failures_total')).toBeGreaterThan(0)
  expect(metric(metrics, 'router_log_spool_rows')).toBeGreaterThanOrEqual(1000)
  primary = startPrimary(primaryPort)
  await primary.listening()
  await expectRowsOnceEach(dbPath, whileAway)

  // kill -9 of the replica with rows in its journal and spool, the primary away again.
  expect(await primary.stop()).toBe(0)
  const beforeKill: string[] = []
  for (let index = 0; index < 200; index++) beforeKill.push(await chat(replicaUrl))
  replica.child.kill('SIGKILL')
  await replica.child.exited
  // What the kill left on the replica's disk: every row still to ship, in its spool or its journal.
  const spool = new Database(join(replicaData, 'spool.db'), { readonly: true })
  const left = new Set(spool.query<{ id: string }, []>('select id from spooled_logs').all().map((row) => row.id))
  spool.close()
  const journalDir = requestJournalDirectory(replicaData)
  for (const segment of readdirSync(journalDir)) for (const row of readSegment(join(journalDir, segment)).rows) left.add(row.id)
  expect(beforeKill.filter((id) => !left.has(id))).toEqual([])
  replica = startService(replicaData, { ...replicaEnvironment, PORT: replicaPort })
  await replica.listening()
  primary = startPrimary(primaryPort)
  await primary.listening()
  await expectRowsOnceEach(dbPath, beforeKill)

  // Jobs run on the primary only: with the primary gone and a job due, the replica runs none.
  expect(await primary.stop()).toBe(0)
  const rw = new Database(dbPath)
  rw.run("update job_leases set next_run_at = 0 where job = 'catalog-crawl'")
  rw.close()
  const leaseOf = () => {
    const db = new Database(dbPath, { readonly: true })
    try {
      return db.query<{ holder: string | null; last_finished_at: number | null }, []>("select holder, last_finished_at from job_leases where job = 'catalog-crawl'").get()!
    } finally {
      db.close()
    }
  }
  const leaseBefore = leaseOf()
  // The primary crawled openai when its provider key arrived (catalogs follow keys); none since.
  const listingsBefore = mock.calls('/models').length
  await Bun.sleep(2500)
  expect(leaseOf()).toEqual(leaseBefore)
  expect(mock.calls('/models')).toHaveLength(listingsBefore)
  const spooledAfterPrimaryLeft = [await chat(replicaUrl), await chat(replicaUrl)]

  // Promotion: `.primary` removed. The replica writes, runs the due job and keeps what it spooled.
  rmSync(join(replicaMount, '.primary'))
  await replica.waitForLine((line) => line.includes('"event":"promoted"'))
  const madeOnPromoted = await created(await manage(replicaUrl, 'POST', '/keys', { routing: { targets: [{ provider_key_id: provider.id }] } }))
  expect(madeOnPromoted.key).toStartWith('rt_live_')
  await chat(replicaUrl, madeOnPromoted.key)
  await expectRowsOnceEach(dbPath, spooledAfterPrimaryLeft)
  const deadline = Date.now() + 10_000
  while (leaseOf().last_finished_at === leaseBefore.last_finished_at && Date.now() < deadline) await Bun.sleep(100)
  expect(leaseOf().last_finished_at).not.toBe(leaseBefore.last_finished_at)
  expect(mock.calls('/models').length).toBeGreaterThan(listingsBefore)
  expect((await (await fetch(`${replicaUrl}/metrics`)).text())).toContain('router_node_replica 0')
  expect(await replica.stop()).toBe(0)
}, 120_000)
