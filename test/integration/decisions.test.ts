/**
 * The decisions contract and the decisioner (CONTRACT §9, §6; SPEC "POST /decisions",
 * "Decisioner" under Routing behavior, X-Router-Decisioner, the routing rule's `decisioner`).
 *
 * - POST /v1/decisions on `decisions` keys: the body checked whole before anything is sent
 *   (400 invalid_decision_request naming the field), routed with failover over decision-capable
 *   targets, the gateway's answer checked (one answer per question, in order, options listed,
 *   choice probabilities summing to 1 ± 0.01) and then relayed as it came.
 * - The decisioner on chat-capable keys (RT_DECISIONER_ENABLED=1): skips, the in-code cost pick,
 *   one decision call otherwise, the X-Router-Decisioner header, the pick tried first, the model
 *   override, and the request-log row's `enrichment.decisioner`.
 *
 * Real pieces on 127.0.0.1: the service (harness/server) and one mock gateway per gateway kind
 * (harness/gateways), the decisioner's provider key pointed at a mock that records its /decisions calls.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import type { MockGateway, MockReply, RecordedRequest } from '../harness/mock-gateway'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'

// ---------------------------------------------------------------------------------------------
// Gateway kinds (src/gateways/catalog.ts)

/** Routable and decision-capable (`decisions: true`): chat targets, and decisions-key targets. */
const A = 'groq'
const B = 'together'
/** Routable: a third chat target. */
const C = 'fireworks'
/** Decision-only (`routable: false`, `decisions: true`), can host a decisioner. */
const DECIDER = 'not-diamond'
/** The other decision-only kind. */
const DECISION_ONLY = 'martian'

const MODEL = 'openai/gpt-4o-mini'
const OTHER_MODEL = 'openai/gpt-4.1-mini'

const flagOn = { RT_DECISIONER_ENABLED: '1' }

// ---------------------------------------------------------------------------------------------
// Helpers

async function createKey(server: TestServer, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const key = await createInferenceKey(server, body)
  return { id: key.id as string, secret: key.key as string }
}

/** A priority rule over these provider key ids, with an optional decisioner (its provider key is the DECIDER mock's). */
function rule(env: GatewaysEnv, providerKeyIds: string[], decisioner?: Record<string, unknown>) {
  return {
    strategy: 'priority',
    targets: providerKeyIds.map((id) => ({ provider_key_id: id })),
    ...(decisioner ? { decisioner: { provider_key_id: env.providers[DECIDER], ...decisioner } } : {}),
  }
}

const ids = (env: GatewaysEnv, ...gateways: string[]) => gateways.map((gateway) => env.providers[gateway]!)

/** A catalog for a gateway: each model listed with `[prompt, completion]` USD per token, or listed without a price (null). */
function seedCatalog(server: TestServer, gateway: string, models: Record<string, [number | string, number | string] | null>) {
  server.runtime.repositories.gatewayCatalogs.replaceCatalog(
    gateway,
    Date.now(),
    Object.entries(models).map(([id, price]) => ({
      modelId: id,
      canonicalId: id,
      object: JSON.stringify(price ? { id, object: 'model', pricing: { prompt: String(price[0]), completion: String(price[1]) } } : { id, object: 'model' }),
    })),
  )
}

/** $6 per million tokens (prompt + completion). */
const EXPENSIVE: [string, string] = ['0.000002', '0.000004']
/** $0.30 per million tokens. */
const CHEAP: [string, string] = ['0.0000001', '0.0000002']
/** $1 per million tokens. */
const ONE_DOLLAR: [string, string] = ['0.0000005', '0.0000005']

const chat = (server: TestServer, secret: string, body: Record<string, unknown> = {}): Promise<CallResult> =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...body }, bearerHeader(secret))

const decisionsCall = (server: TestServer, secret: string, body: unknown): Promise<CallResult> => httpCall(server, 'POST', '/v1/decisions', body, bearerHeader(secret))

const chatCalls = (mock: MockGateway) => mock.calls('/chat/completions')
const decisionCalls = (mock: MockGateway) => mock.calls('/decisions')
const decisionerHeader = (result: CallResult) => result.headers.get('x-router-decisioner')

function expectChatError(result: CallResult, status: number, code: string) {
  expect(result.status).toBe(status)
  expect(result.json?.error?.code).toBe(code)
  expect(typeof result.json.error.message).toBe('string')
  expect(result.headers.get('x-router-request-id')).toBeTruthy()
}

/** The key's latest request-log row (waits for the log queue). */
async function logRowOf(server: TestServer, keyId: string): Promise<Record<string, any>> {
  for (let attempt = 0; attempt < 50; attempt++) {
    server.runtime.logQueue.flush()
    const db = new Database(server.runtime.config.dbPath, { readonly: true })
    try {
      const row = db.query('select * from request_logs where key_id = ? order by seq desc limit 1').get(keyId) as Record<string, any> | null
      if (row) return row
    } finally {
      db.close()
    }
    await Bun.sleep(20)
  }
  throw new Error(`no request-log row for key ${keyId}`)
}

/** The number of request-log rows of a key (after flushing the queue). */
function logCountOf(server: TestServer, keyId: string): number {
  server.runtime.logQueue.flush()
  const db = new Database(server.runtime.config.dbPath, { readonly: true })
  try {
    return (db.query('select count(*) as n from request_logs where key_id = ?').get(keyId) as { n: number }).n
  } finally {
    db.close()
  }
}

/** Waits until the key has `count` log rows, then returns the latest. */
async function logRowAfter(server: TestServer, keyId: string, count: number): Promise<Record<string, any>> {
  for (let attempt = 0; attempt < 50 && logCountOf(server, keyId) < count; attempt++) await Bun.sleep(20)
  return logRowOf(server, keyId)
}

