/**
 * Management API: inference keys (SPEC "Inference key", "POST /keys body", "PATCH /keys/:id fields",
 * "States and transitions: Inference key").
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { startTestServer, type TestServer } from '../harness/server'
import { createInferenceKey, storeProvider } from '../harness/api'

const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const keyFields = [
  'allowed_ips',
  'api_shape',
  'cache',
  'companion_ads',
  'continuation',
  'created_at',
  'effective_timeouts',
  'failover_ttfb_ms',
  'guardrails',
  'id',
  'key_prefix',
  'keyterms',
  'label',
  'last_used_at',
  'limit_state',
  'limits',
  'revoked_at',
  'routing',
  'steering_message',
  'upstream_timeout_ms',
]

async function plainGateways(server: TestServer): Promise<string[]> {
  const response = await server.call('GET', '/api/v1/gateways')
  return response.body.data
    .filter((gateway: { routable: boolean; config_fields?: unknown }) => gateway.routable && !gateway.config_fields)
    .map((gateway: { id: string }) => gateway.id)
}

async function addProvider(server: TestServer, gateway: string) {
  return (await storeProvider(server, { gateway, key: `sk-${randomUUID()}` })) as { id: string; gateway: string }
}

async function createKey(server: TestServer, body: Record<string, unknown> = {}) {
  return createInferenceKey(server, body)
}

async function getKey(server: TestServer, id: string) {
  const response = await server.call('GET', `/api/v1/keys/${id}`)
  expect(response.status).toBe(200)
  return response.body.data
}

/** Every key of the workspace, walking the pages. */
async function allKeys(server: TestServer): Promise<any[]> {
  const keys: any[] = []
  for (let offset = 0; ; offset += 100) {
    const page = await server.call('GET', `/api/v1/keys?offset=${offset}`)
    expect(page.status).toBe(200)
    keys.push(...page.body.data)
    if (page.body.data.length < 100) return keys
  }
}

async function keyCount(server: TestServer): Promise<number> {
  return (await allKeys(server)).length
}

