import { expect, test } from 'bun:test'
import OpenAI from 'openai'
import { startTestServer } from '../harness/server'
import { startMockGateway } from '../harness/mock-gateway'

test('smoke: chat through one mock gateway', async () => {
  await using mock = await startMockGateway()
  await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url, RT_GATEWAY_URL_GROQ: mock.url })
  const provider = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-upstream-secret' })
  const key = await server.call('POST', '/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.body.data.id }] } })
  const client = new OpenAI({ apiKey: key.body.data.key, baseURL: server.baseUrl })
  const completion = await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
  expect(completion.choices[0]!.message.content).toBe('Hello from the mock.')
  expect(mock.requests[0]!.headers.authorization).toBe('Bearer sk-upstream-secret')
  const stream = await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true })
  let text = ''
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
  expect(text).toBe('Hello!')
  server.runtime.logQueue.flush()
  expect(server.runtime.repositories.requestLogs.count()).toBe(2)
})
