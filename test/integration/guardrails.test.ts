/**
 * Guardrails end to end (CONTRACT §17), against scripted upstreams on 127.0.0.1: personal data
 * masked on the way out (one placeholder per distinct value, tool results and tool-call arguments
 * included) and put back in the answer, buffered and streamed (a placeholder split across two SSE
 * records too), in the chat, messages and Responses shapes, the original never reaching the
 * upstream; an input block refused in the shape's envelope with no upstream call; output masks and
 * blocks; monitor mode; the row's findings (never the matched text) and the metric; moderation
 * through a gateway's /moderations (flagged, clean, unavailable), its call logged.
 */
import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { TestServer } from '../harness/server'
import { logRowOf } from '../harness/request-log'
import { bearerHeader, createInferenceKey, httpCall, type CallResult } from '../harness/api'
import { parseClientSse } from '../harness/client-sse'
import { chatStream, responsesStream, sseRecord, useScriptedService, type ScriptGateway, type ScriptRequest } from '../harness/script-gateway'

const kinds = { chat: 'together', moderation: 'openai' } as const
type Kind = keyof typeof kinds
let gateways: Record<Kind, ScriptGateway>
let providers: Record<Kind, string>
let server: TestServer
useScriptedService(kinds, (service) => void ({ server, gateways, providers } = service))

const personal = {
  mode: 'enforce',
  input: [
    { detector: 'email', action: 'mask' },
    { detector: 'phone', action: 'mask' },
    { detector: 'credit_card', action: 'block' },
    { detector: 'regex', pattern: 'PRJ-[0-9]{4}', action: 'mask', name: 'project_code' },
  ],
  output: [
    { detector: 'iban', action: 'mask' },
    { detector: 'secret', action: 'block' },
  ],
}

async function keyFor(guardrails: unknown, shape = 'chat'): Promise<string> {
  const key = await createInferenceKey(server, { api_shape: shape, guardrails, routing: { strategy: 'priority', targets: [{ provider_key_id: providers.chat }] } })
  return key.key as string
}

const email = 'jane.doe@example.com'
const other = 'bob.smith@example.org'
const chat = (secret: string, messages: unknown[], extra: Record<string, unknown> = {}) => httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages, ...extra }, bearerHeader(secret))
const completion = (content: string, toolCalls?: unknown[]) => ({
  json: {
    id: 'chatcmpl-up',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content, ...(toolCalls ? { tool_calls: toolCalls } : {}) }, finish_reason: toolCalls ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  },
})
const streamOf = (texts: string[]) => ({ pieces: chatStream(texts, { finish: 'stop', usage: { prompt_tokens: 10, completion_tokens: 5 } }) })
/** What the upstream got, as text: the original values must never be in it. */
const sentUpstream = (gateway: ScriptGateway) => JSON.stringify(gateway.requests.map((request) => request.body))

function chatText(result: CallResult): string {
  return parseClientSse(result.text)
    .map((event) => event.data)
    .filter((data): data is any => typeof data === 'object' && data !== null && !data.error)
    .map((chunk) => chunk.choices?.[0]?.delta?.content ?? '')
    .join('')
}