describe('POST /api/v1/keys', () => {
  test('201 with the secret `key` (rt_live_…) only in the creation response, key_prefix its prefix, and defaults', async () => {
    await using server = await startTestServer()
    const response = await server.call('POST', '/api/v1/keys', {})
    expect(response.status).toBe(201)
    const key = response.body.data
    expect(Object.keys(key).sort()).toEqual([...keyFields, 'key'].sort())
    expect(key.id).toMatch(uuidRe)
    expect(typeof key.key).toBe('string')
    expect(key.key.startsWith('rt_live_')).toBe(true)
    expect(key.key_prefix.startsWith('rt_live_')).toBe(true)
    expect(key.key.startsWith(key.key_prefix)).toBe(true)
    expect(key.key_prefix.length).toBeLessThan(key.key.length)

    expect(key.label).toBeNull()
    expect(key.api_shape).toBe('chat')
    expect(key.companion_ads).toBe(false)
    expect(key.keyterms).toBe(false)
    expect(key.allowed_ips).toEqual([])
    expect(key.steering_message).toBeNull()
    expect(key.failover_ttfb_ms).toBeNull()
    expect(key.upstream_timeout_ms).toBeNull()
    expect(key.effective_timeouts).toEqual({ failover_ttfb_ms: 5000, upstream_timeout_ms: 60000 })
    // No limits unless set (CONTRACT §11), and nothing used yet.
    expect(key.limits).toEqual({ requests_per_minute: null, tokens_per_minute: null, usd_per_day: null, usd_per_month: null })
    expect(key.limit_state).toEqual({ requests_last_minute: 0, tokens_last_minute: 0, usd_today: 0, usd_this_month: 0 })
    // No response cache unless turned on (CONTRACT §15).
    expect(key.cache).toBeNull()
    // No mid-stream continuation unless turned on (CONTRACT §16).
    expect(key.continuation).toBeNull()
    // No guardrails unless turned on (CONTRACT §17).
    expect(key.guardrails).toBeNull()
    expect(Number.isNaN(Date.parse(key.created_at))).toBe(false)
    expect(key.last_used_at).toBeNull()
    expect(key.revoked_at).toBeNull()
    // Omitting routing creates an empty rule.
    expect(key.routing.targets).toEqual([])
    expect(key.routing.model_remaps).toEqual([])
    expect(key.routing.decisioner).toBeNull()

    // Never again: GET, list, PATCH, DELETE.
    const secret = key.key
    const responses = [
      await server.call('GET', `/api/v1/keys/${key.id}`),
      await server.call('GET', '/api/v1/keys'),
      await server.call('GET', `/api/v1/keys/${key.id}/routing`),
      await server.call('PATCH', `/api/v1/keys/${key.id}`, { label: 'renamed' }),
      await server.call('GET', '/api/v1/account'),
      await server.call('DELETE', `/api/v1/keys/${key.id}`),
    ]
    for (const later of responses) {
      expect(later.status).toBe(200)
      expect(JSON.stringify(later.body)).not.toContain(secret)
    }
    expect('key' in responses[0]!.body.data).toBe(false)
    expect('key' in responses[1]!.body.data[0]).toBe(false)
    expect('key' in responses[3]!.body.data).toBe(false)
    expect('key' in responses[5]!.body.data).toBe(false)
  })

  test('each key gets a different secret and id', async () => {
    await using server = await startTestServer()
    const a = await createKey(server)
    const b = await createKey(server)
    expect(a.id).not.toBe(b.id)
    expect(a.key).not.toBe(b.key)
  })

  test('stores the given settings', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, {
      label: 'my key',
      api_shape: 'messages',
      companion_ads: true,
      steering_message: 'Be brief.',
      failover_ttfb_ms: 2500,
      upstream_timeout_ms: 30000,
    })
    expect(key).toMatchObject({
      label: 'my key',
      api_shape: 'messages',
      companion_ads: true,
      steering_message: 'Be brief.',
      failover_ttfb_ms: 2500,
      upstream_timeout_ms: 30000,
      effective_timeouts: { failover_ttfb_ms: 2500, upstream_timeout_ms: 30000 },
    })
    const fetched = await getKey(server, key.id)
    const { key: _secret, ...withoutSecret } = key
    expect(fetched).toEqual(withoutSecret)
  })

  test('every api_shape of SPEC is accepted', async () => {
    await using server = await startTestServer()
    for (const shape of ['chat', 'chat_router', 'messages', 'content', 'decisions']) {
      const key = await createKey(server, { api_shape: shape })
      expect(key.api_shape).toBe(shape)
    }
  })

  test('unknown api_shape gives 400 exactly {error:"Unsupported API shape."} and creates nothing', async () => {
    await using server = await startTestServer()
    for (const shape of ['completions', 'CHAT', '']) {
      const response = await server.call('POST', '/api/v1/keys', { api_shape: shape })
      expect(response.status).toBe(400)
      expect(response.body).toEqual({ error: 'Unsupported API shape.' })
    }
    expect(await keyCount(server)).toBe(0)
  })

  test('label (or name) longer than 120 chars is cut to 120', async () => {
    await using server = await startTestServer()
    const long = 'a'.repeat(119) + 'bcdef'
    expect((await createKey(server, { label: long })).label).toBe(long.slice(0, 120))
    expect((await createKey(server, { name: long })).label).toBe(long.slice(0, 120))
    expect((await createKey(server, { name: 'short' })).label).toBe('short')
  })

  describe('allowed_ips', () => {
    test('array of addresses and CIDR ranges; single addresses stored as written, ranges as network address', async () => {
      await using server = await startTestServer()
      const key = await createKey(server, { allowed_ips: ['203.0.113.7', '10.1.2.3/8', '192.168.1.77/24', '2001:db8::1', '2001:db8:abcd:12::5/48'] })
      expect(key.allowed_ips).toEqual(['203.0.113.7', '10.0.0.0/8', '192.168.1.0/24', '2001:db8::1', '2001:db8:abcd::/48'])
      expect((await getKey(server, key.id)).allowed_ips).toEqual(key.allowed_ips)
    })

    test('comma-separated and newline-separated strings', async () => {
      await using server = await startTestServer()
      const commas = await createKey(server, { allowed_ips: '198.51.100.1, 10.1.2.3/8,172.16.5.4/12' })
      expect(commas.allowed_ips).toEqual(['198.51.100.1', '10.0.0.0/8', '172.16.0.0/12'])
      const newlines = await createKey(server, { allowed_ips: '198.51.100.1\n10.1.2.3/8\n::1' })
      expect(newlines.allowed_ips).toEqual(['198.51.100.1', '10.0.0.0/8', '::1'])
      const mixed = await createKey(server, { allowed_ips: '2001:DB8:0:0::1,\n192.0.2.10/32' })
      expect(mixed.allowed_ips).toEqual(['2001:DB8:0:0::1', '192.0.2.10/32'])
    })

    test('an invalid entry gives 400 naming it and no key is created', async () => {
      await using server = await startTestServer()
      await createKey(server)
      const before = await keyCount(server)
      for (const body of [
        { allowed_ips: ['10.0.0.1', 'not-an-ip'] },
        { allowed_ips: '10.0.0.1, 300.1.2.3' },
        { allowed_ips: ['10.0.0.0/33'] },
      ]) {
        const response = await server.call('POST', '/api/v1/keys', { label: 'should not exist', ...body })
        expect(response.status).toBe(400)
        expect(typeof response.body.error).toBe('string')
      }
      const named = await server.call('POST', '/api/v1/keys', { allowed_ips: ['10.0.0.1', 'bogus-entry-xyz'] })
      expect(named.body.error).toContain('bogus-entry-xyz')
      const namedString = await server.call('POST', '/api/v1/keys', { allowed_ips: '10.0.0.1,999.999.1.1' })
      expect(namedString.body.error).toContain('999.999.1.1')
      expect(await keyCount(server)).toBe(before)
    })

    test('more than 100 entries gives 400 (100 is fine)', async () => {
      await using server = await startTestServer()
      const hundred = Array.from({ length: 100 }, (_, index) => `10.0.${Math.floor(index / 250)}.${(index % 250) + 1}`)
      const ok = await createKey(server, { allowed_ips: hundred })
      expect(ok.allowed_ips).toHaveLength(100)
      const before = await keyCount(server)
      const tooMany = await server.call('POST', '/api/v1/keys', { allowed_ips: [...hundred, '10.9.9.9'] })
      expect(tooMany.status).toBe(400)
      expect(typeof tooMany.body.error).toBe('string')
      const tooManyString = await server.call('POST', '/api/v1/keys', { allowed_ips: [...hundred, '10.9.9.9'].join(',') })
      expect(tooManyString.status).toBe(400)
      expect(await keyCount(server)).toBe(before)
    })

    test('an entry longer than 64 chars gives 400', async () => {
      await using server = await startTestServer()
      const long = '1'.repeat(65)
      const response = await server.call('POST', '/api/v1/keys', { allowed_ips: ['10.0.0.1', long] })
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
      expect(await keyCount(server)).toBe(0)
    })
  })

  test('steering_message of 2000 chars is stored; 2001 gives 400 and nothing is created', async () => {
    await using server = await startTestServer()
    const ok = await createKey(server, { steering_message: 's'.repeat(2000) })
    expect(ok.steering_message).toHaveLength(2000)
    const tooLong = await server.call('POST', '/api/v1/keys', { steering_message: 's'.repeat(2001) })
    expect(tooLong.status).toBe(400)
    expect(typeof tooLong.body.error).toBe('string')
    expect(await keyCount(server)).toBe(1)
  })

  test('timeouts: bounds accepted, out of range or non-integer gives 400', async () => {
    await using server = await startTestServer()
    const low = await createKey(server, { failover_ttfb_ms: 1000, upstream_timeout_ms: 90000 })
    expect(low.effective_timeouts).toEqual({ failover_ttfb_ms: 1000, upstream_timeout_ms: 90000 })
    const high = await createKey(server, { failover_ttfb_ms: 30000, upstream_timeout_ms: 60000 })
    expect(high.failover_ttfb_ms).toBe(30000)
    const minUpstream = await createKey(server, { upstream_timeout_ms: 5000 })
    expect(minUpstream.upstream_timeout_ms).toBe(5000)
    // The failover timeout never exceeds the upstream timeout (SPEC "Timeouts").
    const capped = await createKey(server, { failover_ttfb_ms: 30000, upstream_timeout_ms: 5000 })
    expect(capped.failover_ttfb_ms).toBe(30000)
    expect(capped.effective_timeouts).toEqual({ failover_ttfb_ms: 5000, upstream_timeout_ms: 5000 })
    const nulls = await createKey(server, { failover_ttfb_ms: null, upstream_timeout_ms: null })
    expect(nulls.effective_timeouts).toEqual({ failover_ttfb_ms: 5000, upstream_timeout_ms: 60000 })
    const before = await keyCount(server)
    for (const body of [
      { failover_ttfb_ms: 999 },
      { failover_ttfb_ms: 30001 },
      { failover_ttfb_ms: 1500.5 },
      { failover_ttfb_ms: '2000' },
      { upstream_timeout_ms: 4999 },
      { upstream_timeout_ms: 90001 },
      { upstream_timeout_ms: 0 },
    ]) {
      const response = await server.call('POST', '/api/v1/keys', body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    expect(await keyCount(server)).toBe(before)
  })

  test('keyterms: true is stored as false without RT_KEYTERMS_ENABLED', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { keyterms: true })
    expect(key.keyterms).toBe(false)
    expect((await getKey(server, key.id)).keyterms).toBe(false)
    const patched = await server.call('PATCH', `/api/v1/keys/${key.id}`, { keyterms: true })
    expect(patched.status).toBe(200)
    expect(patched.body.data.keyterms).toBe(false)
  })

  test('keyterms: true is stored as true with RT_KEYTERMS_ENABLED=1', async () => {
    await using server = await startTestServer({ RT_KEYTERMS_ENABLED: '1' })
    const key = await createKey(server, { keyterms: true })
    expect(key.keyterms).toBe(true)
    expect((await getKey(server, key.id)).keyterms).toBe(true)
    const off = await server.call('PATCH', `/api/v1/keys/${key.id}`, { keyterms: false })
    expect(off.body.data.keyterms).toBe(false)
    const on = await server.call('PATCH', `/api/v1/keys/${key.id}`, { keyterms: true })
    expect(on.body.data.keyterms).toBe(true)
  })

  test('non-boolean companion_ads or keyterms gives 400', async () => {
    await using server = await startTestServer()
    for (const body of [{ companion_ads: 'true' }, { keyterms: 1 }, { companion_ads: null }]) {
      const response = await server.call('POST', '/api/v1/keys', body)
      expect(response.status).toBe(400)
    }
    expect(await keyCount(server)).toBe(0)
  })

  test('with routing: stored and shown with gateway filled in', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, gateway!)
    const key = await createKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })
    expect(key.routing.strategy).toBe('priority')
    expect(key.routing.targets).toEqual([{ provider_key_id: provider.id, gateway, ttfb_ms: null }])
  })

  test('invalid routing rolls the new key back', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    const provider = await addProvider(server, gateways[0]!)
    await createKey(server)
    const before = await keyCount(server)
    const bad = [
      { strategy: 'priority', targets: [{ provider_key_id: randomUUID() }] },
      { strategy: 'priority', targets: [] },
      { strategy: 'priority', targets: [{ provider_key_id: gateways[0] }] },
      { strategy: 'split', targets: [{ provider_key_id: provider.id, weight: 0 }] },
      { strategy: 'priority', targets: [{ provider_key_id: provider.id }, { provider_key_id: provider.id }] },
    ]
    for (const routing of bad) {
      const response = await server.call('POST', '/api/v1/keys', { label: 'rolled back', routing })
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    const keys = await allKeys(server)
    expect(keys).toHaveLength(before)
    expect(keys.some((key) => key.label === 'rolled back')).toBe(false)
  })

  test('a decisions key rejects targets on gateways that cannot serve decisions, and creates nothing', async () => {
    await using server = await startTestServer()
    const catalog = (await server.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean; decisions: boolean; config_fields?: unknown }[]
    const notDecisions = catalog.find((gateway) => !gateway.decisions && !gateway.config_fields)!
    const decisions = catalog.find((gateway) => gateway.decisions && !gateway.config_fields)!
    const bad = await addProvider(server, notDecisions.id)
    const good = await addProvider(server, decisions.id)
    const refused = await server.call('POST', '/api/v1/keys', { api_shape: 'decisions', routing: { strategy: 'priority', targets: [{ provider_key_id: bad.id }] } })
    expect(refused.status).toBe(400)
    expect(await keyCount(server)).toBe(0)
    const accepted = await createKey(server, { api_shape: 'decisions', routing: { strategy: 'priority', targets: [{ provider_key_id: good.id }] } })
    expect(accepted.routing.targets[0].gateway).toBe(decisions.id)
  })
})