const enrichmentOf = (row: Record<string, any>) => (row.enrichment === null || row.enrichment === undefined ? null : JSON.parse(row.enrichment))

/** A decision answer object (CONTRACT §9). */
function decisionAnswer(answers: unknown[], model = 'decider-1') {
  return { id: 'dec_mock_1', object: 'decision', model, created: 1_700_000_000, answers, usage: { prompt_tokens: 21, completion_tokens: 4, total_tokens: 25 } }
}

/** A choice answer: the top option and the probabilities as given. */
function choiceAnswer(id: string, probabilities: Record<string, number>) {
  const top = Object.entries(probabilities).sort((left, right) => right[1] - left[1])[0]![0]
  return { id, type: 'choice', answer: top, probabilities }
}

/** The decider answers each asked question from `probabilities` (by question id). */
function scriptDecider(mock: MockGateway, probabilities: Record<string, Record<string, number>>) {
  mock.handle((request) => {
    if (!request.path.endsWith('/decisions')) return undefined
    const questions = request.body.questions as { id: string }[]
    return { json: decisionAnswer(questions.map((question) => choiceAnswer(question.id, probabilities[question.id]!))) }
  })
}

/** The body of the one decision call the decider got. */
function onlyDecisionCall(mock: MockGateway): RecordedRequest {
  const calls = decisionCalls(mock)
  expect(calls).toHaveLength(1)
  return calls[0]!
}

// ---------------------------------------------------------------------------------------------
// POST /v1/decisions

/** A valid decisions request: a choice, a boolean and a number question. */
const validQuestions = [
  { id: 'next_move', type: 'choice', prompt: 'Which move next?', options: ['rock', 'paper', 'scissors'] },
  { id: 'escalate', type: 'boolean', prompt: 'Escalate to a human?' },
  { id: 'budget', type: 'number', prompt: 'How many dollars?', min: 0, max: 100 },
]

/** A well-formed answer to validQuestions; `moveProbabilities` sets the choice's probabilities. */
function answerToValid(moveProbabilities: Record<string, number> = { rock: 0.2, paper: 0.7, scissors: 0.1 }) {
  return decisionAnswer([
    choiceAnswer('next_move', moveProbabilities),
    { id: 'escalate', type: 'boolean', answer: false, probability: 0.12 },
    { id: 'budget', type: 'number', answer: 40, interval: [30, 55] },
  ])
}

const startDecisionsEnv = () => startGateways([A, B, DECISION_ONLY])

async function decisionsKey(env: GatewaysEnv, ...gateways: string[]) {
  return createKey(env.server, { api_shape: 'decisions', routing: rule(env, ids(env, ...gateways)) })
}

