/**
 * Management API: authentication (SPEC "Authentication" 3–4, "Management key"), workspace
 * isolation, usage (SPEC "Usage records", "Usage filters"), account snapshot, OpenAPI document
 * and request-level errors.
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { addMember, createManagementKey, createWorkspace } from '../../src/management/workspaces'
import type { RequestLogRow } from '../../src/storage/repositories/request-logs'
import { startTestServer, type TestServer } from '../harness/server'
import { storeProvider } from '../harness/api'

const hourMs = 3_600_000
const dayMs = 86_400_000

async function plainGateways(server: TestServer, key?: string | null): Promise<string[]> {
  const response = await server.call('GET', '/api/v1/gateways', undefined, key)
  return response.body.data
    .filter((gateway: { routable: boolean; config_fields?: unknown }) => gateway.routable && !gateway.config_fields)
    .map((gateway: { id: string }) => gateway.id)
}

async function addProvider(server: TestServer, gateway: string, key?: string | null) {
  return (await storeProvider(server, { gateway, key: `sk-${randomUUID()}` }, key)) as { id: string; gateway: string }
}

async function addKey(server: TestServer, body: Record<string, unknown> = {}, key?: string | null) {
  const response = await server.call('POST', '/api/v1/keys', body, key)
  expect(response.status).toBe(201)
  return response.body.data
}

/** Everything the full-access key can read about the workspace, for before/after comparisons. */
async function snapshot(server: TestServer) {
  const keys = (await server.call('GET', '/api/v1/keys')).body.data
  const providers = (await server.call('GET', '/api/v1/providers')).body.data
  const routing = []
  for (const key of keys) routing.push((await server.call('GET', `/api/v1/keys/${key.id}/routing`)).body.data)
  return { keys, providers, routing }
}

/** A workspace with two providers and a routed key. */
async function populate(server: TestServer) {
  const gateways = await plainGateways(server)
  const a = await addProvider(server, gateways[0]!)
  const b = await addProvider(server, gateways[1]!)
  const key = await addKey(server, { label: 'routed', routing: { strategy: 'priority', targets: [{ provider_key_id: a.id }] } })
  return { a, b, key, gateways }
}

function writeRequests(ids: { keyId: string; providerId: string; otherProviderId: string; gateway: string }) {
  return [
    ['POST', '/api/v1/keys', { label: 'new' }],
    ['POST', '/api/v1/keys', { api_shape: 'nonsense' }],
    ['PATCH', `/api/v1/keys/${ids.keyId}`, { label: 'changed' }],
    ['PATCH', `/api/v1/keys/${ids.keyId}`, { revoked: true }],
    ['DELETE', `/api/v1/keys/${ids.keyId}`, undefined],
    ['PUT', `/api/v1/keys/${ids.keyId}/routing`, { strategy: 'priority', targets: [{ provider_key_id: ids.otherProviderId }] }],
    ['POST', '/api/v1/providers', { gateway: ids.gateway, key: 'sk-readonly-should-not-store' }],
    ['PATCH', `/api/v1/providers/${ids.providerId}`, { disabled: true }],
    ['PATCH', `/api/v1/providers/${ids.providerId}`, { label: 'renamed' }],
    ['DELETE', `/api/v1/providers/${ids.providerId}`, undefined],
  ] as const
}

