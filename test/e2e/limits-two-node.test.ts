/**
 * Key limits on two nodes (CONTRACT §10, §11 last point): a primary and a LiteFS replica, set up as
 * test/e2e/litefs-two-node.test.ts does (one database file, the replica's mount holding `.primary`,
 * its rows spooled and shipped to the primary), serve the same limited key at once. Each node
 * counts its own requests at once and the other node's only as the database shows them, so together
 * they may let in more than the limit, but, says the CONTRACT, "by at most what other nodes admitted
 * in the last RT_LIMIT_SYNC_MS".
 *
 * The bound asserted. Each node sends on a fixed clock, one request every `spacingMs` (the two
 * clocks interleaved, half a spacing apart), so neither can admit more than about
 * k = RT_LIMIT_SYNC_MS / spacingMs = 200 / 50 = 4 requests in one sync period (5 where a period's
 * edges fall just right). Why L + k: take the node that admitted last, at t. It admitted because
 * its own requests plus what the database showed it of the other's came to under L; if the
 * database shows a node's admissions within RT_LIMIT_SYNC_MS, everything the other node admitted
 * up to t - RT_LIMIT_SYNC_MS was in that count, so the total is under L plus what the other node
 * admitted in the last RT_LIMIT_SYNC_MS before t (and after it: nothing, as the window is full by
 * then for both). The test measures that allowance from what happened (the most 200s one node got
 * in any RT_LIMIT_SYNC_MS, by send time) rather than trusting the clock, and asserts
 * total admitted ≤ L + allowance, and for USD, spend ≤ cap + one request's cost (a single node's own
 * overshoot: admission asks whether the spend so far is under the cap) + allowance × that cost.
 *
 * It also asserts that the limit holds at all (requests refused with the right code), that each
 * node refused while it had admitted fewer than L itself (so it counted the other's requests, read
 * from the database), and that once the rows are in and read, both nodes' `limit_state` agrees with
 * the database: nothing counted twice for good, nothing missing.
 *
 * Then the replica alone (the primary idle, so the CONTRACT allows no overshoot at all): with
 * RT_LIMIT_SYNC_MS 50 it must admit at most L, and with RT_LIMIT_SYNC_MS 200 it must admit exactly L
 * when sent 50 requests a second for 2 s (a request is refused when the window is full, not before).
 * Both depend on the replica counting its own requests until the database it reads holds their rows
 * (found by id in the same read as the sums: pipeline/limits/ledger.ts), however long the rows take
 * to go to the primary and come back. Timings: the log queue flushes every 50 ms, the shipper sends
 * every quarter of RT_LIMIT_SYNC_MS (at most 250 ms).
 */
import { expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startService, tempDir } from '../harness/service-process'
import { until } from '../harness/until'
import { twoMounts } from '../harness/litefs-simulation'

const clusterSecret = 'cluster-secret-for-the-limits-test'
const primaryHost = 'primary-machine-1'
const syncMs = 200
const spacingMs = 50
const perNode = 60
const limit = 30
/** The mock answers 11 prompt + 7 completion tokens; priced at $1 and $4 per million. */
const promptPrice = 0.000001
const completionPrice = 0.000004
const costPerRequest = 11 * promptPrice + 7 * completionPrice
/** The same in whole nano-dollars, as a request-log row records it (cost_nano_usd). */
const costPerRequestNano = 11 * 1_000 + 7 * 4_000

interface Outcome {
  node: 'primary' | 'replica'
  /** Milliseconds since the first send was due. */
  sentAt: number
  doneAt: number
  status: number
  code: string | undefined
  requestId: string
}

interface Cluster {
  mock: MockGateway
  dbPath: string
  primaryUrl: string
  replicaUrl: string
  providerId: string
  manage(base: string, method: string, path: string, body?: unknown): Promise<Response>
}

