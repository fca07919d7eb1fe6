/**
 * Management API: routing rules (SPEC "Routing rule", "PUT routing rules", "States and transitions:
 * Provider key" last line).
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { createWorkspace } from '../../src/management/workspaces'
import { startTestServer, type TestServer } from '../harness/server'
import { storeProvider } from '../harness/api'

interface Gateway {
  id: string
  routable: boolean
  decisions: boolean
  config_fields?: unknown
  capabilities: { decisioner: boolean }
}

interface Setup {
  server: TestServer
  catalog: Gateway[]
  /** Routable gateways that need no config. */
  plain: Gateway[]
  keyId: string
  /** Provider keys on distinct plain gateways. */
  providers: { id: string; gateway: string }[]
  routing(): Promise<any>
  put(body: unknown): Promise<{ status: number; body: any }>
}

async function addProvider(server: TestServer, gateway: string, key?: string | null) {
  return (await storeProvider(server, { gateway, key: `sk-${randomUUID()}` }, key)) as { id: string; gateway: string }
}

async function setup(server: TestServer, providerCount = 3, keyBody: Record<string, unknown> = {}): Promise<Setup> {
  const catalog = (await server.call('GET', '/api/v1/gateways')).body.data as Gateway[]
  const plain = catalog.filter((gateway) => gateway.routable && !gateway.config_fields)
  const providers = []
  for (let index = 0; index < providerCount; index++) providers.push(await addProvider(server, plain[index % plain.length]!.id))
  const created = await server.call('POST', '/api/v1/keys', keyBody)
  expect(created.status).toBe(201)
  const keyId = created.body.data.id
  return {
    server,
    catalog,
    plain,
    keyId,
    providers,
    async routing() {
      const response = await server.call('GET', `/api/v1/keys/${keyId}/routing`)
      expect(response.status).toBe(200)
      return response.body.data
    },
    put: (body) => server.call('PUT', `/api/v1/keys/${keyId}/routing`, body),
  }
}

/** PUT must give 400 with a string error, and the stored rule must be exactly as before. */
async function expectRefused(ctx: Setup, body: unknown, message?: string) {
  const before = await ctx.routing()
  const response = await ctx.put(body)
  expect(response.status).toBe(400)
  expect(typeof response.body.error).toBe('string')
  if (message !== undefined) expect(response.body).toEqual({ error: message })
  expect(await ctx.routing()).toEqual(before)
  return response
}

const slugMessage = 'provider_key_id must be the UUID returned by GET /api/v1/providers.'

