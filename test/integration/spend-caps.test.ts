/**
 * Spend caps that hold (CONTRACT §11, its last three bullets): a USD cap admits a request only when
 * the settled spend, the open reservations and the request's own worst case fit, and that worst case
 * is an upper bound — prompt bytes, images and tools, the largest output field, `n` multiplied in,
 * the listed maximum or the `max_tokens: 4096` the router then sends itself, every tool-loop round
 * and the decisioner's call reserved before they are made, the plan priced being the plan run,
 * batch items reserved as they are read — and a success never settles below its reservation for
 * lack of usage. Each test is an attack on a cap (a usage-less answer, a bound no ledger can count,
 * two output fields, `n`, a remap, a batch, a tool loop, all of them at once under load), run on the
 * real service on 127.0.0.1 against mock gateways that serve all they were allowed, with the money
 * read back three ways: the key's `limit_state`, the request-log rows' `cost_nano_usd`, and what the
 * mocks say they served.
 */
import { describe, expect, test } from 'bun:test'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { chatChunks, chatCompletion, type MockHandler, type RecordedRequest } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, readCallResult, storeProvider, type CallResult } from '../harness/api'
import { until } from '../harness/until'
import { startMcpServer } from '../harness/mcp-server'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { responseObject } from '../harness/responses-script'
import { addMcpServer } from '../../src/management/key-settings'
import { addedBytes, defaultMaxTokens, measurePrompt, outputBound, worstCaseNano } from '../../src/pipeline/limits/worst-case'
import type { ModelPricing } from '../../src/gateways/model-prices'

// ---------------------------------------------------------------------------------------------
// Prices, keys and money

const MODEL = 'openai/gpt-4o-mini'
const messages = [{ role: 'user', content: 'Hello there' }]

/** A model as a catalog lists it: USD per token, and the limits the worst case reads. */
interface Listed {
  prompt: number
  completion: number
  /** `top_provider.max_completion_tokens` */
  maxOutput?: number
  /** `context_length` */
  context?: number
}

/** gpt-4o-mini at $1 per million prompt tokens and $4 per million completion tokens: 1,000 and 4,000 nano-dollars a token. */
const MINI: Listed = { prompt: 0.000001, completion: 0.000004 }

/** Lists `models` (id → price, or null: listed without one) in `gateway`'s catalog and waits for the snapshot that shows them. */
async function listCatalog(server: TestServer, gateway: string, models: Record<string, Listed | null>) {
  server.runtime.repositories.gatewayCatalogs.replaceCatalog(
    gateway,
    Date.now(),
    Object.entries(models).map(([id, listed]) => ({
      modelId: id,
      canonicalId: id.includes('/') ? id : `openai/${id}`,
      object: JSON.stringify({
        id,
        ...(listed
          ? {
              pricing: { prompt: String(listed.prompt), completion: String(listed.completion) },
              ...(listed.maxOutput !== undefined ? { top_provider: { max_completion_tokens: listed.maxOutput } } : {}),
              ...(listed.context !== undefined ? { context_length: listed.context } : {}),
            }
          : {}),
      }),
    })),
  )
  await server.runtime.snapshots.fresh()
}

const pricingOf = (listed: Listed): ModelPricing => ({ prompt: listed.prompt, completion: listed.completion, maxOutput: listed.maxOutput, context: listed.context })

/**
 * What the router may add to a body on its way (its own fields, a longer spelling of the model): the
 * models here are sent as spelled by a catalog that lists them no longer than the client named them.
 */
const routerBytes = (body: Record<string, unknown>) => addedBytes(body.model, String(body.model))

/** The worst case (nano-dollars) the cap must reserve for a chat body sent to a model listed so. */
const worstOf = (listed: Listed, body: Record<string, unknown>): number => worstCaseNano(pricingOf(listed), measurePrompt(body), outputBound(body, 'chat'), 'chat', routerBytes(body))!

/** What an answer's usage costs, nano-dollars (the prices here are whole nano-dollars a token). */
const costOf = (listed: Listed, prompt: number, completion: number) => prompt * Math.round(listed.prompt * 1e9) + completion * Math.round(listed.completion * 1e9)

interface LimitedKey {
  id: string
  secret: string
}

async function limitedKey(env: GatewaysEnv, limits: Record<string, unknown>, extra: Record<string, unknown> = {}, gateway = 'openai'): Promise<LimitedKey> {
  const key = await createInferenceKey(env.server, { routing: { targets: [{ provider_key_id: env.providers[gateway] }] }, ...extra })
  const patched = await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { limits })
  expect(patched.status).toBe(200)
  return { id: key.id, secret: key.key }
}

/** The chat body a test sends: the model, one user message and `extra`. */
const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model: MODEL, messages, ...extra })

const chat = (server: TestServer, key: LimitedKey, body: Record<string, unknown>): Promise<CallResult> => httpCall(server, 'POST', '/v1/chat/completions', body, bearerHeader(key.secret))

/** The key's `limit_state.usd_today` in whole nano-dollars (settled spend and open reservations). */
async function usdToday(server: TestServer, key: LimitedKey): Promise<number> {
  const view = await server.call('GET', `/api/v1/keys/${key.id}`)
  expect(view.status).toBe(200)
  return Math.round(view.body.data.limit_state.usd_today * 1e9)
}

interface LogRow {
  status: number
  error_code: string | null
  cost_nano_usd: number | null
  attempt_path: string | null
}

/** A request's log row, once the log queue has written it. */
function rowOf(server: TestServer, requestId: string | null): Promise<LogRow> {
  expect(requestId).toBeTruthy()
  return until(`the request-log row of ${requestId}`, () => {
    server.runtime.logQueue.flush()
    return server.runtime.storage.sqlite.query<LogRow, [string]>('select status, error_code, cost_nano_usd, attempt_path from request_logs where id = ?').get(requestId!) ?? undefined
  })
}

/** The key's rows' cost summed (every row written: the queue flushed first). */
function rowsSpent(server: TestServer, key: LimitedKey): number {
  server.runtime.logQueue.flush()
  return server.runtime.storage.sqlite.query<{ total: number | null }, [string]>('select sum(cost_nano_usd) as total from request_logs where key_id = ?').get(key.id)!.total ?? 0
}

/** A latch the mock waits on: its answers are held until `open()`. */
function latch() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/**
 * `checks` run while `pending` is held at a mock behind `gate`; then the gate opens and the answer is
 * awaited — also when a check fails, so a failure leaves no request in flight for the next test.
 */
async function whileHeld<T>(gate: ReturnType<typeof latch>, pending: Promise<T>, checks: () => Promise<void>): Promise<T> {
  try {
    await checks()
  } finally {
    gate.open()
    await pending.catch(() => undefined)
  }
  return pending
}

/** A stream's chunks as the mock gateway's default, without the usage-only chunk: an upstream that ignores include_usage. */
const chunksWithoutUsage = (model: string, pieces: string[]) => chatChunks(model, pieces).filter((chunk) => typeof chunk === 'string' || !('usage' in (chunk as object)))

