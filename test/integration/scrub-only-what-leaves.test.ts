/**
 * Scrub only what leaves (issue 37 item 8): the provider secret is scrubbed from what of an upstream
 * answer is relayed or logged, while what the router keeps and uses of it (a batch id, a response id)
 * is read as it came. A provider secret that holds the gateway's name (`sk-openrouter-batch-…`)
 * shares 8 characters with every id the gateway issues (`batch_openrouter_1`): scrubbed before it was
 * kept, the id became `batch_[redacted]_1`, and every refresh then read "not visible".
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { startMockGateway, type MockGateway, type RecordedRequest } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { runJob } from '../../src/scheduler/jobs'
import { redacted } from '../../src/gateways/scrub-secret'

const model = 'openai/gpt-4o-mini'
/** The gateway's name is in the secret, and so in 8-character runs of every id it issues. */
const batchSecret = 'sk-openrouter-batch-Zq7vX2mB9kLp4RtY8wNc'
const responsesSecret = 'sk-openai-proj-Hs7vX2mB9kLp4RtY8wNc3QaZ'

let batches: BatchGateway
let responses: MockGateway
let server: TestServer
let batchKey: string
let responsesKey: string

/** The Responses the mock holds, by its own id (`resp_openai-proj-N`). */
const stored = new Map<string, Record<string, unknown>>()

