/**
 * Routing through real mock gateways (SPEC "Routing behavior", "Failover reasons", "Errors",
 * "Model ids", "Common response headers"): priority and split, remaps, every failover trigger
 * with its `gateway:reason`, the final errors, skipped targets and model spelling.
 */
import { describe, expect, test } from 'bun:test'
import { chatChunks, chatCompletion, type MockGateway } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { droppingUpstream } from '../harness/dropping-upstream'

/** Three gateway kinds, each pointed at its own mock. */
const A = 'openai'
const B = 'groq'
const C = 'together'

type Env = GatewaysEnv

const startEnv = (extraEnv: Record<string, string> = {}): Promise<Env> => startGateways([A, B, C], extraEnv)

async function addProvider(server: TestServer, gateway: string, config?: Record<string, unknown>): Promise<string> {
  return (await storeProvider(server, { gateway, key: `sk-${gateway}-secret`, ...(config ? { config } : {}) })).id
}

async function createKey(server: TestServer, routing: unknown, extra: Record<string, unknown> = {}) {
  const key = await createInferenceKey(server, { ...extra, ...(routing === undefined ? {} : { routing }) })
  return { id: key.id as string, secret: key.key as string }
}

const priority = (env: Env, ...gateways: string[]) => ({ strategy: 'priority', targets: gateways.map((gateway) => ({ provider_key_id: env.providers[gateway] })) })

type Result = CallResult

/** A chat completion for openai/gpt-4o-mini with one user message; `body` adds or overrides fields. */
const chat = (server: TestServer, secret: string, body: Record<string, unknown> = {}): Promise<Result> =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...body }, bearerHeader(secret))

const failover = (result: Result) =>
  result.headers
    .get('x-router-failover')
    ?.split(',')
    .map((entry) => entry.trim())
const attemptsOf = (result: Result) => result.headers.get('x-router-attempts')
const chatCalls = (mock: MockGateway) => mock.calls('/chat/completions')

function expectError(result: Result, status: number, code: string) {
  expect(result.status).toBe(status)
  expect(result.json?.error?.code).toBe(code)
  expect(typeof result.json.error.message).toBe('string')
  expect(result.headers.get('x-router-request-id')).toBeTruthy()
}

function seedCatalog(server: TestServer, gateway: string, ids: string[], fetchedAtMs = Date.now()) {
  server.runtime.repositories.gatewayCatalogs.replaceCatalog(
    gateway,
    fetchedAtMs,
    ids.map((id) => ({ modelId: id, canonicalId: id.includes('/') ? id : `openai/${id}`, object: JSON.stringify({ id, object: 'model' }) })),
  )
}

/** A port with nothing listening on it. */
describe('strategy', () => {
  test('priority tries targets in listed order and stops at the first success', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, B, C, A))
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(attemptsOf(result)).toBe('1')
    expect(result.headers.get('x-router-failover')).toBeNull()
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
    expect(chatCalls(env.mocks[C]!)).toHaveLength(0)
  })

  test('failover walks the listed order; X-Router-Failover lists each losing attempt', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ status: 500, json: { error: { message: 'boom' } } }))
    env.mocks[B]!.handle(() => ({ status: 429, json: { error: { message: 'slow down' } } }))
    const key = await createKey(env.server, priority(env, A, B, C))
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(C)
    expect(attemptsOf(result)).toBe('3')
    expect(failover(result)).toEqual([`${A}:server-error`, `${B}:rate-limited`])
  })

  test('split: first picks follow the weights and a weight-0 target is never first', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      strategy: 'split',
      targets: [
        { provider_key_id: env.providers[A], weight: 0 },
        { provider_key_id: env.providers[B], weight: 1 },
        { provider_key_id: env.providers[C], weight: 3 },
      ],
    })
    const total = 240
    for (let index = 0; index < total; index++) expect((await chat(env.server, key.secret)).status).toBe(200)
    const b = chatCalls(env.mocks[B]!).length
    const c = chatCalls(env.mocks[C]!).length
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
    expect(b + c).toBe(total)
    expect(c / total).toBeGreaterThan(0.6)
    expect(c / total).toBeLessThan(0.9)
    expect(b).toBeGreaterThan(0)
  })

  test('split: a weight-0 target still serves as failover', async () => {
    await using env = await startEnv()
    env.mocks[B]!.handle(() => ({ status: 503, json: { error: { message: 'down' } } }))
    const key = await createKey(env.server, {
      strategy: 'split',
      targets: [
        { provider_key_id: env.providers[A], weight: 0 },
        { provider_key_id: env.providers[B], weight: 5 },
      ],
    })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(failover(result)).toEqual([`${B}:server-error`])
  })
})

