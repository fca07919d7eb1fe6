/**
 * What real Messages clients send, through the router to a chat gateway: structured output
 * (`output_config.format`, as the AI SDK's anthropic provider and LangChain's ChatAnthropic send it)
 * reaching the gateway as `response_format`, buffered and streamed, the answer a text block; a
 * stream's `message_start` carrying the prompt estimate count_tokens gives (its `message_delta` the
 * real counts); and the body Claude Code sends to a model that is not Claude (a system entry inside
 * `messages`, adaptive thinking with an effort, `context_management`, its beta header) served.
 */
import { expect, test } from 'bun:test'
import { startGateways } from '../harness/gateways'
import { chatChunks, chatCompletion } from '../harness/mock-gateway'
import { httpCall } from '../harness/api'
import { parseClientSse } from '../harness/client-sse'
import { createInferenceKey } from '../harness/api'

const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }

async function messagesEnv() {
  const env = await startGateways(['openai'])
  const key = await createInferenceKey(env.server, { api_shape: 'messages', routing: { targets: [{ provider_key_id: env.providers.openai }] } })
  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    httpCall(env.server, 'POST', '/v1/messages', body, { 'x-api-key': key.key, 'anthropic-version': '2023-06-01', ...headers })
  return { env, key, post }
}

test('output_config.format reaches the gateway as response_format; the JSON answer comes back as the text block, buffered and streamed', async () => {
  const { env, post } = await messagesEnv()
  await using _ = env
  env.mocks.openai!.handle((request) => {
    const body = request.body as any
    const json = body.response_format?.type === 'json_schema' ? '{"city":"Lyon"}' : 'Lyon, I think.'
    return body.stream ? { sse: chatChunks(body.model, [json.slice(0, 5), json.slice(5)]) } : { json: chatCompletion(body.model, json) }
  })
  const buffered = await post({ model: 'openai/gpt-4o-mini', max_tokens: 200, output_config: { format: { type: 'json_schema', schema } }, messages: [{ role: 'user', content: 'Where?' }] })
  expect(buffered.status).toBe(200)
  expect(env.mocks.openai!.requests.at(-1)!.body).toMatchObject({ response_format: { type: 'json_schema', json_schema: { name: 'response', schema } } })
  expect(buffered.json.content).toEqual([{ type: 'text', text: '{"city":"Lyon"}' }])

  const streamed = await post({ model: 'openai/gpt-4o-mini', max_tokens: 200, stream: true, output_config: { format: { type: 'json_schema', schema } }, messages: [{ role: 'user', content: 'Where?' }] })
  expect(env.mocks.openai!.requests.at(-1)!.body).toMatchObject({ stream: true, response_format: { type: 'json_schema' } })
  const text = parseClientSse(streamed.text)
    .filter((event) => event.event === 'content_block_delta')
    .map((event) => (event.data as any).delta.text)
    .join('')
  expect(text).toBe('{"city":"Lyon"}')
})

test("a stream's message_start carries count_tokens' estimate of the prompt; message_delta the real counts", async () => {
  const { env, key, post } = await messagesEnv()
  await using _ = env
  const body = { model: 'openai/gpt-4o-mini', max_tokens: 100, system: 'Be brief.', messages: [{ role: 'user', content: 'Tell me about otters and the lakes they live near, briefly.' }] }
  const estimate = await httpCall(env.server, 'POST', '/v1/messages/count_tokens', body, { 'x-api-key': key.key })
  expect(estimate.json.input_tokens).toBeGreaterThan(10)
  const streamed = await post({ ...body, stream: true })
  const events = parseClientSse(streamed.text)
  const start = events.find((event) => event.event === 'message_start')!.data as any
  expect(start.message.usage).toEqual({ input_tokens: estimate.json.input_tokens, output_tokens: 0 })
  const delta = events.find((event) => event.event === 'message_delta')!.data as any
  // The mock reports 11 prompt tokens and one per piece.
  expect(delta.usage).toEqual({ input_tokens: 11, output_tokens: 3 })
})

test('what Claude Code sends to a model that is not Claude is served: system entries in messages, adaptive thinking with an effort, context_management, its beta header', async () => {
  const { env, post } = await messagesEnv()
  await using _ = env
  const answer = await post(
    {
      model: 'openai/gpt-4o-mini',
      max_tokens: 32000,
      stream: true,
      system: [{ type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude.", cache_control: { type: 'ephemeral' } }],
      thinking: { type: 'adaptive' },
      output_config: { effort: 'high' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      metadata: { user_id: 'user_abc' },
      tools: [{ name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'What is in this directory?' }] },
        { role: 'system', content: [{ type: 'text', text: '# Environment\nWorking directory: /repo' }] },
      ],
    },
    { 'anthropic-beta': 'claude-code-20250219,mid-conversation-tool-changes-2026-07-01,context-management-2025-06-27' },
  )
  expect(answer.status).toBe(200)
  expect(parseClientSse(answer.text).some((event) => event.event === 'message_stop')).toBe(true)
  const upstream = env.mocks.openai!.requests.at(-1)!
  expect(upstream.body).toMatchObject({
    reasoning_effort: 'high',
    messages: [
      { role: 'system', content: "You are Claude Code, Anthropic's official CLI for Claude." },
      { role: 'user', content: 'What is in this directory?' },
      { role: 'system', content: '# Environment\nWorking directory: /repo' },
    ],
    tools: [{ type: 'function', function: { name: 'Bash' } }],
  })
  expect((upstream.body as any).context_management).toBeUndefined()
  expect((upstream.body as any).thinking).toBeUndefined()
  expect(upstream.headers['anthropic-beta']).toBeUndefined()
})
