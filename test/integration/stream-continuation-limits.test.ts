/**
 * Mid-stream continuation (CONTRACT §16) at the request's limits, chat shape, against scripted
 * upstreams on 127.0.0.1:
 * - a USD cap (§11) that cannot reserve the continuation (its prompt is longer: it carries the
 *   partial text and the request for the rest): the break ends the stream with SPEC's in-stream
 *   error, nothing is asked of the next target, the metric counts `refused`, the row marks the broken
 *   attempt; with room under the cap the continuation happens and the request is charged for both
 *   attempts (the cut one, which reported no usage but sent the client bytes, at its reservation);
 * - the request deadline (RT_DEADLINE_MS): a break after it is not continued (metric `deadline`); a
 *   break before it is, and the continuation's wait for its first byte is cut to what the deadline
 *   leaves (the late target is `<gateway>:deadline` in the row's path).
 *
 * Every break here is the first target's body ending without the stream's end (no finish, no
 * [DONE]), which the router reads as a cut (`mid_stream_cut`). It ends cleanly rather than with a
 * reset connection: Bun's fetch drops the bytes it holds but was not yet asked for when a connection
 * resets, so on a busy machine a reset just after the last piece can take pieces with it and the
 * text before the break would depend on timing.
 */
import { describe, expect, test } from 'bun:test'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { logRowOf } from '../harness/request-log'
import { parseClientSse } from '../harness/client-sse'
import { until } from '../harness/until'
import { continueInstruction } from '../../src/pipeline/stages/continuation/request'
import { addedBytes, measurePrompt, outputBound, worstCaseNano } from '../../src/pipeline/limits/worst-case'
import type { ModelPricing } from '../../src/gateways/model-prices'
import { chatStream, useScriptedService, withoutComments, type ScriptedService } from '../harness/script-gateway'

const MODEL = 'openai/gpt-4o-mini'
const question = [{ role: 'user', content: 'Tell me about the sea.' }]

/** The gateway kinds used here: `together` and `fireworks` take no prefill, `openrouter` a trailing assistant message (catalog data). */
type Kind = 'together' | 'fireworks' | 'openrouter'

type Env = ScriptedService<Kind>

/** Scripted upstreams of these gateway kinds, each with its own gap between pieces. */
function gapKinds(gaps: Partial<Record<Kind, number>>): Record<Kind, { gateway: string; gapMs: number }> {
  return Object.fromEntries(Object.entries(gaps).map(([kind, gapMs]) => [kind, { gateway: kind, gapMs: gapMs as number }])) as Record<Kind, { gateway: string; gapMs: number }>
}

/** A key routed over `targets` in order, continuation on (one hop); `limits` set as CONTRACT §11 says. */
async function continuedKey(env: Env, targets: Kind[], limits?: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const routing = { strategy: 'priority', targets: targets.map((kind) => ({ provider_key_id: env.providers[kind] })) }
  const key = await createInferenceKey(env.server, { api_shape: 'chat', continuation: { max_hops: 1 }, routing })
  if (limits) expect((await env.server.call('PATCH', `/api/v1/keys/${key.id}`, { limits })).status).toBe(200)
  return { id: key.id, secret: key.key }
}

const chat = (env: Env, secret: string, extra: Record<string, unknown> = {}) =>
  httpCall(env.server, 'POST', '/v1/chat/completions', { model: MODEL, messages: question, stream: true, ...extra }, bearerHeader(secret))

/** A stream that breaks off after `texts`: its body ends without the stream's end (a cut). */
const broken = (texts: string[]) => ({ pieces: chatStream(texts, { id: 'chatcmpl-first' }), then: 'end' as const })
const whole = (texts: string[], usage = { prompt_tokens: 40, completion_tokens: 12 }) => ({ pieces: chatStream(texts, { id: 'chatcmpl-second', finish: 'stop', usage }) })

/** The client's chat records, text and comment lines. */
function chatOf(result: CallResult) {
  const records = parseClientSse(withoutComments(result.text).text).map((event) => event.data)
  const chunks = records.filter((record): record is any => typeof record === 'object' && record !== null && !record.error)
  const text = chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').join('')
  const comments = result.text.split('\n').filter((line) => line.startsWith(':'))
  return { records, chunks, text, comments }
}

