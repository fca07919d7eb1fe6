/**
 * GET /models, GET /models/{id} and POST /embeddings (SPEC "GET /models", "GET /models/{id}",
 * "POST /embeddings", "Model objects", "Common response headers").
 */
import { describe, expect, test } from 'bun:test'
import { resolve } from 'node:path'
import OpenAI from 'openai'
import { type MockGateway, type MockHandler } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { droppingUpstream } from '../harness/dropping-upstream'

const A = 'openai'
const B = 'groq'
const C = 'together'

type Env = GatewaysEnv

const startEnv = (extraEnv: Record<string, string> = {}): Promise<Env> => startGateways([A, B, C], extraEnv)

async function addProvider(server: TestServer, gateway: string): Promise<string> {
  return (await storeProvider(server, { gateway, key: `sk-${gateway}-secret` })).id
}

async function createKey(server: TestServer, routing: unknown, extra: Record<string, unknown> = {}) {
  const key = await createInferenceKey(server, { ...extra, routing })
  return { id: key.id as string, secret: key.key as string }
}

const priority = (env: Env, ...gateways: string[]) => ({ targets: gateways.map((gateway) => ({ provider_key_id: env.providers[gateway] })) })

type Result = CallResult

/** GET under /v1 with an inference key. */
const get = (server: TestServer, secret: string, path: string): Promise<Result> => httpCall(server, 'GET', `/v1${path}`, undefined, bearerHeader(secret))

const embed = (server: TestServer, secret: string, body: Record<string, unknown>): Promise<Result> => httpCall(server, 'POST', '/v1/embeddings', body, bearerHeader(secret))

/** Answers GET …/models with the given objects; everything else falls back to the defaults. */
function listing(models: Record<string, unknown>[]): MockHandler {
  return (request) => (request.method === 'GET' && request.path.endsWith('/models') ? { json: { object: 'list', data: models } } : undefined)
}

const failing: MockHandler = (request) => (request.path.endsWith('/models') ? { status: 500, json: { error: { message: 'catalog down' } } } : undefined)

const modelsCalls = (mock: MockGateway) => mock.requests.filter((request) => request.method === 'GET' && request.path.endsWith('/models'))

const repoRoot = resolve(import.meta.dir, '../..')

