/**
 * Management API: provider keys (SPEC "Provider key", "States and transitions: Provider key",
 * endpoint table rows for /providers).
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { startTestServer, type TestServer } from '../harness/server'
import { storeProvider } from '../harness/api'

const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

interface Gateway {
  id: string
  routable: boolean
  decisions: boolean
  config_fields?: { name: string; required: boolean; default?: string }[]
  capabilities: { decisioner: boolean }
}

async function catalog(server: TestServer): Promise<Gateway[]> {
  const response = await server.call('GET', '/api/v1/gateways')
  expect(response.status).toBe(200)
  return response.body.data
}

/** Routable gateways that need no config, in catalog order. */
async function plainGateways(server: TestServer): Promise<string[]> {
  return (await catalog(server)).filter((gateway) => gateway.routable && !gateway.config_fields).map((gateway) => gateway.id)
}

async function configGateway(server: TestServer): Promise<Gateway> {
  const withFields = (await catalog(server)).filter((gateway) => Array.isArray(gateway.config_fields))
  expect(withFields).toHaveLength(1)
  return withFields[0]!
}

function secretFor(tag = ''): string {
  return `sk-${tag}${randomUUID().replaceAll('-', '')}WXYZ`
}

async function addProvider(server: TestServer, body: Record<string, unknown>) {
  return storeProvider(server, body)
}

async function addKey(server: TestServer, body: Record<string, unknown> = {}) {
  const response = await server.call('POST', '/api/v1/keys', body)
  expect(response.status).toBe(201)
  return response.body.data
}

function expectProviderShape(provider: Record<string, unknown>) {
  expect(Object.keys(provider).sort()).toEqual(['config', 'created_at', 'disabled_at', 'gateway', 'id', 'key_last4', 'label'])
  expect(provider.id).toMatch(uuidRe)
  expect(typeof provider.gateway).toBe('string')
  expect(typeof provider.label).toBe('string')
  expect(typeof provider.key_last4).toBe('string')
  expect(typeof provider.config).toBe('object')
  expect(Number.isNaN(Date.parse(provider.created_at as string))).toBe(false)
}