/** SPEC's in-stream error ends the stream: the text sent so far, no seam, the error record last, no [DONE]. */
function expectAborted(result: CallResult, text: string) {
  expect(result.status).toBe(200)
  const { records, comments } = chatOf(result)
  expect(chatOf(result).text).toBe(text)
  expect(comments).toEqual([])
  expect(records).not.toContain('[DONE]')
  expect(records.at(-1)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'stream_aborted' } })
  expect(records.filter((record) => typeof record === 'object' && record?.error)).toHaveLength(1)
}

/** One clean continued stream: the text whole, one seam comment, one finish, [DONE], no error. */
function expectContinued(result: CallResult, text: string, seam: string) {
  expect(result.status).toBe(200)
  const { records, chunks, comments } = chatOf(result)
  expect(chatOf(result).text).toBe(text)
  expect(comments).toEqual([`: router-continued ${seam}`])
  expect(records.filter((record) => typeof record === 'object' && record?.error)).toEqual([])
  expect(records.at(-1)).toBe('[DONE]')
  expect(new Set(chunks.map((chunk) => chunk.id))).toEqual(new Set(['chatcmpl-first']))
  expect(chunks.filter((chunk) => chunk.choices?.[0]?.finish_reason)).toHaveLength(1)
  return chunks
}

/** `router_stream_continuations_total{result}` now (0 before the first). */
async function continuations(env: Env, result: string): Promise<number> {
  const metrics = await (await fetch(`${env.server.rootUrl}/metrics`)).text()
  const line = metrics.split('\n').find((candidate) => candidate.startsWith(`router_stream_continuations_total{result="${result}"} `))
  return line ? Number(line.split(' ').at(-1)) : 0
}

// =============================================================================================