describe('model remaps', () => {
  test('an exact match (case-insensitive) runs before the rule with the upstream model', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'OpenAI/GPT-4o', provider_key_id: env.providers[C], upstream_model: 'meta-llama/Llama-3.3-70B-Instruct-Turbo' }],
    })
    const hit = await chat(env.server, key.secret, { model: 'openai/gpt-4o' })
    expect(hit.status).toBe(200)
    expect(hit.headers.get('x-router-provider')).toBe(C)
    expect(chatCalls(env.mocks[C]!)[0]!.body.model).toBe('meta-llama/Llama-3.3-70B-Instruct-Turbo')
    // Exact, not a prefix.
    const miss = await chat(env.server, key.secret, { model: 'openai/gpt-4o-mini' })
    expect(miss.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[A]!)[0]!.body.model).toBe('openai/gpt-4o-mini')
    expect(chatCalls(env.mocks[C]!)).toHaveLength(1)
  })

  test('`*` covers every model without its own rule', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [
        { match: '*', provider_key_id: env.providers[C], upstream_model: 'star/model' },
        { match: 'openai/gpt-4o', provider_key_id: env.providers[B], upstream_model: 'own/model' },
      ],
    })
    expect((await chat(env.server, key.secret, { model: 'anthropic/claude-sonnet-4' })).headers.get('x-router-provider')).toBe(C)
    expect(chatCalls(env.mocks[C]!)[0]!.body.model).toBe('star/model')
    expect((await chat(env.server, key.secret, { model: 'openai/gpt-4o' })).headers.get('x-router-provider')).toBe(B)
    expect(chatCalls(env.mocks[B]!)[0]!.body.model).toBe('own/model')
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
  })

  test('percent rolls per request, roughly in proportion', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'openai/gpt-4o-mini', percent: 30, provider_key_id: env.providers[C], upstream_model: 'remapped/model' }],
    })
    const total = 300
    for (let index = 0; index < total; index++) expect((await chat(env.server, key.secret)).status).toBe(200)
    const remapped = chatCalls(env.mocks[C]!).length
    expect(remapped + chatCalls(env.mocks[A]!).length).toBe(total)
    expect(remapped / total).toBeGreaterThan(0.18)
    expect(remapped / total).toBeLessThan(0.42)
    for (const request of chatCalls(env.mocks[C]!)) expect(request.body.model).toBe('remapped/model')
  })

  test('a disabled remap row is not served', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'openai/gpt-4o-mini', provider_key_id: env.providers[C], upstream_model: 'staged/model', enabled: false }],
    })
    for (let index = 0; index < 10; index++) expect((await chat(env.server, key.secret)).headers.get('x-router-provider')).toBe(A)
    expect(env.mocks[C]!.requests).toHaveLength(0)
  })

  test('a remap failing retryably (500) falls through to the normal targets', async () => {
    await using env = await startEnv()
    env.mocks[C]!.handle(() => ({ status: 500, json: { error: { message: 'remap target down' } } }))
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'openai/gpt-4o-mini', provider_key_id: env.providers[C], upstream_model: 'remapped/model' }],
    })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(failover(result)).toEqual([`${C}:server-error`])
    expect(attemptsOf(result)).toBe('2')
    expect(chatCalls(env.mocks[A]!)[0]!.body.model).toBe('openai/gpt-4o-mini')
  })

  test('a remap answering a non-retryable 400 is returned as-is', async () => {
    await using env = await startEnv()
    const upstreamError = { error: { message: "Invalid value for 'temperature': must be at most 2.", type: 'invalid_request_error', param: 'temperature' } }
    env.mocks[C]!.handle(() => ({ status: 400, json: upstreamError }))
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'openai/gpt-4o-mini', provider_key_id: env.providers[C], upstream_model: 'remapped/model' }],
    })
    const result = await chat(env.server, key.secret, { temperature: 5 })
    expect(result.status).toBe(400)
    expect(result.json).toEqual(upstreamError)
    expect(attemptsOf(result)).toBe('1')
    expect(env.mocks[A]!.requests).toHaveLength(0)
  })

  test('a remap onto a :batch id is skipped as gateway:batch-only', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, {
      ...priority(env, A),
      model_remaps: [{ match: 'openai/gpt-4o-mini', provider_key_id: env.providers[C], upstream_model: 'openai/gpt-4o-mini:batch' }],
    })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(failover(result)).toEqual([`${C}:batch-only`])
    expect(attemptsOf(result)).toBe('1')
    expect(env.mocks[C]!.requests).toHaveLength(0)
  })
})