describe('POST /api/v1/providers', () => {
  test('stores a provider key given as `key`: 201 {data: provider} with key_last4 and no secret', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const secret = secretFor('a')
    const response = await server.call('POST', '/api/v1/providers', { gateway, key: secret, label: 'Main account' })
    expect(response.status).toBe(201)
    const provider = response.body.data
    expectProviderShape(provider)
    expect(provider.gateway).toBe(gateway)
    expect(provider.label).toBe('Main account')
    expect(provider.key_last4).toBe(secret.slice(-4))
    expect(provider.disabled_at).toBeNull()
    expect(JSON.stringify(response.body)).not.toContain(secret)
  })

  test('accepts `secret` in place of `key`, and `name` in place of `label`', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const secret = secretFor('b')
    const response = await server.call('POST', '/api/v1/providers', { gateway, secret, name: 'Named' })
    expect(response.status).toBe(201)
    expect(response.body.data.key_last4).toBe(secret.slice(-4))
    expect(response.body.data.label).toBe('Named')
    expect(JSON.stringify(response.body)).not.toContain(secret)
  })

  test('missing secret gives 400 and stores nothing', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const response = await server.call('POST', '/api/v1/providers', { gateway, label: 'no secret' })
    expect(response.status).toBe(400)
    expect(typeof response.body.error).toBe('string')
    const list = await server.call('GET', '/api/v1/providers')
    expect(list.body.data).toEqual([])
  })

  test('a secret of exactly 2000 chars is stored; 2001 chars gives 400 (as key or secret)', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const ok = await server.call('POST', '/api/v1/providers', { gateway, key: 'k'.repeat(1996) + 'LAST' })
    expect(ok.status).toBe(201)
    expect(ok.body.data.key_last4).toBe('LAST')

    const tooLongKey = await server.call('POST', '/api/v1/providers', { gateway, key: 'k'.repeat(2001) })
    expect(tooLongKey.status).toBe(400)
    expect(typeof tooLongKey.body.error).toBe('string')
    const tooLongSecret = await server.call('POST', '/api/v1/providers', { gateway, secret: 's'.repeat(2001) })
    expect(tooLongSecret.status).toBe(400)
    expect(typeof tooLongSecret.body.error).toBe('string')

    const list = await server.call('GET', '/api/v1/providers')
    expect(list.body.data).toHaveLength(1)
  })

  test('label longer than 120 chars is cut to 120, not refused', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const label = 'L'.repeat(100) + 'M'.repeat(50)
    const viaLabel = await server.call('POST', '/api/v1/providers', { gateway, key: secretFor(), label })
    expect(viaLabel.status).toBe(201)
    expect(viaLabel.body.data.label).toBe(label.slice(0, 120))
    const viaName = await server.call('POST', '/api/v1/providers', { gateway, key: secretFor(), name: label })
    expect(viaName.status).toBe(201)
    expect(viaName.body.data.label).toBe(label.slice(0, 120))
  })

  test('unknown gateway gives 400 and stores nothing', async () => {
    await using server = await startTestServer()
    const response = await server.call('POST', '/api/v1/providers', { gateway: 'no-such-gateway', key: secretFor() })
    expect(response.status).toBe(400)
    expect(typeof response.body.error).toBe('string')
    expect((await server.call('GET', '/api/v1/providers')).body.data).toEqual([])
  })

  test('a provider key UUID passed as gateway gives 400 (identifiers are not mixed)', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const existing = await addProvider(server, { gateway, key: secretFor() })
    const byExistingId = await server.call('POST', '/api/v1/providers', { gateway: existing.id, key: secretFor() })
    expect(byExistingId.status).toBe(400)
    expect(typeof byExistingId.body.error).toBe('string')
    const byRandomUuid = await server.call('POST', '/api/v1/providers', { gateway: randomUUID(), key: secretFor() })
    expect(byRandomUuid.status).toBe(400)
    expect((await server.call('GET', '/api/v1/providers')).body.data).toHaveLength(1)
  })

  test('the gateway kind with config_fields requires config.account_id and defaults gateway_id to "default"', async () => {
    await using server = await startTestServer()
    const gateway = await configGateway(server)
    const fields = Object.fromEntries(gateway.config_fields!.map((field) => [field.name, field]))
    expect(fields.account_id).toMatchObject({ name: 'account_id', required: true })
    expect(fields.gateway_id).toMatchObject({ name: 'gateway_id', required: false, default: 'default' })

    const noConfig = await server.call('POST', '/api/v1/providers', { gateway: gateway.id, key: secretFor() })
    expect(noConfig.status).toBe(400)
    expect(typeof noConfig.body.error).toBe('string')
    const noAccount = await server.call('POST', '/api/v1/providers', { gateway: gateway.id, key: secretFor(), config: { gateway_id: 'gw' } })
    expect(noAccount.status).toBe(400)
    expect((await server.call('GET', '/api/v1/providers')).body.data).toEqual([])

    const defaulted = await server.call('POST', '/api/v1/providers', { gateway: gateway.id, key: secretFor(), config: { account_id: 'acct-123' } })
    expect(defaulted.status).toBe(201)
    expect(defaulted.body.data.config).toMatchObject({ account_id: 'acct-123', gateway_id: 'default' })

    const explicit = await server.call('POST', '/api/v1/providers', {
      gateway: gateway.id,
      key: secretFor(),
      config: { account_id: 'acct-456', gateway_id: 'my-gw' },
    })
    expect(explicit.status).toBe(201)
    expect(explicit.body.data.config).toMatchObject({ account_id: 'acct-456', gateway_id: 'my-gw' })

    const fetched = await server.call('GET', `/api/v1/providers/${defaulted.body.data.id}`)
    expect(fetched.body.data.config).toMatchObject({ account_id: 'acct-123', gateway_id: 'default' })
  })
})