describe('masked on the way out, put back on the way in', () => {
  test('chat, buffered: one placeholder per distinct value; tool results and tool-call arguments masked; the answer and its tool call arguments restored', async () => {
    const secret = await keyFor(personal)
    gateways.chat.use((request) => {
      const last = request.body.messages.at(-1).content as string
      return completion(`I will write to <EMAIL_1> and copy <EMAIL_2> about <PROJECT_CODE_1>. (${last.length})`, [
        { id: 'call_1', type: 'function', function: { name: 'send', arguments: JSON.stringify({ to: '<EMAIL_1>', note: 'call <PHONE_1>' }) } },
      ])
    })
    const messages = [
      { role: 'system', content: 'You help with mail.' },
      { role: 'user', content: `Mail ${email} and ${other}, then ${email} again about PRJ-1234. My phone is +1 415 555 2671.` },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'lookup', arguments: JSON.stringify({ who: email }) } }] },
      { role: 'tool', tool_call_id: 'call_0', content: `Found ${other} in the directory.` },
      { role: 'user', content: 'Go on.' },
    ]
    const result = await chat(secret, messages)
    expect(result.status).toBe(200)
    const sent = gateways.chat.requests[0]!.body.messages
    expect(sent[1].content).toBe('Mail <EMAIL_1> and <EMAIL_2>, then <EMAIL_1> again about <PROJECT_CODE_1>. My phone is <PHONE_1>.')
    expect(JSON.parse(sent[2].tool_calls[0].function.arguments)).toEqual({ who: '<EMAIL_1>' })
    expect(sent[3].content).toBe('Found <EMAIL_2> in the directory.')
    for (const value of [email, other, 'PRJ-1234', '555 2671']) expect(sentUpstream(gateways.chat)).not.toContain(value)
    const message = result.json.choices[0].message
    expect(message.content).toBe(`I will write to ${email} and copy ${other} about PRJ-1234. (6)`)
    expect(JSON.parse(message.tool_calls[0].function.arguments)).toEqual({ to: email, note: 'call +1 415 555 2671' })
    const row = await logRowOf(server, result)
    const findings = JSON.parse(row.guardrails)
    expect(findings).toEqual(
      expect.arrayContaining([
        { rule: 'email', where: 'input', action: 'mask', count: 5 },
        { rule: 'project_code', where: 'input', action: 'mask', count: 1 },
        { rule: 'phone', where: 'input', action: 'mask', count: 1 },
      ]),
    )
    expect(row.guardrails).not.toContain(email)
    expect(row.guardrails).not.toContain('PRJ-1234')
    const metrics = await (await fetch(`${server.rootUrl}/metrics`)).text()
    expect(metrics).toMatch(/router_guardrail_findings_total\{detector="email",where="input",action="mask"\} [1-9]/)
  })

  test('chat, streamed: a placeholder split across two SSE records is put back whole', async () => {
    const secret = await keyFor(personal)
    gateways.chat.use(() => streamOf(['Writing to <EMA', 'IL_1> now', ', and <EMAIL_2>.']))
    const result = await chat(secret, [{ role: 'user', content: `Mail ${email} and ${other}.` }], { stream: true })
    expect(chatText(result)).toBe(`Writing to ${email} now, and ${other}.`)
    expect(sentUpstream(gateways.chat)).not.toContain(email)

    // A tool call's arguments streamed with the placeholder split across records: put back, JSON-escaped.
    const base = { id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini' }
    const toolDelta = (delta: Record<string, unknown>, finish: string | null = null) => sseRecord({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
    gateways.chat.use(() => ({
      pieces: [
        toolDelta({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'send', arguments: '' } }] }),
        toolDelta({ tool_calls: [{ index: 0, function: { arguments: '{"to": "<EMA' } }] }),
        toolDelta({ tool_calls: [{ index: 0, function: { arguments: 'IL_1>"}' } }] }),
        toolDelta({}, 'tool_calls'),
        sseRecord('[DONE]'),
      ],
    }))
    const tools = [{ type: 'function', function: { name: 'send', parameters: { type: 'object', properties: { to: { type: 'string' } } } } }]
    const called = await chat(secret, [{ role: 'user', content: `Mail ${email}.` }], { stream: true, tools })
    const args = parseClientSse(called.text)
      .map((event) => event.data)
      .filter((data): data is any => typeof data === 'object' && data !== null)
      .map((chunk) => chunk.choices?.[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? '')
      .join('')
    expect(JSON.parse(args)).toEqual({ to: email })
  })

  test('messages and Responses shapes, streamed: the text restored in each grammar', async () => {
    const messagesKey = await keyFor(personal, 'messages')
    gateways.chat.use(() => streamOf(['Dear <EMA', 'IL_1>, done.']))
    const viaMessages = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, stream: true, messages: [{ role: 'user', content: `Mail ${email}` }] }, { 'x-api-key': messagesKey })
    const text = parseClientSse(viaMessages.text)
      .filter((event) => event.event === 'content_block_delta')
      .map((event) => event.data.delta.text)
      .join('')
    expect(text).toBe(`Dear ${email}, done.`)
    expect(sentUpstream(gateways.chat)).not.toContain(email)

    gateways.chat.requests.length = 0
    const chatKey = await keyFor(personal)
    gateways.chat.use((request) => (request.path.endsWith('/responses') ? { pieces: responsesStream(['Dear <EMAIL', '_2>, done.'], { input_tokens: 5, output_tokens: 3 }) } : streamOf(['never'])))
    const viaResponses = await httpCall(server, 'POST', '/v1/responses', { model: 'openai/gpt-4o-mini', stream: true, instructions: `Sign as ${other}.`, input: [{ role: 'user', content: `Mail ${email}` }] }, bearerHeader(chatKey))
    const events = parseClientSse(viaResponses.text)
    expect(events.at(-1)!.data.response.output[0].content[0].text).toBe(`Dear ${email}, done.`)
    const sent = gateways.chat.requests[0]!.body
    expect(sent.instructions).toBe('Sign as <EMAIL_1>.')
    expect(sent.input[0].content).toBe('Mail <EMAIL_2>')
  })

  test('the official SDK reads a masked-and-restored stream as the original text', async () => {
    const secret = await keyFor(personal)
    gateways.chat.use(() => streamOf(['Sent to <', 'EMAIL_1', '>.']))
    const client = new OpenAI({ apiKey: secret, baseURL: `${server.rootUrl}/v1` })
    const stream = await client.chat.completions.create({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `Mail ${email}` }] })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
    expect(text).toBe(`Sent to ${email}.`)
  })
})