describe('PUT /api/v1/keys/:id/routing: targets', () => {
  test('priority rule stored in order with gateway filled per target; GET routing and GET key agree', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 3)
    const [a, b, c] = ctx.providers
    const response = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: c!.id }, { provider_key_id: a!.id, ttfb_ms: 1500 }, { provider_key_id: b!.id }] })
    expect(response.status).toBe(200)
    expect(response.body.data).toEqual({
      strategy: 'priority',
      targets: [
        { provider_key_id: c!.id, gateway: c!.gateway, ttfb_ms: null },
        { provider_key_id: a!.id, gateway: a!.gateway, ttfb_ms: 1500 },
        { provider_key_id: b!.id, gateway: b!.gateway, ttfb_ms: null },
      ],
      model_remaps: [],
      decisioner: null,
    })
    expect(await ctx.routing()).toEqual(response.body.data)
    const key = await server.call('GET', `/api/v1/keys/${ctx.keyId}`)
    expect(key.body.data.routing).toEqual(response.body.data)
  })

  test('a gateway sent in a target is ignored; the stored provider row decides it', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    const response = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: a!.id, gateway: b!.gateway }] })
    expect(response.status).toBe(200)
    expect(response.body.data.targets[0].gateway).toBe(a!.gateway)
  })

  test('a gateway slug as provider_key_id gives 400 with the exact message', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.gateway }] }, slugMessage)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }, { provider_key_id: ctx.plain[1]!.id }] }, slugMessage)
  })

  test('empty targets gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
    await expectRefused(ctx, { strategy: 'priority', targets: [] })
    await expectRefused(ctx, { strategy: 'split', targets: [] })
  })

  test('10 targets are accepted; 11 give 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 11)
    const ten = ctx.providers.slice(0, 10).map((provider) => ({ provider_key_id: provider.id }))
    const ok = await ctx.put({ strategy: 'priority', targets: ten })
    expect(ok.status).toBe(200)
    expect(ok.body.data.targets).toHaveLength(10)
    await expectRefused(ctx, { strategy: 'priority', targets: ctx.providers.map((provider) => ({ provider_key_id: provider.id })) })
  })

  test('the same provider key twice gives 400 (also when spelled in upper case)', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }] })
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a!.id }, { provider_key_id: b!.id }, { provider_key_id: a!.id }] })
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a!.id }, { provider_key_id: a!.id.toUpperCase() }] })
  })

  test('a disabled provider key gives 400; after re-enabling it is accepted', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }] })
    expect((await server.call('PATCH', `/api/v1/providers/${a!.id}`, { disabled: true })).status).toBe(200)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: b!.id }, { provider_key_id: a!.id }] })
    expect((await server.call('PATCH', `/api/v1/providers/${a!.id}`, { disabled: false })).status).toBe(200)
    expect((await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }, { provider_key_id: a!.id }] })).status).toBe(200)
  })

  test('a missing (never existed or deleted) provider key gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }] })
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: randomUUID() }] })
    expect((await server.call('DELETE', `/api/v1/providers/${a!.id}`)).status).toBe(200)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: b!.id }, { provider_key_id: a!.id }] })
  })

  test("another workspace's provider key gives 400", async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
    const other = createWorkspace(server.runtime, 'other')
    const foreign = await addProvider(server, ctx.plain[0]!.id, other.management_key)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: foreign.id }] })
    await expectRefused(ctx, {
      strategy: 'priority',
      targets: [{ provider_key_id: ctx.providers[0]!.id }],
      model_remaps: [{ match: 'm', provider_key_id: foreign.id, upstream_model: 'u' }],
    })
  })

  test('unknown key id gives 404; invalid strategy gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const unknown = await server.call('PUT', `/api/v1/keys/${randomUUID()}/routing`, { strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
    expect(unknown.status).toBe(404)
    expect(unknown.body).toEqual({ error: 'API key not found.' })
    const unknownGet = await server.call('GET', `/api/v1/keys/${randomUUID()}/routing`)
    expect(unknownGet.status).toBe(404)
    expect(unknownGet.body).toEqual({ error: 'API key not found.' })
    await expectRefused(ctx, { strategy: 'random', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
  })
})

describe('split weights', () => {
  test('valid weights are stored and shown (0 is failover-only; up to 1,000,000)', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 3)
    const [a, b, c] = ctx.providers
    const response = await ctx.put({
      strategy: 'split',
      targets: [
        { provider_key_id: a!.id, weight: 1_000_000 },
        { provider_key_id: b!.id, weight: 0 },
        { provider_key_id: c!.id, weight: 7 },
      ],
    })
    expect(response.status).toBe(200)
    expect(response.body.data.strategy).toBe('split')
    expect(response.body.data.targets).toEqual([
      { provider_key_id: a!.id, gateway: a!.gateway, weight: 1_000_000, ttfb_ms: null },
      { provider_key_id: b!.id, gateway: b!.gateway, weight: 0, ttfb_ms: null },
      { provider_key_id: c!.id, gateway: c!.gateway, weight: 7, ttfb_ms: null },
    ])
    expect(await ctx.routing()).toEqual(response.body.data)
  })

  test('missing, negative, too large, non-integer or all-zero weights give 400 and save nothing', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    expect((await ctx.put({ strategy: 'split', targets: [{ provider_key_id: a!.id, weight: 1 }, { provider_key_id: b!.id, weight: 2 }] })).status).toBe(200)
    const cases = [
      [{ provider_key_id: a!.id }, { provider_key_id: b!.id, weight: 2 }],
      [{ provider_key_id: a!.id, weight: -1 }, { provider_key_id: b!.id, weight: 2 }],
      [{ provider_key_id: a!.id, weight: 1_000_001 }, { provider_key_id: b!.id, weight: 2 }],
      [{ provider_key_id: a!.id, weight: 1.5 }, { provider_key_id: b!.id, weight: 2 }],
      [{ provider_key_id: a!.id, weight: '3' }, { provider_key_id: b!.id, weight: 2 }],
      [{ provider_key_id: a!.id, weight: 0 }, { provider_key_id: b!.id, weight: 0 }],
      [{ provider_key_id: a!.id, weight: 0 }],
    ]
    for (const targets of cases) await expectRefused(ctx, { strategy: 'split', targets })
  })
})