describe('secret is never returned', () => {
  test('no response of any provider endpoint (or the account snapshot) carries the secret', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const secret = secretFor('never-shown-')
    const texts: string[] = []
    const record = (response: { body: unknown }) => {
      texts.push(JSON.stringify(response.body))
      return response
    }
    const created = record(await server.call('POST', '/api/v1/providers', { gateway, key: secret, label: 'x' }))
    const id = (created.body as any).data.id
    expect((created.body as any).data.key_last4).toBe(secret.slice(-4))
    record(await server.call('GET', '/api/v1/providers'))
    record(await server.call('GET', `/api/v1/providers?gateway=${gateway}`))
    record(await server.call('GET', `/api/v1/providers/${id}`))
    record(await server.call('PATCH', `/api/v1/providers/${id}`, { label: 'renamed' }))
    record(await server.call('PATCH', `/api/v1/providers/${id}`, { disabled: true }))
    record(await server.call('GET', '/api/v1/account'))
    const key = record(await server.call('POST', '/api/v1/keys', {}))
    const keyId = (key.body as any).data.id
    await server.call('PATCH', `/api/v1/providers/${id}`, { disabled: false })
    record(await server.call('PUT', `/api/v1/keys/${keyId}/routing`, { strategy: 'priority', targets: [{ provider_key_id: id }] }))
    record(await server.call('GET', `/api/v1/keys/${keyId}`))
    record(await server.call('GET', '/api/v1/keys'))
    record(await server.call('DELETE', `/api/v1/providers/${id}`))
    for (const text of texts) {
      expect(text).not.toContain(secret)
      // Nor any long fragment of it.
      expect(text).not.toContain(secret.slice(0, 20))
    }
  })
})

describe('GET /api/v1/providers and /providers/:id', () => {
  test('lists the workspace provider keys; GET by id returns the same metadata', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    const first = await addProvider(server, { gateway: gateways[0], key: secretFor(), label: 'one' })
    const second = await addProvider(server, { gateway: gateways[1], key: secretFor(), label: 'two' })
    const list = await server.call('GET', '/api/v1/providers')
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(2)
    for (const provider of list.body.data) expectProviderShape(provider)
    expect(list.body.data.map((provider: { id: string }) => provider.id).sort()).toEqual([first.id, second.id].sort())

    const one = await server.call('GET', `/api/v1/providers/${first.id}`)
    expect(one.status).toBe(200)
    expect(one.body).toEqual({ data: first })
  })

  test('gateway query filters the list', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    const a1 = await addProvider(server, { gateway: gateways[0], key: secretFor() })
    const a2 = await addProvider(server, { gateway: gateways[0], key: secretFor() })
    const b1 = await addProvider(server, { gateway: gateways[1], key: secretFor() })

    const onlyA = await server.call('GET', `/api/v1/providers?gateway=${encodeURIComponent(gateways[0]!)}`)
    expect(onlyA.status).toBe(200)
    expect(onlyA.body.data.map((provider: { id: string }) => provider.id).sort()).toEqual([a1.id, a2.id].sort())
    for (const provider of onlyA.body.data) expect(provider.gateway).toBe(gateways[0])

    const onlyB = await server.call('GET', `/api/v1/providers?gateway=${encodeURIComponent(gateways[1]!)}`)
    expect(onlyB.body.data.map((provider: { id: string }) => provider.id)).toEqual([b1.id])

    const none = await server.call('GET', `/api/v1/providers?gateway=${encodeURIComponent(gateways[2]!)}`)
    expect(none.status).toBe(200)
    expect(none.body.data).toEqual([])
  })

  test('unknown id gives 404 with exactly {error:"Provider key not found."}', async () => {
    await using server = await startTestServer()
    const byUuid = await server.call('GET', `/api/v1/providers/${randomUUID()}`)
    expect(byUuid.status).toBe(404)
    expect(byUuid.body).toEqual({ error: 'Provider key not found.' })
    const bySlug = await server.call('GET', '/api/v1/providers/not-a-uuid')
    expect(bySlug.status).toBe(404)
    expect(bySlug.body).toEqual({ error: 'Provider key not found.' })
  })
})