describe('authentication', () => {
  test('401 {error} without a key, with a bad key, and with an inference key as bearer; nothing is written', async () => {
    await using server = await startTestServer()
    const { a, b, key, gateways } = await populate(server)
    const before = await snapshot(server)
    const inferenceKey = (await addKey(server)).key as string
    expect(inferenceKey.startsWith('rt_live_')).toBe(true)
    const afterSetup = await snapshot(server)

    const reads = [
      '/api/v1/gateways',
      '/api/v1/providers',
      `/api/v1/providers/${a.id}`,
      '/api/v1/keys',
      `/api/v1/keys/${key.id}`,
      `/api/v1/keys/${key.id}/routing`,
      '/api/v1/usage/summary',
      '/api/v1/usage/series',
      '/api/v1/usage/breakdown?by=model',
      '/api/v1/account',
    ]
    const writes = writeRequests({ keyId: key.id, providerId: a.id, otherProviderId: b.id, gateway: gateways[0]! })
    const badAuth: (string | null)[] = [null, 'rt_mgmt_notARealKey123456', 'garbage', '', inferenceKey, server.managementKey + 'x']
    for (const credential of badAuth) {
      for (const path of reads) {
        const response = await server.call('GET', path, undefined, credential)
        expect([path, response.status]).toEqual([path, 401])
        expect(typeof response.body.error).toBe('string')
      }
      for (const [method, path, body] of writes) {
        const response = await server.call(method, path, body, credential)
        expect([method, path, response.status]).toEqual([method, path, 401])
        expect(typeof response.body.error).toBe('string')
      }
    }
    // A non-Bearer scheme carrying a valid key is not accepted either.
    const basic = await server.api('/api/v1/keys', { key: null, headers: { authorization: `Basic ${server.managementKey}` } })
    expect(basic.status).toBe(401)
    expect(await snapshot(server)).toEqual(afterSetup)
    expect(afterSetup.keys.length).toBe(before.keys.length + 1)
  })

  test('a management key is never valid on /v1 paths (401)', async () => {
    await using server = await startTestServer()
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    for (const credential of [server.managementKey, readOnly.key]) {
      const models = await server.call('GET', '/v1/models', undefined, credential)
      expect(models.status).toBe(401)
      const chat = await server.call('POST', '/v1/chat/completions', { model: 'vendor/model', messages: [{ role: 'user', content: 'hi' }] }, credential)
      expect(chat.status).toBe(401)
    }
  })

  test('an inference key is not valid on /mcp (401)', async () => {
    await using server = await startTestServer()
    const inferenceKey = (await addKey(server)).key as string
    const response = await server.api('/mcp', {
      method: 'POST',
      key: inferenceKey,
      headers: { accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    })
    expect(response.status).toBe(401)
  })

  test('a read-only management key may GET everything', async () => {
    await using server = await startTestServer()
    const { a, key } = await populate(server)
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    expect(readOnly.key.startsWith('rt_mgmt_')).toBe(true)
    const paths = [
      '/api/v1/gateways',
      '/api/v1/providers',
      `/api/v1/providers/${a.id}`,
      '/api/v1/keys',
      `/api/v1/keys/${key.id}`,
      `/api/v1/keys/${key.id}/routing`,
      '/api/v1/usage/summary',
      '/api/v1/usage/series?range=24h',
      '/api/v1/usage/breakdown?by=gateway',
      '/api/v1/account',
    ]
    for (const path of paths) {
      const full = await server.call('GET', path)
      const limited = await server.call('GET', path, undefined, readOnly.key)
      expect([path, limited.status]).toEqual([path, 200])
      expect(limited.body).toEqual(full.body)
    }
  })

  test('a read-only management key gets 403 on every POST/PATCH/PUT/DELETE of keys, providers and routing, and writes nothing', async () => {
    await using server = await startTestServer()
    const { a, b, key, gateways } = await populate(server)
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const before = await snapshot(server)
    for (const [method, path, body] of writeRequests({ keyId: key.id, providerId: a.id, otherProviderId: b.id, gateway: gateways[0]! })) {
      const response = await server.call(method, path, body, readOnly.key)
      expect([method, path, response.status]).toEqual([method, path, 403])
      expect(typeof response.body.error).toBe('string')
    }
    // Even for ids that do not exist or bodies that are invalid: every write is a 403.
    for (const [method, path, body] of [
      ['PATCH', `/api/v1/keys/${randomUUID()}`, { label: 'x' }],
      ['DELETE', `/api/v1/providers/${randomUUID()}`, undefined],
      ['PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [] }],
    ] as const) {
      const response = await server.call(method, path, body, readOnly.key)
      expect([method, path, response.status]).toEqual([method, path, 403])
    }
    expect(await snapshot(server)).toEqual(before)
    // The full-access key still writes.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { label: 'by full key' })).status).toBe(200)
  })
})

describe('workspace isolation', () => {
  test("a second workspace cannot see, patch, delete or route the first's keys and providers (404)", async () => {
    await using server = await startTestServer()
    const { a, b, key } = await populate(server)
    const before = await snapshot(server)
    const other = createWorkspace(server.runtime, 'other')
    const otherKey = other.management_key
    const otherGateways = await plainGateways(server, otherKey)
    const ownProvider = await addProvider(server, otherGateways[0]!, otherKey)

    expect((await server.call('GET', '/api/v1/keys', undefined, otherKey)).body.data).toEqual([])
    const otherProviders = (await server.call('GET', '/api/v1/providers', undefined, otherKey)).body.data
    expect(otherProviders.map((provider: { id: string }) => provider.id)).toEqual([ownProvider.id])

    const keyNotFound = { error: 'API key not found.' }
    const providerNotFound = { error: 'Provider key not found.' }
    const attempts = [
      ['GET', `/api/v1/keys/${key.id}`, undefined, keyNotFound],
      ['PATCH', `/api/v1/keys/${key.id}`, { label: 'hijacked' }, keyNotFound],
      ['PATCH', `/api/v1/keys/${key.id}`, { revoked: true }, keyNotFound],
      ['DELETE', `/api/v1/keys/${key.id}`, undefined, keyNotFound],
      ['GET', `/api/v1/keys/${key.id}/routing`, undefined, keyNotFound],
      ['PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: ownProvider.id }] }, keyNotFound],
      ['GET', `/api/v1/providers/${a.id}`, undefined, providerNotFound],
      ['PATCH', `/api/v1/providers/${a.id}`, { disabled: true }, providerNotFound],
      ['DELETE', `/api/v1/providers/${b.id}`, undefined, providerNotFound],
    ] as const
    for (const [method, path, body, expected] of attempts) {
      const response = await server.call(method, path, body, otherKey)
      expect([method, path, response.status]).toEqual([method, path, 404])
      expect(response.body).toEqual(expected)
    }
    const account = await server.call('GET', '/api/v1/account', undefined, otherKey)
    expect(account.body.data.workspace.id).toBe(other.workspace.id)
    expect(account.body.data.inference_keys).toEqual({ total: 0, live: 0, revoked: 0 })
    expect(account.body.data.provider_keys.map((provider: { id: string }) => provider.id)).toEqual([ownProvider.id])

    expect(await snapshot(server)).toEqual(before)
  })
})

function logRow(workspaceId: string, values: Partial<RequestLogRow> & { createdAt: number }): RequestLogRow {
  return {
    id: randomUUID(),
    workspaceId,
    keyId: null,
    endpoint: '/v1/chat/completions',
    gateway: 'gw-a',
    model: 'vendor/model-a',
    status: 200,
    stream: false,
    latencyMs: 100,
    overheadMs: 1,
    attempts: 1,
    ...values,
  }
}

interface SeriesItem {
  bucket: string
  requests: number
  errors: number
  avgLatency: number | null
  avgOverhead: number | null
}

/** Checks the bucket layout and returns the buckets in time order. */
function checkBuckets(series: SeriesItem[], count: number, size: number, now: number): SeriesItem[] {
  expect(series).toHaveLength(count)
  for (const item of series) {
    expect(Object.keys(item).sort()).toEqual(['avgLatency', 'avgOverhead', 'bucket', 'errors', 'requests'])
    expect(item.bucket).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/)
    expect(Number.isNaN(Date.parse(item.bucket))).toBe(false)
  }
  const sorted = [...series].sort((left, right) => Date.parse(left.bucket) - Date.parse(right.bucket))
  for (let index = 1; index < sorted.length; index++) {
    expect(Date.parse(sorted[index]!.bucket) - Date.parse(sorted[index - 1]!.bucket)).toBe(size)
  }
  // The newest bucket covers the present moment.
  const last = Date.parse(sorted[sorted.length - 1]!.bucket)
  expect(last).toBeLessThanOrEqual(now)
  expect(last + size).toBeGreaterThan(now)
  return sorted
}

function bucketIndexOf(sorted: SeriesItem[], size: number, at: number): number {
  return sorted.findIndex((item) => Date.parse(item.bucket) <= at && at < Date.parse(item.bucket) + size)
}

/** Expected per-bucket aggregates for rows (only rows that fall in some bucket). */
function expectSeriesMatches(sorted: SeriesItem[], size: number, rows: RequestLogRow[]) {
  const groups = new Map<number, RequestLogRow[]>()
  for (const row of rows) {
    const index = bucketIndexOf(sorted, size, row.createdAt)
    if (index === -1) continue
    groups.set(index, [...(groups.get(index) ?? []), row])
  }
  sorted.forEach((item, index) => {
    const group = groups.get(index)
    if (!group) {
      expect(item).toMatchObject({ requests: 0, errors: 0, avgLatency: null, avgOverhead: null })
      return
    }
    expect(item.requests).toBe(group.length)
    expect(item.errors).toBe(group.filter((row) => row.status >= 400).length)
    expect(item.avgLatency).toBeCloseTo(group.reduce((sum, row) => sum + row.latencyMs, 0) / group.length, 2)
    expect(item.avgOverhead).toBeCloseTo(group.reduce((sum, row) => sum + (row.overheadMs ?? 0), 0) / group.length, 2)
  })
}

describe('usage', () => {
  async function seeded() {
    const server = await startTestServer()
    const keyOne = await addKey(server, { label: 'one' })
    const keyTwo = await addKey(server, { label: 'two' })
    const other = createWorkspace(server.runtime, 'other')
    const now = Date.now()
    const ws = server.workspaceId
    // Inside 24h: 8 rows, 2 errors (500s), latencies 100..800, overheads 1..8, three models, two gateways.
    const recent = [
      logRow(ws, { keyId: keyOne.id, createdAt: now, latencyMs: 100, overheadMs: 1, model: 'vendor/a', gateway: 'gw-1' }),
      logRow(ws, { keyId: keyOne.id, createdAt: now, latencyMs: 300, overheadMs: 3, model: 'vendor/a', gateway: 'gw-1', cache: 'hit', savedNanoUsd: 2_500_000 }),
      logRow(ws, { keyId: keyOne.id, createdAt: now - 2 * hourMs, latencyMs: 200, overheadMs: 2, model: 'vendor/b', gateway: 'gw-1', status: 500 }),
      logRow(ws, { keyId: keyTwo.id, createdAt: now - 5 * hourMs, latencyMs: 400, overheadMs: 4, model: 'vendor/b', gateway: 'gw-2' }),
      logRow(ws, { keyId: keyTwo.id, createdAt: now - 5 * hourMs - 60_000, latencyMs: 600, overheadMs: 6, model: 'vendor/c', gateway: 'gw-2', cache: 'semantic-hit', savedNanoUsd: null }),
      logRow(ws, { keyId: keyTwo.id, createdAt: now - 10 * hourMs, latencyMs: 500, overheadMs: 5, model: 'vendor/a', gateway: 'gw-1', status: 500 }),
      logRow(ws, { keyId: keyOne.id, createdAt: now - 20 * hourMs, latencyMs: 700, overheadMs: 7, model: 'vendor/a', gateway: 'gw-1', cache: 'coalesced', savedNanoUsd: 1_000 }),
      logRow(ws, { keyId: keyTwo.id, createdAt: now - 21 * hourMs, latencyMs: 800, overheadMs: 8, model: 'vendor/a', gateway: 'gw-2' }),
    ]
    // Older: in 7d but not 24h; in 30d but not 7d; beyond 30d.
    const lastWeek = [
      logRow(ws, { keyId: keyOne.id, createdAt: now - 25 * hourMs, latencyMs: 1000, overheadMs: 10, model: 'vendor/d', gateway: 'gw-3', status: 502 }),
      logRow(ws, { keyId: keyTwo.id, createdAt: now - 3 * dayMs, latencyMs: 1000, overheadMs: 10, model: 'vendor/d', gateway: 'gw-3', cache: 'hit', savedNanoUsd: 7 }),
    ]
    const lastMonth = [logRow(ws, { keyId: keyOne.id, createdAt: now - 8 * dayMs, latencyMs: 2000, overheadMs: 20, model: 'vendor/e', gateway: 'gw-4' })]
    const ancient = [logRow(ws, { keyId: keyOne.id, createdAt: now - 40 * dayMs, latencyMs: 9000, overheadMs: 90, model: 'vendor/f', gateway: 'gw-5' })]
    // Another workspace's traffic never shows.
    const foreign = [logRow(other.workspace.id, { createdAt: now - 1000, latencyMs: 5, overheadMs: 5, model: 'vendor/foreign', gateway: 'gw-foreign' })]
    server.runtime.repositories.requestLogs.insertMany([...recent, ...lastWeek, ...lastMonth, ...ancient, ...foreign])
    return { server, now, keyOne, keyTwo, other, recent, lastWeek, lastMonth }
  }

  function expectSummary(summary: Record<string, unknown>, rows: RequestLogRow[]) {
    expect(Object.keys(summary).sort()).toEqual(['avgLatency', 'avgOverhead', 'cache_hits', 'cost_usd', 'errorRate', 'errors', 'models', 'requests', 'saved_usd', 'unpriced_requests'])
    for (const value of Object.values(summary)) expect(typeof value).toBe('number')
    const errors = rows.filter((row) => row.status >= 400).length
    expect(summary.requests).toBe(rows.length)
    expect(summary.errors).toBe(errors)
    expect(summary.errorRate as number).toBeCloseTo((errors / rows.length) * 100, 2)
    expect(summary.avgLatency as number).toBeCloseTo(rows.reduce((sum, row) => sum + row.latencyMs, 0) / rows.length, 2)
    expect(summary.avgOverhead as number).toBeCloseTo(rows.reduce((sum, row) => sum + (row.overheadMs ?? 0), 0) / rows.length, 2)
    expect(summary.models).toBe(new Set(rows.map((row) => row.model)).size)
    // CONTRACT §15: the cache's answers counted, their known savings summed (in nano-dollars, shown in USD).
    expect(summary.cache_hits).toBe(rows.filter((row) => row.cache).length)
    expect(summary.saved_usd).toBe(rows.reduce((sum, row) => sum + (row.savedNanoUsd ?? 0), 0) / 1e9)
  }

  test('summary per range: 24h, 7d (default and for unknown values), 30d; errorRate is a percentage', async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const { recent, lastWeek, lastMonth } = fixture

    const day = await server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(day.status).toBe(200)
    expectSummary(day.body.data, recent)
    // 8 rows with 2 errors: 25 percent, not a fraction.
    expect(day.body.data.errorRate).toBe(25)
    expect(day.body.data.avgLatency).toBe(450)
    expect(day.body.data.avgOverhead).toBe(4.5)
    expect(day.body.data.models).toBe(3)

    const week = await server.call('GET', '/api/v1/usage/summary?range=7d')
    expectSummary(week.body.data, [...recent, ...lastWeek])
    expect(week.body.data.errorRate).toBe(30)

    const month = await server.call('GET', '/api/v1/usage/summary?range=30d')
    expectSummary(month.body.data, [...recent, ...lastWeek, ...lastMonth])

    for (const path of ['/api/v1/usage/summary', '/api/v1/usage/summary?range=banana', '/api/v1/usage/summary?range=1y', '/api/v1/usage/summary?range=']) {
      const response = await server.call('GET', path)
      expect([path, response.status]).toEqual([path, 200])
      expect(response.body).toEqual(week.body)
    }
  })

  test('summary of a workspace without traffic is all zeros', async () => {
    await using server = await startTestServer()
    const response = await server.call('GET', '/api/v1/usage/summary')
    expect(response.status).toBe(200)
    expect(response.body.data).toMatchObject({ requests: 0, errors: 0, errorRate: 0, models: 0 })
    for (const value of Object.values(response.body.data)) expect(typeof value).toBe('number')
  })

  test('series: 24 hourly buckets for 24h, 7 daily for 7d (also default/unknown), 30 for 30d; empty buckets zero-filled with null averages', async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const { now, recent, lastWeek, lastMonth } = fixture
    const all = [...recent, ...lastWeek, ...lastMonth]

    const day = await server.call('GET', '/api/v1/usage/series?range=24h')
    expect(day.status).toBe(200)
    const hourly = checkBuckets(day.body.data, 24, hourMs, now)
    for (const row of recent) expect(bucketIndexOf(hourly, hourMs, row.createdAt)).not.toBe(-1)
    expectSeriesMatches(hourly, hourMs, all)
    expect(hourly.reduce((sum, item) => sum + item.requests, 0)).toBe(recent.length)
    expect(hourly.filter((item) => item.requests === 0).length).toBeGreaterThan(0)
    // The two rows of "now" share the newest bucket: average of 100 and 300.
    expect(hourly[23]).toEqual({ bucket: hourly[23]!.bucket, requests: 2, errors: 0, avgLatency: 200, avgOverhead: 2 })

    const week = await server.call('GET', '/api/v1/usage/series?range=7d')
    const daily = checkBuckets(week.body.data, 7, dayMs, now)
    for (const row of [...recent, ...lastWeek]) expect(bucketIndexOf(daily, dayMs, row.createdAt)).not.toBe(-1)
    expectSeriesMatches(daily, dayMs, all)
    expect(daily.reduce((sum, item) => sum + item.requests, 0)).toBe(recent.length + lastWeek.length)

    for (const path of ['/api/v1/usage/series', '/api/v1/usage/series?range=90d']) {
      const response = await server.call('GET', path)
      expect(response.status).toBe(200)
      expect(response.body).toEqual(week.body)
    }

    const month = await server.call('GET', '/api/v1/usage/series?range=30d')
    const thirty = checkBuckets(month.body.data, 30, dayMs, now)
    expectSeriesMatches(thirty, dayMs, all)
    expect(thirty.reduce((sum, item) => sum + item.requests, 0)).toBe(all.length)
  })

  test('series of a workspace without traffic: every bucket zero with null averages', async () => {
    await using server = await startTestServer()
    const response = await server.call('GET', '/api/v1/usage/series?range=24h')
    expect(response.body.data).toHaveLength(24)
    for (const item of response.body.data) expect(item).toMatchObject({ requests: 0, errors: 0, avgLatency: null, avgOverhead: null })
  })

  test('breakdown by model and by gateway: {name, requests, cost_usd, unpriced_requests}, ordered by count, range-filtered', async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const byModel = await server.call('GET', '/api/v1/usage/breakdown?by=model&range=24h')
    expect(byModel.status).toBe(200)
    expect(byModel.body.data).toEqual([
      { name: 'vendor/a', requests: 5, cost_usd: null, unpriced_requests: 5 },
      { name: 'vendor/b', requests: 2, cost_usd: null, unpriced_requests: 2 },
      { name: 'vendor/c', requests: 1, cost_usd: null, unpriced_requests: 1 },
    ])
    const byGateway = await server.call('GET', '/api/v1/usage/breakdown?by=gateway&range=24h')
    expect(byGateway.body.data).toEqual([
      { name: 'gw-1', requests: 5, cost_usd: null, unpriced_requests: 5 },
      { name: 'gw-2', requests: 3, cost_usd: null, unpriced_requests: 3 },
    ])
    const monthGateways = await server.call('GET', '/api/v1/usage/breakdown?by=gateway&range=30d')
    expect(monthGateways.body.data).toEqual([
      { name: 'gw-1', requests: 5, cost_usd: null, unpriced_requests: 5 },
      { name: 'gw-2', requests: 3, cost_usd: null, unpriced_requests: 3 },
      { name: 'gw-3', requests: 2, cost_usd: null, unpriced_requests: 2 },
      { name: 'gw-4', requests: 1, cost_usd: null, unpriced_requests: 1 },
    ])
    const defaultRange = await server.call('GET', '/api/v1/usage/breakdown?by=gateway')
    expect(defaultRange.body.data).toEqual([
      { name: 'gw-1', requests: 5, cost_usd: null, unpriced_requests: 5 },
      { name: 'gw-2', requests: 3, cost_usd: null, unpriced_requests: 3 },
      { name: 'gw-3', requests: 2, cost_usd: null, unpriced_requests: 2 },
    ])
  })

  test('breakdown keeps the top 12 by count', async () => {
    await using server = await startTestServer()
    const now = Date.now()
    const rows: RequestLogRow[] = []
    // model-01 has 15 rows, model-02 14, … model-15 has 1.
    for (let index = 1; index <= 15; index++) {
      for (let count = 0; count < 16 - index; count++) {
        rows.push(logRow(server.workspaceId, { createdAt: now - 1000 - count, model: `model-${String(index).padStart(2, '0')}`, gateway: `gw-${index}` }))
      }
    }
    server.runtime.repositories.requestLogs.insertMany(rows)
    // The rows carry no cost: each counted as unpriced, none as $0 (a name none of whose requests is priced: null, unknown).
    const expected = Array.from({ length: 12 }, (_, index) => ({ name: `model-${String(index + 1).padStart(2, '0')}`, requests: 15 - index, cost_usd: null, unpriced_requests: 15 - index }))
    const byModel = await server.call('GET', '/api/v1/usage/breakdown?by=model')
    expect(byModel.status).toBe(200)
    expect(byModel.body.data).toEqual(expected)
    const byGateway = await server.call('GET', '/api/v1/usage/breakdown?by=gateway&range=24h')
    expect(byGateway.body.data).toEqual(expected.map((item, index) => ({ ...item, name: `gw-${index + 1}` })))
  })

  test('cost in the breakdown: known costs summed and shown in USD; null where every request of the name is unpriced, 0 where priced requests cost nothing; the summary a number beside unpriced_requests', async () => {
    await using server = await startTestServer()
    const now = Date.now() - 60_000
    const row = (model: string, gateway: string, costNanoUsd: number | null) => logRow(server.workspaceId, { createdAt: now, model, gateway, costNanoUsd })
    server.runtime.repositories.requestLogs.insertMany([
      row('vendor/priced', 'gw-1', 1_250_000),
      row('vendor/priced', 'gw-1', 2_500_000),
      // One priced (a single nano-dollar), one not.
      row('vendor/mixed', 'gw-2', 1),
      row('vendor/mixed', 'gw-2', null),
      row('vendor/unpriced', 'gw-4', null),
      row('vendor/unpriced', 'gw-4', null),
      // Priced, and nothing billed (a request refused before any upstream call).
      row('vendor/free', 'gw-3', 0),
    ])
    const byModel = await server.call('GET', '/api/v1/usage/breakdown?by=model&range=24h')
    expect(byModel.status).toBe(200)
    expect(byModel.body.data).toEqual([
      { name: 'vendor/mixed', requests: 2, cost_usd: 0.000000001, unpriced_requests: 1 },
      { name: 'vendor/priced', requests: 2, cost_usd: 0.00375, unpriced_requests: 0 },
      { name: 'vendor/unpriced', requests: 2, cost_usd: null, unpriced_requests: 2 },
      { name: 'vendor/free', requests: 1, cost_usd: 0, unpriced_requests: 0 },
    ])
    const byGateway = await server.call('GET', '/api/v1/usage/breakdown?by=gateway&range=24h')
    expect(byGateway.body.data).toEqual([
      { name: 'gw-1', requests: 2, cost_usd: 0.00375, unpriced_requests: 0 },
      { name: 'gw-2', requests: 2, cost_usd: 0.000000001, unpriced_requests: 1 },
      { name: 'gw-4', requests: 2, cost_usd: null, unpriced_requests: 2 },
      { name: 'gw-3', requests: 1, cost_usd: 0, unpriced_requests: 0 },
    ])
    // The summary sums the known costs (to the nano-dollar) and counts the unknown ones beside them.
    const summary = await server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(summary.body.data).toMatchObject({ requests: 7, cost_usd: 0.003750001, unpriced_requests: 3 })
    // The same through MCP.
    const mcp = await fetch(`${server.rootUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_usage_breakdown', arguments: { by: 'gateway', range: '24h' } } }),
    })
    const answer = (await mcp.json()) as { result: { content: { text: string }[] } }
    expect(JSON.parse(answer.result.content[0]!.text)).toEqual(byGateway.body.data)
  })

  test('cache hits and savings: the summary counts the answers the cache gave and sums what they saved in USD (an unpriced saving adds nothing); the MCP tool gives the same', async () => {
    await using server = await startTestServer()
    const key = await addKey(server, { label: 'cached' })
    const now = Date.now() - 60_000
    const row = (values: Partial<RequestLogRow>) => logRow(server.workspaceId, { createdAt: now, keyId: key.id, costNanoUsd: 1_000, ...values })
    server.runtime.repositories.requestLogs.insertMany([
      row({ cache: 'hit', costNanoUsd: 0, savedNanoUsd: 83_700 }),
      row({ cache: 'hit', costNanoUsd: 0, savedNanoUsd: 1_250_000_000 }),
      row({ cache: 'semantic-hit', costNanoUsd: 0, savedNanoUsd: 1 }),
      // The original was unpriced: a hit, saving unknown.
      row({ cache: 'coalesced', costNanoUsd: 0, savedNanoUsd: null }),
      // Not cache answers: a continued stream and one with guardrail findings count as requests only.
      row({ continued: 1 }),
      row({ guardrails: '[{"rule":"email","where":"input","action":"mask","count":1}]' }),
      row({}),
      // Older than 24 hours: in 7d only.
      row({ createdAt: now - 2 * dayMs, cache: 'hit', costNanoUsd: 0, savedNanoUsd: 5_000_000 }),
    ])
    const day = await server.call('GET', '/api/v1/usage/summary?range=24h')
    expect(day.status).toBe(200)
    expect(day.body.data).toMatchObject({ requests: 7, cost_usd: 0.000003, unpriced_requests: 0, cache_hits: 4, saved_usd: 1.250083701 })
    const week = await server.call('GET', `/api/v1/usage/summary?range=7d&api_key_id=${key.id}`)
    expect(week.body.data).toMatchObject({ requests: 8, cache_hits: 5, saved_usd: 1.255083701 })
    // Another key's filter: none of them.
    const other = await addKey(server, { label: 'other' })
    expect((await server.call('GET', `/api/v1/usage/summary?range=7d&api_key_id=${other.id}`)).body.data).toMatchObject({ requests: 0, cache_hits: 0, saved_usd: 0 })
    // The same through MCP (the one operation).
    const mcp = await fetch(`${server.rootUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_usage_summary', arguments: { range: '24h' } } }),
    })
    const answer = (await mcp.json()) as { result: { content: { text: string }[] } }
    expect(JSON.parse(answer.result.content[0]!.text)).toEqual(day.body.data)
  })

  test('breakdown without a valid `by` gives 400', async () => {
    await using server = await startTestServer()
    for (const path of ['/api/v1/usage/breakdown', '/api/v1/usage/breakdown?by=', '/api/v1/usage/breakdown?by=key', '/api/v1/usage/breakdown?by=MODEL']) {
      const response = await server.call('GET', path)
      expect([path, response.status]).toEqual([path, 400])
      expect(typeof response.body.error).toBe('string')
    }
  })

  test('api_key_id filters, and may be repeated', async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const { now, keyOne, keyTwo, recent } = fixture
    const ofOne = recent.filter((row) => row.keyId === keyOne.id)
    const ofTwo = recent.filter((row) => row.keyId === keyTwo.id)

    const one = await server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${keyOne.id}`)
    expect(one.status).toBe(200)
    expectSummary(one.body.data, ofOne)
    const two = await server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${keyTwo.id}`)
    expectSummary(two.body.data, ofTwo)
    const both = await server.call('GET', `/api/v1/usage/summary?range=24h&api_key_id=${keyOne.id}&api_key_id=${keyTwo.id}`)
    expectSummary(both.body.data, recent)

    const series = await server.call('GET', `/api/v1/usage/series?range=24h&api_key_id=${keyTwo.id}`)
    const hourly = checkBuckets(series.body.data, 24, hourMs, now)
    expectSeriesMatches(hourly, hourMs, ofTwo)
    expect(hourly.reduce((sum, item) => sum + item.requests, 0)).toBe(ofTwo.length)

    const breakdown = await server.call('GET', `/api/v1/usage/breakdown?by=model&range=24h&api_key_id=${keyOne.id}`)
    expect(breakdown.body.data).toEqual([
      { name: 'vendor/a', requests: 3, cost_usd: null, unpriced_requests: 3 },
      { name: 'vendor/b', requests: 1, cost_usd: null, unpriced_requests: 1 },
    ])
  })

  test('api_key_id: malformed gives 400; unknown or another workspace’s gives 404', async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const { keyOne, other } = fixture
    const foreignKey = await addKey(server, { label: 'foreign' }, other.management_key)
    for (const endpoint of ['summary', 'series', 'breakdown?by=model']) {
      const join = endpoint.includes('?') ? '&' : '?'
      const base = `/api/v1/usage/${endpoint}${join}`
      for (const bad of ['not-a-uuid', '123', `${keyOne.id}x`]) {
        const response = await server.call('GET', `${base}api_key_id=${encodeURIComponent(bad)}`)
        expect([endpoint, bad, response.status]).toEqual([endpoint, bad, 400])
        expect(typeof response.body.error).toBe('string')
      }
      const malformedAmongGood = await server.call('GET', `${base}api_key_id=${keyOne.id}&api_key_id=nope`)
      expect(malformedAmongGood.status).toBe(400)
      for (const missing of [randomUUID(), foreignKey.id]) {
        const response = await server.call('GET', `${base}api_key_id=${missing}`)
        expect([endpoint, response.status]).toEqual([endpoint, 404])
        expect(typeof response.body.error).toBe('string')
      }
      const mixed = await server.call('GET', `${base}api_key_id=${keyOne.id}&api_key_id=${foreignKey.id}`)
      expect(mixed.status).toBe(404)
    }
    // The foreign workspace can filter by its own key.
    const own = await server.call('GET', `/api/v1/usage/summary?api_key_id=${foreignKey.id}`, undefined, other.management_key)
    expect(own.status).toBe(200)
  })

  test("another workspace's usage only counts its own rows", async () => {
    const fixture = await seeded()
    await using server = fixture.server
    const { other } = fixture
    const summary = await server.call('GET', '/api/v1/usage/summary?range=24h', undefined, other.management_key)
    expect(summary.body.data).toMatchObject({ requests: 1, errors: 0, errorRate: 0, avgLatency: 5, avgOverhead: 5, models: 1 })
    const breakdown = await server.call('GET', '/api/v1/usage/breakdown?by=gateway', undefined, other.management_key)
    expect(breakdown.body.data).toEqual([{ name: 'gw-foreign', requests: 1, cost_usd: null, unpriced_requests: 1 }])
  })
})