describe('target ttfb_ms', () => {
  test('1000 to 30000 accepted; out of range gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    const ok = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: a!.id, ttfb_ms: 1000 }, { provider_key_id: b!.id, ttfb_ms: 30000 }] })
    expect(ok.status).toBe(200)
    expect(ok.body.data.targets.map((target: { ttfb_ms: number }) => target.ttfb_ms)).toEqual([1000, 30000])
    for (const ttfb of [999, 30001, 0, -5, 1500.5, '2000']) {
      await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a!.id, ttfb_ms: ttfb }] })
    }
  })

  test('null clears it; omitted keeps the stored value (also after reordering)', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 3)
    const [a, b, c] = ctx.providers
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: a!.id, ttfb_ms: 2000 }, { provider_key_id: b!.id, ttfb_ms: 3000 }] })

    const kept = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }, { provider_key_id: a!.id }, { provider_key_id: c!.id }] })
    expect(kept.status).toBe(200)
    expect(kept.body.data.targets.map((target: { provider_key_id: string; ttfb_ms: number | null }) => [target.provider_key_id, target.ttfb_ms])).toEqual([
      [b!.id, 3000],
      [a!.id, 2000],
      [c!.id, null],
    ])

    const cleared = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id, ttfb_ms: null }, { provider_key_id: a!.id }] })
    expect(cleared.body.data.targets.map((target: { ttfb_ms: number | null }) => target.ttfb_ms)).toEqual([null, 2000])
    expect((await ctx.routing()).targets.map((target: { ttfb_ms: number | null }) => target.ttfb_ms)).toEqual([null, 2000])

    // Switching strategy keeps the stored value too.
    const split = await ctx.put({ strategy: 'split', targets: [{ provider_key_id: a!.id, weight: 1 }] })
    expect(split.body.data.targets).toEqual([{ provider_key_id: a!.id, gateway: a!.gateway, weight: 1, ttfb_ms: 2000 }])
  })
})