function expectBudgetRefusal(answer: CallResult) {
  expect(answer.status).toBe(429)
  expect(answer.json?.error?.code).toBe('key_budget_exhausted')
  expect(answer.headers.get('retry-after')).toMatch(/^\d+$/)
}

/**
 * A request on `key` held at the mock while `limit_state` is read: what it reserved (nano-dollars),
 * the body the mock received, and the answer. The mock answers chat, streamed or not, and Responses.
 */
async function reservationOf(env: GatewaysEnv, key: LimitedKey, path: '/v1/chat/completions' | '/v1/responses', body: Record<string, unknown>, gateway = 'openai') {
  const { server } = env
  const mock = env.mocks[gateway]!
  const gate = latch()
  mock.handle(async (request) => {
    await gate.opened
    const model = String(request.body?.model)
    if (request.path.endsWith('/responses')) return { json: responseObject(request.body, { text: 'ok', usage: { input: 11, output: 7 } }) }
    return request.body?.stream ? { sse: chatChunks(model) } : { json: chatCompletion(model) }
  })
  const before = await usdToday(server, key)
  const count = mock.requests.length
  let reserved = 0
  const answer = await whileHeld(gate, httpCall(server, 'POST', path, body, bearerHeader(key.secret)), async () => {
    await until(`the request reaches the ${gateway} mock`, () => (mock.requests.length === count + 1 ? true : undefined))
    reserved = (await usdToday(server, key)) - before
  })
  return { reserved, sent: mock.requests[count]!, answer }
}

const completionNano = (listed: Listed, tokens: number) => tokens * Math.round(listed.completion * 1e9)

// =============================================================================================

describe('a success without usage is charged its reservation', () => {
  test('a stream whose upstream sends no usage chunk (though asked): whole for the client, charged its reservation, and the cap counts it', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const mock = env.mocks.openai!
    const pieces = ['One', ' two', ' three', '.']
    let held: Promise<void> | undefined
    mock.handle(async (request) => {
      await held
      return { sse: chunksWithoutUsage(String(request.body?.model), pieces) }
    })
    const body = chatBody({ stream: true, max_tokens: 50_000 })
    const worst = worstOf(MINI, body)
    // 50,000 completion tokens at $4/M are $0.20 of it; the cap takes two such reservations and half a third.
    expect(worst).toBeGreaterThan(50_000 * 4000)
    const key = await limitedKey(env, { usd_per_day: (2 * worst + Math.floor(worst / 2)) / 1e9 })

    // In flight, the request holds its worst case.
    const gate = latch()
    held = gate.opened
    const first = await whileHeld(gate, chat(server, key, body), async () => {
      await until('the first stream reaches the mock', () => (mock.requests.length === 1 ? true : undefined))
      expect(await usdToday(server, key)).toBe(worst)
      // The router asked the upstream for usage (the client did not).
      expect(body.stream_options).toBeUndefined()
      expect(mock.requests[0]!.body.stream_options).toEqual({ include_usage: true })
    })
    held = undefined
    expect(first.status).toBe(200)
    // The client's stream is whole: every piece, the finish and [DONE].
    expect(first.text).toContain('"finish_reason":"stop"')
    expect(first.text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    for (const piece of pieces) expect(first.text).toContain(JSON.stringify(piece))
    expect(first.text).not.toContain('"usage"')
    // No usage: charged the reservation, not $0.
    expect((await rowOf(server, first.headers.get('x-router-request-id'))).cost_nano_usd).toBe(worst)
    expect(await usdToday(server, key)).toBe(worst)

    const second = await chat(server, key, body)
    expect(second.status).toBe(200)
    expect((await rowOf(server, second.headers.get('x-router-request-id'))).cost_nano_usd).toBe(worst)
    expect(await usdToday(server, key)).toBe(2 * worst)
    // Two charged, half a worst case left: the third does not fit and is not sent.
    const third = await chat(server, key, body)
    expectBudgetRefusal(third)
    expect(mock.requests).toHaveLength(2)

    // A buffered 200 without usage is charged its reservation too.
    mock.handle((request) => ({ json: chatCompletion(String(request.body?.model), 'No usage here.', { usage: undefined }) }))
    const smallBody = chatBody({ max_tokens: 10_000 })
    const small = worstOf(MINI, smallBody)
    expect(small).toBeLessThan(worst / 2)
    const buffered = await chat(server, key, smallBody)
    expect(buffered.status).toBe(200)
    expect(buffered.json.usage).toBeUndefined()
    expect((await rowOf(server, buffered.headers.get('x-router-request-id'))).cost_nano_usd).toBe(small)
    expect(await usdToday(server, key)).toBe(2 * worst + small)
    expect(rowsSpent(server, key)).toBe(2 * worst + small)
  })
})

describe('bounds the cap cannot count', () => {
  test('max_tokens 1e300 beside requests in flight: refused, never added to the ledger, and the spend never drops however often it is tried', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const mock = env.mocks.openai!
    let held: Promise<void> | undefined
    mock.handle(async (request) => {
      await held
      return { json: chatCompletion(String(request.body?.model)) }
    })
    const key = await limitedKey(env, { usd_per_day: 1 })
    // Two of these reserve about $0.80 of the $1 cap while they run.
    const body = chatBody({ max_tokens: 100_000 })
    const worst = worstOf(MINI, body)
    const attacks = [{ max_tokens: 1e300 }, { max_completion_tokens: 1e300 }, { max_tokens: 10, max_output_tokens: 1e300 }, { max_tokens: 10, n: 1e300 }, { max_tokens: Number.MAX_VALUE }]
    const served = costOf(MINI, 11, 7)
    let settled = 0
    for (let round = 0; round < 3; round++) {
      const gate = latch()
      held = gate.opened
      const before = mock.requests.length
      const inFlight = Promise.all([chat(server, key, body), chat(server, key, body)])
      const answers = await whileHeld(gate, inFlight, async () => {
        await until('both requests reach the mock', () => (mock.requests.length === before + 2 ? true : undefined))
        expect(await usdToday(server, key)).toBe(settled + 2 * worst)
        for (const attack of attacks) {
          const refused = await chat(server, key, chatBody(attack))
          expectBudgetRefusal(refused)
          // Nothing was reserved for it, nothing taken away when it ended.
          expect(await usdToday(server, key)).toBe(settled + 2 * worst)
        }
        expect(mock.requests).toHaveLength(before + 2)
      })
      held = undefined
      for (const answer of answers) expect(answer.status).toBe(200)
      settled += 2 * served
      // The day's spend is what the two served, exactly.
      expect(await usdToday(server, key)).toBe(settled)
      for (const attack of attacks) {
        expectBudgetRefusal(await chat(server, key, chatBody(attack)))
        expect(await usdToday(server, key)).toBe(settled)
      }
    }
    expect(rowsSpent(server, key)).toBe(settled)
    for (const request of mock.requests) expect(request.body.max_tokens).toBe(100_000)
  })
})