function answerResponses(request: RecordedRequest) {
  if (request.method === 'POST' && request.path.endsWith('/responses')) {
    const id = `resp_openai-proj-${stored.size + 1}`
    const response = {
      id,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      model: request.body.model,
      status: 'completed',
      previous_response_id: request.body.previous_response_id ?? null,
      output: [{ id: `msg_${id}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `turn ${stored.size + 1}`, annotations: [] }] }],
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
    }
    stored.set(id, response)
    return { json: response }
  }
  const match = /\/responses\/([^/]+)$/.exec(request.path)
  if (request.method === 'GET' && match) {
    const found = stored.get(decodeURIComponent(match[1]!))
    // A gateway that echoes the key it was sent in its refusal.
    return found ? { json: found } : { status: 404, json: { error: { message: `No response '${match[1]}' for key ${request.headers.authorization}.`, type: 'invalid_request_error' } } }
  }
  return undefined
}

beforeAll(async () => {
  batches = await startBatchGateway({ models: [model, `${model}:batch`], idPrefix: 'batch_openrouter_' })
  responses = await startMockGateway({ handler: answerResponses })
  server = await startTestServer({ RT_GATEWAY_URL_OPENROUTER: batches.url, RT_GATEWAY_URL_OPENAI: responses.url, RT_WEBHOOK_ALLOW_PRIVATE: '1' })
  const batchProvider = (await storeProvider(server, { gateway: 'openrouter', key: batchSecret })).id
  const responsesProvider = (await storeProvider(server, { gateway: 'openai', key: responsesSecret })).id
  batchKey = (await createInferenceKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })).key
  responsesKey = (await createInferenceKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: responsesProvider }] } })).key
})

afterAll(async () => {
  await server?.[Symbol.asyncDispose]()
  await batches?.close()
  await responses?.close()
})

/** Fails when any trace of the secret (whole or an 8-character run) is in `text`. */
function expectNoSecret(text: string, secret: string) {
  for (let start = 0; start + 8 <= secret.length; start++) expect(text).not.toContain(secret.slice(start, start + 8))
}

const submitBody = (count: number) => ({
  endpoint: '/v1/chat/completions',
  model,
  completion_window: '24h',
  requests: Array.from({ length: count }, (_, index) => ({ custom_id: `r${index}`, body: { model, messages: [{ role: 'user', content: `question ${index}` }] } })),
})

describe('a batch whose gateway id holds 8 characters of the provider secret', () => {
  test('is kept under its own id, refreshed to completion, and its results are readable; an echoed secret in them is scrubbed', async () => {
    const created = await httpCall(server, 'POST', '/v1/batches', submitBody(4), bearerHeader(batchKey))
    expect(created.status).toBe(202)
    const upstreamId = [...batches.batches.keys()].at(-1)!
    expect(upstreamId).toBe('batch_openrouter_1')
    expect(server.runtime.repositories.batches.get(created.json.id)!.upstreamId).toBe(upstreamId)

    batches.advance(upstreamId, 'completed')
    // The model's answer quotes the key (a prompt that contained it): that leaves, so it is scrubbed.
    const quoting = (batches.batches.get(upstreamId)!.results as any[]).find((item) => item.response)
    quoting.response.body.choices[0].message.content = `Your key is ${batchSecret}.`

    const refreshed = await runJob(server.runtime, 'batch-refresh')
    expect(refreshed).toMatchObject({ checked: 1, finished: 1, not_visible: 0, failed: 0 })
    expect(server.runtime.repositories.batches.get(created.json.id)!.status).toBe('completed')

    const read = await httpCall(server, 'GET', `/v1/batches/${created.json.id}`, undefined, bearerHeader(batchKey))
    expect(read.status).toBe(200)
    expect(read.json).toMatchObject({ id: created.json.id, status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 }, usage: { cost: 0.0123 } })
    expect(read.json.results).toHaveLength(4)
    expect(read.json.results.map((item: any) => item.custom_id).sort()).toEqual(['r0', 'r1', 'r2', 'r3'])
    expectNoSecret(read.text, batchSecret)
    expect(read.text).toContain(`Your key is ${redacted}.`)
  })

  test('a failed batch: its state is read and its error, which echoes the secret, is shown scrubbed', async () => {
    const created = await httpCall(server, 'POST', '/v1/batches', submitBody(1), bearerHeader(batchKey))
    expect(created.status).toBe(202)
    const upstreamId = [...batches.batches.keys()].at(-1)!
    batches.advance(upstreamId, 'failed', { error: { code: 'batch_failed', message: `The key ${batchSecret} ran out of credit.` } })
    const read = await httpCall(server, 'GET', `/v1/batches/${created.json.id}`, undefined, bearerHeader(batchKey))
    expect(read.status).toBe(200)
    expect(read.json.status).toBe('failed')
    expect(read.json.error).toEqual({ code: 'batch_failed', message: `The key ${redacted} ran out of credit.` })
    expectNoSecret(read.text, batchSecret)
    expectNoSecret(server.runtime.repositories.batches.get(created.json.id)!.error!, batchSecret)
  })
})

describe('a Responses id holding 8 characters of the provider secret', () => {
  test('stays retrievable and chainable under the id the client was given; a refusal that echoes the secret is scrubbed', async () => {
    const first = await httpCall(server, 'POST', '/v1/responses', { model, input: 'Hi' }, bearerHeader(responsesKey))
    expect(first.status).toBe(200)
    expect(first.json.id).toStartWith('resp_rt_')

    const retrieved = await httpCall(server, 'GET', `/v1/responses/${first.json.id}`, undefined, bearerHeader(responsesKey))
    expect(retrieved.status).toBe(200)
    expect(retrieved.json.id).toBe(first.json.id)
    expect(responses.requests.at(-1)!.path).toBe('/responses/resp_openai-proj-1')

    const second = await httpCall(server, 'POST', '/v1/responses', { model, input: 'Again', previous_response_id: first.json.id }, bearerHeader(responsesKey))
    expect(second.status).toBe(200)
    expect(responses.requests.at(-1)!.body.previous_response_id).toBe('resp_openai-proj-1')
    const chained = await httpCall(server, 'GET', `/v1/responses/${second.json.id}`, undefined, bearerHeader(responsesKey))
    expect(chained.status).toBe(200)
    expect(chained.json.id).toBe(second.json.id)
    expect(chained.json.previous_response_id).toBe(first.json.id)

    stored.delete('resp_openai-proj-1')
    const gone = await httpCall(server, 'GET', `/v1/responses/${first.json.id}`, undefined, bearerHeader(responsesKey))
    expect(gone.status).toBe(404)
    expectNoSecret(gone.text, responsesSecret)
    expect(gone.text).toContain(redacted)
  })
})
