/**
 * The response cache's partitions and purge (CONTRACT §15): a key-scoped entry is its key's alone, a
 * workspace-scoped one its workspace's (never another workspace's); DELETE /api/v1/keys/{id}/cache
 * removes a key's entries (or its workspace's shared ones); Responses answers kept at once and purged
 * with their partition; ages in whole seconds. The single-request behaviour is in
 * response-cache.test.ts, the flows across requests in response-cache-flows.test.ts.
 */
import { describe, expect, test } from 'bun:test'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'
import { chatChunks, chatCompletion, type MockReply, type RecordedRequest } from '../harness/mock-gateway'
import { responsesTurn } from '../harness/responses-script'
import { createWorkspace } from '../../src/management/workspaces'

const MODEL = 'openai/gpt-4o-mini'
const ANSWER = 'Hello there'
const hi = [{ role: 'user', content: 'Hi' }]

/** The mock's answer to chat and Responses calls: ANSWER, buffered or streamed as asked (embeddings get the mock's default). */
function answering(content = ANSWER) {
  return (request: RecordedRequest): MockReply | Response | undefined => {
    if (request.path.endsWith('/chat/completions')) {
      const model = String(request.body?.model)
      return request.body?.stream ? { sse: chatChunks(model, ['Hel', 'lo', ' there']) } : { json: chatCompletion(model, content) }
    }
    if (request.path.endsWith('/responses')) return responsesTurn(request, { text: content, usage: { input: 11, output: 7 } }, 'upstream')
    return undefined
  }
}

async function cachedEnv(): Promise<GatewaysEnv> {
  const env = await startGateways(['openai'])
  env.mocks.openai!.handle(answering())
  return env
}

const routing = (env: GatewaysEnv) => ({ routing: { targets: [{ provider_key_id: env.providers.openai }] } })

async function cachedKey(env: GatewaysEnv, extra: Record<string, unknown> = {}, cache: Record<string, unknown> = {}) {
  const key = await createInferenceKey(env.server, { ...routing(env), cache: { ttl_seconds: 600, ...cache }, ...extra })
  return { id: key.id as string, secret: key.key as string }
}

type Key = { secret: string }

const chat = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: hi, max_tokens: 100, ...extra }, { ...bearerHeader(key.secret), ...headers })

const responses = (env: GatewaysEnv, key: Key, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  httpCall(env.server, 'POST', '/v1/responses', { model: MODEL, input: 'Hi', max_output_tokens: 100, ...extra }, { ...bearerHeader(key.secret), ...headers })

/** Entries are written by the store's writer thread: wait until the queued ones are committed. */
const flushed = (env: GatewaysEnv) => env.server.runtime.cache.open().flush()

const chatCalls = (env: GatewaysEnv) => env.mocks.openai!.calls('/chat/completions').length

/** The cache headers of an answer, as one object (exact values, null when absent). */
function cacheHeaders(result: CallResult) {
  const header = (name: string) => result.headers.get(name)
  return {
    status: result.status,
    cache: header('x-router-cache'),
    age: header('age'),
    attempts: header('x-router-attempts'),
    provider: header('x-router-provider'),
    cacheProvider: header('x-router-cache-provider'),
  }
}

const missHeaders = { status: 200, cache: 'miss', age: null, attempts: '1', provider: 'openai', cacheProvider: null }
const hitHeaders = { status: 200, cache: 'hit', age: '0', attempts: '0', provider: null, cacheProvider: 'openai' }


describe('partitions', () => {
  test('scope key: another key of the workspace never hits the first key\'s entry', async () => {
    await using env = await cachedEnv()
    const first = await cachedKey(env)
    const second = await cachedKey(env)
    expect(cacheHeaders(await chat(env, first))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, second))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, first))).toEqual(hitHeaders)
    expect(cacheHeaders(await chat(env, second))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(2)
  })

  test('scope workspace: the keys of one workspace share entries; another workspace never hits them', async () => {
    await using env = await cachedEnv()
    const first = await cachedKey(env, {}, { scope: 'workspace' })
    const second = await cachedKey(env, {}, { scope: 'workspace' })
    // A key-scoped key of the same workspace does not read the workspace's entries.
    const keyScoped = await cachedKey(env)
    const other = createWorkspace(env.server.runtime, 'other')
    const otherProvider = await storeProvider(env.server, { gateway: 'openai', key: 'sk-other-workspace-secret' }, other.management_key)
    const outsider = await createInferenceKey(env.server, { routing: { targets: [{ provider_key_id: otherProvider.id }] }, cache: { ttl_seconds: 600, scope: 'workspace' } }, other.management_key)

    expect(cacheHeaders(await chat(env, first))).toEqual(missHeaders)
    await flushed(env)
    expect(cacheHeaders(await chat(env, second))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(1)
    expect(cacheHeaders(await chat(env, keyScoped))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(2)
    expect(cacheHeaders(await chat(env, { secret: outsider.key }))).toEqual(missHeaders)
    expect(chatCalls(env)).toBe(3)
  })
})