describe('model remaps', () => {
  test('stored with defaults percent 100 and enabled true, gateway filled in', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    const response = await ctx.put({
      strategy: 'priority',
      targets: [{ provider_key_id: a!.id }],
      model_remaps: [
        { match: 'gpt-4o', provider_key_id: b!.id, upstream_model: 'vendor/gpt-4o' },
        { match: '*', percent: 25, provider_key_id: a!.id, upstream_model: 'vendor/cheap', enabled: false },
      ],
    })
    expect(response.status).toBe(200)
    expect(response.body.data.model_remaps).toEqual([
      { match: 'gpt-4o', percent: 100, provider_key_id: b!.id, gateway: b!.gateway, upstream_model: 'vendor/gpt-4o', enabled: true },
      { match: '*', percent: 25, provider_key_id: a!.id, gateway: a!.gateway, upstream_model: 'vendor/cheap', enabled: false },
    ])
    expect(await ctx.routing()).toEqual(response.body.data)
  })

  test('20 remaps accepted; 21 give 400 even when switched off', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const a = ctx.providers[0]!
    const remaps = (count: number, enabled: boolean) =>
      Array.from({ length: count }, (_, index) => ({ match: `model-${index}`, provider_key_id: a.id, upstream_model: `up-${index}`, enabled }))
    const twenty = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: a.id }], model_remaps: remaps(20, true) })
    expect(twenty.status).toBe(200)
    expect(twenty.body.data.model_remaps).toHaveLength(20)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a.id }], model_remaps: remaps(21, false) })
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a.id }], model_remaps: [...remaps(20, true).slice(0, 10), ...remaps(11, false).map((remap) => ({ ...remap, match: `off-${remap.match}` }))] })
  })

  test('match and upstream_model must be 1 to 200 chars', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const a = ctx.providers[0]!
    const ok = await ctx.put({
      strategy: 'priority',
      targets: [{ provider_key_id: a.id }],
      model_remaps: [{ match: 'm'.repeat(200), provider_key_id: a.id, upstream_model: 'u'.repeat(200) }],
    })
    expect(ok.status).toBe(200)
    for (const remap of [
      { match: '', upstream_model: 'u' },
      { match: 'm'.repeat(201), upstream_model: 'u' },
      { match: 'm', upstream_model: '' },
      { match: 'm', upstream_model: 'u'.repeat(201) },
      { upstream_model: 'u' },
      { match: 'm' },
    ]) {
      await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: a.id }], model_remaps: [{ provider_key_id: a.id, ...remap }] })
    }
  })

  test('percent must be an integer 1 to 100; enabled must be boolean', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const a = ctx.providers[0]!
    const ok = await ctx.put({
      strategy: 'priority',
      targets: [{ provider_key_id: a.id }],
      model_remaps: [{ match: 'x', percent: 1, provider_key_id: a.id, upstream_model: 'u' }],
    })
    expect(ok.status).toBe(200)
    for (const extra of [{ percent: 0 }, { percent: 101 }, { percent: 50.5 }, { percent: -10 }, { enabled: 'yes' }]) {
      await expectRefused(ctx, {
        strategy: 'priority',
        targets: [{ provider_key_id: a.id }],
        model_remaps: [{ match: 'x', provider_key_id: a.id, upstream_model: 'u', ...extra }],
      })
    }
  })

  test('remap provider_key_id: slug gives the exact 400; missing or disabled gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: a!.id }] })
    const rule = (providerKeyId: string) => ({
      strategy: 'priority',
      targets: [{ provider_key_id: a!.id }],
      model_remaps: [{ match: 'x', provider_key_id: providerKeyId, upstream_model: 'u' }],
    })
    await expectRefused(ctx, rule(b!.gateway), slugMessage)
    await expectRefused(ctx, rule(randomUUID()))
    await server.call('PATCH', `/api/v1/providers/${b!.id}`, { disabled: true })
    await expectRefused(ctx, rule(b!.id))
  })

  test('enabled remaps for one match total at most 100 percent, case-insensitively; disabled rows do not count', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    const put = (model_remaps: unknown[]) => ({ strategy: 'priority', targets: [{ provider_key_id: a!.id }], model_remaps })
    const remap = (match: string, percent: number | undefined, enabled?: boolean, id = a!.id) => ({
      match,
      provider_key_id: id,
      upstream_model: `up-${match}-${percent}`,
      ...(percent !== undefined ? { percent } : {}),
      ...(enabled !== undefined ? { enabled } : {}),
    })

    const exact = await ctx.put(put([remap('gpt-4o', 60), remap('gpt-4o', 40, undefined, b!.id), remap('other', 100)]))
    expect(exact.status).toBe(200)

    await expectRefused(ctx, put([remap('gpt-4o', 60), remap('GPT-4O', 50)]))
    await expectRefused(ctx, put([remap('gpt-4o', undefined), remap('Gpt-4o', 1)]))
    await expectRefused(ctx, put([remap('*', 70), remap('*', 31)]))

    const withDisabled = await ctx.put(put([remap('gpt-4o', 100), remap('GPT-4o', 100, false), remap('gpt-4O', 90, false)]))
    expect(withDisabled.status).toBe(200)
    expect(withDisabled.body.data.model_remaps.map((row: { enabled: boolean }) => row.enabled)).toEqual([true, false, false])
  })
})