describe('blocks', () => {
  test('an input block: 400 guardrail_blocked naming the rule, in the shape’s envelope, no upstream call', async () => {
    const secret = await keyFor(personal)
    gateways.chat.use(() => completion('never'))
    const result = await chat(secret, [{ role: 'user', content: 'My card is 4111 1111 1111 1111.' }])
    expect(result.status).toBe(400)
    expect(result.json.error).toMatchObject({ code: 'guardrail_blocked', type: 'invalid_request_error' })
    expect(result.json.error.message).toContain("'credit_card'")
    expect(result.json.error.message).not.toContain('4111')
    const messagesKey = await keyFor(personal, 'messages')
    const viaMessages = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'Card 4111-1111-1111-1111' }] }, { 'x-api-key': messagesKey })
    expect(viaMessages.status).toBe(400)
    expect(viaMessages.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
    expect(gateways.chat.requests).toHaveLength(0)
    const row = await logRowOf(server, result)
    expect(row.error_code).toBe('guardrail_blocked')
    expect(JSON.parse(row.guardrails)).toEqual([{ rule: 'credit_card', where: 'input', action: 'block', count: 1 }])
  })

  test('output: an IBAN masked as [REDACTED:IBAN] (buffered, and streamed split across records); a secret blocks (buffered 502, the stream’s in-stream error)', async () => {
    const secret = await keyFor(personal)
    const iban = 'DE89 3704 0044 0532 0130 00'
    gateways.chat.use(() => completion(`Pay to ${iban} today.`))
    const buffered = await chat(secret, [{ role: 'user', content: 'Where do I pay?' }])
    expect(buffered.json.choices[0].message.content).toBe('Pay to [REDACTED:IBAN] today.')
    gateways.chat.use(() => streamOf(['Pay to DE89 3704 ', '0044 0532 0130 00', ' today.']))
    const streamed = await chat(secret, [{ role: 'user', content: 'Where do I pay?' }], { stream: true })
    expect(chatText(streamed)).toBe('Pay to [REDACTED:IBAN] today.')
    expect(streamed.text).not.toContain('0532')

    const key = `sk-proj-${'Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z'.repeat(2)}`
    gateways.chat.use(() => completion(`Use the key ${key}.`))
    const blocked = await chat(secret, [{ role: 'user', content: 'Any key?' }])
    expect(blocked.status).toBe(502)
    expect(blocked.json.error.code).toBe('guardrail_blocked')
    expect(blocked.text).not.toContain(key)
    gateways.chat.use(() => streamOf(['Use the key ', key.slice(0, 20), key.slice(20), '.']))
    const cut = await chat(secret, [{ role: 'user', content: 'Any key?' }], { stream: true })
    const records = parseClientSse(cut.text).map((event) => event.data)
    expect(records.at(-1)).toMatchObject({ error: { code: 'guardrail_blocked' } })
    expect(records).not.toContain('[DONE]')
    expect(cut.text).not.toContain(key.slice(0, 20))
  })
})

