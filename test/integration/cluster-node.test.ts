/**
 * The pieces of CONTRACT §10 below the two-process test (test/e2e/litefs-two-node.test.ts): the
 * role read from `.primary`, the spool, the primary's `/internal/v1/logs`, the snapshot following
 * other connections' writes between requests, and a demotion while serving.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readRole, RoleWatcher, startingRole } from '../../src/cluster/role'
import { startFakeLiteFs } from '../harness/litefs-api'
import { until } from '../harness/until'
import { LogSpool, spooledRows } from '../../src/cluster/spool'
import { LogShipper, primaryBaseUrl } from '../../src/cluster/ship-logs'
import { Writer } from '../../src/cluster/writer'
import { Metrics } from '../../src/observability/metrics'
import { chmodSync } from 'node:fs'
import { ClusterNode } from '../../src/cluster/node'
import { setWorkspaceSettings } from '../../src/management/workspaces'
import { createRuntime } from '../../src/runtime'
import { loadConfig } from '../../src/config/env'
import { silentLogger } from '../../src/observability/logger'
import { startTestServer } from '../harness/server'
import { createInferenceKey, storeProvider } from '../harness/api'
import { startMockGateway } from '../harness/mock-gateway'

const temp = () => mkdtempSync(join(tmpdir(), 'router-cluster-'))
/** Where no LiteFS API listens (port 1 refuses): these tests drive the role through `.primary` alone. */
const noLiteFsApi = 'http://127.0.0.1:1'

function logRow(id: string, workspaceId: string, keyId: string | null = null) {
  return { id, workspaceId, keyId, createdAt: Date.now(), endpoint: 'chat', status: 200, latencyMs: 3.5, stream: false, attempts: 1, attemptPath: 'openai:ok' }
}