describe('decisioner', () => {
  function decisionerGateways(ctx: Setup) {
    const hosts = ctx.catalog.filter((gateway) => gateway.capabilities.decisioner && !gateway.config_fields)
    const nonHost = ctx.catalog.find((gateway) => !gateway.capabilities.decisioner && gateway.routable && !gateway.config_fields)!
    return { hosts, nonHost }
  }

  test('five gateway kinds can host a decisioner; a full decisioner is stored and shown', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const { hosts } = decisionerGateways(ctx)
    expect(ctx.catalog.filter((gateway) => gateway.capabilities.decisioner)).toHaveLength(5)
    const decider = await addProvider(server, hosts[0]!.id)
    const decisioner = {
      provider_key_id: decider.id,
      objective: 'capability',
      allow_model_override: true,
      max_usd_m: 2.5,
      notes: 'n'.repeat(500),
      models: Array.from({ length: 12 }, (_, index) => `vendor/model-${index}`),
    }
    const response = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }], decisioner })
    expect(response.status).toBe(200)
    expect(response.body.data.decisioner).toMatchObject(decisioner)
    expect(await ctx.routing()).toEqual(response.body.data)
  })

  test('every decisioner-capable gateway is accepted as host; objective defaults to cost', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    for (const host of decisionerGateways(ctx).hosts) {
      const decider = await addProvider(server, host.id)
      const response = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }], decisioner: { provider_key_id: decider.id } })
      expect(response.status).toBe(200)
      expect(response.body.data.decisioner.provider_key_id).toBe(decider.id)
      expect(response.body.data.decisioner.objective).toBe('cost')
    }
    for (const objective of ['cost', 'capability', 'efficiency']) {
      const decider = await addProvider(server, decisionerGateways(ctx).hosts[0]!.id)
      const response = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }], decisioner: { provider_key_id: decider.id, objective } })
      expect(response.status).toBe(200)
      expect(response.body.data.decisioner.objective).toBe(objective)
    }
  })

  test('null, omitted or {} turns it off', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const decider = await addProvider(server, decisionerGateways(ctx).hosts[0]!.id)
    const target = { provider_key_id: ctx.providers[0]!.id }
    for (const off of [{ decisioner: null }, {}, { decisioner: {} }]) {
      const on = await ctx.put({ strategy: 'priority', targets: [target], decisioner: { provider_key_id: decider.id } })
      expect(on.body.data.decisioner).not.toBeNull()
      const response = await ctx.put({ strategy: 'priority', targets: [target], ...off })
      expect(response.status).toBe(200)
      expect(response.body.data.decisioner).toBeNull()
      expect((await ctx.routing()).decisioner).toBeNull()
    }
  })

  test('a host on a gateway that cannot host a decisioner, a missing, disabled or slug provider gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const { hosts, nonHost } = decisionerGateways(ctx)
    const target = { provider_key_id: ctx.providers[0]!.id }
    const good = await addProvider(server, hosts[0]!.id)
    await ctx.put({ strategy: 'priority', targets: [target], decisioner: { provider_key_id: good.id, objective: 'efficiency' } })

    const wrongKind = await addProvider(server, nonHost.id)
    await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { provider_key_id: wrongKind.id } })
    await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { provider_key_id: randomUUID() } })
    await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { provider_key_id: hosts[0]!.id } }, slugMessage)
    await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { objective: 'cost' } })
    const disabled = await addProvider(server, hosts[0]!.id)
    await server.call('PATCH', `/api/v1/providers/${disabled.id}`, { disabled: true })
    await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { provider_key_id: disabled.id } })
  })

  test('models at most 12, notes at most 500, max_usd_m above 0, objective in the enum', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    const decider = await addProvider(server, decisionerGateways(ctx).hosts[0]!.id)
    const target = { provider_key_id: ctx.providers[0]!.id }
    const ok = await ctx.put({ strategy: 'priority', targets: [target], decisioner: { provider_key_id: decider.id, models: [], max_usd_m: 0.01 } })
    expect(ok.status).toBe(200)
    expect(ok.body.data.decisioner.models).toEqual([])
    for (const extra of [
      { models: Array.from({ length: 13 }, (_, index) => `m-${index}`) },
      { notes: 'n'.repeat(501) },
      { max_usd_m: 0 },
      { max_usd_m: -1 },
      { max_usd_m: 'cheap' },
      { objective: 'speed' },
      { objective: 'Cost' },
      { allow_model_override: 'yes' },
    ]) {
      await expectRefused(ctx, { strategy: 'priority', targets: [target], decisioner: { provider_key_id: decider.id, ...extra } })
    }
  })

  test('a key of shape decisions rejects a decisioner', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 0, { api_shape: 'decisions' })
    const { hosts } = decisionerGateways(ctx)
    const decisionsGateway = ctx.catalog.find((gateway) => gateway.decisions && !gateway.config_fields)!
    const target = await addProvider(server, decisionsGateway.id)
    const decider = await addProvider(server, hosts[0]!.id)
    expect((await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: target.id }] })).status).toBe(200)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: target.id }], decisioner: { provider_key_id: decider.id } })
    const created = await server.call('POST', '/api/v1/keys', {
      api_shape: 'decisions',
      routing: { strategy: 'priority', targets: [{ provider_key_id: target.id }], decisioner: { provider_key_id: decider.id } },
    })
    expect(created.status).toBe(400)
  })
})