describe('POST /v1/decisions', () => {
  test('a valid request goes to the target`s …/decisions as sent; its answer comes back byte for byte, with routing headers and a log row', async () => {
    await using env = await startDecisionsEnv()
    const key = await decisionsKey(env, A, B)
    // The gateway's own bytes: odd spacing and field order must survive.
    const answerText = `{ "object":"decision","id":"dec_up_7" , "model":"NotDiamond/Router-V1","created":1700000000,\n "answers":${JSON.stringify(answerToValid().answers)},"usage":{"prompt_tokens":33,"completion_tokens":9,"total_tokens":42},"extra":"kept"}`
    env.mocks[A]!.handle((request) => (request.path.endsWith('/decisions') ? { status: 200, text: answerText, headers: { 'content-type': 'application/json' } } : undefined))
    // The client's bytes: a mixed-case model id no catalog knows, spacing of its own, state of any shape.
    const sent = `{"model":"NotDiamond/Router-V1",  "state":{"turn":3,"history":["a","b"],"nested":{"x":null}},"questions":${JSON.stringify(validQuestions)}}`
    const result = await decisionsCall(env.server, key.secret, sent)
    expect(result.status).toBe(200)
    expect(result.text).toBe(answerText)
    expect(result.headers.get('content-type')).toContain('application/json')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(result.headers.get('x-router-attempts')).toBe('1')
    expect(result.headers.get('x-router-failover')).toBeNull()
    expect(result.headers.get('x-router-request-id')).toBeTruthy()

    const calls = decisionCalls(env.mocks[A]!)
    expect(calls).toHaveLength(1)
    expect(calls[0]!.method).toBe('POST')
    expect(calls[0]!.rawBody).toBe(sent)
    expect(calls[0]!.body.model).toBe('NotDiamond/Router-V1')
    expect(calls[0]!.headers.authorization).toBe(`Bearer sk-${A}-secret`)
    expect(env.mocks[B]!.requests).toHaveLength(0)

    const row = await logRowOf(env.server, key.id)
    expect(row.endpoint).toBe('decisions')
    expect(row.status).toBe(200)
    expect(row.gateway).toBe(A)
    expect(row.model).toBe('NotDiamond/Router-V1')
    expect(row.attempts).toBe(1)
    expect(row.input_tokens).toBe(33)
    expect(row.output_tokens).toBe(9)
  })

  test('every malformed request is 400 invalid_decision_request naming the field, and nothing is sent', async () => {
    await using env = await startDecisionsEnv()
    const key = await decisionsKey(env, A, B)
    const choice = (options: unknown) => ({ id: 'q', type: 'choice', prompt: 'Pick one', options })
    const number = (bounds: Record<string, unknown>) => ({ id: 'n', type: 'number', prompt: 'How many?', ...bounds })
    const body = (questions: unknown, extra: Record<string, unknown> = {}) => ({ model: 'decider-1', state: { s: 1 }, questions, ...extra })
    const sixteen = Array.from({ length: 16 }, (_, index) => ({ id: `q${index}`, type: 'boolean', prompt: 'Yes?' }))
    const cases: { name: string; body: unknown; field: string | RegExp }[] = [
      { name: 'missing model', body: { state: {}, questions: [validQuestions[1]] }, field: 'model' },
      { name: 'empty model', body: { model: '', state: {}, questions: [validQuestions[1]] }, field: 'model' },
      { name: 'missing state', body: { model: 'decider-1', questions: [validQuestions[1]] }, field: 'state' },
      { name: 'missing questions', body: { model: 'decider-1', state: {} }, field: 'questions' },
      { name: '0 questions', body: body([]), field: 'questions' },
      { name: '17 questions', body: body([...sixteen, { id: 'q16', type: 'boolean', prompt: 'Yes?' }]), field: 'questions' },
      { name: 'duplicate id', body: body([validQuestions[1], { ...validQuestions[1] }]), field: /questions\[1\]\.id|\bid\b/ },
      { name: 'id of 65 chars', body: body([{ id: 'x'.repeat(65), type: 'boolean', prompt: 'Yes?' }]), field: /\bid\b/ },
      { name: 'empty id', body: body([{ id: '', type: 'boolean', prompt: 'Yes?' }]), field: /\bid\b/ },
      { name: 'missing prompt', body: body([{ id: 'q', type: 'boolean' }]), field: 'prompt' },
      { name: 'bad type', body: body([{ id: 'q', type: 'ranking', prompt: 'Rank' }]), field: 'type' },
      { name: 'choice with 1 option', body: body([choice(['only'])]), field: 'options' },
      { name: 'choice with 33 options', body: body([choice(Array.from({ length: 33 }, (_, index) => `o${index}`))]), field: 'options' },
      { name: 'choice with duplicate options', body: body([choice(['a', 'b', 'a'])]), field: 'options' },
      { name: 'choice with non-string options', body: body([choice(['a', 2])]), field: 'options' },
      { name: 'choice without options', body: body([{ id: 'q', type: 'choice', prompt: 'Pick' }]), field: 'options' },
      { name: 'number min not a number', body: body([number({ min: '0' })]), field: 'min' },
      { name: 'number max not a number', body: body([number({ max: 'ten' })]), field: 'max' },
      { name: 'number min > max', body: body([number({ min: 10, max: 1 })]), field: /min|max/ },
    ]
    // Sanity: the boundaries themselves are fine (16 questions, 32 options, 64-char id).
    env.mocks[A]!.handle((request) => {
      if (!request.path.endsWith('/decisions')) return undefined
      const questions = request.body.questions as any[]
      return {
        json: decisionAnswer(
          questions.map((question) =>
            question.type === 'choice'
              ? choiceAnswer(question.id, Object.fromEntries((question.options as string[]).map((option, index) => [option, index === 0 ? 1 : 0])))
              : { id: question.id, type: 'boolean', answer: true, probability: 0.9 },
          ),
        ),
      }
    })
    for (const { name, body: sent, field } of cases) {
      const result = await decisionsCall(env.server, key.secret, sent)
      if (result.status !== 400 || result.json?.error?.code !== 'invalid_decision_request') throw new Error(`${name}: ${result.status} ${result.text}`)
      expectChatError(result, 400, 'invalid_decision_request')
      const message = result.json.error.message as string
      if (typeof field === 'string' ? !message.includes(field) : !field.test(message)) throw new Error(`${name}: the message does not name ${field}: ${message}`)
      expect(result.headers.get('x-router-attempts')).toBe('0')
    }
    expect(env.mocks[A]!.requests).toHaveLength(0)
    expect(env.mocks[B]!.requests).toHaveLength(0)

    const edges = body([
      ...sixteen.slice(0, 14),
      { id: 'y'.repeat(64), type: 'boolean', prompt: 'Yes?' },
      choice(Array.from({ length: 32 }, (_, index) => `o${index}`)),
    ])
    const accepted = await decisionsCall(env.server, key.secret, edges)
    expect(accepted.status).toBe(200)
    // `state` may be any JSON value, null included.
    const nullState = await decisionsCall(env.server, key.secret, { model: 'decider-1', state: null, questions: [validQuestions[1]] })
    expect(nullState.status).toBe(200)
    expect(decisionCalls(env.mocks[A]!)).toHaveLength(2)
  })

  test('an answer that does not answer the questions fails over to the next target; all targets so: 502 upstream_unreadable; a sum of 1.005 is accepted', async () => {
    await using env = await startDecisionsEnv()
    const key = await decisionsKey(env, A, B)
    const request = { model: 'decider-1', state: { board: 'x..' }, questions: validQuestions }
    const good = answerToValid()
    const bad: Record<string, unknown> = {
      'probabilities sum to 0.9': answerToValid({ rock: 0.2, paper: 0.6, scissors: 0.1 }),
      'answers missing': decisionAnswer([]),
      'one answer short': decisionAnswer(good.answers.slice(0, 2)),
      'answers out of order': decisionAnswer([good.answers[1], good.answers[0], good.answers[2]]),
      'an answer that is not an option': decisionAnswer([{ ...good.answers[0]!, answer: 'lizard' }, good.answers[1], good.answers[2]]),
      'a probability for an option not listed': decisionAnswer([choiceAnswer('next_move', { rock: 0.2, paper: 0.6, lizard: 0.2 }), good.answers[1], good.answers[2]]),
    }
    let firstAnswer: unknown = good
    env.mocks[A]!.handle((recorded) => (recorded.path.endsWith('/decisions') ? { json: firstAnswer } : undefined))
    env.mocks[B]!.handle((recorded) => (recorded.path.endsWith('/decisions') ? { json: good } : undefined))
    for (const [name, answer] of Object.entries(bad)) {
      firstAnswer = answer
      const result = await decisionsCall(env.server, key.secret, request)
      if (result.status !== 200) throw new Error(`${name}: ${result.status} ${result.text}`)
      expect(result.headers.get('x-router-provider')).toBe(B)
      expect(result.headers.get('x-router-attempts')).toBe('2')
      expect(result.headers.get('x-router-failover') ?? '').toStartWith(`${A}:`)
      expect(result.json).toEqual(good)
    }
    expect(decisionCalls(env.mocks[A]!)).toHaveLength(Object.keys(bad).length)
    expect(decisionCalls(env.mocks[B]!)).toHaveLength(Object.keys(bad).length)

    // Within 1 ± 0.01: accepted from the first target.
    firstAnswer = answerToValid({ rock: 0.2, paper: 0.705, scissors: 0.1 })
    const tolerated = await decisionsCall(env.server, key.secret, request)
    expect(tolerated.status).toBe(200)
    expect(tolerated.headers.get('x-router-provider')).toBe(A)
    expect(tolerated.headers.get('x-router-failover')).toBeNull()
    expect(tolerated.json).toEqual(firstAnswer as any)

    // Every target answers unusably.
    firstAnswer = bad['probabilities sum to 0.9']
    env.mocks[B]!.handle((recorded) => (recorded.path.endsWith('/decisions') ? { json: decisionAnswer([]) } : undefined))
    const failed = await decisionsCall(env.server, key.secret, request)
    expectChatError(failed, 502, 'upstream_unreadable')
    expect(failed.headers.get('x-router-attempts')).toBe('2')
    const failover = failed.headers.get('x-router-failover') ?? ''
    expect(failover).toContain(`${A}:`)
    expect(failover).toContain(`${B}:`)
  })

  test('a decision-only gateway kind serves decisions; a chat key whose only target is decision-only answers 501', async () => {
    await using env = await startDecisionsEnv()
    const catalog = (await env.server.call('GET', '/api/v1/gateways')).body.data as { id: string; routable: boolean; decisions: boolean }[]
    expect(catalog.find((gateway) => gateway.id === DECISION_ONLY)).toMatchObject({ routable: false, decisions: true })
    const key = await decisionsKey(env, DECISION_ONLY)
    env.mocks[DECISION_ONLY]!.handle((request) => (request.path.endsWith('/decisions') ? { json: answerToValid() } : undefined))
    const result = await decisionsCall(env.server, key.secret, { model: 'martian/router', state: 'free text state', questions: validQuestions })
    expect(result.status).toBe(200)
    expect(result.headers.get('x-router-provider')).toBe(DECISION_ONLY)
    expect(result.json).toEqual(answerToValid())
    expect(decisionCalls(env.mocks[DECISION_ONLY]!)).toHaveLength(1)

    const chatKey = await createKey(env.server, { routing: rule(env, ids(env, DECISION_ONLY)) })
    const refused = await chat(env.server, chatKey.secret)
    expectChatError(refused, 501, 'gateway_not_supported')
    expect(refused.headers.get('x-router-attempts')).toBe('0')
    expect(chatCalls(env.mocks[DECISION_ONLY]!)).toHaveLength(0)
  })

  test('keys of every other shape get 404 wrong_api_shape on /v1/decisions, with no upstream call', async () => {
    await using env = await startDecisionsEnv()
    const request = { model: 'decider-1', state: {}, questions: validQuestions }
    for (const shape of ['chat', 'chat_router', 'messages', 'content']) {
      const key = await createKey(env.server, { api_shape: shape, routing: rule(env, ids(env, A, B)) })
      const result = await decisionsCall(env.server, key.secret, request)
      expect(result.status).toBe(404)
      expect(result.text).toContain('wrong_api_shape')
      if (shape === 'chat' || shape === 'chat_router') expectChatError(result, 404, 'wrong_api_shape')
    }
    expect(env.mocks[A]!.requests).toHaveLength(0)
    expect(env.mocks[B]!.requests).toHaveLength(0)
  })
})