/** A primary and a replica as in litefs-two-node.test.ts, both with RT_LIMIT_SYNC_MS = syncMs; the mock lists gpt-4o-mini with prices. */
async function startCluster(limitSyncMs = syncMs): Promise<Cluster> {
  const mock = await startMockGateway({ models: ['gpt-4o-mini'] })
  mock.handle((request) =>
    request.path.endsWith('/models')
      ? { json: { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1_700_000_000, owned_by: 'mock', pricing: { prompt: String(promptPrice), completion: String(completionPrice) } }] } }
      : undefined,
  )
  const root = tempDir()
  const { primaryMount, replicaMount, dbPath } = twoMounts(root, primaryHost)
  // No LiteFS API here (port 1 refuses): `.primary` alone decides the roles.
  const shared = { RT_MASTER_KEY: randomBytes(32).toString('base64'), RT_CLUSTER_SECRET: clusterSecret, RT_GATEWAY_URL_OPENAI: mock.url, RT_LOG_LEVEL: 'warn', RT_LIMIT_SYNC_MS: String(limitSyncMs), RT_LITEFS_API_URL: 'http://127.0.0.1:1' }
  const primary = startService(join(root, 'primary-data'), { ...shared, RT_LITEFS_DIR: primaryMount })
  const primaryUrl = (await primary.listening()).rootUrl
  const managementKey = await primary.managementKey()
  const manage = (base: string, method: string, path: string, body?: unknown) =>
    fetch(`${base}/api/v1${path}`, { method, headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
  const providerResponse = await manage(primaryUrl, 'POST', '/providers', { gateway: 'openai', key: 'sk-upstream' })
  expect(providerResponse.status).toBe(201)
  const providerId = ((await providerResponse.json()) as { data: { id: string } }).data.id
  const replica = startService(join(root, 'replica-data'), { ...shared, RT_LITEFS_DIR: replicaMount, RT_DB_PATH: dbPath, RT_PRIMARY_URL: primaryUrl })
  const replicaUrl = (await replica.listening()).rootUrl
  return { mock, dbPath, primaryUrl, replicaUrl, providerId, manage }
}

function query<T>(dbPath: string, sql: string, ...params: (string | number)[]): T[] {
  const db = new Database(dbPath, { readonly: true })
  try {
    return db.query<T, (string | number)[]>(sql).all(...params)
  } finally {
    db.close()
  }
}


/** A key of its own for the scenario, with `limits` set on the primary, and seen set by the replica. */
async function limitedKey(cluster: Cluster, limits: Record<string, number>) {
  const { manage, primaryUrl, replicaUrl } = cluster
  const created = await manage(primaryUrl, 'POST', '/keys', { routing: { targets: [{ provider_key_id: cluster.providerId }] } })
  expect(created.status).toBe(201)
  const key = ((await created.json()) as { data: { id: string; key: string } }).data
  const patched = await manage(primaryUrl, 'PATCH', `/keys/${key.id}`, { limits })
  expect(patched.status).toBe(200)
  await until('the replica reads the key with its limits', async () => {
    const view = ((await (await manage(replicaUrl, 'GET', `/keys/${key.id}`)).json()) as { data?: { limits?: Record<string, number | null> } }).data
    return Object.entries(limits).every(([name, value]) => view?.limits?.[name] === value) ? true : undefined
  }, 10_000)
  return key
}

/**
 * Both nodes at once, each on its own fixed clock: node n's i-th request is sent at
 * i × spacingMs + n × spacingMs / 2 (whatever the earlier ones are doing).
 */
async function drive(cluster: Cluster, secret: string, body: Record<string, unknown>, only?: Outcome['node'], spacing = spacingMs, count = perNode): Promise<Outcome[]> {
  const nodes = [
    { node: 'primary' as const, url: cluster.primaryUrl },
    { node: 'replica' as const, url: cluster.replicaUrl },
  ].filter((entry) => only === undefined || entry.node === only)
  const start = performance.now() + 100
  const outcomes: Outcome[] = []
  await Promise.all(
    nodes.flatMap(({ node, url }, n) =>
      Array.from({ length: count }, async (_, index) => {
        await Bun.sleep(Math.max(0, start + index * spacing + (n * spacing) / 2 - performance.now()))
        const sentAt = performance.now() - start
        const response = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...body }),
        })
        const json = (await response.json()) as { error?: { code?: string } }
        outcomes.push({ node, sentAt, doneAt: performance.now() - start, status: response.status, code: json.error?.code, requestId: response.headers.get('x-router-request-id') ?? '' })
      }),
    ),
  )
  return outcomes.sort((left, right) => left.sentAt - right.sentAt)
}

/** The most 200s one node got within any `windowMs` (by send time): what it could admit in one sync period. */
function mostInWindow(outcomes: Outcome[], node: Outcome['node'], windowMs: number): number {
  const times = outcomes.filter((outcome) => outcome.node === node && outcome.status === 200).map((outcome) => outcome.sentAt)
  let most = 0
  for (let first = 0, last = 0; last < times.length; last++) {
    while (times[last]! - times[first]! >= windowMs) first++
    most = Math.max(most, last - first + 1)
  }
  return most
}

