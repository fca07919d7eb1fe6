/**
 * Spend caps and rate limits on keys (CONTRACT §11): set through REST, MCP and the CLI (validated,
 * fields not named kept), shown with `limit_state`; requests refused before any upstream call with
 * 429 key_rate_limited / key_budget_exhausted and Retry-After in the key's envelope; USD caps that
 * hold under 200 concurrent requests; unpriced models refused (or passed over) on a USD-capped key;
 * the IETF RateLimit headers on every answer of a limited key and on no other, never in place of
 * a gateway's X-RateLimit-*; counters that survive a restart.
 */
import { describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { chatChunks, chatCompletion } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { addedBytes, measurePrompt, outputBound, worstCaseNano } from '../../src/pipeline/limits/worst-case'

const messages = [{ role: 'user', content: 'Hello there' }]
const chat = (server: TestServer, secret: string, body: Record<string, unknown> = {}): Promise<CallResult> =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages, ...body }, bearerHeader(secret))

/** A priced catalog for the openai kind: gpt-4o-mini at $1 per million prompt tokens and $4 per million completion tokens. */
async function priceCatalog(server: TestServer, models: Record<string, { prompt: number; completion: number } | null> = { 'gpt-4o-mini': { prompt: 0.000001, completion: 0.000004 } }) {
  server.runtime.repositories.gatewayCatalogs.replaceCatalog(
    'openai',
    Date.now(),
    Object.entries(models).map(([id, price]) => ({ modelId: id, canonicalId: `openai/${id}`, object: JSON.stringify(price ? { id, pricing: { prompt: String(price.prompt), completion: String(price.completion) } } : { id }) })),
  )
  await server.runtime.snapshots.fresh()
}

async function limitedKey(env: GatewaysEnv, limits: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const key = await createInferenceKey(env.server, { routing: { targets: [{ provider_key_id: env.providers.openai }] }, ...extra })
  const patched = await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { limits })
  expect(patched.status).toBe(200)
  return { id: key.id as string, secret: key.key as string, view: patched.body.data }
}

describe('limits on the key object', () => {
  test('PATCH sets them, fields not named stay, null clears one, limits: null clears all; bad values are refused naming the field and change nothing', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    const key = await limitedKey(env, { requests_per_minute: 60, usd_per_day: 5 })
    expect(key.view.limits).toEqual({ requests_per_minute: 60, tokens_per_minute: null, usd_per_day: 5, usd_per_month: null })
    expect(key.view.limit_state).toEqual({ requests_last_minute: 0, tokens_last_minute: 0, usd_today: 0, usd_this_month: 0 })

    const more = await server.call('PATCH', `/api/v1/keys/${key.id}`, { limits: { tokens_per_minute: 10000, usd_per_day: null } })
    expect(more.body.data.limits).toEqual({ requests_per_minute: 60, tokens_per_minute: 10000, usd_per_day: null, usd_per_month: null })

    for (const [limits, message] of [
      [{ requests_per_minute: 0 }, 'Invalid limits.requests_per_minute: expected a whole number of at least 1, or null for no limit.'],
      [{ usd_per_day: -1 }, 'Invalid limits.usd_per_day: expected a positive number, or null for no limit.'],
      [{ tokens_per_minute: 1.5 }, 'Invalid limits.tokens_per_minute: expected a whole number of at least 1, or null for no limit.'],
      [{ usd_per_week: 3 }, 'Invalid limits.usd_per_week: unknown field; expected requests_per_minute, tokens_per_minute, usd_per_day or usd_per_month.'],
      [[1, 2], 'Invalid limits: must be an object or null.'],
    ] as const) {
      const refused = await server.call('PATCH', `/api/v1/keys/${key.id}`, { limits, label: 'not kept' })
      expect([JSON.stringify(limits), refused.status]).toEqual([JSON.stringify(limits), 400])
      expect(refused.body.error).toBe(message)
    }
    const unchanged = await server.call('GET', `/api/v1/keys/${key.id}`)
    expect(unchanged.body.data.limits).toEqual({ requests_per_minute: 60, tokens_per_minute: 10000, usd_per_day: null, usd_per_month: null })
    expect(unchanged.body.data.label).toBeNull()

    const cleared = await server.call('PATCH', `/api/v1/keys/${key.id}`, { limits: null })
    expect(cleared.body.data.limits).toEqual({ requests_per_minute: null, tokens_per_minute: null, usd_per_day: null, usd_per_month: null })
    // A key whose limits are gone answers with no RateLimit headers.
    const answer = await chat(server, key.secret)
    expect(answer.status).toBe(200)
    expect(answer.headers.get('ratelimit-policy')).toBeNull()
  })

  test('MCP set_key_limits and the audit log', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const client = new Client({ name: 'limits-test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${server.managementKey}` } } }))
    try {
      const tool = (await client.listTools()).tools.find((candidate) => candidate.name === 'set_key_limits')
      expect(tool?.annotations?.readOnlyHint).toBe(false)
      const result = (await client.callTool({ name: 'set_key_limits', arguments: { key_id: key.id, limits: { usd_per_month: 20, requests_per_minute: 5 } } })) as { isError?: boolean; content: { text: string }[] }
      expect(result.isError).toBeFalsy()
      expect(JSON.parse(result.content[0]!.text).limits).toEqual({ requests_per_minute: 5, tokens_per_minute: null, usd_per_day: null, usd_per_month: 20 })
      const bad = (await client.callTool({ name: 'set_key_limits', arguments: { key_id: key.id, limits: { usd_per_month: 0 } } })) as { isError?: boolean; content: { text: string }[] }
      expect(bad.isError).toBe(true)
      expect(bad.content[0]!.text).toContain('Invalid limits.usd_per_month')
    } finally {
      await client.close()
    }
    const audit = await server.call('GET', `/api/v1/audit?action=keys.set_limits&target_id=${key.id}`)
    expect(audit.body.data).toHaveLength(1)
    expect(audit.body.data[0]).toMatchObject({ via: 'mcp', changes: { limits: { usd_per_month: 20, requests_per_minute: 5 } } })
  })
})