describe('GET /api/v1/keys', () => {
  test('newest first, 100 per page, offset pagination, routing included', async () => {
    await using server = await startTestServer()
    const created: string[] = []
    for (let index = 0; index < 105; index++) {
      const response = await server.call('POST', '/api/v1/keys', { label: `k${index}` })
      expect(response.status).toBe(201)
      created.push(response.body.data.id)
    }
    const newestFirst = [...created].reverse()

    const first = await server.call('GET', '/api/v1/keys')
    expect(first.status).toBe(200)
    expect(first.body.data).toHaveLength(100)
    expect(first.body.data.map((key: { id: string }) => key.id)).toEqual(newestFirst.slice(0, 100))
    for (const key of first.body.data) {
      expect(Object.keys(key).sort()).toEqual(keyFields)
      expect(key.routing).toMatchObject({ targets: [], model_remaps: [], decisioner: null })
    }

    const offsetZero = await server.call('GET', '/api/v1/keys?offset=0')
    expect(offsetZero.body.data.map((key: { id: string }) => key.id)).toEqual(newestFirst.slice(0, 100))

    const second = await server.call('GET', '/api/v1/keys?offset=100')
    expect(second.status).toBe(200)
    expect(second.body.data.map((key: { id: string }) => key.id)).toEqual(newestFirst.slice(100))

    const shifted = await server.call('GET', '/api/v1/keys?offset=3')
    expect(shifted.body.data).toHaveLength(100)
    expect(shifted.body.data.map((key: { id: string }) => key.id)).toEqual(newestFirst.slice(3, 103))

    const past = await server.call('GET', '/api/v1/keys?offset=1000')
    expect(past.status).toBe(200)
    expect(past.body.data).toEqual([])
  })

  test('revoked keys stay in the list', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    await server.call('DELETE', `/api/v1/keys/${key.id}`)
    const list = await server.call('GET', '/api/v1/keys')
    expect(list.body.data).toHaveLength(1)
    expect(list.body.data[0].revoked_at).not.toBeNull()
  })
})