describe('the completion bound', () => {
  test('n is multiplied in: a cap that admits n 1 refuses n 3, and admits n 3 when three fit', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const one = chatBody({ max_tokens: 20_000 })
    const three = chatBody({ max_tokens: 20_000, n: 3 })
    const worstOne = worstOf(MINI, one)
    const worstThree = worstOf(MINI, three)
    // The prompt counts once, the completion three times.
    expect(worstThree).toBeGreaterThan(3 * 20_000 * 4000)
    expect(worstThree).toBeLessThan(3 * worstOne)

    const tight = await limitedKey(env, { usd_per_day: 2 * worstOne / 1e9 })
    const refused = await chat(server, tight, three)
    expectBudgetRefusal(refused)
    expect(env.mocks.openai!.requests).toHaveLength(0)
    expect((await chat(server, tight, one)).status).toBe(200)

    // A cap of exactly the n-3 worst case admits it (a cap takes exactly its amount), one nano-dollar less does not.
    const short = await limitedKey(env, { usd_per_day: (worstThree - 1) / 1e9 })
    expectBudgetRefusal(await chat(server, short, three))
    const exact = await limitedKey(env, { usd_per_day: worstThree / 1e9 })
    const admitted = await chat(server, exact, three)
    expect(admitted.status).toBe(200)
    expect(env.mocks.openai!.requests.at(-1)!.body.n).toBe(3)
  })

  test('both output fields: the larger bounds the reservation, in either order', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    // The cap fits 10 completion tokens many times over, and not 100,000 ($0.40).
    const key = await limitedKey(env, { usd_per_day: 0.01 })
    for (const fields of [
      { max_tokens: 10, max_completion_tokens: 100_000 },
      { max_completion_tokens: 10, max_tokens: 100_000 },
      { max_tokens: 10, max_output_tokens: 100_000 },
    ]) {
      const refused = await chat(server, key, chatBody(fields))
      expect([JSON.stringify(fields), refused.status, refused.json?.error?.code]).toEqual([JSON.stringify(fields), 429, 'key_budget_exhausted'])
    }
    expect(env.mocks.openai!.requests).toHaveLength(0)
    expect(await usdToday(server, key)).toBe(0)
    const both = chatBody({ max_tokens: 10, max_completion_tokens: 20 })
    const small = await chat(server, key, both)
    expect(small.status).toBe(200)
    expect(env.mocks.openai!.requests).toHaveLength(1)
  })
})

describe('the default bound', () => {
  /** A model whose catalog entry lists its maximum output. */
  const LISTED_MAX: Listed = { prompt: 0.0000025, completion: 0.00001, maxOutput: 2000 }

  test('no output field and no listed maximum: max_tokens 4096 is sent upstream (max_output_tokens on Responses) and reserved', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const key = await limitedKey(env, { usd_per_day: 5 })
    const pricing = pricingOf(MINI)
    for (const extra of [{}, { stream: true }]) {
      const body = chatBody(extra)
      const { reserved, sent, answer } = await reservationOf(env, key, '/v1/chat/completions', body)
      expect(answer.status).toBe(200)
      expect(sent.body.max_tokens).toBe(defaultMaxTokens)
      expect(defaultMaxTokens).toBe(4096)
      expect(reserved).toBe(worstCaseNano(pricing, measurePrompt(body), { requested: 4096, choices: 1 }, 'chat', routerBytes(body))!)
      expect(reserved).toBeGreaterThan(completionNano(MINI, 4096))
    }
    // The client's own bound goes as it is.
    const own = await reservationOf(env, key, '/v1/chat/completions', chatBody({ max_completion_tokens: 300 }))
    expect(own.sent.body.max_tokens).toBeUndefined()
    expect(own.sent.body.max_completion_tokens).toBe(300)

    const responsesBody = { model: MODEL, input: 'Hello there' }
    const responses = await reservationOf(env, key, '/v1/responses', responsesBody)
    expect(responses.answer.status).toBe(200)
    expect(responses.sent.path).toEndWith('/responses')
    expect(responses.sent.body.max_output_tokens).toBe(4096)
    expect(responses.sent.body.max_tokens).toBeUndefined()
    expect(responses.reserved).toBe(worstCaseNano(pricing, measurePrompt(responsesBody), { requested: 4096, choices: 1 }, 'responses', routerBytes(responsesBody))!)
  })

  test('a listed maximum output: nothing is added upstream and the reservation uses it; a bound above it is reserved at it', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o': LISTED_MAX })
    const pricing = pricingOf(LISTED_MAX)
    const key = await limitedKey(env, { usd_per_day: 5 })
    const plain = { model: 'openai/gpt-4o', messages }
    const unbounded = await reservationOf(env, key, '/v1/chat/completions', plain)
    expect(unbounded.answer.status).toBe(200)
    expect(unbounded.sent.body.max_tokens).toBeUndefined()
    expect(unbounded.sent.body.max_completion_tokens).toBeUndefined()
    expect(unbounded.reserved).toBe(worstCaseNano(pricing, measurePrompt(plain), { requested: 2000, choices: 1 }, 'chat', routerBytes(plain))!)
    expect(unbounded.reserved).toBeLessThan(completionNano(LISTED_MAX, 4096))

    // 50,000 asked: the model answers 2,000 at most, which is what is reserved (the body goes as sent).
    const above = { ...plain, max_tokens: 50_000 }
    const capped = await reservationOf(env, key, '/v1/chat/completions', above)
    expect(capped.sent.body.max_tokens).toBe(50_000)
    expect(capped.reserved).toBe(worstCaseNano(pricing, measurePrompt(above), { requested: 2000, choices: 1 }, 'chat', routerBytes(above))!)
    // So a cap that fits the listed maximum, and not 50,000 tokens, admits it.
    const small = await limitedKey(env, { usd_per_day: (capped.reserved + 1000) / 1e9 })
    expect(completionNano(LISTED_MAX, 50_000)).toBeGreaterThan(capped.reserved + 1000)
    expect((await chat(server, small, above)).status).toBe(200)
  })
})