describe('failover triggers', () => {
  const cases: { name: string; status: number; body: unknown; reason: string }[] = [
    { name: '500', status: 500, body: { error: { message: 'internal' } }, reason: 'server-error' },
    { name: '503', status: 503, body: { error: { message: 'unavailable' } }, reason: 'server-error' },
    { name: '429', status: 429, body: { error: { message: 'rate limited' } }, reason: 'rate-limited' },
    { name: '401', status: 401, body: { error: { message: 'invalid api key' } }, reason: 'provider-auth' },
    { name: '402', status: 402, body: { error: { message: 'insufficient credits' } }, reason: 'http-402' },
    { name: '403', status: 403, body: { error: { message: 'forbidden' } }, reason: 'http-403' },
    { name: '404', status: 404, body: { error: { message: 'not found' } }, reason: 'no-model' },
    {
      name: '400 model unknown',
      status: 400,
      body: { error: { message: 'The model `openai/gpt-4o-mini` does not exist or you do not have access to it.', type: 'invalid_request_error', code: 'model_not_found' } },
      reason: 'no-model',
    },
  ]

  test('each status trigger fails over with its exact gateway:reason', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A, B))
    for (const scenario of cases) {
      env.mocks[A]!.handle(() => ({ status: scenario.status, json: scenario.body }))
      const before = chatCalls(env.mocks[B]!).length
      const result = await chat(env.server, key.secret)
      expect({ case: scenario.name, status: result.status }).toEqual({ case: scenario.name, status: 200 })
      expect({ case: scenario.name, failover: failover(result) }).toEqual({ case: scenario.name, failover: [`${A}:${scenario.reason}`] })
      expect(result.headers.get('x-router-provider')).toBe(B)
      expect(attemptsOf(result)).toBe('2')
      expect(chatCalls(env.mocks[B]!).length).toBe(before + 1)
      expect(result.json.choices[0].message.content).toBe('Hello from the mock.')
    }
  })

  test('a closed port fails over as unreachable', async () => {
    using unreachable = droppingUpstream()
    await using env = await startEnv({ RT_GATEWAY_URL_DEEPINFRA: unreachable.url })
    const dead = await addProvider(env.server, 'deepinfra')
    const key = await createKey(env.server, { targets: [{ provider_key_id: dead }, { provider_key_id: env.providers[A] }] })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(failover(result)).toEqual(['deepinfra:unreachable'])
    expect(attemptsOf(result)).toBe('2')
  })

  test('a stream with no first byte within ttfb_ms fails over as ttfb-timeout', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ hang: true }))
    const key = await createKey(env.server, { targets: [{ provider_key_id: env.providers[A], ttfb_ms: 1000 }, { provider_key_id: env.providers[B] }] })
    const started = performance.now()
    const result = await chat(env.server, key.secret, { stream: true })
    const elapsed = performance.now() - started
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(failover(result)).toEqual([`${A}:ttfb-timeout`])
    expect(attemptsOf(result)).toBe('2')
    expect(result.text).toContain('data: [DONE]')
    expect(elapsed).toBeGreaterThanOrEqual(950)
    expect(elapsed).toBeLessThan(4000)
  })

  test("the key's failover_ttfb_ms applies when the target has none", async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ hang: true }))
    const key = await createKey(env.server, priority(env, A, B), { failover_ttfb_ms: 1000 })
    const started = performance.now()
    const result = await chat(env.server, key.secret, { stream: true })
    expect(result.status).toBe(200)
    expect(failover(result)).toEqual([`${A}:ttfb-timeout`])
    expect(performance.now() - started).toBeLessThan(4000)
  })

  test('the failover timeout does not cut the last streaming target, nor non-streaming requests', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle((request) => (request.body?.stream ? { delayMs: 1400, sse: chatChunks('x') } : { delayMs: 1400, json: chatCompletion('x', 'slow but fine') }))
    // Last (only) streaming target: the upstream timeout applies.
    const single = await createKey(env.server, { targets: [{ provider_key_id: env.providers[A], ttfb_ms: 1000 }] })
    const stream = await chat(env.server, single.secret, { stream: true })
    expect(stream.status).toBe(200)
    expect(stream.headers.get('x-router-failover')).toBeNull()
    expect(stream.text).toContain('data: [DONE]')
    // Non-streaming with another target after: still the upstream timeout.
    const pair = await createKey(env.server, { targets: [{ provider_key_id: env.providers[A], ttfb_ms: 1000 }, { provider_key_id: env.providers[B] }] })
    const buffered = await chat(env.server, pair.secret)
    expect(buffered.status).toBe(200)
    expect(buffered.headers.get('x-router-provider')).toBe(A)
    expect(buffered.json.choices[0].message.content).toBe('slow but fine')
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })

  test('the request deadline: 504 deadline_exceeded with `deadline` in X-Router-Failover and no further target called', async () => {
    await using env = await startEnv({ RT_DEADLINE_MS: '1000' })
    env.mocks[A]!.handle(() => ({ hang: true }))
    const key = await createKey(env.server, priority(env, A, B))
    const started = performance.now()
    const result = await chat(env.server, key.secret)
    const elapsed = performance.now() - started
    expectError(result, 504, 'deadline_exceeded')
    expect(result.headers.get('x-router-failover')).toContain(`${A}:deadline`)
    expect(attemptsOf(result)).toBe('1')
    expect(env.mocks[B]!.requests).toHaveLength(0)
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect(elapsed).toBeLessThan(3000)
  })

  test('the deadline cuts streaming failover hops too', async () => {
    await using env = await startEnv({ RT_DEADLINE_MS: '1000' })
    env.mocks[A]!.handle(() => ({ hang: true }))
    const key = await createKey(env.server, { targets: [{ provider_key_id: env.providers[A], ttfb_ms: 5000 }, { provider_key_id: env.providers[B] }] })
    const result = await chat(env.server, key.secret, { stream: true })
    expectError(result, 504, 'deadline_exceeded')
    expect(result.headers.get('x-router-failover')).toContain(`${A}:deadline`)
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })

  test('a stream that has started is never cut by the deadline', async () => {
    await using env = await startEnv({ RT_DEADLINE_MS: '1000' })
    env.mocks[A]!.handle(() => ({ sse: chatChunks('x', ['a', 'b', 'c', 'd', 'e']), chunkDelayMs: 250 }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { stream: true })
    expect(result.status).toBe(200)
    expect(result.text).toContain('data: [DONE]')
    expect(result.text).not.toContain('stream_aborted')
  })
})