describe('monitor mode', () => {
  test('nothing is changed; the findings are in the row and the metric all the same', async () => {
    const secret = await keyFor({ ...personal, mode: 'monitor' })
    gateways.chat.use(() => completion(`Pay to DE89 3704 0044 0532 0130 00.`))
    const result = await chat(secret, [{ role: 'user', content: `Mail ${email}, card 4111 1111 1111 1111.` }])
    expect(result.status).toBe(200)
    expect(gateways.chat.requests[0]!.body.messages[0].content).toBe(`Mail ${email}, card 4111 1111 1111 1111.`)
    expect(result.json.choices[0].message.content).toBe('Pay to DE89 3704 0044 0532 0130 00.')
    const findings = JSON.parse((await logRowOf(server, result)).guardrails)
    expect(findings).toEqual(
      expect.arrayContaining([
        { rule: 'email', where: 'input', action: 'mask', count: 1 },
        { rule: 'credit_card', where: 'input', action: 'block', count: 1 },
        { rule: 'iban', where: 'output', action: 'mask', count: 1 },
      ]),
    )
  })
})

describe('moderation', () => {
  const flagged = (request: ScriptRequest, categories: Record<string, boolean>) =>
    request.path.endsWith('/moderations') ? { json: { id: 'modr-1', model: 'omni-moderation-latest', results: request.body.input.map(() => ({ flagged: Object.values(categories).some(Boolean), categories })) } } : { status: 404, json: {} }

  test('a flagged category the rule names blocks; one it does not name, or none, passes; the check is its own row; a check that cannot be made fails closed (503)', async () => {
    const rules = { input: [{ detector: 'email', action: 'mask' }, { detector: 'moderation', action: 'block', provider_key_id: providers.moderation, categories: ['violence', 'self-harm'] }] }
    const secret = await keyFor(rules)
    gateways.chat.use(() => completion('ok'))
    gateways.moderation.use((request) => flagged(request, { violence: false, 'self-harm/intent': true, harassment: false }))
    const blocked = await chat(secret, [{ role: 'user', content: `Mail ${email} something dark.` }])
    expect(blocked.status).toBe(400)
    expect(blocked.json.error.code).toBe('guardrail_blocked')
    expect(blocked.json.error.message).toContain('self-harm/intent')
    expect(gateways.chat.requests).toHaveLength(0)
    // The check saw the masked text, never the value.
    expect(gateways.moderation.requests[0]!.body).toEqual({ model: 'omni-moderation-latest', input: ['Mail <EMAIL_1> something dark.'] })

    gateways.moderation.use((request) => flagged(request, { violence: false, harassment: true }))
    const passed = await chat(secret, [{ role: 'user', content: 'Hello.' }])
    expect(passed.status).toBe(200)
    server.runtime.logQueue.flush()
    const checks = server.runtime.storage.sqlite.query("select status, attempt_path from request_logs where endpoint = 'moderations'").all()
    expect(checks.length).toBeGreaterThanOrEqual(2)
    expect(checks.at(-1)).toEqual({ status: 200, attempt_path: 'openai:ok' })

    gateways.moderation.use(() => ({ status: 500, json: { error: { message: 'down' } } }))
    const closed = await chat(secret, [{ role: 'user', content: 'Hello again.' }])
    expect(closed.status).toBe(503)
    expect(closed.json.error.code).toBe('guardrail_unavailable')
    expect(gateways.chat.requests).toHaveLength(1)
  })
})