describe('the prompt bound', () => {
  /** A model that lists its context window. */
  const CONTEXT: Listed = { prompt: 0.000002, completion: 0.000008, maxOutput: 1000, context: 100_000 }

  test('an image counts 8,192 tokens whatever its bytes, tools add 1,024, a file by id counts the whole listed context', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4.1': CONTEXT })
    const key = await limitedKey(env, { usd_per_day: 10 })
    const promptNano = Math.round(CONTEXT.prompt * 1e9)
    const completion = completionNano(CONTEXT, 1000)
    const base = { model: 'openai/gpt-4.1', messages }
    const plain = (await reservationOf(env, key, '/v1/chat/completions', base)).reserved
    expect(plain).toBe(worstOf(CONTEXT, base))

    const image = { model: 'openai/gpt-4.1', messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] }
    const withImage = (await reservationOf(env, key, '/v1/chat/completions', image)).reserved
    expect(withImage - completion).toBeGreaterThanOrEqual(8192 * promptNano)

    const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }
    const tools = { ...base, tools: [tool] }
    const withTools = (await reservationOf(env, key, '/v1/chat/completions', tools)).reserved
    expect(withTools - plain).toBeGreaterThanOrEqual(1024 * promptNano)

    // A file named by id: its content is not in the body, only the context bounds it.
    const file = { model: 'openai/gpt-4.1', messages: [{ role: 'user', content: [{ type: 'text', text: 'Summarize' }, { type: 'file', file: { file_id: 'file-abc123' } }] }] }
    const withFile = (await reservationOf(env, key, '/v1/chat/completions', file)).reserved
    expect(withFile).toBe(100_000 * promptNano + completion)
  })

  test('an upstream reporting as many prompt tokens as the bytes it was sent cannot take the spend past the cap', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const mock = env.mocks.openai!
    // It serves the whole bound it was sent and counts every byte of the body as a prompt token:
    // no tokenizer counts more, so the cap must hold against it.
    mock.handle((request) => {
      const model = String(request.body?.model)
      const usage = { prompt_tokens: Buffer.byteLength(request.rawBody), completion_tokens: request.body.max_tokens, total_tokens: Buffer.byteLength(request.rawBody) + request.body.max_tokens }
      if (!request.body.stream) return { json: chatCompletion(model, 'ok', { usage }) }
      return { sse: [...chunksWithoutUsage(model, ['ok']).slice(0, -1), { id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage }, '[DONE]'] }
    })
    // The router adds to both bodies: `stream_options` to the stream, `max_tokens: 4096` to the other.
    const outcomes: { body: string; cap: number; spent: number; over: number }[] = []
    for (const body of [chatBody({ stream: true, max_tokens: 50_000 }), chatBody()]) {
      const worst = worstOf(MINI, body)
      const key = await limitedKey(env, { usd_per_day: worst / 1e9 })
      const answer = await chat(server, key, body)
      expect(answer.status).toBe(200)
      const sent = mock.requests.at(-1)!
      const charged = (await rowOf(server, answer.headers.get('x-router-request-id'))).cost_nano_usd!
      expect(charged).toBe(costOf(MINI, Buffer.byteLength(sent.rawBody), sent.body.max_tokens))
      const spent = await usdToday(server, key)
      expect(spent).toBe(charged)
      outcomes.push({ body: JSON.stringify(body), cap: worst, spent, over: Math.max(0, spent - worst) })
    }
    // What was reserved bounds the body as it went upstream, so the settled spend stays under the cap.
    expect(outcomes).toEqual(outcomes.map((outcome) => ({ ...outcome, over: 0 })))
  })
})

describe('what the upstream may read otherwise', () => {
  test('output fields and n as numeric strings: an upstream that reads them as numbers cannot take the spend past the cap', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    // A lenient upstream (as validators in lax mode do) reads "9" as 9, serves the whole bound, and says so.
    const asNumber = (value: unknown) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value)
    env.mocks.openai!.handle((request) => {
      const body = request.body
      const fields = [body.max_tokens, body.max_completion_tokens].map(asNumber).filter((value): value is number => typeof value === 'number')
      const choices = (asNumber(body.n) as number | undefined) ?? 1
      const completion = Math.max(...fields) * choices
      return { json: chatCompletion(String(body.model), 'ok', { usage: { prompt_tokens: 11, completion_tokens: completion, total_tokens: 11 + completion } }) }
    })
    const outcomes: { body: string; status: number; cap: number; spent: number; withinCap: boolean }[] = []
    for (const extra of [{ max_tokens: 10_000, n: '9' }, { max_tokens: 10, max_completion_tokens: '100000' }, { max_tokens: '100000' }]) {
      // $0.05: 10,000 completion tokens fit ($0.04), nine times that or 100,000 do not.
      const key = await limitedKey(env, { usd_per_day: 0.05 })
      const answer = await chat(server, key, chatBody(extra))
      const spent = await usdToday(server, key)
      outcomes.push({ body: JSON.stringify(extra), status: answer.status, cap: 50_000_000, spent, withinCap: spent <= 50_000_000 })
    }
    // Refused (400 or 429) or counted: either way the day's spend stays within the cap.
    expect(outcomes).toEqual(outcomes.map((outcome) => ({ ...outcome, withinCap: true })))
  })

  test('a success whose usage leaves out the completion count is charged its completion bound, not the prompt alone', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    // It served the whole bound and counted only the prompt.
    env.mocks.openai!.handle((request) => ({ json: chatCompletion(String(request.body?.model), 'ok', { usage: { prompt_tokens: 11 } }) }))
    const key = await limitedKey(env, { usd_per_day: 1 })
    const body = chatBody({ max_tokens: 50_000 })
    const answer = await chat(server, key, body)
    expect(answer.status).toBe(200)
    const charged = (await rowOf(server, answer.headers.get('x-router-request-id'))).cost_nano_usd!
    // At least the prompt reported and the completion it could not count at its bound; at most the reservation.
    expect(charged).toBeGreaterThanOrEqual(costOf(MINI, 11, 50_000))
    expect(charged).toBeLessThanOrEqual(worstOf(MINI, body))
  })
})

describe('RateLimit fields on every answer of a limited key', () => {
  test('a 400 for a bad body, the 400 for an unpriced model and the 429s carry RateLimit-Policy and RateLimit', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI, 'gpt-4.1': null })
    const key = await limitedKey(env, { usd_per_day: 0.01 })
    const policy = '"usd-day";q=0.01;w=86400'
    const fields = (answer: CallResult) => ({ status: answer.status, code: answer.json?.error?.code, policy: answer.headers.get('ratelimit-policy'), ratelimit: answer.headers.get('ratelimit') })
    const usdField = expect.stringMatching(/^"usd-day";r=[\d.]+;t=\d+$/)

    const invalidJson = await httpCall(server, 'POST', '/v1/chat/completions', '{"model": "openai/gpt-4o-mini", "messages": [', bearerHeader(key.secret))
    expect(fields(invalidJson)).toEqual({ status: 400, code: 'invalid_json', policy, ratelimit: usdField })
    const noMessages = await chat(server, key, { model: MODEL })
    expect(fields(noMessages)).toEqual({ status: 400, code: 'missing_messages', policy, ratelimit: usdField })
    const unpriced = await chat(server, key, chatBody({ model: 'openai/gpt-4.1' }))
    expect(fields(unpriced)).toEqual({ status: 400, code: 'key_budget_unpriced_model', policy, ratelimit: usdField })
    const overCap = await chat(server, key, chatBody({ max_tokens: 100_000 }))
    expect(fields(overCap)).toEqual({ status: 429, code: 'key_budget_exhausted', policy, ratelimit: usdField })
    const uncountable = await chat(server, key, chatBody({ max_tokens: 1e300 }))
    expect(fields(uncountable)).toEqual({ status: 429, code: 'key_budget_exhausted', policy, ratelimit: usdField })
    expect(env.mocks.openai!.requests).toHaveLength(0)

    // The requests-per-minute refusal, beside a spend cap: both policies.
    const both = await limitedKey(env, { requests_per_minute: 1, usd_per_day: 1 })
    expect((await chat(server, both, chatBody({ max_tokens: 10 }))).status).toBe(200)
    const rateLimited = await chat(server, both, chatBody({ max_tokens: 10 }))
    expect(fields(rateLimited)).toEqual({ status: 429, code: 'key_rate_limited', policy: '"rpm";q=1;w=60, "usd-day";q=1;w=86400', ratelimit: expect.stringMatching(/^"rpm";r=0;t=\d+$/) })
    const badAgain = await httpCall(server, 'POST', '/v1/chat/completions', 'not json', bearerHeader(both.secret))
    expect(fields(badAgain)).toEqual({ status: 400, code: 'invalid_json', policy: '"rpm";q=1;w=60, "usd-day";q=1;w=86400', ratelimit: expect.stringMatching(/^"rpm";r=0;t=\d+$/) })
  })
})

