/**
 * The upstream client never follows a redirect (issue 37 item 2): fetch would resend the provider
 * secret to the Location, and it drops only Authorization across origins, never a gateway's own key
 * header (Portkey's x-portkey-api-key). A gateway on 127.0.0.1 answers every call with a 3xx to
 * another local server that records what reaches it: nothing ever does, whatever the call (a routed
 * attempt, buffered or streamed, a model listing, a batch or decision read, an upload); a routed
 * request fails over with `gateway:http-3xx` (SPEC "Failover reasons": any other status), and a sole
 * target ends in 502 all_targets_failed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ModelListingFailed, UpstreamClient, type GatewayAccess } from '../../src/gateways/client'
import { findGateway } from '../../src/gateways/catalog'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'

interface Received {
  method: string
  path: string
  headers: Record<string, string>
}

/** The server a redirect points at: it records every request that reaches it and answers as a gateway would. */
function startRecorder() {
  const received: Received[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      await request.arrayBuffer()
      received.push({ method: request.method, path: new URL(request.url).pathname, headers: Object.fromEntries(request.headers) })
      return Response.json({ object: 'list', data: [{ id: 'openai/gpt-4o-mini' }] })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, received, stop: () => server.stop(true) }
}

/** A gateway that answers every call with `status` and a Location on the recorder (same path). */
function startRedirector(target: string) {
  let status = 302
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      await request.arrayBuffer()
      const url = new URL(request.url)
      return new Response('Moved', { status, headers: { location: `${target}${url.pathname}${url.search}`, 'content-type': 'text/plain' } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    answer(next: number) {
      status = next
    },
    stop: () => server.stop(true),
  }
}

const portkeySecret = 'pk-redirect-Zq7vX2mB9kLp4RtY8wNc3HsJ'
const openaiSecret = 'sk-redirect-Hs7vX2mB9kLp4RtY8wNc3QaZ'

let recorder: ReturnType<typeof startRecorder>
let redirector: ReturnType<typeof startRedirector>

beforeAll(() => {
  recorder = startRecorder()
  redirector = startRedirector(recorder.url)
})

afterAll(async () => {
  await redirector?.stop()
  await recorder?.stop()
})

/** Nothing reached the redirect's target, so no secret did. */
function expectNothingFollowed() {
  expect(recorder.received).toEqual([])
}

describe('UpstreamClient with the real fetch: every call leaves the redirect unfollowed', () => {
  const access = (gatewayId: string, secret: string): GatewayAccess => ({ gateway: findGateway(gatewayId)!, secret, baseUrl: `${redirector.url}/v1` })
  const client = new UpstreamClient(fetch)

  for (const status of [301, 302, 303, 307, 308]) {
    test(`${status}: a routed call (JSON and a streamed upload), a read and a model listing get the 3xx back; nothing reaches the Location`, async () => {
      redirector.answer(status)
      recorder.received.length = 0
      // Portkey's own header is one fetch would carry across origins; Authorization another gateway's.
      for (const provider of [access('portkey', portkeySecret), access('openai', openaiSecret)]) {
        const json = await client.send(provider, { path: '/chat/completions', body: { model: 'm', messages: [] } })
        expect(json.status).toBe(status)
        expect(json.headers.get('location')).toBe(`${recorder.url}/v1/chat/completions`)
        await json.arrayBuffer()
        const upload = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"endpoint":"/v1/chat/completions","requests":[]}'))
            controller.close()
          },
        })
        const uploaded = await client.send(provider, { path: '/batches', bytes: upload })
        expect(uploaded.status).toBe(status)
        await uploaded.arrayBuffer()
        const read = await client.read(provider, { path: '/batches/b_1' }, 5000)
        expect(read).toMatchObject({ status, ok: false })
        const decision = await client.read(provider, { path: '/decisions', body: { questions: [] } }, 5000)
        expect(decision.status).toBe(status)
        expect(await client.listModels(provider, AbortSignal.timeout(5000)).catch((error: unknown) => error)).toBeInstanceOf(ModelListingFailed)
      }
      expectNothingFollowed()
    })
  }
})

describe('a routed request whose gateway answers with a redirect', () => {
  let server: TestServer
  let backup: MockGateway
  const providers: Record<string, string> = {}

  beforeAll(async () => {
    backup = await startMockGateway()
    server = await startTestServer({ RT_GATEWAY_URL_PORTKEY: redirector.url, RT_GATEWAY_URL_GROQ: backup.url })
    providers.portkey = (await storeProvider(server, { gateway: 'portkey', key: portkeySecret })).id
    providers.groq = (await storeProvider(server, { gateway: 'groq', key: 'gsk-redirect-backup-0123456789' })).id
  })

  afterAll(async () => {
    await server?.[Symbol.asyncDispose]()
    await backup?.close()
  })

  const keyFor = async (targets: string[]) =>
    (await createInferenceKey(server, { routing: { strategy: 'priority', targets: targets.map((gateway) => ({ provider_key_id: providers[gateway] })) } })).key as string
  const chat = (secret: string, extra: Record<string, unknown> = {}) =>
    httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], ...extra }, bearerHeader(secret))
  const attemptPath = (result: CallResult) => {
    server.runtime.logQueue.flush()
    return (server.runtime.storage.sqlite.query('select attempt_path from request_logs where id = ?').get(result.headers.get('x-router-request-id')) as { attempt_path: string }).attempt_path
  }

  test('fails over to the next target, buffered and streamed: X-Router-Failover and the logged attempt path say http-3xx', async () => {
    const secret = await keyFor(['portkey', 'groq'])
    for (const [status, stream] of [
      [307, false],
      [302, true],
    ] as const) {
      redirector.answer(status)
      recorder.received.length = 0
      const before = backup.calls('/chat/completions').length
      const result = await chat(secret, { stream })
      expect(result.status).toBe(200)
      expect(result.headers.get('x-router-provider')).toBe('groq')
      expect(result.headers.get('x-router-failover')).toBe(`portkey:http-${status}`)
      expect(result.headers.get('x-router-attempts')).toBe('2')
      expect(attemptPath(result)).toContain(`portkey:http-${status}`)
      expect(backup.calls('/chat/completions').length).toBe(before + 1)
      expectNothingFollowed()
    }
  })

  test('a sole target: 502 all_targets_failed naming the redirect; the 3xx is not relayed', async () => {
    const secret = await keyFor(['portkey'])
    redirector.answer(302)
    recorder.received.length = 0
    const result = await chat(secret)
    expect(result.status).toBe(502)
    expect(result.json.error.code).toBe('all_targets_failed')
    expect(result.json.error.message).toContain('portkey:http-302')
    expect(result.headers.get('location')).toBeNull()
    expect(attemptPath(result)).toContain('portkey:http-302')
    expectNothingFollowed()
  })
})
