/**
 * The Batch API (SPEC "Batch API", "Batch object", Batch states, batch errors) against a mock of the
 * gateway that keeps batch results: submit read as it streams, routing to the batch provider key,
 * ids bound to the key, `validating` while the gateway cannot see the batch, results only when
 * completed, list filters, DELETE per the state table, refresh writing notifications once.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { startFaultGateway, type FaultGateway } from '../harness/fault-gateway'
import { runJob } from '../../src/scheduler/jobs'

const model = 'openai/gpt-4o-mini'
let gateway: BatchGateway
let other: FaultGateway
let server: TestServer
let batchProvider: string
let chatProvider: string
let key: { id: string; key: string }

const submitBody = (count: number, extra: Record<string, unknown> = {}) => ({
  endpoint: '/v1/chat/completions',
  model,
  completion_window: '24h',
  ...extra,
  requests: Array.from({ length: count }, (_, index) => ({ custom_id: `r${index}`, body: { model, messages: [{ role: 'user', content: `question ${index}` }] } })),
})

const submit = (body: unknown, secret = key.key) => httpCall(server, 'POST', '/v1/batches', body, bearerHeader(secret))
const get = (path: string, secret = key.key) => httpCall(server, 'GET', path, undefined, bearerHeader(secret))

beforeAll(async () => {
  gateway = await startBatchGateway({ models: [model, `${model}:batch`, 'anthropic/claude-3.5-haiku'] })
  other = await startFaultGateway()
  server = await startTestServer({ RT_GATEWAY_URL_OPENROUTER: gateway.url, RT_GATEWAY_URL_GROQ: other.url, RT_WEBHOOK_ALLOW_PRIVATE: '1' })
  batchProvider = (await storeProvider(server, { gateway: 'openrouter', key: 'sk-or-batch-secret-0123456789' })).id
  chatProvider = (await storeProvider(server, { gateway: 'groq', key: 'gsk-chat-secret-0123456789' })).id
  key = await createInferenceKey(server, { name: 'batch app', routing: { strategy: 'priority', targets: [{ provider_key_id: chatProvider }, { provider_key_id: batchProvider }] } })
})

afterAll(async () => {
  await server?.[Symbol.asyncDispose]()
  await gateway?.close()
  await other?.close()
})

beforeEach(() => {
  gateway.options.invisibleReads = 0
  gateway.options.refuseWith = undefined
  gateway.options.confirmDelayMs = 0
})

describe('submit', () => {
  test('202 with a batch object in validating; the gateway got the items on the batch provider key', async () => {
    const response = await submit(submitBody(3))
    expect(response.status).toBe(202)
    const batch = response.json
    expect(batch).toMatchObject({ object: 'batch', endpoint: '/v1/chat/completions', model, completion_window: '24h', status: 'validating', request_counts: { total: 3, completed: 0, failed: 0 }, results: null, error: null })
    expect(batch.id).toStartWith('batch_rt_')
    expect(typeof batch.created_at).toBe('number')
    expect(response.headers.get('x-router-provider')).toBe('openrouter')
    const sent = JSON.parse(gateway.lastSubmitText)
    expect(Object.keys(sent)).toEqual(['endpoint', 'model', 'completion_window', 'requests'])
    expect(sent.model).toBe(`${model}:batch`)
    expect(sent.requests.map((item: any) => item.custom_id)).toEqual(['r0', 'r1', 'r2'])
    // A body.model naming the batch's model is sent as the gateway spells the batch model.
    expect(sent.requests[0].body.model).toBe(`${model}:batch`)
    expect(gateway.requests.at(-1)!.authorization).toBe('Bearer sk-or-batch-secret-0123456789')
  })

  test('every issued id is unique and bound to the creating key', async () => {
    const ids = new Set<string>()
    for (let index = 0; index < 3; index++) ids.add((await submit(submitBody(1))).json.id)
    expect(ids.size).toBe(3)
    const otherKey = await createInferenceKey(server, { name: 'other', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const [id] = [...ids]
    const foreign = await get(`/v1/batches/${id}`, otherKey.key)
    expect(foreign.status).toBe(404)
    expect(foreign.json.error.code).toBe('batch_not_found')
    const altered = await get(`/v1/batches/${id!.slice(0, -2)}xx`)
    expect(altered.status).toBe(404)
    expect(altered.json.error.code).toBe('invalid_batch_id')
  })

  test('field order and shape: each malformed submit gets its SPEC code and sends and stores nothing', async () => {
    const before = gateway.batches.size
    const rowsBefore = server.runtime.storage.sqlite.query('select count(*) as n from batches').get() as { n: number }
    const cases: [string, number, string][] = [
      [JSON.stringify({ requests: [{ custom_id: 'a', body: {} }], endpoint: '/v1/chat/completions', model }), 400, 'invalid_batch_body'],
      [`{"endpoint":"/v1/chat/completions","model":"${model}","requests":[{"custom_id":"a","body":{}}],"completion_window":"24h"}`, 400, 'invalid_batch_body'],
      [JSON.stringify({ model, requests: [{ custom_id: 'a', body: {} }] }), 400, 'invalid_batch_body'],
      [JSON.stringify({ endpoint: '/v1/chat/completions', requests: [] }), 400, 'invalid_batch_body'],
      [JSON.stringify({ endpoint: '/v1/completions', model, requests: [{ custom_id: 'a', body: {} }] }), 400, 'invalid_endpoint'],
      [JSON.stringify({ endpoint: '/v1/chat/completions', model, requests: [] }), 400, 'empty_requests'],
      [`{"endpoint":"/v1/chat/completions","model":"${model}","requests":[{"custom_id":"a","body":{}},{"custom_id":"b","body":{]}`, 400, 'invalid_json'],
      [`{"endpoint":"/v1/chat/completions","model":"${model}","requests":[{"custom_id":"a","body":{}}`, 400, 'invalid_json'],
      ['not json', 400, 'invalid_json'],
    ]
    for (const [body, status, code] of cases) {
      const response = await submit(body)
      expect({ body: body.slice(0, 60), status: response.status, code: response.json?.error?.code }).toEqual({ body: body.slice(0, 60), status, code })
      expect(response.json.error.message).toBeString()
    }
    expect(gateway.batches.size).toBe(before)
    expect(server.runtime.storage.sqlite.query('select count(*) as n from batches').get()).toEqual(rowsBefore)
  })

  test('a single request over 16 MB is 413 value_too_large', async () => {
    const big = 'x'.repeat(16 * 1024 * 1024 + 10)
    const response = await submit(`{"endpoint":"/v1/chat/completions","model":"${model}","requests":[{"custom_id":"a","body":{"messages":[{"role":"user","content":"${big}"}]}}]}`)
    expect(response.status).toBe(413)
    expect(response.json.error.code).toBe('value_too_large')
  })

  test('routing refusals: no batch provider key, no :batch variant, a :batch id on a synchronous endpoint', async () => {
    const chatOnly = await createInferenceKey(server, { name: 'chat only', routing: { strategy: 'priority', targets: [{ provider_key_id: chatProvider }] } })
    const unsupported = await submit(submitBody(1), chatOnly.key)
    expect(unsupported.status).toBe(400)
    expect(unsupported.json.error.code).toBe('batch_not_supported')
    const noVariant = await submit({ ...submitBody(1), model: 'anthropic/claude-3.5-haiku' })
    expect(noVariant.status).toBe(404)
    expect(noVariant.json.error.code).toBe('batch_model_not_available')
    const sync = await httpCall(server, 'POST', '/v1/chat/completions', { model: `${model}:batch`, messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(key.key))
    expect(sync.status).toBe(400)
    expect(sync.json.error.code).toBe('batch_only_model')
  })

  test('a gateway refusal is relayed with its own status, message and numeric code, and nothing is kept', async () => {
    const duplicate = submitBody(2)
    duplicate.requests[1]!.custom_id = 'r0'
    const response = await submit(duplicate)
    expect(response.status).toBe(422)
    expect(response.json.error).toMatchObject({ code: 422, message: "Duplicate custom_id 'r0'." })
    const mismatch = submitBody(1)
    mismatch.requests[0]!.body.model = 'openai/gpt-4o'
    const refused = await submit(mismatch)
    expect(refused.status).toBe(400)
    expect(refused.json.error.code).toBe(400)
    gateway.options.refuseWith = { status: 402, body: { error: { code: 402, message: 'Insufficient credits (key sk-or-batch-secret-0123456789).' } } }
    const credit = await submit(submitBody(1))
    expect(credit.status).toBe(402)
    expect(credit.text).not.toContain('sk-or-batch-secret-0123456789')
    expect(server.runtime.storage.sqlite.query(`select count(*) as n from batches where status in ('submitting', 'unconfirmed')`).get()).toEqual({ n: 0 })
  })

  test('steering goes into every request (system message, instructions, top-level system), never embeddings', async () => {
    const steered = await createInferenceKey(server, { name: 'steered', steering_message: 'Answer in French.', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const cases: [string, Record<string, unknown>, (body: any) => unknown, unknown][] = [
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, (body) => body.messages[0], { role: 'system', content: 'Answer in French.' }],
      ['/v1/responses', { input: 'hi', instructions: 'Be brief.' }, (body) => body.instructions, 'Be brief.\n\nAnswer in French.'],
      ['/v1/messages', { max_tokens: 10, system: 'Be kind.', messages: [{ role: 'user', content: 'hi' }] }, (body) => body.system, 'Answer in French.\n\nBe kind.'],
      ['/v1/embeddings', { input: 'hi' }, (body) => body, { input: 'hi' }],
    ]
    for (const [endpoint, body, pick, expected] of cases) {
      const response = await submit({ endpoint, model, requests: [{ custom_id: 'a', body }] }, steered.key)
      expect(response.status).toBe(202)
      expect(pick(JSON.parse(gateway.lastSubmitText).requests[0].body)).toEqual(expected)
    }
  })
})

describe('states', () => {
  test('validating while the gateway cannot see it, then its states; results only when completed, one of response/error each', async () => {
    gateway.options.invisibleReads = 2
    const created = (await submit(submitBody(4))).json
    for (let index = 0; index < 2; index++) {
      const early = await get(`/v1/batches/${created.id}`)
      expect(early.status).toBe(200)
      expect(early.json).toMatchObject({ id: created.id, status: 'validating', results: null })
    }
    const upstreamId = [...gateway.batches.values()].at(-1)!.id
    for (const status of ['in_progress', 'finalizing']) {
      gateway.advance(upstreamId, status)
      const read = await get(`/v1/batches/${created.id}`)
      expect(read.json).toMatchObject({ status, results: null, usage: null })
    }
    gateway.advance(upstreamId, 'completed')
    const done = await get(`/v1/batches/${created.id}`)
    expect(done.json).toMatchObject({ id: created.id, status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 }, usage: { cost: 0.0123 } })
    expect(done.json.results).toHaveLength(4)
    for (const item of done.json.results) {
      expect(Object.keys(item).sort()).toEqual(['custom_id', 'error', 'response'])
      expect((item.response === null) !== (item.error === null)).toBe(true)
    }
    expect(done.json.results.find((item: any) => item.response).response).toMatchObject({ status_code: 200 })
  })

  test('DELETE: 409 batch_not_terminal while running, then purges a terminal batch (404 after)', async () => {
    const created = (await submit(submitBody(1))).json
    const running = await httpCall(server, 'DELETE', `/v1/batches/${created.id}`, undefined, bearerHeader(key.key))
    expect(running.status).toBe(409)
    expect(running.json.error.code).toBe('batch_not_terminal')
    const upstreamId = [...gateway.batches.values()].at(-1)!.id
    gateway.advance(upstreamId, 'cancelled')
    const deleted = await httpCall(server, 'DELETE', `/v1/batches/${created.id}`, undefined, bearerHeader(key.key))
    expect(deleted.status).toBe(200)
    expect(deleted.json).toEqual({ id: created.id, object: 'batch', deleted: true })
    expect(gateway.batches.has(upstreamId)).toBe(false)
    expect((await get(`/v1/batches/${created.id}`)).json.error.code).toBe('batch_not_found')
  })

  test('a provider key no longer on the key: 409 batch_target_unavailable; past 30 days: 410 batch_expired', async () => {
    const moving = await createInferenceKey(server, { name: 'moving', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const created = (await submit(submitBody(1), moving.key)).json
    const rerouted = await server.call('PUT', `/api/v1/keys/${moving.id}/routing`, { strategy: 'priority', targets: [{ provider_key_id: chatProvider }] })
    expect(rerouted.status).toBe(200)
    const gone = await get(`/v1/batches/${created.id}`, moving.key)
    expect(gone.status).toBe(409)
    expect(gone.json.error.code).toBe('batch_target_unavailable')
    const old = (await submit(submitBody(1))).json
    server.runtime.storage.sqlite.query('update batches set created_at = created_at - 31 * 86400 where id = ?').run(old.id)
    const expired = await get(`/v1/batches/${old.id}`)
    expect(expired.status).toBe(410)
    expect(expired.json.error.code).toBe('batch_expired')
  })

  test('the refresh job brings rows up to date and writes one webhook outbox row per terminal batch, however often it runs', async () => {
    const hooked = await createInferenceKey(server, { name: 'hooked', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const saved = await import('../../src/management/key-settings').then((module) => module.setWebhook(server.runtime, hooked.id, { url: 'http://127.0.0.1:9/hook' }))
    expect(saved.signing_secret).toStartWith('whsec_')
    const created = (await submit(submitBody(2), hooked.key)).json
    const upstreamId = [...gateway.batches.values()].at(-1)!.id
    gateway.advance(upstreamId, 'completed')
    await runJob(server.runtime, 'batch-refresh')
    await runJob(server.runtime, 'batch-refresh')
    await get(`/v1/batches/${created.id}`, hooked.key)
    const rows = server.runtime.repositories.batches.listOutbox(created.id)
    expect(rows).toHaveLength(1)
    expect(rows[0]!.event).toBe('batch.completed')
    const payload = JSON.parse(rows[0]!.payload)
    expect(payload).toMatchObject({ type: 'batch.completed', data: { id: created.id, object: 'batch', status: 'completed', request_counts: { total: 2 }, usage: { cost: 0.0123 } } })
    expect(payload.data.results).toBeUndefined()
    expect(server.runtime.repositories.batches.get(created.id)!.status).toBe('completed')
  })
})

describe('an unconfirmed upload', () => {
  test('504 upstream_timeout when the gateway does not confirm in time; the refresh job finds it in the gateway list and the client list shows it', async () => {
    const slow = await createInferenceKey(server, { name: 'slow', upstream_timeout_ms: 5000, routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    gateway.options.confirmDelayMs = 5600
    const started = performance.now()
    const response = await submit(submitBody(2), slow.key)
    expect(response.status).toBe(504)
    expect(response.json.error.code).toBe('upstream_timeout')
    expect(performance.now() - started).toBeLessThan(5500)
    expect((await get('/v1/batches', slow.key)).json.data).toHaveLength(0)
    await Bun.sleep(800)
    const result = await runJob(server.runtime, 'batch-refresh')
    expect(result.adopted).toBe(1)
    const listed = (await get('/v1/batches', slow.key)).json.data
    expect(listed).toHaveLength(1)
    expect(listed[0]).toMatchObject({ status: 'validating', request_counts: { total: 2 } })
    expect((await get(`/v1/batches/${listed[0].id}`, slow.key)).json.status).toBe('validating')
  }, 15_000)
})

describe('list', () => {
  test('newest first, this key only, limit/after paging, repeatable status, created_after/before in unix or ISO', async () => {
    const lister = await createInferenceKey(server, { name: 'lister', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const ids: string[] = []
    for (let index = 0; index < 5; index++) ids.push((await submit(submitBody(1), lister.key)).json.id)
    server.runtime.storage.sqlite.query('update batches set created_at = created_at - 1000 where id = ?').run(ids[0]!)
    const first = await get('/v1/batches?limit=2', lister.key)
    expect(first.json).toMatchObject({ object: 'list', has_more: true })
    expect(first.json.data).toHaveLength(2)
    expect(first.json.data.every((item: any) => item.results === null)).toBe(true)
    const all: string[] = []
    let after: string | undefined
    for (;;) {
      const page = await get(`/v1/batches?limit=2${after ? `&after=${after}` : ''}`, lister.key)
      all.push(...page.json.data.map((item: any) => item.id))
      if (!page.json.has_more) break
      after = page.json.last_id
    }
    expect(all).toHaveLength(5)
    expect(new Set(all)).toEqual(new Set(ids))
    expect(all.at(-1)).toBe(ids[0])
    const now = Math.floor(Date.now() / 1000)
    expect((await get(`/v1/batches?created_before=${now - 500}`, lister.key)).json.data.map((item: any) => item.id)).toEqual([ids[0]])
    const iso = new Date((now - 500) * 1000).toISOString()
    expect((await get(`/v1/batches?created_after=${encodeURIComponent(iso)}`, lister.key)).json.data).toHaveLength(4)
    expect((await get('/v1/batches?status=completed&status=failed', lister.key)).json.data).toHaveLength(0)
    expect((await get('/v1/batches?status=validating', lister.key)).json.data).toHaveLength(5)
    for (const bad of ['limit=0', 'limit=101', 'status=done', 'created_after=yesterday']) {
      expect((await get(`/v1/batches?${bad}`, lister.key)).status).toBe(400)
    }
  })

  test('only chat and chat_router keys: others get 404 wrong_api_shape', async () => {
    const messagesKey = await createInferenceKey(server, { name: 'messages', api_shape: 'messages', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
    const response = await get('/v1/batches', messagesKey.key)
    expect(response.status).toBe(404)
  })
})