describe('batches on a capped key', () => {
  /**
   * The service with the batch-keeping gateway kind pointed at its mock, the model and its `:batch`
   * variant priced, and a key routed there with a daily cap.
   */
  async function startCappedBatches(usdPerDay: number) {
    const gateway: BatchGateway = await startBatchGateway({ models: [MODEL, `${MODEL}:batch`] })
    const server = await startTestServer({ RT_GATEWAY_URL_OPENROUTER: gateway.url })
    const provider = (await storeProvider(server, { gateway: 'openrouter', key: 'sk-or-batch-secret-0123456789' })).id
    await listCatalog(server, 'openrouter', { [MODEL]: MINI, [`${MODEL}:batch`]: MINI })
    const created = await createInferenceKey(server, { routing: { strategy: 'priority', targets: [{ provider_key_id: provider }] } })
    expect((await server.call('PATCH', `/api/v1/keys/${created.id}`, { limits: { usd_per_day: usdPerDay } })).status).toBe(200)
    const key: LimitedKey = { id: created.id, secret: created.key }
    return {
      server,
      gateway,
      key,
      async [Symbol.asyncDispose]() {
        await server[Symbol.asyncDispose]()
        await gateway.close()
      },
    }
  }

  test('a submit reserves its items until the batch ends, then counts its reported cost; one whose items do not fit is refused and nothing is created upstream', async () => {
    await using env = await startCappedBatches(0.1)
    const { server, gateway, key } = env
    const items = (count: number, from = 0) => Array.from({ length: count }, (_, index) => ({ custom_id: `r${from + index}`, body: { model: MODEL, messages: [{ role: 'user', content: `question ${from + index}` }] } }))
    const submit = (count: number, from = 0) => httpCall(server, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model: MODEL, completion_window: '24h', requests: items(count, from) }, bearerHeader(key.secret))
    // Each item sets no bound and the model lists none: 4,096 completion tokens ($0.016) and its prompt,
    // sent under the batch's spelling of the model (its `:batch` variant).
    const itemWorst = (body: Record<string, unknown>) => worstCaseNano(pricingOf(MINI), measurePrompt(body), outputBound(body, 'chat'), 'chat', addedBytes(body.model, `${MODEL}:batch`))!
    const itemsWorst = (count: number, from = 0) => items(count, from).reduce((sum, item) => sum + itemWorst(item.body), 0)
    /** The ledger once it has read what the database shows (the submit's row written). */
    const settledView = async () => {
      server.runtime.logQueue.flush()
      await server.runtime.limiter.sync()
      return usdToday(server, key)
    }

    const accepted = await submit(3)
    expect(accepted.status).toBe(202)
    expect(accepted.headers.get('ratelimit-policy')).toBe('"usd-day";q=0.1;w=86400')
    expect(accepted.headers.get('ratelimit')).toMatch(/^"usd-day";r=[\d.]+;t=\d+$/)
    const reserved = itemsWorst(3)
    expect(reserved).toBeGreaterThan(3 * 4096 * 4000)
    expect(await usdToday(server, key)).toBe(reserved)
    // Held on the batch's row once the ledger reads it, not counted twice.
    expect(await settledView()).toBe(reserved)
    // The items went with the router's bound, as they were priced.
    const sent = JSON.parse(gateway.lastSubmitText)
    expect(sent.requests.map((item: any) => item.body.max_tokens)).toEqual([4096, 4096, 4096])
    expect(gateway.batches.size).toBe(1)

    // A batch whose items do not fit: refused before the upload completes, nothing created upstream.
    const rowsBefore = server.runtime.storage.sqlite.query<{ n: number }, []>('select count(*) as n from batches').get()!.n
    const refused = await submit(10, 100)
    expectBudgetRefusal(refused)
    expect(refused.json.error.type).toBe('rate_limit_error')
    expect(refused.headers.get('ratelimit-policy')).toBe('"usd-day";q=0.1;w=86400')
    expect(gateway.batches.size).toBe(1)
    expect(server.runtime.storage.sqlite.query<{ n: number }, []>('select count(*) as n from batches').get()!.n).toBe(rowsBefore)
    expect(await settledView()).toBe(reserved)

    // The batch ends with a reported cost ($0.0123): the day shows that cost instead of the reservation.
    const upstreamId = [...gateway.batches.keys()][0]!
    gateway.advance(upstreamId, 'completed')
    const done = await httpCall(server, 'GET', `/v1/batches/${accepted.json.id}`, undefined, bearerHeader(key.secret))
    expect(done.json).toMatchObject({ status: 'completed', usage: { cost: 0.0123 } })
    expect(await settledView()).toBe(12_300_000)
    expect(server.runtime.storage.sqlite.query('select reserved_nano_usd, charged_nano_usd from batches where id = ?').get(accepted.json.id)).toEqual({ reserved_nano_usd: reserved, charged_nano_usd: 12_300_000 })

    // The room the reservation left is there again: five items fit under $0.0877, six do not.
    expect(12_300_000 + itemsWorst(5, 200)).toBeLessThanOrEqual(100_000_000)
    expect(12_300_000 + itemsWorst(6, 300)).toBeGreaterThan(100_000_000)
    expectBudgetRefusal(await submit(6, 300))
    expect((await submit(5, 200)).status).toBe(202)
    expect(gateway.batches.size).toBe(2)
    expect(await settledView()).toBe(12_300_000 + itemsWorst(5, 200))
  })

  test('a ledger read between the submit\'s answer and its request-log row counts the batch once', async () => {
    await using env = await startCappedBatches(0.1)
    const { server, gateway, key } = env
    const requests = [0, 1, 2].map((index) => ({ custom_id: `r${index}`, body: { model: MODEL, messages: [{ role: 'user', content: `question ${index}` }] } }))
    const reserved = requests.reduce((sum, item) => sum + worstCaseNano(pricingOf(MINI), measurePrompt(item.body), outputBound(item.body, 'chat'), 'chat', addedBytes(item.body.model, `${MODEL}:batch`))!, 0)
    const accepted = await httpCall(server, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model: MODEL, requests }, bearerHeader(key.secret))
    expect(accepted.status).toBe(202)
    expect(await usdToday(server, key)).toBe(reserved)
    // The periodic read (every RT_LIMIT_SYNC_MS) may come before the submit's request-log row is
    // written (the log queue's next flush; on a replica, once the row is back from the primary): the
    // batch row holds the reservation by then, and must not be counted beside the submit's own
    // share, or the key is refused what fits.
    await server.runtime.limiter.sync()
    expect(await usdToday(server, key)).toBe(reserved)
    const fits = await httpCall(server, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model: MODEL, requests: requests.map((item) => ({ ...item, custom_id: `again-${item.custom_id}` })) }, bearerHeader(key.secret))
    expect(2 * reserved).toBeLessThanOrEqual(100_000_000)
    expect(fits.status).toBe(202)
  })
})