// ---------------------------------------------------------------------------------------------
// The decisioner

const startDecisionerEnv = (extraEnv: Record<string, string> = flagOn) => startGateways([A, B, C, DECIDER], extraEnv)

/** A chat key over these gateways' provider keys (rule order as given) with a decisioner. */
async function decisionerKey(env: GatewaysEnv, gateways: string[], decisioner: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return createKey(env.server, { ...extra, routing: rule(env, ids(env, ...gateways), decisioner) })
}

/** The log row's `enrichment.decisioner` is `{header}` (no decision call) or `{header, ms}` (a call was made). */
async function expectLoggedDecision(server: TestServer, keyId: string, header: string, called: boolean, rows?: number) {
  const row = rows === undefined ? await logRowOf(server, keyId) : await logRowAfter(server, keyId, rows)
  const decisioner = enrichmentOf(row)?.decisioner
  expect(decisioner?.header).toBe(header)
  if (called) {
    expect(typeof decisioner.ms).toBe('number')
    expect(decisioner.ms).toBeGreaterThanOrEqual(0)
  } else {
    expect(decisioner.ms).toBeUndefined()
  }
  return row
}

describe('the decisioner: flag and skips', () => {
  test('flag off: saved config kept, no header, no decision call, the rule order unchanged', async () => {
    await using env = await startDecisionerEnv({})
    seedCatalog(env.server, A, { [MODEL]: EXPENSIVE })
    seedCatalog(env.server, B, { [MODEL]: CHEAP })
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.05, [B]: 0.9, [C]: 0.05 } })
    const key = await decisionerKey(env, [A, B, C], { objective: 'cost' })
    const stored = await env.server.call('GET', `/api/v1/keys/${key.id}/routing`)
    expect(stored.status).toBe(200)
    expect(stored.body.data.decisioner).toMatchObject({ provider_key_id: env.providers[DECIDER], objective: 'cost' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBeNull()
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[A]!)).toHaveLength(1)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
    const row = await logRowOf(env.server, key.id)
    expect(enrichmentOf(row)?.decisioner).toBeUndefined()
  })

  test('skipped:single_target with one target gateway (two provider keys of one kind, or one target): no call, the first target served', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: CHEAP })
    const second = (await storeProvider(env.server, { gateway: A, key: 'sk-groq-second-secret' })).id as string
    const twoOfOneKind = await createKey(env.server, { routing: rule(env, [env.providers[A]!, second], { objective: 'cost' }) })
    const result = await chat(env.server, twoOfOneKind.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe('skipped:single_target;obj:cost')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[A]!)).toHaveLength(1)
    expect(chatCalls(env.mocks[A]!)[0]!.headers.authorization).toBe(`Bearer sk-${A}-secret`)
    await expectLoggedDecision(env.server, twoOfOneKind.id, 'skipped:single_target;obj:cost', false)

    const oneTarget = await decisionerKey(env, [B], { objective: 'capability' })
    const single = await chat(env.server, oneTarget.secret)
    expect(single.status).toBe(200)
    expect(decisionerHeader(single)).toBe('skipped:single_target;obj:capability')
    expect(single.headers.get('x-router-provider')).toBe(B)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
  })

  test('skipped:no_facts when no target prices the model (listed without a price is unknown, not free): no call, the first target served', async () => {
    await using env = await startDecisionerEnv()
    // Listed without pricing on A and B; a price for some other model does not count.
    seedCatalog(env.server, A, { [MODEL]: null, 'openai/gpt-4o': EXPENSIVE })
    seedCatalog(env.server, B, { [MODEL]: null })
    const key = await decisionerKey(env, [A, B, C], { objective: 'cost' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe('skipped:no_facts;obj:cost')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
    await expectLoggedDecision(env.server, key.id, 'skipped:no_facts;obj:cost', false)
  })

  test('skipped:over_budget when max_usd_m is below every listed price: no call, the first target served', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: EXPENSIVE })
    seedCatalog(env.server, B, { [MODEL]: CHEAP })
    const key = await decisionerKey(env, [A, B], { objective: 'cost', max_usd_m: 0.1 })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe('skipped:over_budget;obj:cost')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
    await expectLoggedDecision(env.server, key.id, 'skipped:over_budget;obj:cost', false)
  })
})

