/**
 * Traces (CONTRACT §13) against a real OTLP/HTTP receiver on 127.0.0.1: the span tree of a
 * failed-over streamed request (SERVER span, a CLIENT span per attempt with the failover reason,
 * GenAI attributes and token usage, each attempt's traceparent sent upstream), a request with an MCP
 * tool round (INTERNAL span per tool call), a caller's traceparent continued, sampling off, protobuf
 * (the default protocol) with the OTEL_* headers and service name, a collector that is down (requests
 * unaffected), and no prompt or completion text and no secret in any span.
 */
import { describe, expect, test } from 'bun:test'
import { startGateways } from '../harness/gateways'
import { chatChunks, chatCompletion } from '../harness/mock-gateway'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../harness/otlp-receiver'
import { bearerHeader, createInferenceKey, httpCall } from '../harness/api'
import type { TestServer } from '../harness/server'
import { startMcpServer } from '../harness/mcp-server'
import { startPluginService } from '../harness/plugin-services'
import { addMcpServer } from '../../src/management/key-settings'
import { loadConfig } from '../../src/config/env'

const SERVER = 2
const CLIENT = 3
const INTERNAL = 1
const prompt = 'A secret plan about the otters of Lake Geneva'

/** Sends what the batch processor holds and waits until `count` spans (at least) arrived. */
async function spansAfterFlush(server: TestServer, receiver: OtlpReceiver, count: number): Promise<ReceivedSpan[]> {
  for (let attempt = 0; attempt < 100; attempt++) {
    await server.runtime.tracing!.flush()
    if (receiver.spans.length >= count) return receiver.spans
    await Bun.sleep(20)
  }
  throw new Error(`only ${receiver.spans.length} of ${count} spans arrived`)
}

const tracingEnv = (receiver: OtlpReceiver, extra: Record<string, string> = {}) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_SERVICE_NAME: 'router-under-test',
  ...extra,
})