describe('rate limits', () => {
  test('requests per minute: the request over the limit is refused before any upstream call, 429 key_rate_limited with Retry-After, in each shape', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    const key = await limitedKey(env, { requests_per_minute: 3 })
    for (let index = 0; index < 3; index++) {
      const answer = await chat(server, key.secret)
      expect(answer.status).toBe(200)
      expect(answer.headers.get('ratelimit-policy')).toBe('"rpm";q=3;w=60')
      expect(answer.headers.get('ratelimit')).toMatch(new RegExp(`^"rpm";r=${2 - index};t=\\d+$`))
    }
    const calls = env.mocks.openai!.requests.length
    const refused = await chat(server, key.secret)
    expect(refused.status).toBe(429)
    expect(refused.json.error).toMatchObject({ code: 'key_rate_limited', type: 'rate_limit_error' })
    expect(refused.json.error.message).toBe("This key's limit of 3 requests per minute is reached.")
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(refused.headers.get('ratelimit')).toMatch(/^"rpm";r=0;t=\d+$/)
    expect(env.mocks.openai!.requests.length).toBe(calls)
    // The refusal is logged like any refused request, at no cost.
    server.runtime.logQueue.flush()
    const row = server.runtime.storage.sqlite.query('select status, error_code, cost_nano_usd, attempts from request_logs where id = ?').get(refused.headers.get('x-router-request-id')!)
    expect(row).toEqual({ status: 429, error_code: 'key_rate_limited', cost_nano_usd: 0, attempts: 0 })

    // A messages-shape key gets the Anthropic envelope; the limit state counts the four requests.
    const messagesKey = await limitedKey(env, { requests_per_minute: 1 }, { api_shape: 'messages' })
    const first = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages }, bearerHeader(messagesKey.secret))
    expect(first.status).toBe(200)
    const second = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages }, bearerHeader(messagesKey.secret))
    expect(second.status).toBe(429)
    expect(second.json).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } })
    expect(second.headers.get('retry-after')).toMatch(/^\d+$/)
    const state = await server.call('GET', `/api/v1/keys/${key.id}`)
    // The refused request counts for nothing: a client that keeps knocking is let in as the window moves.
    expect(state.body.data.limit_state).toMatchObject({ requests_last_minute: 3, tokens_last_minute: 3 * 18 })
  })

  test('tokens per minute: counted when a request ends, refused once the window holds the limit', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    // The mock reports 11 prompt + 7 completion tokens per answer.
    const key = await limitedKey(env, { tokens_per_minute: 40 })
    expect((await chat(server, key.secret)).status).toBe(200)
    expect((await chat(server, key.secret)).status).toBe(200)
    const third = await chat(server, key.secret)
    expect(third.status).toBe(200)
    expect(third.headers.get('ratelimit')).toMatch(/^"tpm";r=4;t=\d+$/)
    const refused = await chat(server, key.secret)
    expect(refused.status).toBe(429)
    expect(refused.json.error.code).toBe('key_rate_limited')
    expect(refused.json.error.message).toBe("This key's limit of 40 tokens per minute is reached.")
  })

  test("a gateway's own X-RateLimit-* headers pass through beside the key's RateLimit fields", async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    env.mocks.openai!.handle(() => new Response(JSON.stringify(chatCompletion('gpt-4o-mini')), { headers: { 'content-type': 'application/json', 'x-ratelimit-remaining-requests': '4999' } }))
    const key = await limitedKey(env, { requests_per_minute: 100 })
    const answer = await chat(server, key.secret)
    expect(answer.headers.get('x-ratelimit-remaining-requests')).toBe('4999')
    expect(answer.headers.get('ratelimit-policy')).toBe('"rpm";q=100;w=60')
  })
})