/** `jobs run NAME` through the CLI on the server's database, as an operator runs it (CONTRACT §5). */
async function runJob(server: TestServer, name: string) {
  const environment: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('RT_')) environment[key] = value
  const child = Bun.spawn([process.execPath, 'run', 'src/cli/index.ts', 'jobs', 'run', name], { cwd: repoRoot, env: { ...environment, ...server.env }, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { exitCode, stdout, stderr }
}

const chat = (server: TestServer, secret: string, model: string): Promise<Result> =>
  httpCall(server, 'POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(secret))

describe('GET /v1/models', () => {
  test('fans out to every target and merges: first-seen object kept, :batch ids left out', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(
      listing([
        { id: 'openai/gpt-4o', object: 'model', created: 1, owned_by: 'from-a', context_length: 128000 },
        { id: 'shared/model', object: 'model', created: 2, owned_by: 'from-a' },
        { id: 'openai/gpt-4o:batch', object: 'model', created: 3, owned_by: 'from-a' },
      ]),
    )
    env.mocks[B]!.handle(
      listing([
        { id: 'shared/model', object: 'model', created: 4, owned_by: 'from-b' },
        { id: 'meta-llama/llama-3.3-70b', object: 'model', created: 5, owned_by: 'from-b' },
        { id: 'meta-llama/llama-3.3-70b:BATCH', object: 'model', created: 6, owned_by: 'from-b' },
      ]),
    )
    const key = await createKey(env.server, priority(env, A, B))
    const result = await get(env.server, key.secret, '/models')
    expect(result.status).toBe(200)
    expect(result.json.object).toBe('list')
    const byId = new Map<string, any>(result.json.data.map((model: any) => [model.id, model]))
    expect([...byId.keys()].sort()).toEqual(['meta-llama/llama-3.3-70b', 'openai/gpt-4o', 'shared/model'])
    expect(result.json.data).toHaveLength(3)
    for (const model of result.json.data) expect(model.object).toBe('model')
    expect(byId.get('shared/model').owned_by).toBe('from-a')
    expect(byId.get('shared/model').created).toBe(2)
    expect(byId.get('openai/gpt-4o').context_length).toBe(128000)
    expect(result.headers.get('x-router-attempts')).toBe('2')
    expect(result.headers.get('x-router-provider')).toBeNull()
    expect(result.headers.get('x-router-request-id')).toBeTruthy()
    expect(modelsCalls(env.mocks[A]!)).toHaveLength(1)
    expect(modelsCalls(env.mocks[B]!)).toHaveLength(1)
    expect(env.mocks[C]!.requests).toHaveLength(0)
    // The stored provider secret is what the gateway sees.
    expect(modelsCalls(env.mocks[A]!)[0]!.headers.authorization).toBe('Bearer sk-openai-secret')
  })

  test('weight-0 targets are included', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(listing([{ id: 'a/model', object: 'model' }]))
    env.mocks[B]!.handle(listing([{ id: 'b/model', object: 'model' }]))
    const key = await createKey(env.server, {
      strategy: 'split',
      targets: [
        { provider_key_id: env.providers[A], weight: 1 },
        { provider_key_id: env.providers[B], weight: 0 },
      ],
    })
    const result = await get(env.server, key.secret, '/models')
    expect(result.status).toBe(200)
    expect(result.json.data.map((model: any) => model.id).sort()).toEqual(['a/model', 'b/model'])
    expect(result.headers.get('x-router-attempts')).toBe('2')
  })

  test('an erroring or unreachable provider is skipped; X-Router-Provider names the single supplier', async () => {
    using unreachable = droppingUpstream()
    await using env = await startEnv({ RT_GATEWAY_URL_DEEPINFRA: unreachable.url })
    const dead = await addProvider(env.server, 'deepinfra')
    env.mocks[A]!.handle(failing)
    env.mocks[B]!.handle(listing([{ id: 'b/model', object: 'model', owned_by: 'b' }]))
    const key = await createKey(env.server, { targets: [{ provider_key_id: env.providers[A] }, { provider_key_id: dead }, { provider_key_id: env.providers[B] }] })
    const result = await get(env.server, key.secret, '/models')
    expect(result.status).toBe(200)
    expect(result.json.data.map((model: any) => model.id)).toEqual(['b/model'])
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(result.headers.get('x-router-attempts')).toBe('3')
  })

  test('every provider failing is 502', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(failing)
    env.mocks[B]!.handle(failing)
    const key = await createKey(env.server, priority(env, A, B))
    const result = await get(env.server, key.secret, '/models')
    expect(result.status).toBe(502)
    expect(typeof result.json.error.message).toBe('string')
    expect(typeof result.json.error.code).toBe('string')
    expect(result.headers.get('x-router-attempts')).toBe('2')
    expect(result.headers.get('x-router-provider')).toBeNull()
  })

  test('no routable targets is 501', async () => {
    await using env = await startEnv()
    const catalog = (await env.server.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean }[]
    const decisionOnly = catalog.find((gateway) => !gateway.routable)!
    const id = await addProvider(env.server, decisionOnly.id)
    const key = await createKey(env.server, { targets: [{ provider_key_id: id }] })
    const result = await get(env.server, key.secret, '/models')
    expect(result.status).toBe(501)
    expect(result.headers.get('x-router-attempts')).toBe('0')
  })
})

