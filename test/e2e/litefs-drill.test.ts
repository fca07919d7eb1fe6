/**
 * The failover drill (CONTRACT §10), on the LiteFS simulation of test/e2e/litefs-two-node.test.ts
 * with a third machine: three service processes on one database file, each with its own mount
 * folder and its own LiteFS API (test/harness/litefs-api.ts), behind fly's proxy
 * (test/harness/fly-edge.ts). Under inference and write load the primary is killed with SIGKILL and
 * a standby promoted the way LiteFS does it: its `.primary` removed and `primaryChange` announced,
 * the other replica pointed at it. Measured and printed: how long writes were unavailable, every
 * answer's status, and every request-log row of every 200, found once. The killed machine comes
 * back as a replica, as fly restarts it, and ships what its journal held.
 */
import { expect, test } from 'bun:test'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { startMockGateway } from '../harness/mock-gateway'
import { startFakeLiteFs } from '../harness/litefs-api'
import { startFlyProxy } from '../harness/fly-edge'
import { owedRows } from '../harness/litefs-simulation'
import { startService, tempDir, type ServiceProcess } from '../harness/service-process'

test('drill: kill -9 the primary under load, LiteFS promotes a standby; writes back within 2 s, no 500, no row lost or doubled, the last key made before the kill works everywhere', async () => {
  await using mock = await startMockGateway({ models: ['gpt-4o-mini'] })
  const root = tempDir()
  const names = ['node-1', 'node-2', 'node-3'] as const
  const mounts = Object.fromEntries(names.map((name) => [name, join(root, `${name}-litefs`)]))
  for (const name of names) mkdirSync(mounts[name]!)
  const dbPath = join(mounts['node-1']!, 'router.db')
  // Each machine's LiteFS: node-1 holds the lease, the others replicate from it.
  await using litefs1 = startFakeLiteFs({ isPrimary: true, hostname: '' }, mounts['node-1'])
  await using litefs2 = startFakeLiteFs({ isPrimary: false, hostname: 'node-1' }, mounts['node-2'])
  await using litefs3 = startFakeLiteFs({ isPrimary: false, hostname: 'node-1' }, mounts['node-3'])
  const litefs = { 'node-1': litefs1, 'node-2': litefs2, 'node-3': litefs3 }
  const urls = new Map<string, string>()
  let primary = 'node-1'
  await using edge = startFlyProxy({ machines: () => urls })
  await using privateNetwork = startFlyProxy({ machines: () => urls, route: () => [primary] })
  const shared = {
    RT_MASTER_KEY: randomBytes(32).toString('base64'),
    RT_CLUSTER_SECRET: 'drill-cluster-secret',
    RT_GATEWAY_URL_OPENAI: mock.url,
    RT_LOG_LEVEL: 'warn',
    RT_DB_PATH: dbPath,
    RT_PRIMARY_URL: privateNetwork.url,
  }
  const processes = new Map<string, ServiceProcess>()
  const start = async (name: (typeof names)[number]) => {
    const service = startService(join(root, `${name}-data`), { ...shared, RT_LITEFS_DIR: mounts[name]!, RT_LITEFS_API_URL: litefs[name].url })
    processes.set(name, service)
    urls.set(name, (await service.listening()).rootUrl)
    return service
  }
  const first = await start('node-1')
  const managementKey = await first.managementKey()
  await start('node-2')
  await start('node-3')

  const manage = async (method: string, path: string, body?: unknown) =>
    fetch(`${edge.url}/api/v1${path}`, { method, headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
  const provider = ((await (await manage('POST', '/providers', { gateway: 'openai', key: 'sk-upstream' })).json()) as { data: { id: string } }).data
  const newKey = async () => {
    const sentAt = performance.now()
    const response = await manage('POST', '/keys', { routing: { targets: [{ provider_key_id: provider.id }] } })
    const text = await response.text()
    return { status: response.status, key: response.status === 201 ? (JSON.parse(text) as { data: { key: string } }).data.key : undefined, sentAt, at: performance.now() }
  }
  const loadKey = (await newKey()).key!
  const chat = async (secret: string, machine?: string) => {
    const response = await fetch(machine ? `${urls.get(machine)}/v1/chat/completions` : `${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    })
    await response.arrayBuffer()
    return { status: response.status, id: response.headers.get('x-router-request-id') }
  }

  // The load: inference on every machine through the edge, and key writes that replicas replay.
  let running = true
  const owedRowIds: string[] = []
  const inferenceStatuses = new Map<number, number>()
  const writes: { status: number; sentAt: number; at: number }[] = []
  const count = (into: Map<number, number>, status: number) => into.set(status, (into.get(status) ?? 0) + 1)
  const inference = Array.from({ length: 8 }, async () => {
    while (running) {
      const answer = await chat(loadKey)
      count(inferenceStatuses, answer.status)
      if (answer.status === 200) owedRowIds.push(answer.id!)
    }
  })
  const writers = Array.from({ length: 2 }, async () => {
    while (running) {
      const made = await newKey()
      writes.push({ status: made.status, sentAt: made.sentAt, at: made.at })
      if (made.status !== 201) await Bun.sleep(5)
    }
  })
  await Bun.sleep(1500)

  // The last key before the kill, made through the edge (a replica's request replayed on node-1).
  const lastKey = await newKey()
  expect(lastKey.status).toBe(201)
  const killedAt = performance.now()
  processes.get('node-1')!.child.kill('SIGKILL')
  await processes.get('node-1')!.child.exited
  // LiteFS's lease moves to node-2 (promoted at once here: the lease's TTL is LiteFS's, not ours);
  // node-3 follows it. The dead machine's URL stays in fly's list: its connections are refused.
  litefs['node-2'].announce({ isPrimary: true, hostname: '' })
  litefs['node-3'].announce({ isPrimary: false, hostname: 'node-2' })
  primary = 'node-2'
  const promotedAt = performance.now()
  await Bun.sleep(2500)

  // fly restarts the killed machine; LiteFS there comes back as a replica of node-2.
  litefs['node-1'].announce({ isPrimary: false, hostname: 'node-2' })
  const restarted = await start('node-1')
  await Bun.sleep(1000)
  running = false
  await Promise.all([...inference, ...writers])

  // Writes: the first one sent after the kill that was accepted, and the longest wait between two accepted.
  const accepted = writes.filter((write) => write.status === 201).map((write) => write.at)
  const firstAfterKill = writes.filter((write) => write.status === 201 && write.sentAt >= killedAt).map((write) => write.at)[0]
  expect(firstAfterKill).toBeDefined()
  const unavailableMs = firstAfterKill! - killedAt
  let longestGapMs = 0
  for (let index = 1; index < accepted.length; index++) longestGapMs = Math.max(longestGapMs, accepted[index]! - accepted[index - 1]!)

  // Every 200 owes one row in the database, once: the shipped, the spooled, and the killed primary's journal.
  const { lost, doubled } = await owedRows(dbPath, owedRowIds, 30_000)

  // The key made just before the kill, on every machine (node-1 now a replica).
  const lastKeyAnswers = Object.fromEntries(await Promise.all(names.map(async (name) => [name, (await chat(lastKey.key!, name)).status] as const)))

  // What the killed primary's journal held when it came back (timing decides whether there was any).
  const replayedLine = restarted.stdoutLines().find((line) => line.includes('"event":"request_journal_replayed"'))
  const replayed = replayedLine ? (JSON.parse(replayedLine) as { rows: number; inserted: number }) : { rows: 0, inserted: 0 }
  const journalNote =
    replayed.inserted > 0
      ? `the restarted node-1's journal gave back ${replayed.rows} rows (${replayed.inserted} not yet in the database)`
      : "the killed node-1's journal held no row the database lacked"
  const statuses = (map: Map<number, number>) => [...map].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`).join(' ')
  console.log(
    [
      `drill: writes unavailable ${unavailableMs.toFixed(0)} ms (from the kill to the answer of the first write sent after it and accepted) (promotion announced ${(promotedAt - killedAt).toFixed(0)} ms after the kill); longest wait between two accepted writes ${longestGapMs.toFixed(0)} ms`,
      `drill: ${accepted.length} writes accepted of ${writes.length}; inference answers ${statuses(inferenceStatuses)}; machines answered ${statuses(edge.statuses)}; ${edge.cut} requests cut by the kill (the proxy's 502)`,
      `drill: ${owedRowIds.length} request-log rows owed, ${lost.length} lost, ${doubled.length} doubled; ${journalNote}; the last key before the kill: ${JSON.stringify(lastKeyAnswers)}`,
    ].join('\n'),
  )
  expect(unavailableMs).toBeLessThan(2000)
  expect(longestGapMs).toBeLessThan(2000)
  expect(edge.statuses.get(500) ?? 0).toBe(0)
  expect(privateNetwork.statuses.get(500) ?? 0).toBe(0)
  expect(inferenceStatuses.get(500) ?? 0).toBe(0)
  expect(lost).toEqual([])
  expect(doubled).toEqual([])
  expect(lastKeyAnswers).toEqual({ 'node-1': 200, 'node-2': 200, 'node-3': 200 })
  // The restarted machine is a replica, the promoted one the primary.
  const replicaGauge = async (name: string) => /^router_node_replica (\d)$/m.exec(await (await fetch(`${urls.get(name)}/metrics`)).text())![1]
  expect([await replicaGauge('node-1'), await replicaGauge('node-2'), await replicaGauge('node-3')]).toEqual(['1', '0', '1'])
}, 90_000)