describe('purge', () => {
  test('DELETE /api/v1/keys/{id}/cache removes the key\'s entries: the same request misses again; another key\'s entries stay', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    const other = await cachedKey(env)
    for (const question of ['One', 'Two']) expect(cacheHeaders(await chat(env, key, { messages: [{ role: 'user', content: question }] })).cache).toBe('miss')
    expect(cacheHeaders(await chat(env, other)).cache).toBe('miss')
    await flushed(env)
    expect(cacheHeaders(await chat(env, key, { messages: [{ role: 'user', content: 'One' }] }))).toEqual(hitHeaders)

    const purged = await env.server.call('DELETE', `/api/v1/keys/${key.id}/cache`)
    expect(purged.status).toBe(200)
    expect(purged.body).toEqual({ data: { purged: 2 } })
    await flushed(env)
    expect(cacheHeaders(await chat(env, key, { messages: [{ role: 'user', content: 'One' }] }))).toEqual(missHeaders)
    expect(cacheHeaders(await chat(env, other))).toEqual(hitHeaders)
    expect(chatCalls(env)).toBe(4)
    // Nothing left to purge on an empty key... but the new miss is there once written.
    await flushed(env)
    expect((await env.server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 1 } })
    expect((await env.server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 0 } })
  })

  test('a workspace-scoped key\'s purge removes its workspace\'s shared entries', async () => {
    await using env = await cachedEnv()
    const first = await cachedKey(env, {}, { scope: 'workspace' })
    const second = await cachedKey(env, {}, { scope: 'workspace' })
    expect(cacheHeaders(await chat(env, first)).cache).toBe('miss')
    expect(cacheHeaders(await chat(env, second, { messages: [{ role: 'user', content: 'Other' }] })).cache).toBe('miss')
    await flushed(env)
    expect((await env.server.call('DELETE', `/api/v1/keys/${first.id}/cache`)).body).toEqual({ data: { purged: 2 } })
    await flushed(env)
    expect(cacheHeaders(await chat(env, second, { messages: [{ role: 'user', content: 'Other' }] })).cache).toBe('miss')
  })
})

/**
 * Three cases the first build got wrong, kept as tests: a kept Responses answer readable at once, ages
 * in whole seconds, and a shared partition's purge taking the Responses answers given from it.
 */
describe('kept answers, ages and purges', () => {
  // A Responses answer given from the cache is written by the store's writer thread, off the serving
  // thread; the store reads what it has queued too, so a GET of its id right after the answer finds it.
  test('a Responses hit is retrievable by its id at once, without waiting for the store\'s writer', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect(cacheHeaders(await chat(env, key)).cache).toBe('miss')
    await flushed(env)
    const statuses: number[] = []
    for (let index = 0; index < 5; index++) {
      const hit = await responses(env, key)
      expect(hit.headers.get('x-router-cache')).toBe('hit')
      statuses.push((await httpCall(env.server, 'GET', `/v1/responses/${hit.json.id}`, undefined, bearerHeader(key.secret))).status)
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200])
  })

  // RFC 9111 §5.2.1.1 and the Age header count whole seconds ("age ... less than or equal to the
  // specified number of seconds"): an entry a few milliseconds old has Age 0, and max-age=0 takes it.
  test('max-age=0 accepts an entry whose Age is 0', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env)
    expect(cacheHeaders(await chat(env, key)).cache).toBe('miss')
    await flushed(env)
    expect(cacheHeaders(await chat(env, key))).toEqual(hitHeaders)
    expect(cacheHeaders(await chat(env, key, {}, { 'cache-control': 'max-age=0' }))).toEqual(hitHeaders)
  })

  // The Responses answers a key's hits gave are kept in the partition they were given from: a
  // workspace-scoped key's purge deletes them with the shared entries (and counts them in `purged`).
  test('a workspace-scoped key\'s purge also removes the Responses answers its hits gave', async () => {
    await using env = await cachedEnv()
    const key = await cachedKey(env, {}, { scope: 'workspace' })
    expect(cacheHeaders(await chat(env, key)).cache).toBe('miss')
    await flushed(env)
    const hit = await responses(env, key)
    expect(hit.headers.get('x-router-cache')).toBe('hit')
    await flushed(env)
    expect((await httpCall(env.server, 'GET', `/v1/responses/${hit.json.id}`, undefined, bearerHeader(key.secret))).status).toBe(200)
    expect((await env.server.call('DELETE', `/api/v1/keys/${key.id}/cache`)).body).toEqual({ data: { purged: 2 } })
    await flushed(env)
    expect(env.server.runtime.cache.open().stats().entries).toBe(0)
    const gone = await httpCall(env.server, 'GET', `/v1/responses/${hit.json.id}`, undefined, bearerHeader(key.secret))
    expect(gone.status).toBe(400)
    expect(gone.json.error.code).toBe('response_not_found')
  })
})