describe('a USD cap and the continuation’s reservation', () => {
  /** Prices (USD per token) as the gateways' catalogs list them: the second target dearer than the first. */
  const prices: Partial<Record<Kind, { prompt: number; completion: number }>> = {
    together: { prompt: 0.000001, completion: 0.000004 },
    fireworks: { prompt: 0.000002, completion: 0.000008 },
  }
  const pricing = (kind: Kind): ModelPricing => ({ prompt: prices[kind]!.prompt, completion: prices[kind]!.completion })
  /** nano-dollars of a usage at a gateway's price (whole nano-dollars a token). */
  const costAt = (kind: Kind, usage: { prompt_tokens: number; completion_tokens: number }) =>
    usage.prompt_tokens * Math.round(prices[kind]!.prompt * 1e9) + usage.completion_tokens * Math.round(prices[kind]!.completion * 1e9)
  /** The worst case the cap reserves for a chat body: the dearest of the plan's targets (the catalogs spell the model as the client does). */
  const worstOf = (body: Record<string, unknown>) =>
    Math.max(...(Object.keys(prices) as Kind[]).map((kind) => worstCaseNano(pricing(kind), measurePrompt(body), outputBound(body, 'chat'), 'chat', addedBytes(body.model, String(body.model)))!))

  let env: Env
  useScriptedService(gapKinds({ together: 5, fireworks: 5 }), async (service) => {
    env = service
    for (const kind of Object.keys(prices) as Kind[]) {
      env.server.runtime.repositories.gatewayCatalogs.replaceCatalog(kind, Date.now(), [
        { modelId: MODEL, canonicalId: MODEL, object: JSON.stringify({ id: MODEL, pricing: { prompt: String(prices[kind]!.prompt), completion: String(prices[kind]!.completion) } }) },
      ])
    }
    await env.server.runtime.snapshots.fresh()
  })

  const body = { model: MODEL, messages: question, stream: true, max_tokens: 1000 }
  const head = ['The sea ', 'is ', 'deep ']
  const partial = head.join('')
  const usdToday = async (key: { id: string }) => Math.round((await env.server.call('GET', `/api/v1/keys/${key.id}`)).body.data.limit_state.usd_today * 1e9)

  test('a cap with room for exactly one more request of the original size: the longer continuation does not fit; the stream ends with stream_aborted, nothing goes to the next target', async () => {
    const first = worstOf(body)
    // The continuation's body as the cap measures it at least (the partial turn and the request for the rest added).
    const continuation = worstOf({ ...body, messages: [...question, { role: 'assistant', content: partial }, { role: 'user', content: continueInstruction }] })
    expect(continuation).toBeGreaterThan(first)
    const key = await continuedKey(env, ['together', 'fireworks'], { usd_per_day: (2 * first) / 1e9 })
    env.gateways.together.use(() => broken(head))
    env.gateways.fireworks.use(() => whole(['and blue.']))
    const refusedBefore = await continuations(env, 'refused')
    const continuedBefore = await continuations(env, 'continued')

    const result = await chat(env, key.secret, { max_tokens: 1000 })
    expectAborted(result, partial)
    expect(env.gateways.together.requests).toHaveLength(1)
    expect(env.gateways.fireworks.requests).toHaveLength(0)
    expect(await continuations(env, 'refused')).toBe(refusedBefore + 1)
    expect(await continuations(env, 'continued')).toBe(continuedBefore)
    const row = await logRowOf(env.server, result)
    expect(row.attempt_path).toBe('together:mid_stream_cut')
    expect(row.attempts).toBe(1)
    expect(row.continued).toBeNull()
    expect(row.status).toBe(200)
    expect(row.error_code).toBe('stream_aborted')
    // The cut attempt sent the client bytes and reported no usage: charged its reservation (§11), and the cap counts it.
    expect(row.cost_nano_usd).toBe(first)
    expect(await usdToday(key)).toBe(first)

    // The cap still had room for a request of the original size: a whole answer is admitted and served.
    env.gateways.together.use(() => whole(['The sea is deep.'], { prompt_tokens: 20, completion_tokens: 5 }))
    const next = await chat(env, key.secret, { max_tokens: 1000 })
    expect(next.status).toBe(200)
    expect(chatOf(next).text).toBe('The sea is deep.')
    expect(chatOf(next).records.at(-1)).toBe('[DONE]')
  })

  test('with room under the cap the stream is continued; the row is charged both attempts: the cut one its reservation, the continuation its usage at its own target', async () => {
    const first = worstOf(body)
    const key = await continuedKey(env, ['together', 'fireworks'], { usd_per_day: (10 * first) / 1e9 })
    const usage = { prompt_tokens: 40, completion_tokens: 12 }
    env.gateways.together.use(() => broken(head))
    env.gateways.fireworks.use(() => whole(['and blue.'], usage))
    const continuedBefore = await continuations(env, 'continued')

    const result = await chat(env, key.secret, { max_tokens: 1000 })
    const chunks = expectContinued(result, 'The sea is deep and blue.', '1 together fireworks')
    // The router asked both upstreams for usage on the capped key; the client, which did not ask, gets no usage chunk.
    expect(chunks.filter((chunk) => chunk.usage)).toEqual([])
    expect(env.gateways.together.requests[0]!.body.stream_options).toEqual({ include_usage: true })
    const sent = env.gateways.fireworks.requests
    expect(sent).toHaveLength(1)
    expect(sent[0]!.body.stream_options).toEqual({ include_usage: true })
    expect(sent[0]!.body.max_tokens).toBe(1000)
    expect(sent[0]!.body.messages).toEqual([...question, { role: 'assistant', content: partial }, { role: 'user', content: continueInstruction }])
    expect(await continuations(env, 'continued')).toBe(continuedBefore + 1)

    const row = await logRowOf(env.server, result)
    expect(row.attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
    expect(row.continued).toBe(1)
    expect(row.error_code).toBeNull()
    expect(row.status).toBe(200)
    expect(row.attempts).toBe(2)
    // Usage summed over the attempts (the cut one reported none).
    expect([row.input_tokens, row.output_tokens]).toEqual([usage.prompt_tokens, usage.completion_tokens])
    // The cut attempt: no usage, bytes sent, so its reservation; the continuation: its usage at fireworks' price.
    expect(row.cost_nano_usd).toBe(first + costAt('fireworks', usage))
    expect(await usdToday(key)).toBe(first + costAt('fireworks', usage))
  })
})

describe('the request deadline', () => {
  const deadlineMs = 1200
  /** `together` streams a piece every 200 ms; `fireworks` answers at once; `openrouter` sends its first line 2.5 s after its headers. */
  const slowGapMs = 200
  const lateHeadMs = 2500
  let env: Env
  useScriptedService(gapKinds({ together: slowGapMs, fireworks: 5, openrouter: lateHeadMs }), (service) => void (env = service), { RT_DEADLINE_MS: String(deadlineMs) })

  test('a break after the deadline is not continued: the stream, which the deadline does not cut, ends with stream_aborted; nothing asked of the next target; metric deadline', async () => {
    const key = await continuedKey(env, ['together', 'fireworks'])
    // The role chunk at once, six texts 200 ms apart, the break 200 ms later: 1.4 s in, past the 1.2 s deadline.
    const texts = ['One, ', 'two, ', 'three, ', 'four, ', 'five, ', 'six, ']
    env.gateways.together.use(() => broken(texts))
    env.gateways.fireworks.use(() => whole(['never']))
    const before = await continuations(env, 'deadline')
    const started = performance.now()
    const result = await chat(env, key.secret)
    expect(performance.now() - started).toBeGreaterThanOrEqual((texts.length + 1) * slowGapMs - 50)
    expectAborted(result, texts.join(''))
    expect(env.gateways.fireworks.requests).toHaveLength(0)
    expect(env.gateways.together.requests).toHaveLength(1)
    expect(await continuations(env, 'deadline')).toBe(before + 1)
    const row = await logRowOf(env.server, result)
    expect(row.attempt_path).toBe('together:mid_stream_cut')
    expect(row.continued).toBeNull()
    expect(row.status).toBe(200)
    expect(row.error_code).toBe('stream_aborted')
  })

  test('a break before the deadline is continued', async () => {
    const key = await continuedKey(env, ['together', 'fireworks'])
    // The break 400 ms in: 800 ms of the deadline left, and the next target answers at once.
    env.gateways.together.use(() => broken(['The sea ']))
    env.gateways.fireworks.use(() => whole(['is calm.']))
    const result = await chat(env, key.secret)
    expectContinued(result, 'The sea is calm.', '1 together fireworks')
    expect((await logRowOf(env.server, result)).attempt_path).toBe('together:mid_stream_cut>fireworks:ok')
  })

  test('a continuation whose first byte would come after the deadline is let go at the deadline: stream_aborted, the late target `deadline` in the path', async () => {
    const key = await continuedKey(env, ['together', 'openrouter'])
    env.gateways.together.use(() => broken(['The sea ']))
    // The first record split: its start at once (no whole line, so no first byte yet), the rest 2.5 s later.
    const record = chatStream(['is calm.'], { id: 'chatcmpl-late', finish: 'stop', usage: { prompt_tokens: 40, completion_tokens: 12 } })
    env.gateways.openrouter.use(() => ({ pieces: ['data: {"id"', record[0]!.slice('data: {"id"'.length), ...record.slice(1)] }))
    const cancelledBefore = env.gateways.openrouter.cancelled
    const failedBefore = await continuations(env, 'failed')
    const started = performance.now()
    const result = await chat(env, key.secret)
    const elapsed = performance.now() - started
    // Ended at the deadline (1.2 s), not when the late target's first line would have come (2.9 s).
    expect(elapsed).toBeGreaterThanOrEqual(deadlineMs - 50)
    expect(elapsed).toBeLessThan(2 * slowGapMs + lateHeadMs - 300)
    expectAborted(result, 'The sea ')
    expect(env.gateways.openrouter.requests).toHaveLength(1)
    expect(env.gateways.openrouter.requests[0]!.body.messages.at(-1)).toEqual({ role: 'assistant', content: 'The sea ' })
    // The router let go of the late stream (long before its first line was due); the broken target was not asked again.
    await until('the late stream let go', () => (env.gateways.openrouter.cancelled === cancelledBefore + 1 ? true : undefined), 1000)
    expect(env.gateways.together.requests).toHaveLength(1)
    expect(await continuations(env, 'failed')).toBe(failedBefore + 1)
    const row = await logRowOf(env.server, result)
    expect(row.attempt_path).toBe('together:mid_stream_cut>openrouter:deadline')
    expect(row.continued).toBeNull()
    expect(row.status).toBe(200)
    expect(row.error_code).toBe('stream_aborted')
  })
})