describe('the decisioner: cost picked in code', () => {
  test('a unique cheapest target is picked with no decision call and served first; when it fails, the rule fails over to the rest', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: EXPENSIVE })
    seedCatalog(env.server, B, { [MODEL]: CHEAP })
    // Budget above the cheap price only: the pick is still B.
    const key = await decisionerKey(env, [A, B], { objective: 'cost', max_usd_m: 1 })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(`pick:${B};via:code;obj:cost`)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(result.headers.get('x-router-attempts')).toBe('1')
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
    expect(chatCalls(env.mocks[B]!)[0]!.body.model).toBe(MODEL)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
    await expectLoggedDecision(env.server, key.id, `pick:${B};via:code;obj:cost`, false, 1)

    env.mocks[B]!.handle((request) => (request.path.endsWith('/chat/completions') ? { status: 500, json: { error: { message: 'boom' } } } : undefined))
    const failedOver = await chat(env.server, key.secret)
    expect(failedOver.status).toBe(200)
    expect(decisionerHeader(failedOver)).toBe(`pick:${B};via:code;obj:cost`)
    expect(failedOver.headers.get('x-router-provider')).toBe(A)
    expect(failedOver.headers.get('x-router-failover')).toBe(`${B}:server-error`)
    expect(failedOver.headers.get('x-router-attempts')).toBe('2')
    expect(chatCalls(env.mocks[A]!)).toHaveLength(1)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
  })

  test('an unpriced target is unknown, never free: the priced one is picked in code', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: null })
    seedCatalog(env.server, B, { [MODEL]: EXPENSIVE })
    const key = await decisionerKey(env, [A, B], { objective: 'cost' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(`pick:${B};via:code;obj:cost`)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(env.mocks[DECIDER]!.requests).toHaveLength(0)
  })

  test('a price tie on cost makes one decision call, and its confident pick is served', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: ONE_DOLLAR })
    seedCatalog(env.server, B, { [MODEL]: [0.0000005, 0.0000005] })
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.1, [B]: 0.9 } })
    const key = await decisionerKey(env, [A, B], { objective: 'cost' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(`pick:${B};choice:${B};conf:0.80;p:0.90;obj:cost`)
    expect(result.headers.get('x-router-provider')).toBe(B)
    const call = onlyDecisionCall(env.mocks[DECIDER]!)
    expect(call.body.questions).toHaveLength(1)
    expect(call.body.questions[0]).toMatchObject({ id: 'target', type: 'choice', options: [A, B] })
    await expectLoggedDecision(env.server, key.id, `pick:${B};choice:${B};conf:0.80;p:0.90;obj:cost`, true)
  })
})