/** What the run shows, for the assertions and the log. */
function summarize(outcomes: Outcome[]) {
  const admitted = (node?: Outcome['node']) => outcomes.filter((outcome) => outcome.status === 200 && (node === undefined || outcome.node === node))
  const refused = (node: Outcome['node']) => outcomes.filter((outcome) => outcome.status !== 200 && outcome.node === node)
  const allowance = Math.max(mostInWindow(outcomes, 'primary', syncMs), mostInWindow(outcomes, 'replica', syncMs))
  // Admission order as the client saw it: at which point each node got its last 200, and how many the other had then.
  const lastAdmitted = (node: Outcome['node']) => admitted(node).at(-1)?.sentAt ?? 0
  const summary = {
    admitted: admitted().length,
    admittedByPrimary: admitted('primary').length,
    admittedByReplica: admitted('replica').length,
    refusedByPrimary: refused('primary').length,
    refusedByReplica: refused('replica').length,
    allowance,
    lastAdmittedAtMs: { primary: Math.round(lastAdmitted('primary')), replica: Math.round(lastAdmitted('replica')) },
    statuses: [...new Set(outcomes.map((outcome) => `${outcome.status}${outcome.code ? ` ${outcome.code}` : ''}`))],
  }
  console.log(JSON.stringify(summary))
  return { ...summary, admittedList: admitted(), refused }
}

/** Each node refused only once the window filled, and while it had admitted fewer than the limit itself. */
function expectEachNodeCountedTheOther(outcomes: Outcome[], code: string) {
  for (const node of ['primary', 'replica'] as const) {
    const mine = outcomes.filter((outcome) => outcome.node === node)
    const firstRefusal = mine.findIndex((outcome) => outcome.status !== 200)
    expect([node, firstRefusal]).not.toEqual([node, -1])
    expect(mine[firstRefusal]!.code).toBe(code)
    const ownBefore = mine.slice(0, firstRefusal).filter((outcome) => outcome.status === 200).length
    // Fewer than the limit of its own: the rest of the full window was the other node's, read from the database.
    expect([node, ownBefore < limit]).toEqual([node, true])
  }
}

/** Waits for every row of the run on the primary's database (the replica's shipped). */
async function rowsOf(dbPath: string, outcomes: Outcome[]) {
  const ids = outcomes.map((outcome) => outcome.requestId)
  return until('every row of the run is in the database', () => {
    const rows = query<{ id: string; status: number; cost_nano_usd: number | null }>(dbPath, `select id, status, cost_nano_usd from request_logs where id in (${ids.map(() => '?').join(',')})`, ...ids)
    return rows.length === ids.length ? rows : undefined
  }, 10_000)
}

test('requests_per_minute 30 served by a primary and a replica at once: overshot by at most what the other node admitted in one RT_LIMIT_SYNC_MS', async () => {
  const cluster = await startCluster()
  try {
    const key = await limitedKey(cluster, { requests_per_minute: limit })
    const outcomes = await drive(cluster, key.key, {})
    const run = summarize(outcomes)
    expect(run.statuses.filter((status) => status !== '200' && status !== '429 key_rate_limited')).toEqual([])
    // The limit holds at all: most of the 120 requests were refused.
    expect(run.admitted).toBeGreaterThanOrEqual(limit)
    expect(run.refusedByPrimary + run.refusedByReplica).toBeGreaterThan(0)
    expectEachNodeCountedTheOther(outcomes, 'key_rate_limited')
    // With a request every 50 ms per node, about 4 (k = 200 / 50) fit in one sync period.
    expect(run.allowance).toBeLessThanOrEqual(syncMs / spacingMs + 1)
    // CONTRACT §11: the limit, overshot by at most what the other node admitted in one RT_LIMIT_SYNC_MS.
    expect({ admitted: run.admitted, bound: limit + run.allowance, ok: run.admitted <= limit + run.allowance }).toMatchObject({ ok: true })

    // Once the rows are in the database and read again, both nodes count what it shows, no more and no less.
    const rows = await rowsOf(cluster.dbPath, outcomes)
    expect(rows.filter((row) => row.status === 200).length).toBe(run.admitted)
    await Bun.sleep(4 * syncMs + 500)
    // The requests the limit refused are logged too, and count for nothing.
    const inDatabase = query<{ n: number }>(
      cluster.dbPath,
      "select count(*) as n from request_logs where key_id = ? and created_at >= ? and (error_code is null or error_code <> 'key_rate_limited')",
      key.id,
      Date.now() - 55_000,
    )[0]!.n
    expect(inDatabase).toBe(run.admitted)
    const states: Record<string, unknown> = {}
    for (const [name, base] of [
      ['primary', cluster.primaryUrl],
      ['replica', cluster.replicaUrl],
    ] as const) {
      states[name] = (((await (await cluster.manage(base, 'GET', `/keys/${key.id}`)).json()) as { data: { limit_state: { requests_last_minute: number } } }).data.limit_state.requests_last_minute)
    }
    expect(states).toEqual({ primary: inDatabase, replica: inDatabase })
  } finally {
    await cluster.mock.close()
  }
}, 60_000)