describe('relayed and final errors', () => {
  test('other 400s are relayed immediately without retry', async () => {
    await using env = await startEnv()
    const upstreamError = { error: { message: "'messages' must contain at least one user message", type: 'invalid_request_error', param: 'messages' } }
    env.mocks[A]!.handle(() => ({ status: 400, json: upstreamError }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(400)
    expect(result.json).toEqual(upstreamError)
    expect(attemptsOf(result)).toBe('1')
    expect(result.headers.get('x-router-failover')).toBeNull()
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })

  test('a malformed-body 400 after a failover is relayed as-is and ends the run', async () => {
    await using env = await startEnv()
    const upstreamError = { error: { message: "Invalid 'max_tokens': must be positive.", type: 'invalid_request_error' } }
    env.mocks[A]!.handle(() => ({ status: 502, json: { error: { message: 'bad gateway' } } }))
    env.mocks[B]!.handle(() => ({ status: 400, json: upstreamError }))
    const key = await createKey(env.server, priority(env, A, B, C))
    const result = await chat(env.server, key.secret, { max_tokens: -1 })
    expect(result.status).toBe(400)
    expect(result.json).toEqual(upstreamError)
    expect(failover(result)).toEqual([`${A}:server-error`])
    expect(attemptsOf(result)).toBe('2')
    expect(env.mocks[C]!.requests).toHaveLength(0)
  })

  test('a final upstream 401 is 502 provider_auth_failed', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ status: 500, json: { error: { message: 'x' } } }))
    env.mocks[B]!.handle(() => ({ status: 401, json: { error: { message: 'Invalid API Key' } } }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expectError(result, 502, 'provider_auth_failed')
    expect(attemptsOf(result)).toBe('2')
    expect(failover(result)).toContain(`${A}:server-error`)
  })

  test('every target 402 is 402 all_targets_failed', async () => {
    await using env = await startEnv()
    for (const gateway of [A, B]) env.mocks[gateway]!.handle(() => ({ status: 402, json: { error: { message: 'Insufficient credits' } } }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expectError(result, 402, 'all_targets_failed')
    expect(attemptsOf(result)).toBe('2')
    // No gateway served it.
    expect(result.headers.get('x-router-provider')).toBeNull()
  })

  test("every target 429 is 429 rate_limited with the last gateway's Retry-After", async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ status: 429, headers: { 'retry-after': '7' }, json: { error: { message: 'slow' } } }))
    env.mocks[B]!.handle(() => ({ status: 429, headers: { 'retry-after': '13' }, json: { error: { message: 'slower' } } }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expectError(result, 429, 'rate_limited')
    expect(result.headers.get('retry-after')).toBe('13')
    expect(attemptsOf(result)).toBe('2')
  })

  test("every target 404 is 404 model_not_found relaying the last gateway's message", async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ status: 404, json: { error: { message: 'first: no such model' } } }))
    env.mocks[B]!.handle(() => ({ status: 404, json: { error: { message: 'The model `openai/gpt-4o-mini` does not exist on groq' } } }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expectError(result, 404, 'model_not_found')
    expect(result.json.error.message).toContain('The model `openai/gpt-4o-mini` does not exist on groq')
    expect(attemptsOf(result)).toBe('2')
  })

  test('mixed failures are 502 all_targets_failed', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(() => ({ status: 429, json: { error: { message: 'a' } } }))
    env.mocks[B]!.handle(() => ({ status: 503, json: { error: { message: 'b' } } }))
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret)
    expectError(result, 502, 'all_targets_failed')
    expect(attemptsOf(result)).toBe('2')
  })
})