describe('PATCH /api/v1/providers/:id', () => {
  test('renames via label or name (cut to 120)', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor(), label: 'before' })
    const renamed = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { label: 'after' })
    expect(renamed.status).toBe(200)
    expectProviderShape(renamed.body.data)
    expect(renamed.body.data).toMatchObject({ id: provider.id, label: 'after', key_last4: provider.key_last4, disabled_at: null })

    const long = 'N'.repeat(130)
    const byName = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { name: long })
    expect(byName.status).toBe(200)
    expect(byName.body.data.label).toBe(long.slice(0, 120))
    expect((await server.call('GET', `/api/v1/providers/${provider.id}`)).body.data.label).toBe(long.slice(0, 120))
  })

  test('disabled: true sets disabled_at; disabled: false clears it', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor() })
    const before = Date.now()
    const disabled = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { disabled: true })
    expect(disabled.status).toBe(200)
    expect(typeof disabled.body.data.disabled_at).toBe('string')
    const at = Date.parse(disabled.body.data.disabled_at)
    expect(Number.isNaN(at)).toBe(false)
    expect(at).toBeGreaterThanOrEqual(before - 1000)
    expect((await server.call('GET', `/api/v1/providers/${provider.id}`)).body.data.disabled_at).toBe(disabled.body.data.disabled_at)

    const enabled = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { disabled: false })
    expect(enabled.status).toBe(200)
    expect(enabled.body.data.disabled_at).toBeNull()
    expect((await server.call('GET', `/api/v1/providers/${provider.id}`)).body.data.disabled_at).toBeNull()
  })

  test('disabling keeps routing references', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor() })
    const key = await addKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })
    expect((await server.call('PATCH', `/api/v1/providers/${provider.id}`, { disabled: true })).status).toBe(200)
    const routing = await server.call('GET', `/api/v1/keys/${key.id}/routing`)
    expect(routing.body.data.targets.map((target: { provider_key_id: string }) => target.provider_key_id)).toEqual([provider.id])
  })

  test('empty body gives 400 and changes nothing', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor(), label: 'same' })
    const empty = await server.call('PATCH', `/api/v1/providers/${provider.id}`, {})
    expect(empty.status).toBe(400)
    expect(typeof empty.body.error).toBe('string')
    expect((await server.call('GET', `/api/v1/providers/${provider.id}`)).body.data).toEqual(provider)
  })

  test('non-boolean disabled gives 400 and changes nothing', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor(), label: 'same' })
    for (const disabled of ['true', 1, 0, null, 'yes']) {
      const response = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { disabled })
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe('string')
    }
    const mixed = await server.call('PATCH', `/api/v1/providers/${provider.id}`, { label: 'changed', disabled: 'true' })
    expect(mixed.status).toBe(400)
    expect((await server.call('GET', `/api/v1/providers/${provider.id}`)).body.data).toEqual(provider)
  })

  test('unknown id gives 404 {error:"Provider key not found."}', async () => {
    await using server = await startTestServer()
    const response = await server.call('PATCH', `/api/v1/providers/${randomUUID()}`, { label: 'x' })
    expect(response.status).toBe(404)
    expect(response.body).toEqual({ error: 'Provider key not found.' })
  })
})