describe('GET /api/v1/keys/:id', () => {
  test('returns the key with its routing', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'x' })
    const response = await server.call('GET', `/api/v1/keys/${key.id}`)
    expect(response.status).toBe(200)
    const { key: _secret, ...rest } = key
    expect(response.body).toEqual({ data: rest })
  })

  test('unknown id gives 404 exactly {error:"API key not found."}', async () => {
    await using server = await startTestServer()
    for (const id of [randomUUID(), 'nope']) {
      const response = await server.call('GET', `/api/v1/keys/${id}`)
      expect(response.status).toBe(404)
      expect(response.body).toEqual({ error: 'API key not found.' })
    }
  })
})

describe('PATCH /api/v1/keys/:id', () => {
  test('updates each field', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, {
      name: 'n'.repeat(125),
      companion_ads: true,
      allowed_ips: '10.9.8.7/16\n192.0.2.1',
      steering_message: 'Answer in French.',
      failover_ttfb_ms: 3000,
      upstream_timeout_ms: 20000,
    })
    expect(response.status).toBe(200)
    expect(response.body.data).toMatchObject({
      id: key.id,
      label: 'n'.repeat(120),
      companion_ads: true,
      allowed_ips: ['10.9.0.0/16', '192.0.2.1'],
      steering_message: 'Answer in French.',
      failover_ttfb_ms: 3000,
      upstream_timeout_ms: 20000,
      effective_timeouts: { failover_ttfb_ms: 3000, upstream_timeout_ms: 20000 },
      revoked_at: null,
      key_prefix: key.key_prefix,
      created_at: key.created_at,
    })
    expect(await getKey(server, key.id)).toEqual(response.body.data)
  })

  test('omitted fields are unchanged; null timeouts reset to defaults; [] clears allowed_ips; null or "" clears steering_message', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, {
      label: 'keep',
      allowed_ips: ['10.0.0.1'],
      steering_message: 'hello',
      failover_ttfb_ms: 2000,
      upstream_timeout_ms: 10000,
    })
    const onlyAds = await server.call('PATCH', `/api/v1/keys/${key.id}`, { companion_ads: true })
    expect(onlyAds.body.data).toMatchObject({
      label: 'keep',
      allowed_ips: ['10.0.0.1'],
      steering_message: 'hello',
      failover_ttfb_ms: 2000,
      upstream_timeout_ms: 10000,
    })

    const reset = await server.call('PATCH', `/api/v1/keys/${key.id}`, { failover_ttfb_ms: null, upstream_timeout_ms: null })
    expect(reset.status).toBe(200)
    expect(reset.body.data.failover_ttfb_ms).toBeNull()
    expect(reset.body.data.upstream_timeout_ms).toBeNull()
    expect(reset.body.data.effective_timeouts).toEqual({ failover_ttfb_ms: 5000, upstream_timeout_ms: 60000 })

    const cleared = await server.call('PATCH', `/api/v1/keys/${key.id}`, { allowed_ips: [], steering_message: null })
    expect(cleared.body.data.allowed_ips).toEqual([])
    expect(cleared.body.data.steering_message).toBeNull()

    await server.call('PATCH', `/api/v1/keys/${key.id}`, { steering_message: 'again' })
    const emptyString = await server.call('PATCH', `/api/v1/keys/${key.id}`, { steering_message: '' })
    expect(emptyString.body.data.steering_message).toBeNull()
    expect((await getKey(server, key.id)).label).toBe('keep')
  })

  test('empty body (or one with none of the PATCH fields) gives 400', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'same' })
    const before = await getKey(server, key.id)
    for (const body of [{}, { unknown_field: 1 }, { api_shape: 'messages' }]) {
      const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('non-boolean revoked, companion_ads or keyterms gives 400 and changes nothing', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'same' })
    const before = await getKey(server, key.id)
    for (const body of [
      { revoked: 'true' },
      { revoked: 1 },
      { revoked: null },
      { companion_ads: 'yes' },
      { companion_ads: 0 },
      { keyterms: 'true' },
      { keyterms: null },
    ]) {
      const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('invalid allowed_ips entry (named), bad steering_message, out-of-range timeouts give 400', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    const before = await getKey(server, key.id)
    const named = await server.call('PATCH', `/api/v1/keys/${key.id}`, { allowed_ips: ['10.0.0.1', 'bad.entry.here'] })
    expect(named.status).toBe(400)
    expect(named.body.error).toContain('bad.entry.here')
    for (const body of [
      { allowed_ips: Array.from({ length: 101 }, (_, index) => `10.1.1.${index + 1}`) },
      { allowed_ips: ['x'.repeat(65)] },
      { steering_message: 'm'.repeat(2001) },
      { steering_message: 42 },
      { failover_ttfb_ms: 999 },
      { failover_ttfb_ms: 30001 },
      { upstream_timeout_ms: 4999 },
      { upstream_timeout_ms: 90001 },
    ]) {
      const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('all-or-nothing: one bad field means nothing is changed', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'original', companion_ads: false })
    const before = await getKey(server, key.id)
    for (const body of [
      { label: 'changed', companion_ads: true, failover_ttfb_ms: 5 },
      { label: 'changed', allowed_ips: ['10.0.0.1', 'nope'] },
      { label: 'changed', steering_message: 'x'.repeat(2001) },
      { companion_ads: true, keyterms: 'yes' },
      { label: 'changed', revoked: true, upstream_timeout_ms: 1 },
    ]) {
      const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, body)
      expect(response.status).toBe(400)
    }
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('unknown id gives 404 {error:"API key not found."}', async () => {
    await using server = await startTestServer()
    const response = await server.call('PATCH', `/api/v1/keys/${randomUUID()}`, { label: 'x' })
    expect(response.status).toBe(404)
    expect(response.body).toEqual({ error: 'API key not found.' })
  })
})