describe('traces', () => {
  test('a failed-over streamed request: a SERVER span with GenAI attributes and usage, a CLIENT span per attempt (the failed one with its reason), each attempt’s traceparent upstream', async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['groq', 'openai'], tracingEnv(receiver))
    const { server } = env
    env.mocks.groq!.handle(() => ({ status: 503, json: { error: { message: 'overloaded' } } }))
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.groq }, { provider_key_id: env.providers.openai }] } })
    const answer = await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: prompt }] }, bearerHeader(key.key))
    expect(answer.status).toBe(200)
    expect(answer.text).toContain('[DONE]')

    const spans = await spansAfterFlush(server, receiver, 3)
    expect(spans).toHaveLength(3)
    const root = spans.find((span) => span.kind === SERVER)!
    expect(root.name).toBe('chat openai/gpt-4o-mini')
    expect(root.parentSpanId).toBe('')
    expect(root.serviceName).toBe('router-under-test')
    expect(root.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'openai/gpt-4o-mini',
      // No catalog here: the model goes upstream as the client named it.
      'gen_ai.response.model': 'openai/gpt-4o-mini',
      'gen_ai.usage.input_tokens': 11,
      'gen_ai.usage.output_tokens': 3,
      'router.request_id': answer.headers.get('x-router-request-id')!,
      'router.key_id': key.id,
      'http.response.status_code': 200,
      'router.attempts': 2,
    })
    expect(root.status.code).not.toBe(2)
    const attempts = spans.filter((span) => span.kind === CLIENT)
    expect(attempts.map((span) => [span.attributes['gen_ai.provider.name'], span.parentSpanId, span.traceId])).toEqual([
      ['groq', root.spanId, root.traceId],
      ['openai', root.spanId, root.traceId],
    ])
    const [failed, served] = attempts as [ReceivedSpan, ReceivedSpan]
    expect(failed.attributes).toMatchObject({ 'router.failover_reason': 'server-error', 'http.response.status_code': 503, 'gen_ai.request.model': 'openai/gpt-4o-mini' })
    expect(failed.status.code).toBe(2)
    expect(served.attributes['router.failover_reason']).toBeUndefined()
    expect(served.attributes['http.response.status_code']).toBe(200)
    // Each upstream call carried the traceparent of its own attempt span (sampled).
    expect(env.mocks.groq!.requests.at(-1)!.headers['traceparent']).toBe(`00-${root.traceId}-${failed.spanId}-01`)
    expect(env.mocks.openai!.requests.at(-1)!.headers['traceparent']).toBe(`00-${root.traceId}-${served.spanId}-01`)
    // Neither the prompt nor the answer, nor a secret, is in any span.
    const exported = JSON.stringify(spans)
    expect(exported).not.toContain('otters')
    expect(exported).not.toContain('Hello')
    expect(exported).not.toContain(key.key)
    expect(exported).not.toContain('sk-')
  })

  test('an MCP tool round: an INTERNAL span per tool call under the request, a CLIENT span per model round', async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['groq'], tracingEnv(receiver, { RT_WEBHOOK_ALLOW_PRIVATE: '1' }))
    const { server } = env
    await using mcp = await startMcpServer({ name: 'calc' })
    env.mocks.groq!.handle((request) => {
      const body = request.body as any
      const offered = (body.tools ?? []).map((tool: any) => tool.function.name).find((name: string) => name.endsWith('__add'))
      const round = (body.messages ?? []).filter((message: any) => message.role === 'assistant').length
      if (round === 0) {
        return { json: chatCompletion(body.model, '', { choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: offered, arguments: '{"a":2,"b":3}' } }] }, finish_reason: 'tool_calls' }] }) }
      }
      return { json: chatCompletion(body.model, 'The sum is 5.') }
    })
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.groq }] } })
    await addMcpServer(server.runtime, key.id, mcp.url, 'calc')
    const answer = await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: prompt }] }, bearerHeader(key.key))
    expect(answer.status).toBe(200)
    expect(answer.json.choices[0].message.content).toContain('The sum is 5.')

    const spans = await spansAfterFlush(server, receiver, 4)
    const root = spans.find((span) => span.kind === SERVER)!
    const tools = spans.filter((span) => span.kind === INTERNAL)
    expect(tools.map((span) => [span.name, span.parentSpanId, span.attributes['gen_ai.tool.name'], span.attributes['gen_ai.operation.name']])).toEqual([['execute_tool add', root.spanId, 'add', 'execute_tool']])
    expect(tools[0]!.status.code).not.toBe(2)
    expect(spans.filter((span) => span.kind === CLIENT && span.parentSpanId === root.spanId)).toHaveLength(2)
    // The tool's arguments and result stay out.
    expect(JSON.stringify(spans)).not.toContain('"a":2')
  })

  test('plug-in calls (companion ads, keyterm links) are INTERNAL spans of the request; a failing one is marked an error', async () => {
    await using receiver = await startOtlpReceiver()
    await using ads = await startPluginService({ path: '/v1/ads', answer: { json: { ads: [{ title: 'An ad' }] } } })
    await using keyterms = await startPluginService({ path: '/v1/keyterms', answer: { status: 500, json: { error: 'down' } } })
    await using env = await startGateways(['openai'], tracingEnv(receiver, { RT_ADS_URL: ads.url, RT_KEYTERMS_URL: keyterms.url, RT_KEYTERMS_ENABLED: '1' }))
    const { server } = env
    const key = await createInferenceKey(server, { companion_ads: true, keyterms: true, routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const answer = await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: prompt }] }, bearerHeader(key.key))
    expect(answer.status).toBe(200)
    expect(answer.json.ads).toEqual([{ title: 'An ad' }])
    const spans = await spansAfterFlush(server, receiver, 4)
    const root = spans.find((span) => span.kind === SERVER)!
    const plugins = spans.filter((span) => span.kind === INTERNAL).sort((left, right) => left.name.localeCompare(right.name))
    expect(plugins.map((span) => [span.name, span.parentSpanId, span.attributes['router.plugin'], span.status.code])).toEqual([
      ['plugin ads', root.spanId, 'ads', 0],
      ['plugin keyterms', root.spanId, 'keyterms', 2],
    ])
    expect(plugins[1]!.status.message).toBe('keyterms_upstream_error')
  })

  test("a caller's traceparent is continued: the SERVER span is its child, in its trace", async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['openai'], tracingEnv(receiver))
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const parentId = '00f067aa0ba902b7'
    const answer = await httpCall(server, 'POST', '/v1/embeddings', { model: 'openai/text-embedding-3-small', input: 'x' }, { ...bearerHeader(key.key), traceparent: `00-${traceId}-${parentId}-01`, tracestate: 'vendor=value' })
    expect(answer.status).toBe(200)
    const spans = await spansAfterFlush(server, receiver, 2)
    const root = spans.find((span) => span.kind === SERVER)!
    expect(root.name).toBe('embeddings openai/text-embedding-3-small')
    expect([root.traceId, root.parentSpanId]).toEqual([traceId, parentId])
    expect(spans.every((span) => span.traceId === traceId)).toBe(true)
    expect(env.mocks.openai!.requests.at(-1)!.headers['traceparent']).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
    expect(env.mocks.openai!.requests.at(-1)!.headers['tracestate']).toBeUndefined()

    // A traceparent that is not one starts a new trace.
    await httpCall(server, 'POST', '/v1/embeddings', { model: 'openai/text-embedding-3-small', input: 'x' }, { ...bearerHeader(key.key), traceparent: 'not-a-traceparent' })
    const more = await spansAfterFlush(server, receiver, 4)
    const second = more.filter((span) => span.kind === SERVER)[1]!
    expect(second.traceId).not.toBe(traceId)
    expect(second.parentSpanId).toBe('')
  })

  test('sampling off: no span is exported, the upstream still gets an unsampled traceparent, requests answer as before', async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['openai'], tracingEnv(receiver, { OTEL_TRACES_SAMPLER: 'always_off' }))
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    for (let index = 0; index < 3; index++) expect((await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(key.key))).status).toBe(200)
    await server.runtime.tracing!.flush()
    await Bun.sleep(50)
    expect(receiver.spans).toEqual([])
    expect(env.mocks.openai!.requests.at(-1)!.headers['traceparent']).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
  })

  test("a request that fails authentication gets no say in sampling: its traceparent's sampled flag forces no span; an authenticated one's does", async () => {
    await using receiver = await startOtlpReceiver()
    // Sampled only where a parent says so: the root sampler exports nothing.
    await using env = await startGateways(['openai'], tracingEnv(receiver, { OTEL_TRACES_SAMPLER: 'parentbased_always_off' }))
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const forced = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }
    const body = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }
    for (const headers of [{ ...forced }, { ...forced, ...bearerHeader('rt_live_not-a-key-of-ours') }, { ...forced, authorization: 'Basic abc' }]) {
      expect((await httpCall(server, 'POST', '/v1/chat/completions', body, headers)).status).toBe(401)
    }
    await server.runtime.tracing!.flush()
    await Bun.sleep(50)
    expect(receiver.spans).toEqual([])
    // The same traceparent on an authenticated request is continued, sampled as its caller asked.
    expect((await httpCall(server, 'POST', '/v1/chat/completions', body, { ...forced, ...bearerHeader(key.key) })).status).toBe(200)
    const spans = await spansAfterFlush(server, receiver, 2)
    expect(spans.find((span) => span.kind === SERVER)!.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736')
  })

  test('gen_ai.response.model is the model the answer names (a dated snapshot), not the one asked for: buffered, streamed, translated', async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['openai'], tracingEnv(receiver))
    const { server } = env
    const dated = 'gpt-4o-mini-2024-07-18'
    env.mocks.openai!.handle((request) => (request.body?.stream ? { sse: chatChunks(dated) } : { json: chatCompletion(dated) }))
    const chatKey = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const messagesKey = await createInferenceKey(server, { api_shape: 'messages', routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const chatBody = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }
    expect((await httpCall(server, 'POST', '/v1/chat/completions', chatBody, bearerHeader(chatKey.key))).status).toBe(200)
    expect((await httpCall(server, 'POST', '/v1/chat/completions', { ...chatBody, stream: true }, bearerHeader(chatKey.key))).status).toBe(200)
    const messagesBody = { model: 'openai/gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }
    expect((await httpCall(server, 'POST', '/v1/messages', messagesBody, bearerHeader(messagesKey.key))).status).toBe(200)
    expect((await httpCall(server, 'POST', '/v1/messages', { ...messagesBody, stream: true }, bearerHeader(messagesKey.key))).status).toBe(200)
    const spans = await spansAfterFlush(server, receiver, 8)
    const roots = spans.filter((span) => span.kind === SERVER)
    expect(roots).toHaveLength(4)
    for (const root of roots) {
      expect(root.attributes['gen_ai.request.model']).toBe('openai/gpt-4o-mini')
      expect(root.attributes['gen_ai.response.model']).toBe(dated)
    }
  })

  test('the OTLP endpoint is logged without its user info or query', async () => {
    const lines: Record<string, unknown>[] = []
    const logger = { debug() {}, error() {}, info: (event: string, fields?: Record<string, unknown>) => void lines.push({ event, ...fields }), warn: (event: string, fields?: Record<string, unknown>) => void lines.push({ event, ...fields }) }
    const failing = { export: (_spans: unknown[], done: (result: { code: number; error?: Error }) => void) => done({ code: 1, error: new Error('refused') }), shutdown: () => Promise.resolve() }
    const { RouterTracing } = await import('../../src/observability/tracing')
    const settings = loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://user:pass-word@collector.example:4318/v1/traces?token=query-secret#part' }).tracing!
    const tracing = new RouterTracing(settings, logger, failing as never)
    tracing.startRequest('chat', undefined, Date.now()).end()
    await tracing.flush()
    const { enableTracing } = await import('../../src/runtime')
    await enableTracing({ config: { tracing: settings }, logger, tracing: undefined } as never)
    const text = JSON.stringify(lines)
    expect(lines.map((line) => line.event)).toEqual(['trace_export_failed', 'tracing_enabled'])
    expect(lines.every((line) => line.endpoint === 'https://collector.example:4318/v1/traces')).toBe(true)
    for (const secret of ['pass-word', 'user:', 'query-secret', 'token=']) expect(text).not.toContain(secret)
    await tracing.shutdown()
  })

  test('protobuf (the default protocol) with OTEL_EXPORTER_OTLP_HEADERS; a traces endpoint is used as given', async () => {
    await using receiver = await startOtlpReceiver()
    await using env = await startGateways(['openai'], {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=acme,authorization=Bearer%20collector-token',
    })
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    expect((await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: prompt }] }, bearerHeader(key.key))).status).toBe(200)
    for (let attempt = 0; attempt < 100 && receiver.protobufBodies.length === 0; attempt++) {
      await server.runtime.tracing!.flush()
      await Bun.sleep(20)
    }
    const request = receiver.requests.find((entry) => entry.path === '/v1/traces')!
    expect(request.contentType).toBe('application/x-protobuf')
    expect(request.headers.get('x-tenant')).toBe('acme')
    expect(request.headers.get('authorization')).toBe('Bearer collector-token')
    const text = Buffer.from(receiver.protobufBodies[0]!).toString('latin1')
    expect(text).toContain('chat openai/gpt-4o-mini')
    expect(text).toContain('gen_ai.usage.input_tokens')
    // The default service name.
    expect(text).toContain('router')
    expect(text).not.toContain('otters')
  })

  test('a collector that is down or failing costs the requests nothing: they answer, spans are dropped', async () => {
    await using receiver = await startOtlpReceiver()
    receiver.failWith(503)
    await using env = await startGateways(['openai'], tracingEnv(receiver, { OTEL_EXPORTER_OTLP_TIMEOUT: '500' }))
    const { server } = env
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] } })
    const started = performance.now()
    for (let index = 0; index < 20; index++) expect((await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(key.key))).status).toBe(200)
    await server.runtime.tracing!.flush()
    expect(receiver.spans).toEqual([])
    expect(receiver.requests.length).toBeGreaterThan(0)
    // Nothing waited on the collector: 20 requests well inside its 500 ms export timeout each.
    expect(performance.now() - started).toBeLessThan(5000)
    // And a collector nobody listens on at all.
    await receiver.close()
    for (let index = 0; index < 5; index++) expect((await httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, bearerHeader(key.key))).status).toBe(200)
    await server.runtime.tracing!.flush()
  })

  test('a failing collector is reported once a minute at most, naming the endpoint, never a header value', async () => {
    const warnings: Record<string, unknown>[] = []
    const logger = { debug() {}, info() {}, error() {}, warn: (event: string, fields?: Record<string, unknown>) => void warnings.push({ event, ...fields }) }
    let exports = 0
    const failing = {
      export: (_spans: unknown[], done: (result: { code: number; error?: Error }) => void) => {
        exports++
        done({ code: 1, error: new Error('connect ECONNREFUSED 127.0.0.1:9') })
      },
      shutdown: () => Promise.resolve(),
    }
    const { RouterTracing } = await import('../../src/observability/tracing')
    const settings = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20very-secret' }).tracing!
    const tracing = new RouterTracing(settings, logger, failing as never)
    for (let round = 0; round < 3; round++) {
      tracing.startRequest('chat', new Headers(), Date.now()).end()
      await tracing.flush()
    }
    expect(exports).toBe(3)
    expect(warnings).toEqual([
      {
        event: 'trace_export_failed',
        spans: 1,
        endpoint: 'http://127.0.0.1:9/v1/traces',
        error: 'connect ECONNREFUSED 127.0.0.1:9',
        message: 'Spans are dropped while the collector cannot take them; requests are not affected.',
      },
    ])
    expect(JSON.stringify(warnings)).not.toContain('very-secret')
    await tracing.shutdown()
  })

  test('off without an endpoint; a bad endpoint or sampler stops the start naming the variable', () => {
    expect(loadConfig({ RT_DATA_DIR: '/tmp/unused' }).tracing).toBeUndefined()
    expect(loadConfig({ RT_DATA_DIR: '/tmp/unused', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toMatchObject({ url: 'http://collector:4318/v1/traces', protocol: 'http/protobuf', serviceName: 'router', sampler: 'parentbased_always_on' })
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toThrow('OTEL_EXPORTER_OTLP_ENDPOINT must be a URL')
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow('OTEL_TRACES_SAMPLER must be one of')
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow('OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/protobuf, http/json')
  })
})