describe('GET /api/v1/account', () => {
  test('exact snapshot shape with counts, provider metadata, and no member e-mail addresses', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    await addProvider(server, gateways[0]!)
    await addProvider(server, gateways[1]!)
    const keys = [await addKey(server), await addKey(server), await addKey(server)]
    await server.call('DELETE', `/api/v1/keys/${keys[1].id}`)
    createManagementKey(server.runtime, server.workspaceId, true)
    createManagementKey(server.runtime, server.workspaceId, false)
    addMember(server.runtime, server.workspaceId, 'alice.member@example-corp.test')
    addMember(server.runtime, server.workspaceId, 'bob.member@example-corp.test')

    const response = await server.call('GET', '/api/v1/account')
    expect(response.status).toBe(200)
    expect(Object.keys(response.body)).toEqual(['data'])
    const account = response.body.data
    expect(Object.keys(account).sort()).toEqual(['inference_keys', 'management_keys', 'members', 'provider_keys', 'workspace'])
    expect(Object.keys(account.workspace).sort()).toEqual(['created_at', 'id', 'kind', 'name'])
    expect(account.workspace.id).toBe(server.workspaceId)
    expect(account.workspace.name).toBe('default')
    expect(typeof account.workspace.kind).toBe('string')
    expect(Number.isNaN(Date.parse(account.workspace.created_at))).toBe(false)
    expect(account.inference_keys).toEqual({ total: 3, live: 2, revoked: 1 })
    expect(account.management_keys).toEqual({ total: 3, read_only: 1 })
    expect(account.members).toEqual({ total: 2 })
    const providers = (await server.call('GET', '/api/v1/providers')).body.data
    expect(account.provider_keys).toEqual(providers)

    const text = JSON.stringify(response.body)
    expect(text).not.toContain('alice.member')
    expect(text).not.toContain('bob.member')
    expect(text).not.toContain('example-corp.test')
    expect(text).not.toContain('@')
  })
})