describe('rules that cannot route', () => {
  test('an empty rule is 402 no_route with X-Router-Attempts 0', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, undefined)
    const result = await chat(env.server, key.secret)
    expectError(result, 402, 'no_route')
    expect(attemptsOf(result)).toBe('0')
  })

  test('a rule left with zero targets after a provider delete is 402', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A))
    expect((await chat(env.server, key.secret)).status).toBe(200)
    expect((await env.server.call('DELETE', `/api/v1/providers/${env.providers[A]}`)).status).toBe(200)
    const result = await chat(env.server, key.secret)
    expectError(result, 402, 'no_route')
    expect(attemptsOf(result)).toBe('0')
    expect(chatCalls(env.mocks[A]!)).toHaveLength(1)
  })

  test('disabled providers are passed over; all disabled is 502 no_healthy_target', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A, B))
    expect((await env.server.call('PATCH', `/api/v1/providers/${env.providers[A]}`, { disabled: true })).status).toBe(200)
    const partly = await chat(env.server, key.secret)
    expect(partly.status).toBe(200)
    expect(partly.headers.get('x-router-provider')).toBe(B)
    expect(attemptsOf(partly)).toBe('1')
    expect((await env.server.call('PATCH', `/api/v1/providers/${env.providers[B]}`, { disabled: true })).status).toBe(200)
    const none = await chat(env.server, key.secret)
    expectError(none, 502, 'no_healthy_target')
    expect(attemptsOf(none)).toBe('0')
    expect(env.mocks[A]!.requests).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
    // Re-enabling brings the reference back.
    expect((await env.server.call('PATCH', `/api/v1/providers/${env.providers[A]}`, { disabled: false })).status).toBe(200)
    expect((await chat(env.server, key.secret)).headers.get('x-router-provider')).toBe(A)
  })

  test('a gateway switched off platform-wide is passed over; all switched off is 503 gateway_disabled', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A, B))
    const { providerKeys } = env.server.runtime.repositories
    providerKeys.setGatewayEnabled(A, false, new Date().toISOString())
    const partly = await chat(env.server, key.secret)
    expect(partly.status).toBe(200)
    expect(partly.headers.get('x-router-provider')).toBe(B)
    providerKeys.setGatewayEnabled(B, false, new Date().toISOString())
    const none = await chat(env.server, key.secret)
    expectError(none, 503, 'gateway_disabled')
    expect(attemptsOf(none)).toBe('0')
    expect(env.mocks[A]!.requests).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
  })

  test('a chat key routed only at decision-only gateways answers 501', async () => {
    await using env = await startEnv()
    const catalog = (await env.server.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean }[]
    const decisionOnly = catalog.filter((gateway) => !gateway.routable)
    expect(decisionOnly).toHaveLength(2)
    const ids = []
    for (const gateway of decisionOnly) ids.push(await addProvider(env.server, gateway.id))
    const key = await createKey(env.server, { targets: ids.map((id) => ({ provider_key_id: id })) })
    const result = await chat(env.server, key.secret)
    expectError(result, 501, 'gateway_not_supported')
    expect(attemptsOf(result)).toBe('0')
  })
})