describe('DELETE /api/v1/providers/:id', () => {
  test('returns {data:{id, deleted:true}}; the provider is gone afterwards', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const provider = await addProvider(server, { gateway, key: secretFor() })
    const deleted = await server.call('DELETE', `/api/v1/providers/${provider.id}`)
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ data: { id: provider.id, deleted: true } })

    const get = await server.call('GET', `/api/v1/providers/${provider.id}`)
    expect(get.status).toBe(404)
    expect(get.body).toEqual({ error: 'Provider key not found.' })
    expect((await server.call('GET', '/api/v1/providers')).body.data).toEqual([])
  })

  test('unknown id gives 404 {error:"Provider key not found."}, also on a second delete', async () => {
    await using server = await startTestServer()
    const [gateway] = await plainGateways(server)
    const unknown = await server.call('DELETE', `/api/v1/providers/${randomUUID()}`)
    expect(unknown.status).toBe(404)
    expect(unknown.body).toEqual({ error: 'Provider key not found.' })
    const provider = await addProvider(server, { gateway, key: secretFor() })
    expect((await server.call('DELETE', `/api/v1/providers/${provider.id}`)).status).toBe(200)
    const again = await server.call('DELETE', `/api/v1/providers/${provider.id}`)
    expect(again.status).toBe(404)
    expect(again.body).toEqual({ error: 'Provider key not found.' })
  })

  test('strips the id from every routing rule of the workspace; a rule left empty has targets []', async () => {
    await using server = await startTestServer()
    const gateways = await plainGateways(server)
    const doomed = await addProvider(server, { gateway: gateways[0], key: secretFor(), label: 'doomed' })
    const keeper = await addProvider(server, { gateway: gateways[1], key: secretFor(), label: 'keeper' })

    const onlyDoomed = await addKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: doomed.id }] } })
    const both = await addKey(server, {
      routing: {
        strategy: 'split',
        targets: [
          { provider_key_id: doomed.id, weight: 5 },
          { provider_key_id: keeper.id, weight: 3, ttfb_ms: 2000 },
        ],
      },
    })
    const withRemap = await addKey(server, {
      routing: {
        strategy: 'priority',
        targets: [{ provider_key_id: keeper.id }],
        model_remaps: [
          { match: 'gpt-x', provider_key_id: doomed.id, upstream_model: 'vendor/gpt-x' },
          { match: 'other', provider_key_id: keeper.id, upstream_model: 'vendor/other' },
        ],
      },
    })
    const untouched = await addKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: keeper.id }] } })
    const untouchedBefore = (await server.call('GET', `/api/v1/keys/${untouched.id}/routing`)).body.data

    expect((await server.call('DELETE', `/api/v1/providers/${doomed.id}`)).status).toBe(200)

    const emptied = await server.call('GET', `/api/v1/keys/${onlyDoomed.id}/routing`)
    expect(emptied.status).toBe(200)
    expect(emptied.body.data.targets).toEqual([])
    expect(emptied.body.data.model_remaps).toEqual([])
    expect(emptied.body.data.decisioner).toBeNull()

    const remaining = await server.call('GET', `/api/v1/keys/${both.id}/routing`)
    expect(remaining.body.data.strategy).toBe('split')
    expect(remaining.body.data.targets).toEqual([{ provider_key_id: keeper.id, gateway: gateways[1], weight: 3, ttfb_ms: 2000 }])

    const remapped = await server.call('GET', `/api/v1/keys/${withRemap.id}/routing`)
    expect(JSON.stringify(remapped.body.data)).not.toContain(doomed.id)
    expect(remapped.body.data.model_remaps).toHaveLength(1)
    expect(remapped.body.data.model_remaps[0]).toMatchObject({ match: 'other', provider_key_id: keeper.id })

    // The key views (GET /keys/:id and the list) agree with GET routing.
    const keyView = await server.call('GET', `/api/v1/keys/${onlyDoomed.id}`)
    expect(keyView.body.data.routing.targets).toEqual([])
    const list = await server.call('GET', '/api/v1/keys')
    expect(JSON.stringify(list.body.data)).not.toContain(doomed.id)

    expect((await server.call('GET', `/api/v1/keys/${untouched.id}/routing`)).body.data).toEqual(untouchedBefore)
  })

  test('deleting a provider that hosts a decisioner strips it from the rule', async () => {
    await using server = await startTestServer()
    const all = await catalog(server)
    const host = all.find((gateway) => gateway.capabilities.decisioner && gateway.routable && !gateway.config_fields)!
    const other = all.find((gateway) => gateway.routable && !gateway.config_fields && gateway.id !== host.id)!
    const decider = await addProvider(server, { gateway: host.id, key: secretFor() })
    const target = await addProvider(server, { gateway: other.id, key: secretFor() })
    const key = await addKey(server, {
      routing: { strategy: 'priority', targets: [{ provider_key_id: target.id }], decisioner: { provider_key_id: decider.id } },
    })
    expect(key.routing.decisioner).not.toBeNull()
    expect((await server.call('DELETE', `/api/v1/providers/${decider.id}`)).status).toBe(200)
    const routing = await server.call('GET', `/api/v1/keys/${key.id}/routing`)
    expect(JSON.stringify(routing.body.data)).not.toContain(decider.id)
    expect(routing.body.data.targets.map((entry: { provider_key_id: string }) => entry.provider_key_id)).toEqual([target.id])
  })
})