describe('revoke and restore (SPEC "States and transitions: Inference key")', () => {
  test('live + PATCH revoked:true → revoked, revoked_at set, row kept', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    const before = Date.now()
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })
    expect(response.status).toBe(200)
    expect(typeof response.body.data.revoked_at).toBe('string')
    expect(Date.parse(response.body.data.revoked_at)).toBeGreaterThanOrEqual(before - 1000)
    expect((await getKey(server, key.id)).revoked_at).toBe(response.body.data.revoked_at)
  })

  test('live + DELETE → 200 {data: key} with revoked_at; the row is kept', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'to revoke' })
    const response = await server.call('DELETE', `/api/v1/keys/${key.id}`)
    expect(response.status).toBe(200)
    expect(response.body.data.id).toBe(key.id)
    expect(response.body.data.label).toBe('to revoke')
    expect(typeof response.body.data.revoked_at).toBe('string')
    expect(Object.keys(response.body.data).sort()).toEqual(keyFields)
    const fetched = await getKey(server, key.id)
    expect(fetched.revoked_at).toBe(response.body.data.revoked_at)
  })

  test('revoked + PATCH revoked:true or DELETE → 200, no change, original revoked_at kept', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    const first = await server.call('DELETE', `/api/v1/keys/${key.id}`)
    const revokedAt = first.body.data.revoked_at
    expect(typeof revokedAt).toBe('string')
    // A few round trips in between, so a re-stamp would very likely carry a later time.
    for (let index = 0; index < 5; index++) await server.call('GET', '/api/v1/keys')

    const again = await server.call('DELETE', `/api/v1/keys/${key.id}`)
    expect(again.status).toBe(200)
    expect(again.body.data.revoked_at).toBe(revokedAt)
    const patch = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })
    expect(patch.status).toBe(200)
    expect(patch.body.data.revoked_at).toBe(revokedAt)
    expect((await getKey(server, key.id)).revoked_at).toBe(revokedAt)
  })

  test('revoked + PATCH revoked:false → live', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })
    const restored = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: false })
    expect(restored.status).toBe(200)
    expect(restored.body.data.revoked_at).toBeNull()
    expect((await getKey(server, key.id)).revoked_at).toBeNull()
  })

  test('live + PATCH revoked:false → 200, no change', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'live' })
    const before = await getKey(server, key.id)
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: false })
    expect(response.status).toBe(200)
    expect(response.body.data).toEqual(before)
  })

  test('revoked + any other PATCH field without restore → 409 code key_revoked, nothing changes', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'old' })
    await server.call('DELETE', `/api/v1/keys/${key.id}`)
    const before = await getKey(server, key.id)
    for (const body of [
      { label: 'new' },
      { name: 'new' },
      { companion_ads: true },
      { allowed_ips: ['10.0.0.1'] },
      { steering_message: 'hi' },
      { failover_ttfb_ms: 2000 },
      { upstream_timeout_ms: null },
      { revoked: true, label: 'new' },
    ]) {
      const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, body)
      expect(response.status).toBe(409)
      expect(response.body.code).toBe('key_revoked')
      expect(typeof response.body.error).toBe('string')
    }
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('revoked + PATCH revoked:false with other fields: restore applies first, then the fields', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'old' })
    await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: false, label: 'restored', companion_ads: true, failover_ttfb_ms: 4000 })
    expect(response.status).toBe(200)
    expect(response.body.data).toMatchObject({ revoked_at: null, label: 'restored', companion_ads: true, failover_ttfb_ms: 4000 })
    expect(await getKey(server, key.id)).toEqual(response.body.data)
  })

  test('revoked + PATCH revoked:false with an invalid field → 400 and the key stays revoked', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'old' })
    await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })
    const before = await getKey(server, key.id)
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: false, failover_ttfb_ms: 1 })
    expect(response.status).toBe(400)
    expect(await getKey(server, key.id)).toEqual(before)
  })

  test('live + PATCH revoked:true with other fields: the fields apply, then the revoke', async () => {
    await using server = await startTestServer()
    const key = await createKey(server, { label: 'old' })
    const response = await server.call('PATCH', `/api/v1/keys/${key.id}`, { label: 'last words', steering_message: 'bye', revoked: true })
    expect(response.status).toBe(200)
    expect(response.body.data.label).toBe('last words')
    expect(response.body.data.steering_message).toBe('bye')
    expect(typeof response.body.data.revoked_at).toBe('string')
    expect(await getKey(server, key.id)).toEqual(response.body.data)
  })

  test('PUT routing on a revoked key → 409 key_revoked and the rule is unchanged', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    const a = await addProvider(server, gateways[0]!)
    const b = await addProvider(server, gateways[1]!)
    const key = await createKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: a.id }] } })
    await server.call('DELETE', `/api/v1/keys/${key.id}`)
    const before = (await server.call('GET', `/api/v1/keys/${key.id}/routing`)).body.data
    const response = await server.call('PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: b.id }] })
    expect(response.status).toBe(409)
    expect(response.body.code).toBe('key_revoked')
    expect(typeof response.body.error).toBe('string')
    expect((await server.call('GET', `/api/v1/keys/${key.id}/routing`)).body.data).toEqual(before)

    // After a restore, the PUT works.
    await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: false })
    const afterRestore = await server.call('PUT', `/api/v1/keys/${key.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: b.id }] })
    expect(afterRestore.status).toBe(200)
  })

  test('GET routing of a revoked key still answers 200', async () => {
    await using server = await startTestServer()
    const key = await createKey(server)
    await server.call('DELETE', `/api/v1/keys/${key.id}`)
    const response = await server.call('GET', `/api/v1/keys/${key.id}/routing`)
    expect(response.status).toBe(200)
  })

  test('DELETE unknown id → 404 {error:"API key not found."}', async () => {
    await using server = await startTestServer()
    const response = await server.call('DELETE', `/api/v1/keys/${randomUUID()}`)
    expect(response.status).toBe(404)
    expect(response.body).toEqual({ error: 'API key not found.' })
  })
})
