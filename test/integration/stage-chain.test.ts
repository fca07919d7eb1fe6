/**
 * The stage chain (docs/ARCHITECTURE.md): a new feature is one file and one registry line. A toy stage
 * that upper-cases the answer (test/harness/upper-case-stage.ts) is registered, and applies only to
 * the key that turns it on: that key's answers are upper-cased in every shape, buffered and streamed
 * (the stage's transforms, the log row's record of it), while another key's requests take the
 * straight path as before, their bytes as the gateway sent them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { registerStage, unregisterStage } from '../../src/pipeline/stages/registry'
import { shoutingKeys, upperCaseStage } from '../harness/upper-case-stage'
import { startGateways } from '../harness/gateways'
import { bearerHeader, createInferenceKey, httpCall } from '../harness/api'
import { chatChunks, chatCompletion } from '../harness/mock-gateway'

beforeAll(() => registerStage(upperCaseStage))
afterAll(() => unregisterStage(upperCaseStage.name))

const messages = [{ role: 'user', content: 'Say hello' }]

describe('a stage registered with one line', () => {
  test('applies only to the key that turns it on: upper-cased answers there, buffered and streamed, in chat and messages; another key untouched', async () => {
    await using env = await startGateways(['openai'])
    const { server } = env
    env.mocks.openai!.handle((request) => (request.body?.stream ? { sse: chatChunks(String(request.body.model), ['Hel', 'lo', ' there']) } : { json: chatCompletion(String(request.body?.model), 'Hello there') }))
    const routing = { routing: { targets: [{ provider_key_id: env.providers.openai }] } }
    const quiet = await createInferenceKey(server, routing)
    const loud = await createInferenceKey(server, routing)
    const loudMessages = await createInferenceKey(server, { ...routing, api_shape: 'messages' })
    // Turned on for two keys; their entries are built again with it (the stage decides when an entry is built).
    shoutingKeys.add(loud.id)
    shoutingKeys.add(loudMessages.id)
    for (const id of [loud.id, loudMessages.id]) expect((await server.call('PATCH', `/api/v1/keys/${id}`, { label: 'shouting' })).status).toBe(200)

    const chat = (secret: string, extra: Record<string, unknown> = {}) => httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages, ...extra }, bearerHeader(secret))
    const loudBuffered = await chat(loud.key)
    expect(loudBuffered.status).toBe(200)
    expect(loudBuffered.json.choices[0].message.content).toBe('HELLO THERE')
    const loudStreamed = await chat(loud.key, { stream: true })
    expect(loudStreamed.status).toBe(200)
    const deltas = loudStreamed.text
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)).choices?.[0]?.delta?.content)
      .filter((content): content is string => typeof content === 'string')
    expect(deltas.join('')).toBe('HELLO THERE')
    expect(loudStreamed.text).toContain('[DONE]')

    const messagesAnswer = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages }, bearerHeader(loudMessages.key))
    expect(messagesAnswer.status).toBe(200)
    expect(messagesAnswer.json.content[0].text).toBe('HELLO THERE')

    // The other key: the gateway's own bytes, untouched.
    const quietBuffered = await chat(quiet.key)
    expect(quietBuffered.json.choices[0].message.content).toBe('Hello there')
    expect(quietBuffered.text).toBe(JSON.stringify(chatCompletion('openai/gpt-4o-mini', 'Hello there')))
    const quietStreamed = await chat(quiet.key, { stream: true })
    expect(quietStreamed.text).toContain('"Hel"')
    expect(quietStreamed.text).not.toContain('HEL')

    // The log row records the stage where it ran.
    server.runtime.logQueue.flush()
    const enrichment = (id: string | null) => server.runtime.storage.sqlite.query<{ enrichment: string | null }, [string]>('select enrichment from request_logs where id = ?').get(id!)!.enrichment
    expect(JSON.parse(enrichment(loudBuffered.headers.get('x-router-request-id'))!)).toEqual({ 'upper-case': { shouted: true } })
    expect(enrichment(quietBuffered.headers.get('x-router-request-id'))).toBeNull()
  })
})