describe('an MCP tool loop on a capped key', () => {
  /** The model calls `add` in rounds 0–2 and answers in round 3; each round reports its usage. */
  const loopUsage = [
    { prompt_tokens: 100, completion_tokens: 10 },
    { prompt_tokens: 200, completion_tokens: 20 },
    { prompt_tokens: 300, completion_tokens: 30 },
    { prompt_tokens: 400, completion_tokens: 40 },
  ]
  const addends = [
    { a: 1, b: 2 },
    { a: 3, b: 4 },
    { a: 5, b: 6 },
  ]

  const toolLoopModel: MockHandler = (request) => {
    if (!request.path.endsWith('/chat/completions')) return undefined
    const body = request.body
    const round = (body.messages as any[]).filter((message) => message.role === 'assistant' && Array.isArray(message.tool_calls)).length
    const name = (body.tools as any[]).map((tool) => tool.function.name as string).find((offered) => offered.endsWith('__add'))!
    const model = String(body.model)
    const usage = { ...loopUsage[round]!, total_tokens: loopUsage[round]!.prompt_tokens + loopUsage[round]!.completion_tokens }
    const call = round < addends.length ? { id: `call_${round}`, type: 'function', function: { name, arguments: JSON.stringify(addends[round]) } } : undefined
    if (!body.stream) {
      return { json: chatCompletion(model, `Round ${round}.`, { choices: [{ index: 0, message: { role: 'assistant', content: `Round ${round}.`, ...(call ? { tool_calls: [call] } : {}) }, finish_reason: call ? 'tool_calls' : 'stop' }], usage }) }
    }
    const base = { id: `chatcmpl-${round}`, object: 'chat.completion.chunk', created: 1_700_000_000, model }
    return {
      sse: [
        { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: `Round ${round}.` }, finish_reason: null }] },
        ...(call ? [{ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...call }] }, finish_reason: null }] }] : []),
        { ...base, choices: [{ index: 0, delta: {}, finish_reason: call ? 'tool_calls' : 'stop' }] },
        { ...base, choices: [], usage },
        '[DONE]',
      ],
    }
  }

  test('a later round that does not fit is not sent: the loop ends with key_budget_exhausted (buffered and streamed), tools ran only for the rounds sent, the rounds answered are charged', async () => {
    await using env = await startGateways(['openai'], { RT_WEBHOOK_ALLOW_PRIVATE: '1' })
    await using mcp = await startMcpServer()
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    const mock = env.mocks.openai!
    mock.handle(toolLoopModel)
    const toolKey = async () => {
      // 10,000 completion tokens a round ($0.04) with a prompt of about 2,000 bytes: two rounds fit under $0.10, three do not.
      const key = await limitedKey(env, { usd_per_day: 0.1 })
      await addMcpServer(server.runtime, key.id, mcp.url, 'tools')
      return key
    }
    const body = chatBody({ max_tokens: 10_000, messages: [{ role: 'user', content: 'Add 1 and 2, then 3 and 4, then 5 and 6.' }] })
    const answered = costOf(MINI, 100, 10) + costOf(MINI, 200, 20)

    const buffered = await toolKey()
    const refused = await chat(server, buffered, body)
    expectBudgetRefusal(refused)
    expect(refused.json.error.message).toContain("tool loop's next model round was not sent")
    expect(refused.headers.get('ratelimit-policy')).toBe('"usd-day";q=0.1;w=86400')
    const sentRounds = mock.calls('/chat/completions')
    expect(sentRounds).toHaveLength(2)
    // Each round sent was priced before it went: both fit, a third of the same bound could not.
    const roundWorst = sentRounds.map((request) => worstOf(MINI, request.body))
    expect(roundWorst[0]! + roundWorst[1]!).toBeLessThanOrEqual(100_000_000)
    expect(roundWorst[0]! + roundWorst[1]! + 10_000 * 4000).toBeGreaterThan(100_000_000)
    // The tools ran for the two rounds answered, not for a round never sent.
    expect(mcp.calls.map((call) => ({ name: call.name, args: call.args }))).toEqual([
      { name: 'add', args: addends[0]! },
      { name: 'add', args: addends[1]! },
    ])
    const bufferedRow = await rowOf(server, refused.headers.get('x-router-request-id'))
    expect(bufferedRow).toMatchObject({ status: 429, error_code: 'key_budget_exhausted', cost_nano_usd: answered })
    expect(await usdToday(server, buffered)).toBe(answered)

    const streamed = await toolKey()
    const stream = await chat(server, streamed, { ...body, stream: true })
    expect(stream.status).toBe(200)
    const events = stream.text
      .split('\n\n')
      .filter((record) => record.startsWith('data: ') && record !== 'data: [DONE]')
      .map((record) => JSON.parse(record.slice('data: '.length)))
    const errors = events.filter((event) => event.error)
    expect(errors).toHaveLength(1)
    expect(errors[0].error.code).toBe('key_budget_exhausted')
    expect(events.at(-1)).toBe(errors[0])
    expect(events.flatMap((event) => event.choices ?? []).map((choice: any) => choice.delta?.content ?? '').join('')).toContain('Round 1.')
    expect(mock.calls('/chat/completions')).toHaveLength(4)
    expect(mcp.calls).toHaveLength(4)
    const streamedRow = await rowOf(server, stream.headers.get('x-router-request-id'))
    expect(streamedRow).toMatchObject({ error_code: 'key_budget_exhausted', cost_nano_usd: answered })
    expect(await usdToday(server, streamed)).toBe(answered)
  })
})

