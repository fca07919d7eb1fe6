/**
 * A key's compiled chain (pipeline/stages/registry.ts): what applies to its requests is decided
 * when its read-model entry is built — the stages it opens (the decisioner, only with
 * RT_DECISIONER_ENABLED=1; MCP tools, companion ads, keyterms only with RT_KEYTERMS_ENABLED=1) and
 * what its stages of settings set (the steering message: the key's, else its workspace's; body
 * capture) — and it follows changes: a workspace's new steering message or capture setting reaches its keys'
 * next request. And the answer path's cases: the responses-only gateway kind answering a messages
 * client (one translation, Responses → messages), streamed and buffered.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Database } from 'bun:sqlite'
import { compileKeyPipeline, stageNames } from '../../src/pipeline/stages/registry'
import { setWorkspaceSettings } from '../../src/management/workspaces'
import type { KeyEntry, WorkspaceEntry } from '../../src/pipeline/read-model/snapshot'
import { startMockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'

const noAllowlist = { empty: true, allows: () => true } as unknown as WorkspaceEntry['allowlist']

function key(features: Partial<KeyEntry> = {}): KeyEntry {
  return {
    id: 'k1',
    workspaceId: 'w1',
    apiShape: 'chat',
    secretHash: '',
    previous: undefined,
    revoked: false,
    allowlist: noAllowlist,
    steeringMessage: null,
    failoverTtfbMs: null,
    upstreamTimeoutMs: null,
    companionAds: false,
    keyterms: false,
    rule: { strategy: 'priority', targets: [], remaps: [], decisioner: null },
    mcpServers: [],
    ...features,
  } as KeyEntry
}

const workspace = (settings: Partial<WorkspaceEntry> = {}): WorkspaceEntry => ({ id: 'w1', suspended: false, allowlist: noAllowlist, steeringMessage: null, captureBodies: false, cachePurgedAt: 0, ...settings })
const flagsOff = { decisionerEnabled: false, keytermsEnabled: false }
const flagsOn = { decisionerEnabled: true, keytermsEnabled: true }
const decisioner = { provider_key_id: 'p1', objective: 'cost' }

describe('compileKeyPipeline', () => {
  test('a plain key: no stage, no steering, plain; the flags alone turn nothing on', () => {
    for (const flags of [flagsOff, flagsOn]) {
      const pipeline = compileKeyPipeline(key(), workspace(), flags)
      expect(pipeline.plain).toBe(true)
      expect(pipeline.stages).toHaveLength(0)
      expect(pipeline.onAuthenticated).toHaveLength(0)
      expect(pipeline.onAnswered).toHaveLength(0)
      expect(pipeline.steering).toBeUndefined()
      expect(pipeline.captureBodies).toBe(false)
      expect(Object.isFrozen(pipeline)).toBe(true)
    }
  })

  test('each feature is one registry entry, applied when the key and the operator flags turn it on', () => {
    const names = (entries: readonly { name: string }[]) => entries.map((entry) => entry.name)
    expect(stageNames()).toEqual(['steering', 'guardrails', 'cache', 'limits', 'decisioner', 'continuation', 'mcp', 'ads', 'keyterms', 'tracing', 'body-capture'])
    const withDecisioner = key({ rule: { strategy: 'priority', targets: [], remaps: [], decisioner } })
    expect(names(compileKeyPipeline(withDecisioner, workspace(), flagsOff).stages)).toEqual([])
    expect(names(compileKeyPipeline(withDecisioner, workspace(), flagsOn).stages)).toEqual(['decisioner'])
    expect(compileKeyPipeline(withDecisioner, workspace(), flagsOn).plain).toBe(false)
    expect(names(compileKeyPipeline(key({ keyterms: true }), workspace(), flagsOff).stages)).toEqual([])
    expect(names(compileKeyPipeline(key({ keyterms: true }), workspace(), flagsOn).stages)).toEqual(['keyterms'])
    expect(names(compileKeyPipeline(key({ companionAds: true }), workspace(), flagsOff).stages)).toEqual(['ads'])
    expect(names(compileKeyPipeline(key({ continuation: { maxHops: 2 } }), workspace(), flagsOff).stages)).toEqual(['continuation'])
    const everything = key({ companionAds: true, keyterms: true, mcpServers: [{ id: 's1', name: null, url: 'http://127.0.0.1:1/mcp' }], rule: { strategy: 'priority', targets: [], remaps: [], decisioner } })
    const all = compileKeyPipeline(everything, workspace({ steeringMessage: 'Be brief.', captureBodies: true }), flagsOn)
    expect(names(all.stages)).toEqual(['decisioner', 'mcp', 'ads', 'keyterms'])
    expect(all.steering).toBe('Be brief.')
    expect(all.captureBodies).toBe(true)
  })

  test("steering: the key's message, else the workspace's; a key's empty message steers nothing; steering alone keeps the straight path (each dialect puts the message in)", () => {
    expect(compileKeyPipeline(key({ steeringMessage: 'Key rule.' }), workspace({ steeringMessage: 'Workspace rule.' }), flagsOff).steering).toBe('Key rule.')
    expect(compileKeyPipeline(key(), workspace({ steeringMessage: 'Workspace rule.' }), flagsOff).steering).toBe('Workspace rule.')
    expect(compileKeyPipeline(key({ steeringMessage: '' }), workspace({ steeringMessage: 'Workspace rule.' }), flagsOff).steering).toBeUndefined()
    expect(compileKeyPipeline(key(), workspace({ steeringMessage: 'Workspace rule.' }), flagsOff).plain).toBe(true)
    // Capture changes only the log: the answer stays the straight path.
    expect(compileKeyPipeline(key(), workspace({ captureBodies: true }), flagsOff).plain).toBe(true)
  })
})

const userMessages = [{ role: 'user', content: 'hi' }]

async function chatKey(server: TestServer, gateway: string, extra: Record<string, unknown> = {}) {
  const provider = await storeProvider(server, { gateway, key: `sk-${gateway}-secret` })
  const created = await createInferenceKey(server, { ...extra, routing: { targets: [{ provider_key_id: provider.id }] } })
  return { id: created.id as string, secret: created.key as string }
}

function loggedBody(server: TestServer, keyId: string): string | null {
  server.runtime.logQueue.flush()
  const database = new Database(server.runtime.config.dbPath, { readonly: true })
  try {
    return (database.query('select request_body from request_logs where key_id = ? order by seq desc limit 1').get(keyId) as { request_body: string | null }).request_body
  } finally {
    database.close()
  }
}

describe("a workspace's settings reach its keys' compiled pipelines", () => {
  test('steering set, changed and cleared on the workspace after its key served: each next request follows', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const plain = await chatKey(server, 'openai')
    const body = { model: 'openai/gpt-4o-mini', messages: userMessages }
    const send = () => httpCall(server, 'POST', '/v1/chat/completions', body, bearerHeader(plain.secret))

    expect((await send()).status).toBe(200)
    expect(mock.calls('/chat/completions').at(-1)!.body.messages).toEqual(userMessages)
    // The first request went through as the client's own bytes (a plain key).
    expect(mock.calls('/chat/completions').at(-1)!.rawBody).toBe(JSON.stringify(body))

    setWorkspaceSettings(server.runtime, server.workspaceId, { steeringMessage: 'Workspace rule.' })
    expect((await send()).status).toBe(200)
    expect(mock.calls('/chat/completions').at(-1)!.body.messages).toEqual([{ role: 'system', content: 'Workspace rule.' }, ...userMessages])

    setWorkspaceSettings(server.runtime, server.workspaceId, { steeringMessage: 'Another rule.' })
    expect((await send()).status).toBe(200)
    expect(mock.calls('/chat/completions').at(-1)!.body.messages).toEqual([{ role: 'system', content: 'Another rule.' }, ...userMessages])

    setWorkspaceSettings(server.runtime, server.workspaceId, { steeringMessage: '' })
    expect((await send()).status).toBe(200)
    expect(mock.calls('/chat/completions').at(-1)!.rawBody).toBe(JSON.stringify(body))
  })

  test('body capture switched on and off on the workspace: the next request is logged with its body, then without', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const plain = await chatKey(server, 'openai')
    const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: userMessages })
    const send = () => httpCall(server, 'POST', '/v1/chat/completions', body, bearerHeader(plain.secret))

    expect((await send()).status).toBe(200)
    expect(loggedBody(server, plain.id)).toBeNull()
    setWorkspaceSettings(server.runtime, server.workspaceId, { captureBodies: true })
    expect((await send()).status).toBe(200)
    expect(loggedBody(server, plain.id)).toBe(body)
    setWorkspaceSettings(server.runtime, server.workspaceId, { captureBodies: false })
    expect((await send()).status).toBe(200)
    expect(loggedBody(server, plain.id)).toBeNull()
  })
})

const fixture = (name: string) => readFileSync(join(import.meta.dir, '../fixtures/responses', name), 'utf8')

describe('the responses-only gateway kind answering a messages client: one translation', () => {
  test('buffered: the gateway is asked on /responses and its Response becomes a message', async () => {
    await using mock = await startMockGateway()
    mock.handle((request) => (request.path.endsWith('/responses') ? { json: JSON.parse(fixture('text.upstream.json')) } : undefined))
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI_RESPONSES: mock.url })
    const messagesKey = await chatKey(server, 'openai-responses', { api_shape: 'messages' })
    const result = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages: userMessages }, { 'x-api-key': messagesKey.secret, 'anthropic-version': '2023-06-01' })
    expect(result.status).toBe(200)
    expect(mock.calls('/responses')).toHaveLength(1)
    expect(mock.calls('/chat/completions')).toHaveLength(0)
    expect(mock.calls('/responses')[0]!.body.input).toEqual([{ role: 'user', content: 'hi' }])
    expect(result.json.type).toBe('message')
    expect(result.json.role).toBe('assistant')
    const upstream = JSON.parse(fixture('text.upstream.json'))
    const upstreamText = upstream.output.flatMap((item: any) => item.content ?? []).map((part: any) => part.text ?? '').join('')
    expect(result.json.content).toEqual([{ type: 'text', text: upstreamText }])
    expect(result.json.usage.input_tokens).toBe(upstream.usage.input_tokens)
    expect(result.json.usage.output_tokens).toBe(upstream.usage.output_tokens)
    expect(result.headers.get('x-router-provider')).toBe('openai-responses')
  })

  test('streamed: Responses events become the messages event sequence, the text whole, usage in message_delta', async () => {
    await using mock = await startMockGateway()
    mock.handle((request) =>
      request.path.endsWith('/responses') ? new Response(fixture('text.upstream.sse'), { headers: { 'content-type': 'text/event-stream' } }) : undefined,
    )
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI_RESPONSES: mock.url })
    const messagesKey = await chatKey(server, 'openai-responses', { api_shape: 'messages' })
    const result = await httpCall(server, 'POST', '/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, stream: true, messages: userMessages }, { 'x-api-key': messagesKey.secret, 'anthropic-version': '2023-06-01' })
    expect(result.status).toBe(200)
    expect(result.headers.get('content-type')).toContain('text/event-stream')
    expect(mock.calls('/responses')[0]!.body.stream).toBe(true)
    const events = result.text
      .split('\n\n')
      .filter((block) => block.trim() !== '')
      .map((block) => JSON.parse(block.split('\n').find((line) => line.startsWith('data: '))!.slice(6)))
    const types = events.map((event) => event.type)
    expect(types[0]).toBe('message_start')
    expect(types.at(-1)).toBe('message_stop')
    expect(types).toContain('message_delta')
    const text = events.filter((event) => event.type === 'content_block_delta').map((event) => event.delta.text).join('')
    const deltas = fixture('text.upstream.sse')
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)))
      .filter((event) => event.type === 'response.output_text.delta')
      .map((event) => event.delta)
      .join('')
    expect(text).toBe(deltas)
    expect(events.find((event) => event.type === 'message_delta').usage.output_tokens).toBeGreaterThan(0)
  })
})