test('usd_per_day served by a primary and a replica at once: spend over the cap by at most what the other node admitted in one RT_LIMIT_SYNC_MS', async () => {
  const cluster = await startCluster()
  try {
    // The crawl the provider key set off lists the prices; both nodes price from the database.
    await until('the priced catalog is in the database', () =>
      query<{ object: string }>(cluster.dbPath, "select object from gateway_models where gateway = 'openai' and model_id = 'gpt-4o-mini'")[0]?.object.includes('pricing') ? true : undefined,
      10_000,
    )
    // Each node prices a request now (an unlimited key's rows carry their cost).
    const plain = (await (await cluster.manage(cluster.primaryUrl, 'POST', '/keys', { routing: { targets: [{ provider_key_id: cluster.providerId }] } })).json()) as { data: { key: string } }
    const probes: Outcome[] = []
    for (const [node, base] of [
      ['primary', cluster.primaryUrl],
      ['replica', cluster.replicaUrl],
    ] as const) {
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plain.data.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      })
      await response.arrayBuffer()
      expect(response.status).toBe(200)
      probes.push({ node, sentAt: 0, doneAt: 0, status: 200, code: undefined, requestId: response.headers.get('x-router-request-id')! })
    }
    for (const row of await rowsOf(cluster.dbPath, probes)) expect(row.cost_nano_usd).toBe(costPerRequestNano)

    // A cap that one node alone, one request at a time, reaches with its 30th request (29 × cost < cap ≤ 30 × cost).
    const cap = (limit - 0.5) * costPerRequest
    const key = await limitedKey(cluster, { usd_per_day: cap })
    // max_tokens 7: the reservation (prompt estimate + 7 completion tokens) is close to the actual cost.
    const outcomes = await drive(cluster, key.key, { max_tokens: 7 })
    const run = summarize(outcomes)
    expect(run.statuses.filter((status) => status !== '200' && status !== '429 key_budget_exhausted')).toEqual([])
    expect(run.refusedByPrimary + run.refusedByReplica).toBeGreaterThan(0)
    expectEachNodeCountedTheOther(outcomes, 'key_budget_exhausted')
    expect(run.allowance).toBeLessThanOrEqual(syncMs / spacingMs + 1)
    const rows = await rowsOf(cluster.dbPath, outcomes)
    // USD, from the rows' whole nano-dollars.
    const spent = rows.reduce((sum, row) => sum + (row.cost_nano_usd ?? 0), 0) / 1e9
    console.log(JSON.stringify({ cap, spent, spentInRequests: spent / costPerRequest, bound: cap + (1 + run.allowance) * costPerRequest }))
    expect(rows.filter((row) => row.status === 200).length).toBe(run.admitted)
    // CONTRACT §11: the cap, overshot by one request (its own admission) and what the other node admitted in one RT_LIMIT_SYNC_MS.
    expect({ admitted: run.admitted, bound: limit + run.allowance, ok: run.admitted <= limit + run.allowance }).toMatchObject({ ok: true })
    expect({ spent, ok: spent <= cap + (1 + run.allowance) * costPerRequest + 1e-12 }).toMatchObject({ ok: true })
  } finally {
    await cluster.mock.close()
  }
}, 60_000)

/**
 * One node serving the key, the other idle: nothing is admitted elsewhere, so the CONTRACT leaves no
 * overshoot at all, and (§11) a request is refused only when the window is full, so a client sending
 * 50 requests a second for 2 s gets exactly the limit.
 */
async function replicaAlone(limitSyncMs: number) {
  const cluster = await startCluster(limitSyncMs)
  try {
    const key = await limitedKey(cluster, { requests_per_minute: limit })
    const outcomes = await drive(cluster, key.key, {}, 'replica', 20, 100)
    const run = summarize(outcomes)
    console.log(JSON.stringify({ limitSyncMs, admittedAtMs: run.admittedList.map((outcome) => Math.round(outcome.sentAt)) }))
    expect(run.statuses.filter((status) => status !== '200' && status !== '429 key_rate_limited')).toEqual([])
    expect(run.admittedByPrimary).toBe(0)
    return run
  } finally {
    await cluster.mock.close()
  }
}

test('a replica alone with RT_LIMIT_SYNC_MS 50: the primary admits nothing, so the limit is not overshot at all', async () => {
  const run = await replicaAlone(50)
  expect(run.admitted).toBeLessThanOrEqual(limit)
}, 60_000)

test('a replica alone with RT_LIMIT_SYNC_MS 200: it admits the whole limit, refusing only once the window is full', async () => {
  const run = await replicaAlone(200)
  expect(run.admitted).toBe(limit)
}, 60_000)