describe('the plan priced is the plan run', () => {
  test('a percentage remap to an unpriced model is skipped as unpriced: the priced rule target serves at its price, the unpriced model is never called', async () => {
    await using env = await startGateways(['openai', 'groq'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    await listCatalog(server, 'groq', { 'vendor/unpriced': null, [MODEL]: MINI })
    const served = costOf(MINI, 11, 7)
    for (const percent of [100, 50]) {
      const key = await limitedKey(env, { usd_per_day: 1 }, {
        routing: { targets: [{ provider_key_id: env.providers.openai }], model_remaps: [{ match: MODEL, percent, provider_key_id: env.providers.groq, upstream_model: 'vendor/unpriced' }] },
      })
      const paths = new Set<string>()
      const count = percent === 100 ? 3 : 24
      for (let index = 0; index < count; index++) {
        const answer = await chat(server, key, chatBody({ max_tokens: 100 }))
        expect(answer.status).toBe(200)
        expect(answer.headers.get('x-router-provider')).toBe('openai')
        const row = await rowOf(server, answer.headers.get('x-router-request-id'))
        expect(row.cost_nano_usd).toBe(served)
        paths.add(row.attempt_path!)
      }
      // Rolled per request (at 50 %, both outcomes show in 24 requests but for a chance of 2^-23).
      expect([...paths].sort()).toEqual(percent === 100 ? ['groq:unpriced>openai:ok'] : ['groq:unpriced>openai:ok', 'openai:ok'])
      expect(await usdToday(server, key)).toBe(count * served)
    }
    expect(env.mocks.groq!.requests).toHaveLength(0)
    expect(env.mocks.openai!.requests.every((request) => request.body.model === 'gpt-4o-mini')).toBe(true)
  })

  test('a percentage remap to a dearer model is priced when it is rolled: refused when it does not fit, never run on a reservation made for the cheaper plan', async () => {
    await using env = await startGateways(['openai', 'groq'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': MINI })
    // 100 times the price: 1,000 completion tokens cost $0.40 there, $0.004 here.
    await listCatalog(server, 'groq', { 'vendor/dear': { prompt: 0.0001, completion: 0.0004 } })
    const key = await limitedKey(env, { usd_per_day: 0.1 }, { routing: { targets: [{ provider_key_id: env.providers.openai }], model_remaps: [{ match: MODEL, percent: 50, provider_key_id: env.providers.groq, upstream_model: 'vendor/dear' }] } })
    const statuses: number[] = []
    for (let index = 0; index < 24; index++) {
      const answer = await chat(server, key, chatBody({ max_tokens: 1000 }))
      statuses.push(answer.status)
      if (answer.status === 429) expect(answer.json.error.code).toBe('key_budget_exhausted')
      else expect(answer.headers.get('x-router-provider')).toBe('openai')
    }
    // Both rolls show (but for a chance of 2^-23), and the dear model never answered.
    expect([...new Set(statuses)].sort()).toEqual([200, 429])
    expect(env.mocks.groq!.requests).toHaveLength(0)
    expect(await usdToday(server, key)).toBe(statuses.filter((status) => status === 200).length * costOf(MINI, 11, 7))
  })
})


describe('the decisioner on a capped key', () => {
  const A = 'groq'
  const B = 'together'
  const DECIDER = 'not-diamond'

  /** The decider picks B with p 0.9 (every question it is asked is over the rule's gateways). */
  const decider: MockHandler = (request) => {
    if (!request.path.endsWith('/decisions')) return undefined
    const questions = request.body.questions as { id: string; options: string[] }[]
    const answers = questions.map((question) => ({ id: question.id, type: 'choice', answer: B, probabilities: Object.fromEntries(question.options.map((option) => [option, option === B ? 0.9 : 0.1 / (question.options.length - 1)])) }))
    return { json: { id: 'dec_mock_1', object: 'decision', model: 'decider-1', created: 1_700_000_000, answers, usage: { prompt_tokens: 21, completion_tokens: 4, total_tokens: 25 } } }
  }

  test('its decision call is reserved and charged to the key; when its model is unpriced or the call does not fit, it is skipped:spend_cap and not made', async () => {
    await using env = await startGateways([A, B, DECIDER], { RT_DECISIONER_ENABLED: '1' })
    const { server } = env
    for (const gateway of [A, B]) await listCatalog(server, gateway, { [MODEL]: MINI })
    await listCatalog(server, DECIDER, { [MODEL]: MINI })
    env.mocks[DECIDER]!.handle(decider)
    const routing = { strategy: 'priority', targets: [A, B].map((gateway) => ({ provider_key_id: env.providers[gateway] })), decisioner: { provider_key_id: env.providers[DECIDER], objective: 'capability' } }
    const body = chatBody({ max_tokens: 100 })

    // Priced and within the cap: the call is made, reserved while the request runs, and charged.
    const key = await limitedKey(env, { usd_per_day: 1 }, { routing })
    const gate = latch()
    env.mocks[B]!.handle(async (request) => {
      await gate.opened
      return { json: chatCompletion(String(request.body?.model)) }
    })
    let decisionWorst = 0
    const decided = await whileHeld(gate, chat(server, key, body), async () => {
      await until('the chat call reaches the picked target', () => (env.mocks[B]!.calls('/chat/completions').length === 1 ? true : undefined))
      const decisionCalls = env.mocks[DECIDER]!.calls('/decisions')
      expect(decisionCalls).toHaveLength(1)
      // The decision call's worst case: its body's prompt bound and 4,096 completion tokens (the model lists no maximum).
      decisionWorst = worstCaseNano(pricingOf(MINI), measurePrompt(decisionCalls[0]!.body), { requested: undefined, choices: 1 }, 'decisions', routerBytes(decisionCalls[0]!.body))!
      expect(await usdToday(server, key)).toBe(worstOf(MINI, body) + decisionWorst)
    })
    expect(decided.status).toBe(200)
    expect(decided.headers.get('x-router-decisioner')).toStartWith(`pick:${B};`)
    const charged = costOf(MINI, 11, 7) + costOf(MINI, 21, 4)
    expect((await rowOf(server, decided.headers.get('x-router-request-id'))).cost_nano_usd).toBe(charged)
    expect(await usdToday(server, key)).toBe(charged)

    // The decider's catalog lists no price for the model: the call is not made, the rule serves.
    await listCatalog(server, DECIDER, { [MODEL]: null })
    const unpriced = await chat(server, key, body)
    expect(unpriced.status).toBe(200)
    expect(unpriced.headers.get('x-router-decisioner')).toBe('skipped:spend_cap;obj:capability')
    expect(unpriced.headers.get('x-router-provider')).toBe(A)
    expect(env.mocks[DECIDER]!.calls('/decisions')).toHaveLength(1)

    // Priced, but its worst case (4,096 completion tokens, $0.016) does not fit beside the request's under $0.01.
    await listCatalog(server, DECIDER, { [MODEL]: MINI })
    const tight = await limitedKey(env, { usd_per_day: 0.01 }, { routing })
    expect(worstOf(MINI, body) + decisionWorst).toBeGreaterThan(10_000_000)
    const skipped = await chat(server, tight, body)
    expect(skipped.status).toBe(200)
    expect(skipped.headers.get('x-router-decisioner')).toBe('skipped:spend_cap;obj:capability')
    expect(env.mocks[DECIDER]!.calls('/decisions')).toHaveLength(1)
    expect((await rowOf(server, skipped.headers.get('x-router-request-id'))).cost_nano_usd).toBe(costOf(MINI, 11, 7))
  })
})

describe('under load', () => {
  /** $10 per million prompt tokens, $40 per million completion tokens: a few thousand completion tokens are $0.08–$0.20. */
  const PRICEY: Listed = { prompt: 0.00001, completion: 0.00004 }

  type Kind = 'ordinary' | 'usage-less stream' | 'bound 1e300' | 'n 3' | 'both fields' | 'hang-up' | 'no bound, no usage'
  const kinds: Kind[] = ['ordinary', 'usage-less stream', 'bound 1e300', 'n 3', 'both fields', 'hang-up', 'no bound, no usage']

  function bodyFor(index: number, kind: Kind): Record<string, unknown> {
    const messages = [{ role: 'user', content: `request ${index}: ${kind}` }]
    const bound = 2000 + ((index * 397) % 3001)
    switch (kind) {
      case 'ordinary':
        return { model: MODEL, messages, max_tokens: bound }
      case 'usage-less stream':
        return { model: MODEL, messages, max_tokens: bound, stream: true }
      case 'bound 1e300':
        return { model: MODEL, messages, max_tokens: 1e300 }
      case 'n 3':
        return { model: MODEL, messages, max_tokens: 1000, n: 3 }
      case 'both fields':
        return { model: MODEL, messages, max_tokens: 100, max_completion_tokens: 4000 }
      case 'hang-up':
        return { model: MODEL, messages, max_tokens: 3000, stream: true }
      case 'no bound, no usage':
        return { model: MODEL, messages }
    }
  }

  /** What the mock served one request, whether or not it reported it. */
  interface Served {
    prompt: number
    completion: number
  }

  /**
   * An upstream that serves the most it was allowed: the largest output field it got, times `n`
   * (never more), and reports usage or not by kind; a hang-up's stream counts what it sent before
   * the router let go. Prompt tokens: the bytes of the texts sent and 4 a message (a chat template's),
   * no more than any tokenizer makes of them.
   */
  function greedyUpstream() {
    const served = new Map<number, Served>()
    const unbounded: number[] = []
    let openStreams = 0
    const handler: MockHandler = async (request: RecordedRequest) => {
      const body = request.body
      const texts = (body.messages as { content: string }[]).map((message) => message.content)
      const index = Number(/^request (\d+):/.exec(texts.at(-1)!)![1])
      const kind = kinds[index % kinds.length]!
      const prompt = texts.reduce((sum, text) => sum + Buffer.byteLength(text) + 4, 0)
      const fields = [body.max_tokens, body.max_completion_tokens, body.max_output_tokens].filter((value): value is number => typeof value === 'number')
      if (fields.length === 0) unbounded.push(index)
      const choices = typeof body.n === 'number' ? body.n : 1
      const bound = Math.max(0, ...fields) * choices
      const model = String(body.model)
      // Some latency, so requests overlap.
      await Bun.sleep(5 + ((index * 13) % 40))
      if (kind === 'hang-up') {
        const record: Served = { prompt, completion: 0 }
        served.set(index, record)
        const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`
        let sent = 0
        openStreams++
        const closed = () => {
          if (sent >= 0) openStreams--
          sent = -1
        }
        const stream = new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (sent < 0) return
            if (sent > 0) await Bun.sleep(20)
            if (sent < 0) return
            if (sent * 100 >= bound) {
              controller.close()
              return closed()
            }
            try {
              controller.enqueue(new TextEncoder().encode(chunk({ content: 'word '.repeat(20) })))
            } catch {
              return closed()
            }
            sent++
            record.completion = sent * 100
          },
          cancel: closed,
        })
        return new Response(stream, { headers: { 'content-type': 'text/event-stream' } })
      }
      const completion = kind === 'ordinary' && index % 2 === 1 ? Math.floor(bound / 3) : bound
      served.set(index, { prompt, completion })
      const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
      const reportsUsage = kind === 'ordinary' || kind === 'n 3' || kind === 'both fields'
      if (body.stream) return { sse: chunksWithoutUsage(model, ['Served', ' in', ' full.']) }
      const answer = chatCompletion(model, 'Served in full.', {
        choices: Array.from({ length: choices }, (_, choice) => ({ index: choice, message: { role: 'assistant', content: 'Served in full.' }, finish_reason: 'length' })),
        usage: reportsUsage ? usage : undefined,
      })
      return { json: answer }
    }
    return { served, unbounded, handler, openStreams: () => openStreams }
  }

  test('200 requests, 100 at a time, mixing the attacks on a $1 daily cap: what was served, what was charged and what the key shows all stay within $1', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    await listCatalog(server, 'openai', { 'gpt-4o-mini': PRICEY })
    const upstream = greedyUpstream()
    env.mocks.openai!.handle(upstream.handler)
    const key = await limitedKey(env, { usd_per_day: 1 })
    const cap = 1_000_000_000

    /** One request as a client sends it: a hang-up reads the first bytes and leaves. */
    async function send(index: number): Promise<{ index: number; kind: Kind; status: number; code: string | undefined; requestId: string | null }> {
      const kind = kinds[index % kinds.length]!
      const controller = new AbortController()
      const response = await fetch(`${server.rootUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...bearerHeader(key.secret), 'content-type': 'application/json' },
        body: JSON.stringify(bodyFor(index, kind)),
        signal: controller.signal,
      })
      const requestId = response.headers.get('x-router-request-id')
      if (kind === 'hang-up' && response.status === 200) {
        const reader = response.body!.getReader()
        await reader.read()
        controller.abort()
        await reader.read().catch(() => undefined)
        return { index, kind, status: 200, code: undefined, requestId }
      }
      const answer = await readCallResult(response)
      if (response.status === 200 && kind.includes('stream')) expect(answer.text.trimEnd().endsWith('data: [DONE]')).toBe(true)
      return { index, kind, status: response.status, code: answer.json?.error?.code, requestId }
    }

    const results: Awaited<ReturnType<typeof send>>[] = []
    for (const wave of [0, 1]) results.push(...(await Promise.all(Array.from({ length: 100 }, (_, index) => send(wave * 100 + index)))))
    await until('every upstream stream is closed', () => (upstream.openStreams() === 0 ? true : undefined))

    // Every answer is a success or the spend cap's refusal; the uncountable bound is always refused.
    for (const result of results) {
      expect([result.kind, result.status, result.code]).toEqual([result.kind, result.status === 200 ? 200 : 429, result.status === 200 ? undefined : 'key_budget_exhausted'])
      if (result.kind === 'bound 1e300') expect(result.status).toBe(429)
    }
    const admitted = results.filter((result) => result.status === 200)
    const refusedAttacksAside = results.filter((result) => result.status === 429 && result.kind !== 'bound 1e300')
    // The cap binds: a handful admitted, most refused; every request the upstream got carried a bound.
    expect(admitted.length).toBeGreaterThan(3)
    expect(refusedAttacksAside.length).toBeGreaterThan(50)
    expect(upstream.unbounded).toEqual([])
    expect([...upstream.served.keys()].sort((left, right) => left - right)).toEqual(admitted.map((result) => result.index).sort((left, right) => left - right))

    // Each request is charged at least what it was served (usage or not, whole or left early).
    const promptPerToken = Math.round(PRICEY.prompt * 1e9)
    const completionPerToken = Math.round(PRICEY.completion * 1e9)
    let servedTotal = 0
    let chargedTotal = 0
    for (const result of results) {
      const row = await rowOf(server, result.requestId)
      const served = upstream.served.get(result.index)
      const servedCost = served ? served.prompt * promptPerToken + served.completion * completionPerToken : 0
      servedTotal += servedCost
      chargedTotal += row.cost_nano_usd!
      expect({ index: result.index, kind: result.kind, undercharged: row.cost_nano_usd! < servedCost }).toEqual({ index: result.index, kind: result.kind, undercharged: false })
      if (result.kind === 'hang-up' && result.status === 200) expect(row.status).toBe(499)
    }
    expect(servedTotal).toBeLessThanOrEqual(cap)
    expect(chargedTotal).toBeLessThanOrEqual(cap)
    expect(rowsSpent(server, key)).toBe(chargedTotal)
    const shown = await usdToday(server, key)
    expect(shown).toBeLessThanOrEqual(cap)
    // Every request settled: what the key shows is what its rows were charged, to the nano-dollar.
    expect(shown).toBe(chargedTotal)
  })
})