describe('model ids and catalogs', () => {
  test('a fresh catalog lacking the model while another lists it: skipped without a call as gateway:not-listed', async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o', 'gpt-4o-mini'])
    seedCatalog(env.server, B, ['meta-llama/llama-3.3-70b-versatile'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'meta-llama/llama-3.3-70b-versatile' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(failover(result)).toEqual([`${A}:not-listed`])
    // Attempts counts calls, not skips.
    expect(attemptsOf(result)).toBe('1')
    expect(env.mocks[A]!.requests).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)[0]!.body.model).toBe('meta-llama/llama-3.3-70b-versatile')
  })

  test('a stale catalog (older than 72 h) is never assumed to lack the model', async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o'], Date.now() - 73 * 3_600_000)
    seedCatalog(env.server, B, ['meta-llama/llama-3.3-70b-versatile'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'meta-llama/llama-3.3-70b-versatile' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(result.headers.get('x-router-failover')).toBeNull()
    expect(chatCalls(env.mocks[A]!)[0]!.body.model).toBe('meta-llama/llama-3.3-70b-versatile')
  })

  test('a catalog just under 72 h old still skips', async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o'], Date.now() - 71 * 3_600_000)
    seedCatalog(env.server, B, ['meta-llama/llama-3.3-70b-versatile'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'meta-llama/llama-3.3-70b-versatile' })
    expect(failover(result)).toEqual([`${A}:not-listed`])
    expect(env.mocks[A]!.requests).toHaveLength(0)
  })

  test('a model id no catalog knows is forwarded untouched', async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o-mini'])
    seedCatalog(env.server, B, ['meta-llama/llama-3.3-70b-versatile'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'Acme/Brand-New-Model-1' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[A]!)[0]!.body.model).toBe('Acme/Brand-New-Model-1')
  })

  test("the gateway's catalog spelling is sent upstream", async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o-mini', 'gpt-4o'])
    seedCatalog(env.server, B, ['openai/gpt-4o-mini'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'openai/gpt-4o-mini' })
    expect(result.status).toBe(200)
    expect(chatCalls(env.mocks[A]!)[0]!.body.model).toBe('gpt-4o-mini')
    // The failover target listing the exact id receives it unchanged.
    env.mocks[A]!.handle(() => ({ status: 500, json: { error: { message: 'x' } } }))
    const second = await chat(env.server, key.secret, { model: 'openai/gpt-4o-mini' })
    expect(second.headers.get('x-router-provider')).toBe(B)
    expect(chatCalls(env.mocks[B]!)[0]!.body.model).toBe('openai/gpt-4o-mini')
  })

  test('no target lists the model: 404 model_not_available naming the gateways that list it, nothing sent', async () => {
    await using env = await startEnv()
    seedCatalog(env.server, A, ['gpt-4o-mini'])
    seedCatalog(env.server, B, ['meta-llama/llama-3.3-70b-versatile'])
    seedCatalog(env.server, C, ['deepseek-ai/DeepSeek-V3'])
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'deepseek-ai/DeepSeek-V3' })
    expectError(result, 404, 'model_not_available')
    expect(result.json.error.message).toContain(C)
    expect(attemptsOf(result)).toBe('0')
    for (const mock of Object.values(env.mocks)) expect(mock.requests).toHaveLength(0)
  })

  test(':batch ids on chat completions are 400 batch_only_model, nothing sent', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A, B))
    const result = await chat(env.server, key.secret, { model: 'openai/gpt-4o-mini:batch' })
    expectError(result, 400, 'batch_only_model')
    expect(attemptsOf(result)).toBe('0')
    for (const mock of Object.values(env.mocks)) expect(mock.requests).toHaveLength(0)
  })
})