describe('spend caps', () => {
  test('200 concurrent requests against a cap that holds exactly 20 worst cases: 20 let through, the rest 429 key_budget_exhausted; the settled total stays under the cap', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await priceCatalog(server)
    // Worst case of one request: its prompt bound (the bytes of what it sends) at $1/M plus 1,000
    // max_tokens at $4/M, rounded up to a nano-dollar. The cap is exactly 20 of them: a cap admits
    // settled spend + open reservations + the request's worst case up to the cap, not one more.
    const body = { max_tokens: 1000 }
    const sent = { model: 'openai/gpt-4o-mini', messages, ...body }
    const worst = worstCaseNano({ prompt: 0.000001, completion: 0.000004 }, measurePrompt(sent), outputBound(sent, 'chat'), 'chat', addedBytes(sent.model, 'openai/gpt-4o-mini'))!
    expect(worst).toBeGreaterThan(1000 * 4000)
    const key = await limitedKey(env, { usd_per_day: (20 * worst) / 1e9 })
    // Answers held until all 200 are in, so every admission sees the others' reservations.
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    env.mocks.openai!.handle(async () => {
      await held
      return { json: chatCompletion('gpt-4o-mini') }
    })
    const pending = Array.from({ length: 200 }, () => chat(server, key.secret, body))
    await Bun.sleep(300)
    release()
    const answers = await Promise.all(pending)
    const ok = answers.filter((answer) => answer.status === 200)
    const refused = answers.filter((answer) => answer.status === 429)
    expect(ok.length).toBe(20)
    expect(refused.length).toBe(180)
    for (const answer of refused) {
      expect(answer.json.error.code).toBe('key_budget_exhausted')
      // Until the next UTC midnight.
      const retryAfter = Number(answer.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThan(0)
      expect(retryAfter).toBeLessThanOrEqual(86_400)
    }
    expect(env.mocks.openai!.requests.length).toBe(20)
    server.runtime.logQueue.flush()
    const settled = server.runtime.storage.sqlite.query<{ total: number }, [string]>('select sum(cost_nano_usd) as total from request_logs where key_id = ?').get(key.id)!.total
    // Each answer: 11 prompt + 7 completion tokens, far below its reservation; counted exactly.
    expect(settled).toBe(20 * (11 * 1000 + 7 * 4000))
    // Settled, the reservations are gone: the state shows what was spent, and the key admits again.
    const state = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.limit_state
    expect(state.usd_today).toBe(settled / 1e9)
    expect((await chat(server, key.secret, body)).status).toBe(200)
  })

  test('once actual spend reaches the daily cap the key is refused until midnight, and a restart keeps counting it', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await priceCatalog(server)
    env.mocks.openai!.handle(() => ({ json: chatCompletion('gpt-4o-mini', 'ok', { usage: { prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 } }) }))
    // $0.005 a request; the cap is $0.012: the third request is admitted (0.010 < 0.012) and overshoots by one request's cost at most.
    const key = await limitedKey(env, { usd_per_day: 0.012 })
    for (let index = 0; index < 3; index++) expect((await chat(server, key.secret, { max_tokens: 10 })).status).toBe(200)
    const refused = await chat(server, key.secret, { max_tokens: 10 })
    expect(refused.status).toBe(429)
    expect(refused.json.error.code).toBe('key_budget_exhausted')
    expect(refused.headers.get('ratelimit')).toMatch(/^"usd-day";r=0;t=\d+$/)
    server.runtime.logQueue.flush()
    const state = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.limit_state
    expect(state.usd_today).toBeCloseTo(0.015, 9)
    expect(state.usd_this_month).toBeCloseTo(0.015, 9)
    // Another process on the same database: the spend is read back from the request log.
    const limiter = server.runtime.limiter
    const fresh = new (limiter.constructor as new (...args: unknown[]) => typeof limiter)(server.runtime.usage.keyWindows, { syncMs: 1000 })
    const entry = [...server.runtime.snapshots.current().keysByPrefix.values()].flat().find((candidate) => candidate.id === key.id)!
    const admission = await fresh.admit(key.id, entry.workspaceId, entry.limits!, 1_000_000, crypto.randomUUID(), Date.now())
    expect(admission.refusal?.code).toBe('key_budget_exhausted')
    fresh.stop()
  })

  test('a stream settles to its reported usage (asked for upstream, kept from a client that did not ask); a stream the client leaves is charged its reservation; a failed-over request costs what served it', async () => {
    await using env = await startGateways(['openai', 'groq'])
    const { server } = env
    await priceCatalog(server)
    server.runtime.repositories.gatewayCatalogs.replaceCatalog('groq', Date.now(), [{ modelId: 'openai/gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: JSON.stringify({ id: 'openai/gpt-4o-mini', pricing: { prompt: '0.000002', completion: '0.000008' } }) }])
    await server.runtime.snapshots.fresh()
    const key = await limitedKey(env, { usd_per_day: 1 })
    const usdToday = async () => (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.limit_state.usd_today as number

    // Streamed with usage: 11 prompt + 3 completion tokens. The router asked for the usage chunk;
    // the client, which did not, does not get it.
    const streamed = await chat(server, key.secret, { stream: true, max_tokens: 100 })
    expect(streamed.status).toBe(200)
    expect(streamed.headers.get('ratelimit-policy')).toBe('"usd-day";q=1;w=86400')
    expect(streamed.text).toContain('[DONE]')
    expect(streamed.text).not.toContain('"usage"')
    expect(env.mocks.openai!.requests.at(-1)!.body!.stream_options).toEqual({ include_usage: true })
    await Bun.sleep(20)
    expect(await usdToday()).toBe((11 * 1000 + 3 * 4000) / 1e9)

    // A client that asked for usage gets the chunk as the gateway sent it.
    const asked = await chat(server, key.secret, { stream: true, max_tokens: 100, stream_options: { include_usage: true } })
    expect(asked.text).toContain('"usage"')
    await Bun.sleep(20)
    const beforeLeaving = await usdToday()

    // A stream the client leaves before usage arrives: it had an answer, and nothing was reported, so
    // it is charged its reservation (CONTRACT §11), not 0.
    env.mocks.openai!.handle((request) => ({ sse: chatChunks(String(request.body?.model), ['a', 'b', 'c', 'd', 'e', 'f']), chunkDelayMs: 100 }))
    const controller = new AbortController()
    const response = await fetch(`${server.rootUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearerHeader(key.secret), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages, stream: true, max_tokens: 100000 }),
      signal: controller.signal,
    })
    const reader = response.body!.getReader()
    await reader.read()
    // In flight, its worst case (100,000 completion tokens at $4/M = $0.40, and its prompt) is reserved.
    const inFlight = await usdToday()
    expect(inFlight).toBeGreaterThan(beforeLeaving + 0.4)
    controller.abort()
    await reader.read().catch(() => undefined)
    const leftId = response.headers.get('x-router-request-id')!
    let row: { status: number; cost_nano_usd: number } | null = null
    for (let attempt = 0; attempt < 100 && !row; attempt++) {
      server.runtime.logQueue.flush()
      row = server.runtime.storage.sqlite.query<{ status: number; cost_nano_usd: number }, [string]>('select status, cost_nano_usd from request_logs where id = ?').get(leftId)
      if (!row) await Bun.sleep(20)
    }
    expect(row!.status).toBe(499)
    expect(row!.cost_nano_usd).toBe(Math.round((inFlight - beforeLeaving) * 1e9))
    expect(await usdToday()).toBe(inFlight)

    // groq first (failing 503), openai serves: the cost is openai's.
    const both = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.groq }, { provider_key_id: env.providers.openai }] } })
    await server.call('PATCH', `/api/v1/keys/${both.id}`, { limits: { usd_per_month: 1 } })
    env.mocks.groq!.handle(() => ({ status: 503, json: { error: { message: 'overloaded' } } }))
    env.mocks.openai!.handle((request) => ({ json: chatCompletion(String(request.body?.model)) }))
    const failedOver = await chat(server, both.key, { max_tokens: 10 })
    expect(failedOver.status).toBe(200)
    expect(failedOver.headers.get('x-router-provider')).toBe('openai')
    const state = (await server.call('GET', `/api/v1/keys/${both.id}`)).body.data.limit_state
    expect(state.usd_this_month).toBe((11 * 1000 + 7 * 4000) / 1e9)
  })

  test('an unpriced model on a USD-capped key: 400 key_budget_unpriced_model before any upstream call; a priced target beside an unpriced one is the only one tried', async () => {
    await using env = await startGateways(['openai', 'groq'])
    const { server } = env
    await priceCatalog(server, { 'gpt-4o-mini': { prompt: 0.000001, completion: 0.000004 }, 'gpt-4.1': null })
    const key = await limitedKey(env, { usd_per_month: 10 })
    const refused = await chat(server, key.secret, { model: 'openai/gpt-4.1' })
    expect(refused.status).toBe(400)
    expect(refused.json.error.code).toBe('key_budget_unpriced_model')
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/)
    expect(env.mocks.openai!.requests.length).toBe(0)
    // Without a USD cap the same model is served (unpriced, its cost unknown).
    const rpmOnly = await limitedKey(env, { requests_per_minute: 10 })
    expect((await chat(server, rpmOnly.secret, { model: 'openai/gpt-4.1' })).status).toBe(200)

    // groq lists no price for the model: with a USD cap it is passed over, openai serves.
    const both = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.groq }, { provider_key_id: env.providers.openai }] } })
    await server.call('PATCH', `/api/v1/keys/${both.id}`, { limits: { usd_per_day: 1 } })
    const served = await chat(server, both.key, { model: 'openai/gpt-4o-mini' })
    expect(served.status).toBe(200)
    expect(served.headers.get('x-router-provider')).toBe('openai')
    expect(env.mocks.groq!.requests.length).toBe(0)
    server.runtime.logQueue.flush()
    const row = server.runtime.storage.sqlite.query<{ attempt_path: string }, [string]>('select attempt_path from request_logs where id = ?').get(served.headers.get('x-router-request-id')!)
    expect(row!.attempt_path).toBe('groq:unpriced>openai:ok')
  })
})

describe('keys without limits', () => {
  test('no RateLimit headers, no ledger', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const answer = await chat(server, key.key)
    expect(answer.status).toBe(200)
    expect(answer.headers.get('ratelimit-policy')).toBeNull()
    expect(answer.headers.get('ratelimit')).toBeNull()
    expect(server.runtime.limiter.active).toBe(false)
  })
})