describe('decisions-shaped keys', () => {
  test('targets must be gateways with decisions: true (8 kinds)', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 0, { api_shape: 'decisions' })
    const decisionKinds = ctx.catalog.filter((gateway) => gateway.decisions)
    expect(decisionKinds).toHaveLength(8)
    const accepted = []
    for (const gateway of decisionKinds.filter((entry) => !entry.config_fields)) accepted.push(await addProvider(server, gateway.id))
    const response = await ctx.put({ strategy: 'priority', targets: accepted.map((provider) => ({ provider_key_id: provider.id })) })
    expect(response.status).toBe(200)
    expect(response.body.data.targets.map((target: { gateway: string }) => target.gateway)).toEqual(accepted.map((provider) => provider.gateway))

    const refusedKind = ctx.catalog.find((gateway) => !gateway.decisions && !gateway.config_fields)!
    const refused = await addProvider(server, refusedKind.id)
    await expectRefused(ctx, { strategy: 'priority', targets: [{ provider_key_id: accepted[0]!.id }, { provider_key_id: refused.id }] })
  })
})

describe('PUT replaces the whole rule; violations save nothing', () => {
  test('omitted model_remaps and decisioner are cleared', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 2)
    const [a, b] = ctx.providers
    const host = ctx.catalog.find((gateway) => gateway.capabilities.decisioner && !gateway.config_fields)!
    const decider = await addProvider(server, host.id)
    const full = await ctx.put({
      strategy: 'split',
      targets: [{ provider_key_id: a!.id, weight: 1 }, { provider_key_id: b!.id, weight: 2 }],
      model_remaps: [{ match: 'x', provider_key_id: b!.id, upstream_model: 'y' }],
      decisioner: { provider_key_id: decider.id },
    })
    expect(full.status).toBe(200)
    expect(full.body.data.model_remaps).toHaveLength(1)
    expect(full.body.data.decisioner).not.toBeNull()

    const replaced = await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: b!.id }] })
    expect(replaced.status).toBe(200)
    expect(replaced.body.data).toEqual({
      strategy: 'priority',
      targets: [{ provider_key_id: b!.id, gateway: b!.gateway, ttfb_ms: null }],
      model_remaps: [],
      decisioner: null,
    })
    expect(await ctx.routing()).toEqual(replaced.body.data)
  })

  test('a violation late in the body saves nothing of the earlier valid parts', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 3)
    const [a, b, c] = ctx.providers
    const host = ctx.catalog.find((gateway) => gateway.capabilities.decisioner && !gateway.config_fields)!
    const decider = await addProvider(server, host.id)
    const stored = await ctx.put({
      strategy: 'priority',
      targets: [{ provider_key_id: a!.id, ttfb_ms: 4000 }],
      model_remaps: [{ match: 'keep', provider_key_id: a!.id, upstream_model: 'kept' }],
    })
    expect(stored.status).toBe(200)
    const valid = {
      strategy: 'split',
      targets: [{ provider_key_id: b!.id, weight: 1 }, { provider_key_id: c!.id, weight: 2 }],
      model_remaps: [{ match: 'new', provider_key_id: c!.id, upstream_model: 'n' }],
      decisioner: { provider_key_id: decider.id },
    }
    await expectRefused(ctx, { ...valid, decisioner: { provider_key_id: decider.id, notes: 'x'.repeat(501) } })
    await expectRefused(ctx, { ...valid, model_remaps: [...valid.model_remaps, { match: 'bad', provider_key_id: randomUUID(), upstream_model: 'z' }] })
    await expectRefused(ctx, { ...valid, targets: [...valid.targets, { provider_key_id: a!.id, weight: 1, ttfb_ms: 50 }] })
    expect(await ctx.routing()).toEqual(stored.body.data)
    expect((await ctx.put(valid)).status).toBe(200)
  })

  test('a non-object body or missing targets gives 400', async () => {
    await using server = await startTestServer()
    const ctx = await setup(server, 1)
    await ctx.put({ strategy: 'priority', targets: [{ provider_key_id: ctx.providers[0]!.id }] })
    await expectRefused(ctx, { strategy: 'priority' })
    await expectRefused(ctx, [{ provider_key_id: ctx.providers[0]!.id }])
    await expectRefused(ctx, { strategy: 'priority', targets: { provider_key_id: ctx.providers[0]!.id } })
  })
})