describe('GET /v1/models/{id}', () => {
  test('a slashed id returns the model object with its extra fields', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(
      listing([
        { id: 'openai/gpt-4o', object: 'model', created: 1_715_000_000, owned_by: 'openai-org', context_length: 128000 },
        { id: 'mistralai/mistral-large-2411', object: 'model', created: 1_730_000_000 },
        { id: 'openai/gpt-4o-mini:batch', object: 'model', created: 1 },
      ]),
    )
    const key = await createKey(env.server, priority(env, A))
    const found = await get(env.server, key.secret, '/models/openai/gpt-4o')
    expect(found.status).toBe(200)
    expect(found.json).toMatchObject({ id: 'openai/gpt-4o', object: 'model', created: 1_715_000_000, owned_by: 'openai-org', context_length: 128000 })

    const defaulted = await get(env.server, key.secret, '/models/mistralai/mistral-large-2411')
    expect(defaulted.status).toBe(200)
    expect(defaulted.json.id).toBe('mistralai/mistral-large-2411')
    expect(defaulted.json.object).toBe('model')
    expect(typeof defaulted.json.created).toBe('number')
    expect(defaulted.json.owned_by).toBe('mistralai')

    const unknown = await get(env.server, key.secret, '/models/acme/not-a-model')
    expect(unknown.status).toBe(404)
    expect(unknown.json.error.code).toBe('model_not_found')

    const batch = await get(env.server, key.secret, '/models/openai/gpt-4o-mini:batch')
    expect(batch.status).toBe(404)
    expect(batch.json.error.code).toBe('model_not_found')
  })

  describe.each([
    ['with no crawled catalog', false],
    ['after the catalog crawl', true],
  ])('ids resolve through the spelling map routing uses (SPEC "Model ids"), %s', (_case, crawled) => {
    test('canonical `provider/model`, the gateway spelling and dash/dotted versions find the listed model; the object carries the id asked for', async () => {
      await using env = await startEnv()
      // Gateways list their own spellings: openai without a vendor prefix, as its real /models does.
      env.mocks[A]!.handle(
        listing([
          { id: 'gpt-4o-mini', object: 'model', created: 1_721_172_741, owned_by: 'system', context_window: 128000 },
          { id: 'gpt-4.1', object: 'model', created: 1_744_316_542 },
          { id: 'gpt-4o-mini:batch', object: 'model', created: 1 },
        ]),
      )
      env.mocks[B]!.handle(listing([{ id: 'llama-3.1-8b-instant', object: 'model', created: 1_700_000_000, owned_by: 'Meta' }]))
      const key = await createKey(env.server, priority(env, A, B))
      if (crawled) {
        const crawl = await runJob(env.server, 'catalog-crawl')
        expect(crawl.exitCode).toBe(0)
        expect(JSON.parse(crawl.stdout).gateways).toMatchObject({ [A]: { models: 3 }, [B]: { models: 1 } })
      }

      // Chat accepts the README's id; with a crawled catalog openai receives its own spelling.
      const served = await chat(env.server, key.secret, 'openai/gpt-4o-mini')
      expect(served.status).toBe(200)
      expect(env.mocks[A]!.calls('/chat/completions').at(-1)!.body.model).toBe(crawled ? 'gpt-4o-mini' : 'openai/gpt-4o-mini')

      // ...and look-up accepts it too: the gateway's object, under the id the client asked for.
      const canonical = await get(env.server, key.secret, '/models/openai/gpt-4o-mini')
      expect(canonical.status).toBe(200)
      expect(canonical.json).toEqual({ id: 'openai/gpt-4o-mini', object: 'model', created: 1_721_172_741, owned_by: 'system', context_window: 128000 })
      expect((await get(env.server, key.secret, `/models/${encodeURIComponent('openai/gpt-4o-mini')}`)).json.id).toBe('openai/gpt-4o-mini')

      // The gateway's own spelling is the exact listed id.
      const spelled = await get(env.server, key.secret, '/models/gpt-4o-mini')
      expect(spelled.status).toBe(200)
      expect(spelled.json).toMatchObject({ id: 'gpt-4o-mini', created: 1_721_172_741, owned_by: 'system' })

      // Dash-written and dotted versions are the same model where the gateway lists the dotted form;
      // with no owned_by listed it defaults to the vendor prefix of the slashed id.
      for (const asked of ['openai/gpt-4-1', 'openai/gpt-4.1', 'gpt-4-1']) {
        const version = await get(env.server, key.secret, `/models/${asked}`)
        expect(version.status).toBe(200)
        expect(version.json).toMatchObject({ id: asked, object: 'model', created: 1_744_316_542 })
        expect(version.json.owned_by).toBe(asked.includes('/') ? 'openai' : 'system')
      }

      // The second target's listing is searched too, with its own spelling map.
      const llama = await get(env.server, key.secret, '/models/meta-llama/llama-3.1-8b-instant')
      expect(llama.status).toBe(200)
      expect(llama.json).toMatchObject({ id: 'meta-llama/llama-3.1-8b-instant', created: 1_700_000_000, owned_by: 'Meta' })

      // :batch ids, ids no provider lists, and a canonical id of another vendor stay 404.
      for (const missing of ['openai/gpt-4o-mini:batch', 'gpt-4o-mini:batch', 'openai/gpt-5-nano', 'anthropic/gpt-4o-mini', 'groq/gpt-4o-mini']) {
        const result = await get(env.server, key.secret, `/models/${missing}`)
        expect(result.status).toBe(404)
        expect(result.json.error.code).toBe('model_not_found')
      }
    })
  })

  test('a URL-encoded slashed id works too', async () => {
    await using env = await startEnv()
    env.mocks[A]!.handle(listing([{ id: 'anthropic/claude-sonnet-4', object: 'model', created: 5 }]))
    const key = await createKey(env.server, priority(env, A))
    const result = await get(env.server, key.secret, `/models/${encodeURIComponent('anthropic/claude-sonnet-4')}`)
    expect(result.status).toBe(200)
    expect(result.json.id).toBe('anthropic/claude-sonnet-4')
    expect(result.json.owned_by).toBe('anthropic')
  })

  test('GET /models/{id} belongs to chat and chat_router keys', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A), { api_shape: 'messages' })
    const result = await fetch(`${env.server.baseUrl}/models/openai/gpt-4o`, { headers: { 'x-api-key': key.secret } })
    expect(result.status).toBe(404)
    expect(await result.text()).toContain('wrong_api_shape')
  })
})