describe('the decisioner: the decision call', () => {
  test('capability: one call to the decisioner`s …/decisions (question `target` over the gateways in rule order, a state); a confident answer is picked and served first', async () => {
    await using env = await startDecisionerEnv()
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.15, [B]: 0.8, [C]: 0.05 } })
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability', notes: 'Prefer strong reasoning.' })
    const expected = `pick:${B};choice:${B};conf:0.65;p:0.80;obj:capability`
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(expected)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(result.headers.get('x-router-attempts')).toBe('1')
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)

    const call = onlyDecisionCall(env.mocks[DECIDER]!)
    expect(call.method).toBe('POST')
    expect(call.headers.authorization).toBe(`Bearer sk-${DECIDER}-secret`)
    expect(call.body.questions).toHaveLength(1)
    expect(call.body.questions[0]).toMatchObject({ id: 'target', type: 'choice', options: [A, B, C] })
    expect(typeof call.body.questions[0].prompt).toBe('string')
    expect(call.body.questions[0].prompt.length).toBeGreaterThan(0)
    expect('state' in call.body).toBe(true)
    expect(call.body.state).not.toBeNull()
    expect(typeof call.body.model).toBe('string')
    // The decision call is not served as the client's chat.
    expect(chatCalls(env.mocks[DECIDER]!)).toHaveLength(0)
    await expectLoggedDecision(env.server, key.id, expected, true, 1)

    // The pick fails: the rest of the rule follows, in its order.
    env.mocks[B]!.handle((request) => (request.path.endsWith('/chat/completions') ? { status: 503, json: { error: { message: 'down' } } } : undefined))
    const failedOver = await chat(env.server, key.secret)
    expect(failedOver.status).toBe(200)
    expect(decisionerHeader(failedOver)).toBe(expected)
    expect(failedOver.headers.get('x-router-provider')).toBe(A)
    expect(failedOver.headers.get('x-router-failover')).toBe(`${B}:server-error`)
    expect(chatCalls(env.mocks[C]!)).toHaveLength(0)
  })

  test('p(top) below 0.5: skipped:low_confidence, the rule`s first target served', async () => {
    await using env = await startDecisionerEnv()
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.35, [B]: 0.45, [C]: 0.2 } })
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe('skipped:low_confidence;obj:capability')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    expect(decisionCalls(env.mocks[DECIDER]!)).toHaveLength(1)
    await expectLoggedDecision(env.server, key.id, 'skipped:low_confidence;obj:capability', true)
  })

  test('the decision call fails (500, not JSON, an answer that breaks the contract): skipped:jev_error, the rule`s first target served', async () => {
    await using env = await startDecisionerEnv()
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability' })
    const failures: Record<string, () => MockReply> = {
      'HTTP 500': () => ({ status: 500, json: { error: { message: 'decider down' } } }),
      'not JSON': () => ({ status: 200, text: 'this is not JSON', headers: { 'content-type': 'application/json' } }),
      'probabilities sum to 0.9': () => ({ json: decisionAnswer([choiceAnswer('target', { [A]: 0.1, [B]: 0.7, [C]: 0.1 })]) }),
      'no answers': () => ({ json: decisionAnswer([]) }),
      'an option not offered': () => ({ json: decisionAnswer([choiceAnswer('target', { [A]: 0.1, openrouter: 0.9 })]) }),
    }
    let failure = failures['HTTP 500']!
    env.mocks[DECIDER]!.handle((request) => (request.path.endsWith('/decisions') ? failure() : undefined))
    let rows = 0
    for (const [name, make] of Object.entries(failures)) {
      failure = make
      const result = await chat(env.server, key.secret)
      if (result.status !== 200 || decisionerHeader(result) !== 'skipped:jev_error;obj:capability') throw new Error(`${name}: ${result.status} ${decisionerHeader(result)} ${result.text}`)
      expect(result.headers.get('x-router-provider')).toBe(A)
      rows++
      await expectLoggedDecision(env.server, key.id, 'skipped:jev_error;obj:capability', true, rows)
    }
    expect(decisionCalls(env.mocks[DECIDER]!)).toHaveLength(Object.keys(failures).length)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    expect(chatCalls(env.mocks[C]!)).toHaveLength(0)
  })

  test('a decision call slower than 3 s: skipped:jev_error, and the request is still answered by the rule`s first target in time', async () => {
    await using env = await startDecisionerEnv()
    env.mocks[DECIDER]!.handle((request) =>
      request.path.endsWith('/decisions') ? { delayMs: 3500, json: decisionAnswer([choiceAnswer('target', { [A]: 0.05, [B]: 0.9, [C]: 0.05 })]) } : undefined,
    )
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability' })
    const started = performance.now()
    const result = await chat(env.server, key.secret)
    const elapsed = performance.now() - started
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe('skipped:jev_error;obj:capability')
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(elapsed).toBeLessThan(4500)
    expect(elapsed).toBeGreaterThanOrEqual(2900)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(0)
    const row = await expectLoggedDecision(env.server, key.id, 'skipped:jev_error;obj:capability', true)
    expect(enrichmentOf(row).decisioner.ms).toBeGreaterThanOrEqual(2900)
    expect(enrichmentOf(row).decisioner.ms).toBeLessThan(3500)
  }, 15_000)

  test('allow_model_override with models: a second question `model` over the inbound and allowed models; a confident other model is sent upstream', async () => {
    await using env = await startDecisionerEnv()
    for (const gateway of [A, B, C]) seedCatalog(env.server, gateway, { [MODEL]: null, [OTHER_MODEL]: null })
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.15, [B]: 0.8, [C]: 0.05 }, model: { [MODEL]: 0.1, [OTHER_MODEL]: 0.9 } })
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability', allow_model_override: true, models: [OTHER_MODEL] })
    const expected = `pick:${B};model:${OTHER_MODEL};choice:${B};conf:0.65;p:0.80;obj:capability`
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(expected)
    expect(result.headers.get('x-router-provider')).toBe(B)
    const call = onlyDecisionCall(env.mocks[DECIDER]!)
    expect(call.body.questions).toHaveLength(2)
    expect(call.body.questions[0]).toMatchObject({ id: 'target', type: 'choice', options: [A, B, C] })
    expect(call.body.questions[1]).toMatchObject({ id: 'model', type: 'choice', options: [MODEL, OTHER_MODEL] })
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
    expect(chatCalls(env.mocks[B]!)[0]!.body.model).toBe(OTHER_MODEL)
    const row = await expectLoggedDecision(env.server, key.id, expected, true)
    expect(row.upstream_model).toBe(OTHER_MODEL)

    // `models: []`: no override, so no model question.
    const noModels = await decisionerKey(env, [A, B, C], { objective: 'capability', allow_model_override: true, models: [] })
    const plain = await chat(env.server, noModels.secret)
    expect(plain.status).toBe(200)
    expect(decisionerHeader(plain)).toBe(`pick:${B};choice:${B};conf:0.65;p:0.80;obj:capability`)
    const calls = decisionCalls(env.mocks[DECIDER]!)
    expect(calls).toHaveLength(2)
    expect(calls[1]!.body.questions).toHaveLength(1)
    expect(calls[1]!.body.questions[0].id).toBe('target')
    expect(chatCalls(env.mocks[B]!)[1]!.body.model).toBe(MODEL)
  })

  test('a long override id (over 256 chars) is used: sent upstream whole; the header stays within 500 chars, its pairs whole but the model value cut', async () => {
    await using env = await startDecisionerEnv()
    // SPEC "Limits": the header is capped at 500 chars; nothing caps a model id of the key's `models`.
    const longModel = `openai/${'l'.repeat(293)}`
    const longerModel = `openai/${'m'.repeat(593)}`
    for (const gateway of [A, B, C]) seedCatalog(env.server, gateway, { [MODEL]: null, [longModel]: null, [longerModel]: null })

    // 300 chars: the header fits whole.
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.15, [B]: 0.8, [C]: 0.05 }, model: { [MODEL]: 0.1, [longModel]: 0.9 } })
    const key = await decisionerKey(env, [A, B, C], { objective: 'capability', allow_model_override: true, models: [longModel] })
    const expected = `pick:${B};model:${longModel};choice:${B};conf:0.65;p:0.80;obj:capability`
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(expected)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(chatCalls(env.mocks[B]!).map((call) => call.body.model)).toEqual([longModel])
    const row = await expectLoggedDecision(env.server, key.id, expected, true)
    expect(row.upstream_model).toBe(longModel)

    // 600 chars: the whole header would be 670; the model's value is shortened so the rest stays whole.
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.15, [B]: 0.8, [C]: 0.05 }, model: { [MODEL]: 0.1, [longerModel]: 0.9 } })
    const longer = await decisionerKey(env, [A, B, C], { objective: 'capability', allow_model_override: true, models: [longerModel] })
    const cut = await chat(env.server, longer.secret)
    expect(cut.status).toBe(200)
    const header = decisionerHeader(cut)!
    expect(header.length).toBeLessThanOrEqual(500)
    expect(header.length).toBe(500)
    const pairs = header.split(';').map((pair) => [pair.slice(0, pair.indexOf(':')), pair.slice(pair.indexOf(':') + 1)])
    expect(pairs.map(([name]) => name)).toEqual(['pick', 'model', 'choice', 'conf', 'p', 'obj'])
    expect(header).toStartWith(`pick:${B};model:openai/mmm`)
    expect(header).toEndWith(`;choice:${B};conf:0.65;p:0.80;obj:capability`)
    expect(longerModel.startsWith(pairs[1]![1]!)).toBe(true)
    expect(cut.headers.get('x-router-provider')).toBe(B)
    expect(chatCalls(env.mocks[B]!).map((call) => call.body.model)).toEqual([longModel, longerModel])
    const longerRow = await expectLoggedDecision(env.server, longer.id, header, true)
    expect(longerRow.upstream_model).toBe(longerModel)
  })
})