describe('OpenAPI document', () => {
  test('GET /api/v1/openapi.json is OpenAPI 3.0.3, version 1.0.0, with every management endpoint', async () => {
    await using server = await startTestServer()
    const response = await server.call('GET', '/api/v1/openapi.json')
    expect(response.status).toBe(200)
    const document = response.body
    expect(document.openapi).toBe('3.0.3')
    expect(document.info.version).toBe('1.0.0')
    const paths: Record<string, Record<string, unknown>> = {}
    for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
      paths[path.replace(/^\/api\/v1/, '').replace(/:(\w+)/g, '{$1}')] = item
    }
    const expected: [string, string][] = [
      ['get', '/gateways'],
      ['get', '/providers'],
      ['post', '/providers'],
      ['get', '/providers/{id}'],
      ['patch', '/providers/{id}'],
      ['delete', '/providers/{id}'],
      ['get', '/keys'],
      ['post', '/keys'],
      ['get', '/keys/{id}'],
      ['patch', '/keys/{id}'],
      ['delete', '/keys/{id}'],
      ['get', '/keys/{id}/routing'],
      ['put', '/keys/{id}/routing'],
      ['get', '/usage/summary'],
      ['get', '/usage/series'],
      ['get', '/usage/breakdown'],
      ['get', '/account'],
    ]
    for (const [method, path] of expected) {
      expect([method, path, Boolean(paths[path]?.[method])]).toEqual([method, path, true])
    }
  })
})