describe('POST /v1/embeddings', () => {
  test('with the official openai SDK: body forwarded as sent, list relayed', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, A))
    const client = new OpenAI({ apiKey: key.secret, baseURL: env.server.baseUrl })
    const created = await client.embeddings.create({ model: 'openai/text-embedding-3-small', input: ['hello', 'world'], encoding_format: 'float', dimensions: 3, user: 'u-1' })
    expect(created.object).toBe('list')
    expect(created.data[0]!.embedding).toEqual([0.1, 0.2, 0.3])
    const upstream = env.mocks[A]!.calls('/embeddings')
    expect(upstream).toHaveLength(1)
    expect(upstream[0]!.body).toEqual({ model: 'openai/text-embedding-3-small', input: ['hello', 'world'], encoding_format: 'float', dimensions: 3, user: 'u-1' })
    expect(upstream[0]!.headers.authorization).toBe('Bearer sk-openai-secret')

    // The SDK default (base64 on the wire) goes upstream as sent too.
    const defaulted = await client.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'hi' })
    expect(defaulted.data).toHaveLength(1)
    expect(env.mocks[A]!.calls('/embeddings')[1]!.body.encoding_format).toBe('base64')
  })

  test('a gateway without embeddings is skipped without a call as gateway:no-embeddings', async () => {
    await using env = await startEnv()
    const key = await createKey(env.server, priority(env, B, A))
    const result = await embed(env.server, key.secret, { model: 'openai/text-embedding-3-small', input: 'hello' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(result.headers.get('x-router-failover')).toBe(`${B}:no-embeddings`)
    expect(result.headers.get('x-router-attempts')).toBe('1')
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })

  test('no target with embeddings: 501 embeddings_unsupported naming the gateways picked and those that serve it', async () => {
    await using env = await startEnv()
    const catalog = (await env.server.call('GET', '/api/v1/gateways')).body.data as { id: string; capabilities: { embeddings: boolean } }[]
    const serving = catalog.filter((gateway) => gateway.capabilities.embeddings).map((gateway) => gateway.id)
    expect(serving).toHaveLength(7)
    expect(serving).not.toContain(B)
    const cerebras = await addProvider(env.server, 'cerebras')
    const key = await createKey(env.server, { targets: [{ provider_key_id: env.providers[B] }, { provider_key_id: cerebras }] })
    const result = await embed(env.server, key.secret, { model: 'openai/text-embedding-3-small', input: 'hello' })
    expect(result.status).toBe(501)
    expect(result.json.error.code).toBe('embeddings_unsupported')
    expect(result.json.error.message).toContain(B)
    expect(result.json.error.message).toContain('cerebras')
    for (const id of serving) expect(result.json.error.message).toContain(id)
    expect(result.headers.get('x-router-attempts')).toBe('0')
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })

  test('fails over on 5xx, 429, 404 and connection errors', async () => {
    using dropping = droppingUpstream()
    await using env = await startEnv({ RT_GATEWAY_URL_MISTRAL: dropping.url })
    const key = await createKey(env.server, priority(env, A, C))
    for (const [status, reason] of [
      [503, 'server-error'],
      [500, 'server-error'],
      [429, 'rate-limited'],
      [404, 'no-model'],
    ] as const) {
      env.mocks[A]!.handle((request) => (request.path.endsWith('/embeddings') ? { status, json: { error: { message: `status ${status}` } } } : undefined))
      const result = await embed(env.server, key.secret, { model: 'openai/text-embedding-3-small', input: 'hello' })
      expect(result.status).toBe(200)
      expect(result.headers.get('x-router-provider')).toBe(C)
      expect(result.headers.get('x-router-failover')).toBe(`${A}:${reason}`)
      expect(result.headers.get('x-router-attempts')).toBe('2')
      expect(result.json.data[0].embedding).toEqual([0.1, 0.2, 0.3])
    }
    const dead = await addProvider(env.server, 'mistral')
    const unreachable = await createKey(env.server, { targets: [{ provider_key_id: dead }, { provider_key_id: env.providers[C] }] })
    const result = await embed(env.server, unreachable.secret, { model: 'mistral/mistral-embed', input: 'hello' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-failover')).toBe('mistral:unreachable')
  })

  test('an embedding model id is never skipped as not-listed', async () => {
    await using env = await startEnv()
    const now = Date.now()
    env.server.runtime.repositories.gatewayCatalogs.replaceCatalog(A, now, [{ modelId: 'gpt-4o', canonicalId: 'openai/gpt-4o', object: '{}' }])
    env.server.runtime.repositories.gatewayCatalogs.replaceCatalog(C, now, [
      { modelId: 'openai/text-embedding-3-small', canonicalId: 'openai/text-embedding-3-small', object: '{}' },
    ])
    const key = await createKey(env.server, priority(env, A))
    const result = await embed(env.server, key.secret, { model: 'openai/text-embedding-3-small', input: 'hello' })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(env.mocks[A]!.calls('/embeddings')[0]!.body.model).toBe('openai/text-embedding-3-small')
  })

  test('embeddings belong to chat and chat_router keys', async () => {
    await using env = await startEnv()
    const router = await createKey(env.server, priority(env, A), { api_shape: 'chat_router' })
    expect((await embed(env.server, router.secret, { model: 'openai/text-embedding-3-small', input: 'x' })).status).toBe(200)
    const messages = await createKey(env.server, priority(env, A), { api_shape: 'messages' })
    const refused = await fetch(`${env.server.baseUrl}/embeddings`, {
      method: 'POST',
      headers: { 'x-api-key': messages.secret, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/text-embedding-3-small', input: 'x' }),
    })
    expect(refused.status).toBe(404)
    expect(await refused.text()).toContain('wrong_api_shape')
  })
})