describe('the decisioner: a long override no catalog lists', () => {
  test('a 300- or 600-character model of the key`s list that no catalog lists is used as routing would send it: whole, to the picked target; the header cut to 500 characters', async () => {
    await using env = await startDecisionerEnv()
    // The catalogs list the inbound model only: the override is forwarded untouched, as the rule would forward it.
    for (const gateway of [A, B, C]) seedCatalog(env.server, gateway, { [MODEL]: null })
    for (const length of [300, 600]) {
      const longModel = `vendor/${'o'.repeat(length - 7)}`
      scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.15, [B]: 0.8, [C]: 0.05 }, model: { [MODEL]: 0.1, [longModel]: 0.9 } })
      const key = await decisionerKey(env, [A, B, C], { objective: 'capability', allow_model_override: true, models: [longModel] })
      const result = await chat(env.server, key.secret)
      expect(result.status).toBe(200)
      expect(result.headers.get('x-router-provider')).toBe(B)
      expect(chatCalls(env.mocks[B]!).at(-1)!.body.model).toBe(longModel)
      const header = decisionerHeader(result)!
      expect(header.length).toBeLessThanOrEqual(500)
      expect(header).toStartWith(`pick:${B};model:vendor/ooo`)
    }
  })
})

describe('the decisioner: reading the answer, and the fallbacks of a pick', () => {
  test("the top option is the most probable one, whatever the answer field names", async () => {
    await using env = await startDecisionerEnv()
    for (const gateway of [A, B]) seedCatalog(env.server, gateway, { [MODEL]: null })
    env.mocks[DECIDER]!.handle((request) =>
      request.path.endsWith('/decisions') ? { json: decisionAnswer([{ id: 'target', type: 'choice', answer: A, probabilities: { [A]: 0.3, [B]: 0.7 } }]) } : undefined,
    )
    const key = await decisionerKey(env, [A, B], { objective: 'capability' })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(`pick:${B};choice:${B};conf:0.40;p:0.70;obj:capability`)
    expect(result.headers.get('x-router-provider')).toBe(B)
  })

  test('an overridden model is sent to the pick only: when it fails there, the inbound model is the fallback', async () => {
    await using env = await startDecisionerEnv()
    // Only B lists the other model; A lists the inbound one.
    seedCatalog(env.server, A, { [MODEL]: null })
    seedCatalog(env.server, B, { [MODEL]: null, [OTHER_MODEL]: null })
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.1, [B]: 0.9 }, model: { [MODEL]: 0.1, [OTHER_MODEL]: 0.9 } })
    env.mocks[B]!.handle((request) => (request.path.endsWith('/chat/completions') && request.body.model === OTHER_MODEL ? { status: 500, json: { error: { message: 'down' } } } : undefined))
    const key = await decisionerKey(env, [A, B], { objective: 'capability', allow_model_override: true, models: [OTHER_MODEL] })
    const result = await chat(env.server, key.secret)
    expect(result.status).toBe(200)
    expect(decisionerHeader(result)).toBe(`pick:${B};model:${OTHER_MODEL};choice:${B};conf:0.80;p:0.90;obj:capability`)
    // The pick with the other model first, then the rule as it was, with the inbound model.
    expect(chatCalls(env.mocks[B]!).map((call) => call.body.model)).toEqual([OTHER_MODEL])
    expect(chatCalls(env.mocks[A]!).map((call) => call.body.model)).toEqual([MODEL])
    expect(result.headers.get('x-router-provider')).toBe(A)
    expect(result.headers.get('x-router-failover')).toBe(`${B}:server-error`)
  })
})