describe('request-level errors', () => {
  test('malformed JSON gives a 400 JSON error, never 500, and writes nothing', async () => {
    await using server = await startTestServer()
    const { a, key } = await populate(server)
    const before = await snapshot(server)
    const targets = [
      ['POST', '/api/v1/keys'],
      ['POST', '/api/v1/providers'],
      ['PATCH', `/api/v1/keys/${key.id}`],
      ['PATCH', `/api/v1/providers/${a.id}`],
      ['PUT', `/api/v1/keys/${key.id}/routing`],
    ] as const
    for (const [method, path] of targets) {
      for (const raw of ['{bad json', '{"label": "x",}', '[1, 2', 'nul']) {
        const response = await server.api(path, { method, body: raw, headers: { 'content-type': 'application/json' } })
        expect([method, path, raw, response.status]).toEqual([method, path, raw, 400])
        expect(response.headers.get('content-type') ?? '').toContain('application/json')
        const body = await response.json()
        expect(typeof body.error).toBe('string')
      }
    }
    expect(await snapshot(server)).toEqual(before)
  })

  test('a body over 1 MB gives 400 and writes nothing', async () => {
    await using server = await startTestServer()
    const { key } = await populate(server)
    const before = await snapshot(server)
    const huge = 'x'.repeat(1_100_000)
    for (const [method, path] of [
      ['POST', '/api/v1/keys'],
      ['PATCH', `/api/v1/keys/${key.id}`],
    ] as const) {
      const response = await server.call(method, path, { label: 'big', steering_message: huge })
      expect([method, path, response.status]).toEqual([method, path, 400])
      expect(typeof response.body.error).toBe('string')
    }
    expect(await snapshot(server)).toEqual(before)
  })

  test('an unknown /api/v1 path gives 404 with a JSON error', async () => {
    await using server = await startTestServer()
    for (const [method, path] of [
      ['GET', '/api/v1/nope'],
      ['GET', '/api/v1/keys/x/y/z'],
      ['POST', '/api/v1/widgets'],
      ['GET', '/api/v1/usage/other'],
    ] as const) {
      const response = await server.call(method, path, method === 'POST' ? {} : undefined)
      expect([method, path, response.status]).toEqual([method, path, 404])
      expect(typeof response.body.error).toBe('string')
    }
  })
})