describe('the role (CONTRACT §10)', () => {
  test('no RT_LITEFS_DIR or no .primary: primary; .primary: replica of the host it names; changes are heard in order', async () => {
    const dir = temp()
    try {
      expect(readRole(undefined)).toEqual({ kind: 'primary' })
      expect(readRole(dir)).toEqual({ kind: 'primary' })
      writeFileSync(join(dir, '.primary'), 'machine-a\n')
      expect(readRole(dir)).toEqual({ kind: 'replica', primaryHost: 'machine-a' })
      const watcher = new RoleWatcher(dir)
      const heard: string[] = []
      watcher.onChange((role, previous) => void heard.push(`${previous.kind}>${role.kind}${role.kind === 'replica' ? `:${role.primaryHost}` : ''}`))
      writeFileSync(join(dir, '.primary'), 'machine-b')
      await watcher.check()
      rmSync(join(dir, '.primary'))
      await watcher.check()
      await watcher.check()
      expect(heard).toEqual(['replica>replica:machine-b', 'replica>primary'])
      await watcher.stop()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('no .primary: the primary, whatever mode the mount root shows (the kernel may keep an old one for a minute after a promotion)', () => {
    const dir = temp()
    try {
      chmodSync(dir, 0o555)
      expect(readRole(dir)).toEqual({ kind: 'primary' })
    } finally {
      chmodSync(dir, 0o755)
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test("the primary's URL: RT_PRIMARY_URL, else its fly.io private address, else none", () => {
    expect(primaryBaseUrl({ primaryUrl: 'http://127.0.0.1:9', flyAppName: 'app', port: 8080, primaryHost: 'h' })).toBe('http://127.0.0.1:9')
    expect(primaryBaseUrl({ primaryUrl: undefined, flyAppName: 'router-app', port: 8080, primaryHost: '3d8d9930b3e789' })).toBe('http://3d8d9930b3e789.vm.router-app.internal:8080')
    expect(primaryBaseUrl({ primaryUrl: undefined, flyAppName: undefined, port: 8080, primaryHost: 'h' })).toBeUndefined()
  })
})

describe("LiteFS's local API confirms the role", () => {
  test('/events decides while open: a promotion is heard at once with `.primary` still there; a replica with no primary is told apart (writes 503); tx lines skipped; a dropped stream bridged by /info; the file once LiteFS is gone', async () => {
    const dir = temp()
    writeFileSync(join(dir, '.primary'), 'machine-a\n')
    await using litefs = startFakeLiteFs({ isPrimary: false, hostname: 'machine-a' })
    const api: string[] = []
    const watcher = new RoleWatcher(dir, () => {}, { apiUrl: litefs.url, apiRetryMs: 50, onApi: (event) => void api.push(event) })
    const heard: string[] = []
    const changed: (() => void)[] = []
    watcher.onChange((role, previous) => {
      heard.push(`${previous.kind}>${role.kind}${role.kind === 'replica' ? `:${role.primaryHost}` : ''}`)
      for (const wake of changed.splice(0)) wake()
    })
    const nextChange = () => new Promise<void>((wake) => changed.push(wake))
    try {
      await watcher.start(10_000)
      expect(watcher.apiConnected()).toBe(true)
      expect(watcher.current()).toEqual({ kind: 'replica', primaryHost: 'machine-a' })
      // Transactions stream by and change nothing.
      for (let txid = 1; txid <= 50; txid++) litefs.tx(txid)
      // Promoted: LiteFS says so; `.primary` is left as the kernel may still show it.
      let change = nextChange()
      const announced = performance.now()
      litefs.announce({ isPrimary: true, hostname: '' }, { file: false })
      await change
      expect(performance.now() - announced).toBeLessThan(1000)
      expect(watcher.current()).toEqual({ kind: 'primary' })
      expect(watcher.readNow()).toEqual({ kind: 'primary' })
      // The lease lost, no primary known: a replica with nowhere to replay, though no `.primary` says so.
      rmSync(join(dir, '.primary'))
      change = nextChange()
      litefs.announce({ isPrimary: false, hostname: '' })
      await change
      const role = watcher.current()
      expect(role).toEqual({ kind: 'replica', primaryHost: '' })
      const writer = new Writer(role, {} as never, new Metrics(), join(dir, 'spool.db'))
      const answer = writer.replay()!
      expect(answer.status).toBe(503)
      expect(answer.headers.get('retry-after')).toBe('2')
      expect(answer.headers.get('fly-replay')).toBeNull()
      change = nextChange()
      litefs.announce({ isPrimary: false, hostname: 'machine-b' })
      await change
      // The stream dropped (LiteFS drops a slow reader): `/info` still answers, so LiteFS's word stands
      // over the file's, and the stream is opened again.
      writeFileSync(join(dir, '.primary'), 'machine-c\n')
      litefs.dropStreams()
      await until('the event stream open again', () => (litefs.subscribers() === 1 ? true : undefined), 3000)
      expect(watcher.apiConnected()).toBe(true)
      expect(watcher.current()).toEqual({ kind: 'replica', primaryHost: 'machine-b' })
      // LiteFS gone altogether: the file decides at once.
      change = nextChange()
      await litefs.close()
      await change
      expect(watcher.apiConnected()).toBe(false)
      expect(watcher.current()).toEqual({ kind: 'replica', primaryHost: 'machine-c' })
      expect(heard).toEqual(['replica>primary', 'primary>replica:', 'replica>replica:machine-b', 'replica>replica:machine-c'])
      expect(api).toEqual(['connected', 'lost'])
    } finally {
      await watcher.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('an API that takes the connection and never answers: the start goes on with the file after apiWaitMs, the stream is asked again after its 2 s limit, and a stop during the start leaves nothing running', async () => {
    const dir = temp()
    let asked = 0
    const silent = Bun.serve({ hostname: '127.0.0.1', port: 0, idleTimeout: 0, fetch: () => (asked++, new Promise<Response>(() => {})) })
    try {
      writeFileSync(join(dir, '.primary'), 'machine-a\n')
      const watcher = new RoleWatcher(dir, () => {}, { apiUrl: `http://127.0.0.1:${silent.port}`, apiWaitMs: 100, apiRetryMs: 50 })
      const started = performance.now()
      await watcher.start(20)
      expect(performance.now() - started).toBeLessThan(1000)
      expect(watcher.current()).toEqual({ kind: 'replica', primaryHost: 'machine-a' })
      await until('GET /events asked again', () => (asked >= 2 ? true : undefined), 4000)
      await watcher.stop()

      // Stopped before the API's first word: start() ends, and no poll runs afterwards.
      const early = new RoleWatcher(dir, () => {}, { apiUrl: `http://127.0.0.1:${silent.port}`, apiWaitMs: 5000 })
      const heard: string[] = []
      early.onChange((role) => void heard.push(role.kind))
      const starting = early.start(20)
      await Bun.sleep(50)
      await early.stop()
      await starting
      rmSync(join(dir, '.primary'))
      await Bun.sleep(200)
      expect(heard).toEqual([])
    } finally {
      await silent.stop(true)
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the starting role: /info where it answers (a replica that lost its primary has no `.primary` either), the file where it does not', async () => {
    const dir = temp()
    try {
      await using litefs = startFakeLiteFs({ isPrimary: false, hostname: '' })
      expect(await startingRole({ litefsDir: dir, litefsApiUrl: litefs.url })).toEqual({ kind: 'replica', primaryHost: '' })
      litefs.announce({ isPrimary: false, hostname: 'machine-a' })
      expect(await startingRole({ litefsDir: dir, litefsApiUrl: litefs.url })).toEqual({ kind: 'replica', primaryHost: 'machine-a' })
      litefs.announce({ isPrimary: true, hostname: '' })
      writeFileSync(join(dir, '.primary'), 'stale-view\n')
      expect(await startingRole({ litefsDir: dir, litefsApiUrl: litefs.url })).toEqual({ kind: 'primary' })
      await litefs.close()
      expect(await startingRole({ litefsDir: dir, litefsApiUrl: litefs.url })).toEqual({ kind: 'replica', primaryHost: 'stale-view' })
      expect(await startingRole({ litefsDir: undefined, litefsApiUrl: undefined })).toEqual({ kind: 'primary' })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test("a node LiteFS demotes then promotes by its events alone is writing within a second of the promotion, its `.primary` not yet gone", async () => {
    const litefs = temp()
    try {
      await using api = startFakeLiteFs({ isPrimary: true, hostname: '' }, litefs)
      await using server = await startTestServer({ RT_LITEFS_DIR: litefs, RT_DB_PATH: '', RT_LITEFS_API_URL: api.url })
      // The file's poll far apart: what moves the role here is LiteFS's event stream.
      const node = new ClusterNode(server.runtime, { roleIntervalMs: 60_000, shipIntervalMs: 20 })
      await node.start()
      try {
        expect(server.runtime.roles.apiConnected()).toBe(true)
        api.announce({ isPrimary: false, hostname: 'other-machine' })
        const write = async () => (await server.api('/api/v1/keys', { method: 'POST', json: {} })).status
        const until = async (status: number) => {
          const started = performance.now()
          let seen = await write()
          while (seen !== status && performance.now() - started < 1000) {
            await Bun.sleep(10)
            seen = await write()
          }
          return [seen, performance.now() - started] as const
        }
        expect((await until(409))[0]).toBe(409)
        expect(server.runtime.storage.readonly).toBe(true)
        // Promoted: `.primary` stays (file: false), as a kernel's cached view of the mount may show it.
        api.announce({ isPrimary: true, hostname: '' }, { file: false })
        const [status, tookMs] = await until(201)
        expect(status).toBe(201)
        expect(tookMs).toBeLessThan(1000)
        expect(server.runtime.storage.readonly).toBe(false)
      } finally {
        await node.stop()
      }
    } finally {
      rmSync(litefs, { recursive: true, force: true })
    }
  })
})

describe('/healthz on a replica', () => {
  test("reports LiteFS's lag and fails (503) above RT_MAX_LAG_MS, unless it knows no primary; the primary ignores the file", async () => {
    const litefs = temp()
    try {
      await using server = await startTestServer({ RT_LITEFS_DIR: litefs, RT_DB_PATH: '', RT_LITEFS_API_URL: noLiteFsApi, RT_MAX_LAG_MS: '2000' })
      const health = async () => {
        const response = await fetch(`${server.rootUrl}/healthz`)
        return [response.status, await response.json()]
      }
      writeFileSync(join(litefs, '.lag'), '+0000009999\n')
      expect(await health()).toEqual([200, { ok: true }])
      const node = new ClusterNode(server.runtime, { roleIntervalMs: 20, shipIntervalMs: 20 })
      await node.start()
      try {
        writeFileSync(join(litefs, '.primary'), 'primary-machine\n')
        await server.runtime.roles.check()
        writeFileSync(join(litefs, '.lag'), '+0000000350\n')
        expect(await health()).toEqual([200, { ok: true, lag_ms: 350 }])
        writeFileSync(join(litefs, '.lag'), '+0000002001\n')
        expect(await health()).toEqual([503, { ok: false, lag_ms: 2001, max_lag_ms: 2000 }])
        // Not yet copied once: LiteFS shows the largest lag there is.
        writeFileSync(join(litefs, '.lag'), '+2147483647\n')
        expect((await health())[0]).toBe(503)
        // No primary known (one died, its lease not yet expired): every replica's lag grows alike, and none fails for it.
        writeFileSync(join(litefs, '.primary'), '')
        await server.runtime.roles.check()
        expect(server.runtime.writer.primaryHost()).toBe('')
        expect(await health()).toEqual([200, { ok: true }])
        writeFileSync(join(litefs, '.primary'), 'primary-machine\n')
        await server.runtime.roles.check()
        rmSync(join(litefs, '.lag'))
        expect(await health()).toEqual([200, { ok: true }])
      } finally {
        await node.stop()
      }
    } finally {
      rmSync(litefs, { recursive: true, force: true })
    }
  })
})

describe('the spool', () => {
  test('keeps a row once by id, hands rows out oldest first, and survives a reopen until removed', () => {
    const dir = temp()
    try {
      const path = join(dir, 'spool.db')
      let spool = new LogSpool(path)
      expect(spool.add([logRow('a', 'w'), logRow('b', 'w')])).toBe(2)
      expect(spool.add([logRow('b', 'w'), logRow('c', 'w')])).toBe(1)
      spool.close()
      spool = new LogSpool(path)
      const first = spool.take(2)!
      expect(spooledRows(first).map((row) => row.id)).toEqual(['a', 'b'])
      // A byte cap cuts the batch, never below one row.
      expect(spool.take(10, 1)!.texts).toHaveLength(1)
      spool.remove(first.upTo)
      expect(spooledRows(spool.take(10)!).map((row) => row.id)).toEqual(['c'])
      expect(spool.count()).toBe(1)
      spool.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('the shipper', () => {
  test('a row the primary refuses is found by halving, set aside and counted; every other row is shipped once', async () => {
    const dir = temp()
    const received: string[] = []
    const primary = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(request) {
        const rows = ((await request.json()) as { rows: { id: string }[] }).rows
        if (rows.some((row) => row.id === 'bad')) return Response.json({ error: 'rows[0].status must be a number' }, { status: 400 })
        received.push(...rows.map((row) => row.id))
        return Response.json({ accepted: rows.length, inserted: rows.length })
      },
    })
    try {
      const spool = new LogSpool(join(dir, 'spool.db'))
      const ids = Array.from({ length: 40 }, (_, index) => (index === 23 ? 'bad' : `row-${index}`))
      spool.add(ids.map((id) => logRow(id, 'w')))
      const metrics = new Metrics()
      const logged: string[] = []
      const logger = { ...silentLogger, error: (event: string) => void logged.push(event), warn: () => {}, info: () => {} }
      const shipper = new LogShipper({ spool, primaryUrl: () => `http://127.0.0.1:${primary.port}`, secret: 's', fetch, logger: logger as never, metrics, batchSize: 16 })
      await shipper.ship()
      expect(received.sort()).toEqual(ids.filter((id) => id !== 'bad').sort())
      expect(spool.count()).toBe(0)
      expect(metrics.logRowsRejected).toBe(1)
      expect(metrics.logRowsShipped).toBe(39)
      expect(logged).toEqual(['log_row_rejected'])
      spool.close()
    } finally {
      primary.stop(true)
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('POST /internal/v1/logs on the primary', () => {
  test("from fly.io's public edge (Fly-Client-IP, Fly-Forwarded-Port) the ingest does not exist: 404, even with the secret", async () => {
    await using server = await startTestServer({ RT_CLUSTER_SECRET: 'the-secret' })
    for (const header of ['fly-client-ip', 'fly-forwarded-port']) {
      const response = await fetch(`${server.rootUrl}/internal/v1/logs`, {
        method: 'POST',
        headers: { authorization: 'Bearer the-secret', 'content-type': 'application/json', [header]: header === 'fly-client-ip' ? '203.0.113.9' : '443' },
        body: JSON.stringify({ rows: [] }),
      })
      expect([header, response.status]).toEqual([header, 404])
    }
    // Over the private network (no edge headers) it answers.
    const privately = await fetch(`${server.rootUrl}/internal/v1/logs`, { method: 'POST', headers: { authorization: 'Bearer the-secret', 'content-type': 'application/json' }, body: JSON.stringify({ rows: [] }) })
    expect(privately.status).toBe(200)
  })

  test('401 without the cluster secret (or with none configured); rows land once by id; a bad row is 400 and writes nothing', async () => {
    await using unconfigured = await startTestServer()
    const refused = await fetch(`${unconfigured.rootUrl}/internal/v1/logs`, { method: 'POST', headers: { authorization: 'Bearer anything' }, body: '{"rows":[]}' })
    expect(refused.status).toBe(401)

    await using server = await startTestServer({ RT_CLUSTER_SECRET: 'the-secret' })
    const send = (body: unknown, secret = 'the-secret') =>
      fetch(`${server.rootUrl}/internal/v1/logs`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    expect((await send({ rows: [] }, 'the-secreT')).status).toBe(401)
    // Another method: 401 without the secret, 405 with it.
    expect((await fetch(`${server.rootUrl}/internal/v1/logs`)).status).toBe(401)
    const get = await fetch(`${server.rootUrl}/internal/v1/logs`, { headers: { authorization: 'Bearer the-secret' } })
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST'])
    const key = await createInferenceKey(server)
    const rows = [logRow(crypto.randomUUID(), server.workspaceId, key.id), logRow(crypto.randomUUID(), server.workspaceId, key.id)]
    const first = await send({ rows })
    expect([first.status, await first.json()]).toEqual([200, { accepted: 2, inserted: 2 }])
    // The same batch again (its acknowledgement lost): accepted, written once.
    const again = await send({ rows })
    expect([again.status, await again.json()]).toEqual([200, { accepted: 2, inserted: 0 }])
    const count = () => server.runtime.storage.sqlite.query<{ n: number }, []>('select count(*) as n from request_logs').get()!.n
    expect(count()).toBe(2)
    // The key's last use is stamped from the shipped rows.
    const stamped = server.runtime.storage.sqlite.query<{ last_used_at: string | null }, [string]>('select last_used_at from inference_keys where id = ?').get(key.id)!
    expect(stamped.last_used_at).not.toBeNull()
    for (const [body, message] of [
      [{}, 'rows must be an array of request-log rows.'],
      [{ rows: [logRow('x', server.workspaceId), { ...logRow('y', server.workspaceId), status: '200' }] }, 'rows[1].status must be a number'],
      [{ rows: [{ ...logRow('z', server.workspaceId), id: '' }] }, 'rows[0].id must be a non-empty string'],
      [{ rows: [{ ...logRow('z', server.workspaceId), model: 5 }] }, 'rows[0].model must be a string or null'],
      [{ rows: [{ ...logRow('z', server.workspaceId), createdAt: 1e300 }] }, 'rows[0].createdAt must be Unix milliseconds'],
    ] as const) {
      const response = await send(body)
      expect([response.status, await response.json()]).toEqual([400, { error: message }])
    }
    expect(count()).toBe(2)
  })
})

describe('the snapshot follows the database between requests', () => {
  test("another connection's configuration write is rebuilt without a request; a log write is not", async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)
    expect(key.id).toBeString()
    // The snapshot built (the key's write was patched into it).
    await server.runtime.snapshots.fresh()
    const builds = server.runtime.snapshots.builds()
    const waits = server.runtime.snapshots.requestWaits()
    const other = new Database(server.runtime.config.dbPath)
    other.run("insert into request_logs (id, workspace_id, created_at, endpoint, status, latency_ms) values ('r1', ?, 1, 'chat', 200, 1)", [server.workspaceId])
    await Bun.sleep(150)
    expect(server.runtime.snapshots.builds()).toBe(builds)
    other.close()
    const second = createRuntime(loadConfig(server.env), { logger: silentLogger })
    try {
      setWorkspaceSettings(second, server.workspaceId, { suspended: true })
    } finally {
      second.storage.close()
    }
    // No request in between: the watch (or the poll behind it) rebuilt it.
    const deadline = Date.now() + 2000
    while (server.runtime.snapshots.builds() === builds && Date.now() < deadline) await Bun.sleep(10)
    expect(server.runtime.snapshots.builds()).toBe(builds + 1)
    expect(server.runtime.snapshots.current().workspaces.get(server.workspaceId)!.suspended).toBe(true)
    // And no request had to wait for it.
    expect(server.runtime.snapshots.requestWaits()).toBe(waits)
  })
})

describe('a demotion while serving', () => {
  test('a write LiteFS fails with a disk I/O error on a node demoted a moment ago (before the role poll saw it) is replayed, 409 + fly-replay, never a 500', async () => {
    const litefs = temp()
    try {
      await using server = await startTestServer({ RT_LITEFS_DIR: litefs, RT_DB_PATH: '', RT_LITEFS_API_URL: noLiteFsApi })
      expect(server.runtime.writer.replica).toBe(false)
      const insert = server.runtime.repositories.inferenceKeys.insert
      const ioError = () => Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_WRITE' })
      server.runtime.repositories.inferenceKeys.insert = () => {
        // LiteFS has just made another node the primary: its `.primary` appears, and the write fails.
        writeFileSync(join(litefs, '.primary'), 'new-primary-machine\n')
        throw ioError()
      }
      const write = await server.api('/api/v1/keys', { method: 'POST', json: {} })
      expect(write.status).toBe(409)
      expect(write.headers.get('fly-replay')).toBe('instance=new-primary-machine')
      expect(await write.json()).toEqual({ error: 'replaying on the primary' })
      // Through MCP: the tool's error names the new primary.
      const mcp = await server.api('/mcp', {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream' },
        json: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_api_key', arguments: {} } },
      })
      const tool = ((await mcp.json()) as { result: { isError?: boolean; content: { text: string }[] } }).result
      expect(tool.isError).toBe(true)
      expect(tool.content[0]!.text).toContain('writes go to the primary (new-primary-machine)')
      // The same error on a node that is still the primary is a real failure: 500, logged.
      rmSync(join(litefs, '.primary'))
      server.runtime.repositories.inferenceKeys.insert = () => {
        throw ioError()
      }
      expect((await server.api('/api/v1/keys', { method: 'POST', json: {} })).status).toBe(500)
      server.runtime.repositories.inferenceKeys.insert = insert
      expect((await server.api('/api/v1/keys', { method: 'POST', json: {} })).status).toBe(201)
    } finally {
      rmSync(litefs, { recursive: true, force: true })
    }
  })

  test("read-your-writes: a write's answer carries the primary's LiteFS position; a replica shown it waits for its copy to reach it, else replays; a key it does not know is asked of the primary", async () => {
    const litefs = temp()
    let onCleanup: () => Promise<void> = async () => {}
    try {
      await using server = await startTestServer({ RT_LITEFS_DIR: litefs, RT_DB_PATH: '', RT_LITEFS_API_URL: noLiteFsApi })
      const position = (txid: number) => writeFileSync(join(litefs, 'router.db-pos'), `${txid.toString(16).padStart(16, '0')}/0123456789abcdef\n`)
      position(0xff)
      // The primary: a write's answer says where it got to; a read's does not.
      const created = await server.api('/api/v1/keys', { method: 'POST', json: {} })
      expect(created.status).toBe(201)
      expect(created.headers.get('x-router-txid')).toBe('00000000000000ff')
      expect((await server.api('/api/v1/keys')).headers.get('x-router-txid')).toBeNull()

      // Now a replica (the node follows its role), its copy at 0x10.
      const node = new ClusterNode(server.runtime, { roleIntervalMs: 20, shipIntervalMs: 20 })
      await node.start()
      onCleanup = () => node.stop()
      writeFileSync(join(litefs, '.primary'), 'primary-machine')
      await server.runtime.roles.check()
      expect(server.runtime.writer.replica).toBe(true)
      position(0x10)
      const shown = (txid: string) => ({ 'x-router-txid': txid })
      const waited = server.api('/api/v1/keys', { headers: shown('0000000000000020') })
      await Bun.sleep(150)
      position(0x20)
      const started = performance.now()
      const answer = await waited
      expect(answer.status).toBe(200)
      expect(performance.now() - started).toBeLessThan(1000)
      // A position it reached at once: no wait.
      expect((await server.api('/api/v1/keys', { headers: shown('0000000000000001') })).status).toBe(200)
      // One it never reaches: after 5 s, the primary.
      const late = await server.api('/api/v1/keys', { headers: shown('0000000000000999') })
      expect(late.status).toBe(409)
      expect(late.headers.get('fly-replay')).toBe('instance=primary-machine')

      // A key this copy does not know (perhaps created a moment ago on the primary): replayed, not 401.
      const chatWith = (authorization: string, headers: Record<string, string> = {}) =>
        fetch(`${server.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
        })
      const notHereYet = `rt_live_${'N'.repeat(40)}`
      const unknownKey = await chatWith(`Bearer ${notHereYet}`)
      expect(unknownKey.status).toBe(409)
      expect(unknownKey.headers.get('fly-replay')).toBe('instance=primary-machine')
      const unknownManagementKey = await fetch(`${server.rootUrl}/api/v1/keys`, { headers: { authorization: `Bearer rt_mgmt_${'N'.repeat(40)}` } })
      expect(unknownManagementKey.status).toBe(409)
      // Something that is no key of ours is refused here, never handed to the primary.
      for (const token of ['rt_live_not-here-yet-0000000000000000', 'sk-something-else', `rt_live_${'N'.repeat(39)}`]) {
        const refused = await chatWith(`Bearer ${token}`)
        expect([token, refused.status, refused.headers.get('fly-replay')]).toEqual([token, 401, null])
      }
      expect((await fetch(`${server.rootUrl}/api/v1/keys`, { headers: { authorization: 'Bearer rt_mgmt_not-here-yet' } })).status).toBe(401)

      // A position shown by a caller this copy cannot vouch for costs the replica no wait: without a
      // key, or with no key of ours, the answer is given here at once; a well-formed key it does not
      // know goes to the primary at once.
      const far = shown('ffffffffffffffff')
      for (const [authorization, status] of [
        [undefined, 401],
        ['Bearer rt_live_garbage', 401],
        [`Bearer ${notHereYet}`, 409],
      ] as const) {
        const started = performance.now()
        const answered = authorization ? await chatWith(authorization, far) : await fetch(`${server.baseUrl}/chat/completions`, { method: 'POST', headers: far, body: '{}' })
        expect([authorization, answered.status]).toEqual([authorization, status])
        expect(performance.now() - started).toBeLessThan(1000)
      }
      const managementUnknown = performance.now()
      expect((await fetch(`${server.rootUrl}/api/v1/keys`, { headers: { ...far } })).status).toBe(401)
      expect(performance.now() - managementUnknown).toBeLessThan(1000)
    } finally {
      await onCleanup()
      rmSync(litefs, { recursive: true, force: true })
    }
  }, 15_000)

  test('the primary becomes a replica: writes get 409 + fly-replay, rows go to the spool, inference goes on', async () => {
    await using mock = await startMockGateway()
    const litefs = temp()
    try {
      await using server = await startTestServer({ RT_LITEFS_DIR: litefs, RT_DB_PATH: '', RT_LITEFS_API_URL: noLiteFsApi, RT_GATEWAY_URL_OPENAI: mock.url })
      const node = new ClusterNode(server.runtime, { roleIntervalMs: 20, shipIntervalMs: 20 })
      await node.start()
      try {
        const provider = await storeProvider(server, { gateway: 'openai', key: 'sk-up' })
        const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: provider.id }] } })
        writeFileSync(join(litefs, '.primary'), 'other-machine')
        await server.runtime.roles.check()
        expect(server.runtime.writer.replica).toBe(true)
        expect(server.runtime.storage.readonly).toBe(true)
        const write = await server.api('/api/v1/keys', { method: 'POST', json: {} })
        expect(write.status).toBe(409)
        expect(write.headers.get('fly-replay')).toBe('instance=other-machine')
        const chat = await fetch(`${server.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
        })
        expect(chat.status).toBe(200)
        const id = chat.headers.get('x-router-request-id')!
        server.runtime.logQueue.flush()
        const spooled = spooledRows(server.runtime.writer.spool().take(100)!).map((row) => row.id)
        expect(spooled).toContain(id)
        // Promoted again: the spooled row is written here.
        rmSync(join(litefs, '.primary'))
        await server.runtime.roles.check()
        expect(server.runtime.storage.readonly).toBe(false)
        const row = server.runtime.storage.sqlite.query<{ n: number }, [string]>('select count(*) as n from request_logs where id = ?').get(id)!
        expect(row.n).toBe(1)
        expect((await server.api('/api/v1/keys', { method: 'POST', json: {} })).status).toBe(201)
      } finally {
        await node.stop()
      }
    } finally {
      rmSync(litefs, { recursive: true, force: true })
    }
  })
})