describe('the decisioner on other endpoints', () => {
  test('a messages-shape key: the pick applies on /v1/messages too (header, the picked target served)', async () => {
    await using env = await startDecisionerEnv()
    seedCatalog(env.server, A, { [MODEL]: EXPENSIVE })
    seedCatalog(env.server, B, { [MODEL]: CHEAP })
    const key = await decisionerKey(env, [A, B], { objective: 'cost' }, { api_shape: 'messages' })
    const result = await httpCall(env.server, 'POST', '/v1/messages', { model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': key.secret })
    expect(result.status).toBe(200)
    expect(result.json.type).toBe('message')
    expect(decisionerHeader(result)).toBe(`pick:${B};via:code;obj:cost`)
    expect(result.headers.get('x-router-provider')).toBe(B)
    expect(chatCalls(env.mocks[A]!)).toHaveLength(0)
    expect(chatCalls(env.mocks[B]!)).toHaveLength(1)
    await expectLoggedDecision(env.server, key.id, `pick:${B};via:code;obj:cost`, false)

    // The decision call works there too.
    const capability = await decisionerKey(env, [A, B, C], { objective: 'capability' }, { api_shape: 'messages' })
    scriptDecider(env.mocks[DECIDER]!, { target: { [A]: 0.05, [B]: 0.15, [C]: 0.8 } })
    const picked = await httpCall(env.server, 'POST', '/v1/messages', { model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': capability.secret })
    expect(picked.status).toBe(200)
    expect(decisionerHeader(picked)).toBe(`pick:${C};choice:${C};conf:0.65;p:0.80;obj:capability`)
    expect(picked.headers.get('x-router-provider')).toBe(C)
    expect(decisionCalls(env.mocks[DECIDER]!)).toHaveLength(1)
  })

  test('a pinned Responses chain (previous_response_id) skips the decisioner: a skip header, no decision call', async () => {
    const CHAIN = 'openai'
    await using env = await startGateways([CHAIN, B, DECIDER], flagOn)
    let responses = 0
    env.mocks[CHAIN]!.handle((request) => {
      if (!request.path.endsWith('/responses') || request.method !== 'POST') return undefined
      responses++
      return {
        json: {
          id: `resp_up_${responses}`,
          object: 'response',
          created_at: Math.floor(Date.now() / 1000),
          status: 'completed',
          error: null,
          incomplete_details: null,
          model: String(request.body?.model ?? MODEL),
          output: [{ id: `msg_${responses}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello.', annotations: [] }] }],
          usage: { input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 },
        },
      }
    })
    scriptDecider(env.mocks[DECIDER]!, { target: { [CHAIN]: 0.9, [B]: 0.1 } })
    const key = await decisionerKey(env, [B, CHAIN], { objective: 'capability' })
    const first = await httpCall(env.server, 'POST', '/v1/responses', { model: MODEL, input: 'hi' }, bearerHeader(key.secret))
    expect(first.status).toBe(200)
    expect(decisionerHeader(first)).toBe(`pick:${CHAIN};choice:${CHAIN};conf:0.80;p:0.90;obj:capability`)
    expect(first.headers.get('x-router-provider')).toBe(CHAIN)
    expect(decisionCalls(env.mocks[DECIDER]!)).toHaveLength(1)
    const id = first.json.id as string
    expect(id.startsWith('resp_rt_')).toBe(true)

    const followUp = await httpCall(env.server, 'POST', '/v1/responses', { model: MODEL, input: 'and then?', previous_response_id: id }, bearerHeader(key.secret))
    expect(followUp.status).toBe(200)
    // The key has a decisioner, so the header is there (SPEC "X-Router-Decisioner"): a skip.
    expect(decisionerHeader(followUp)).toBe('skipped:pinned_chain;obj:capability')
    expect(followUp.headers.get('x-router-provider')).toBe(CHAIN)
    expect(decisionCalls(env.mocks[DECIDER]!)).toHaveLength(1)
    const upstream = env.mocks[CHAIN]!.calls('/responses').filter((request) => request.method === 'POST')
    expect(upstream).toHaveLength(2)
    expect(upstream[1]!.body.previous_response_id).toBe('resp_up_1')
    const row = await logRowAfter(env.server, key.id, 2)
    expect(enrichmentOf(row)?.decisioner).toEqual({ header: 'skipped:pinned_chain;obj:capability' })
  })
})
