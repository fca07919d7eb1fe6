/**
 * The one upstream client (gateways/client.ts, CONTRACT §6): the URL under the provider's base, the
 * stored secret in the gateway's own auth header, the forwarding allowlist (SPEC "Request headers
 * forwarded upstream"), the parameters a gateway rejects, the client's bytes passed as they are,
 * and a whole read's time limit and secret scrubbing. Driven through an injected fetch.
 */
import { describe, expect, test } from 'bun:test'
import { authHeaders, forwardedHeaders, GatewayUnreachable, ModelListingFailed, UpstreamClient, type GatewayAccess } from '../../src/gateways/client'
import { findGateway, gatewayCatalog } from '../../src/gateways/catalog'
import { redacted } from '../../src/gateways/scrub-secret'

interface Sent {
  url: string
  method: string
  headers: Headers
  body: string | undefined
}

/** A fetch that records each call and answers with `answer(call)`. */
function recordingFetch(answer: (sent: Sent, signal: AbortSignal | undefined) => Response | Promise<Response> = () => new Response('{}')) {
  const sent: Sent[] = []
  const fetch = (async (url: string, init: RequestInit = {}) => {
    const call: Sent = {
      url,
      method: init.method ?? 'GET',
      headers: new Headers(init.headers),
      body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : new TextDecoder().decode(init.body as Uint8Array),
    }
    sent.push(call)
    return answer(call, init.signal ?? undefined)
  }) as unknown as typeof globalThis.fetch
  return { sent, fetch }
}

const secret = 'sk-test-Zq7vX2mB9kLp4RtY8wNc3HsJ'

function access(gatewayId: string, extra: Partial<GatewayAccess> = {}): GatewayAccess {
  const gateway = findGateway(gatewayId)!
  return { gateway, secret, baseUrl: `http://gateway.test/${gatewayId}/v1`, ...extra }
}

/** A gateway kind whose catalog entry names another auth header than Authorization. */
const otherHeaderGateway = () => gatewayCatalog.find((gateway) => gateway.authHeader !== 'authorization')!

/** The gateway kind with the top_p quirk (SPEC "POST /chat/completions"). */
const quirkGateway = () => gatewayCatalog.find((gateway) => gateway.capabilities.omitParams.length > 0)!

describe('UpstreamClient.send', () => {
  test('POSTs the JSON body to the path under the base URL with the secret as a Bearer token', async () => {
    const { sent, fetch } = recordingFetch()
    await new UpstreamClient(fetch).send(access('openai'), { path: '/chat/completions', body: { model: 'gpt-4o-mini', messages: [] } })
    expect(sent).toHaveLength(1)
    expect(sent[0]!.url).toBe('http://gateway.test/openai/v1/chat/completions')
    expect(sent[0]!.method).toBe('POST')
    expect(sent[0]!.headers.get('authorization')).toBe(`Bearer ${secret}`)
    expect(sent[0]!.headers.get('content-type')).toBe('application/json')
    expect(sent[0]!.headers.get('accept')).toBe('application/json')
    expect(JSON.parse(sent[0]!.body!)).toEqual({ model: 'gpt-4o-mini', messages: [] })
  })

  test("a gateway kind with its own auth header gets the secret there, and no Authorization", async () => {
    const gateway = otherHeaderGateway()
    expect(gateway).toBeDefined()
    const { sent, fetch } = recordingFetch()
    await new UpstreamClient(fetch).send(access(gateway.id), { path: '/models' })
    expect(sent[0]!.headers.get(gateway.authHeader)).toBe(secret)
    expect(sent[0]!.headers.get('authorization')).toBeNull()
  })

  test('a GET has no body and no content type; a stream asks for an event stream', async () => {
    const { sent, fetch } = recordingFetch()
    const client = new UpstreamClient(fetch)
    await client.send(access('openai'), { path: '/responses/resp_1' })
    await client.send(access('openai'), { path: '/chat/completions', body: { stream: true }, stream: true })
    expect(sent[0]!.method).toBe('GET')
    expect(sent[0]!.body).toBeUndefined()
    expect(sent[0]!.headers.get('content-type')).toBeNull()
    expect(sent[1]!.headers.get('accept')).toBe('text/event-stream')
  })

  test('the method can be named (DELETE)', async () => {
    const { sent, fetch } = recordingFetch()
    await new UpstreamClient(fetch).send(access('openai'), { method: 'DELETE', path: '/batches/b1' })
    expect(sent[0]!.method).toBe('DELETE')
  })

  test("the client's bytes go as they are; a JSON body loses the parameters the gateway rejects", async () => {
    const quirk = quirkGateway()
    const omitted = quirk.capabilities.omitParams[0]!
    const { sent, fetch } = recordingFetch()
    const client = new UpstreamClient(fetch)
    const raw = new TextEncoder().encode('{"model":"m",   "messages":[]}')
    await client.send(access('openai'), { path: '/chat/completions', bytes: raw })
    await client.send(access(quirk.id), { path: '/chat/completions', body: { model: 'm', [omitted]: 0.5, temperature: 0.2 } })
    expect(sent[0]!.body).toBe('{"model":"m",   "messages":[]}')
    expect(JSON.parse(sent[1]!.body!)).toEqual({ model: 'm', temperature: 0.2 })
  })

  test('forwarded headers go beside the auth header; the prebuilt headers are used when there are none', async () => {
    const { sent, fetch } = recordingFetch()
    const client = new UpstreamClient(fetch)
    const prebuilt = { json: { ...authHeaders({ gateway: findGateway('openai')!, secret }, 'application/json', true), 'x-prebuilt': 'yes' }, stream: authHeaders({ gateway: findGateway('openai')!, secret }, 'text/event-stream', true) }
    const provider = access('openai', { postHeaders: prebuilt })
    await client.send(provider, { path: '/chat/completions', body: {} })
    await client.send(provider, { path: '/chat/completions', body: {}, forwarded: [['x-title', 'My app']] })
    expect(sent[0]!.headers.get('x-prebuilt')).toBe('yes')
    expect(sent[1]!.headers.get('x-prebuilt')).toBeNull()
    expect(sent[1]!.headers.get('x-title')).toBe('My app')
    expect(sent[1]!.headers.get('authorization')).toBe(`Bearer ${secret}`)
  })
})

describe('forwardedHeaders (the allowlist)', () => {
  test('only HTTP-Referer, X-Title and Idempotency-Key, each at most 512 characters without control characters', () => {
    const incoming = new Headers({
      'http-referer': 'https://app.example',
      'x-title': 'x'.repeat(513),
      'idempotency-key': 'key-1',
      'user-agent': 'sdk',
      cookie: 'a=b',
      authorization: 'Bearer rt_live_client',
    })
    expect(forwardedHeaders(incoming)).toEqual([
      ['http-referer', 'https://app.example'],
      ['idempotency-key', 'key-1'],
    ])
    expect(forwardedHeaders(new Headers({ 'x-title': 'a\tb' }))).toEqual([])
    expect(forwardedHeaders(new Headers())).toEqual([])
  })
})

describe('UpstreamClient.read', () => {
  test('reads the whole answer: status, text and the relayable headers, the secret scrubbed from both', async () => {
    const { fetch } = recordingFetch(
      () =>
        new Response(`{"error":{"message":"Incorrect API key provided: ${secret}"}}`, {
          status: 401,
          headers: { 'content-type': 'application/json', 'x-ratelimit-remaining': `key=${secret}`, 'set-cookie': 'session=1', server: 'upstream' },
        }),
    )
    const answer = await new UpstreamClient(fetch).read(access('openai'), { path: '/responses/r1' }, 1000)
    expect(answer.status).toBe(401)
    expect(answer.ok).toBe(false)
    expect(answer.text).not.toContain(secret)
    expect(answer.text).toContain(redacted)
    expect(answer.headers.get('x-ratelimit-remaining')).toBe(`key=${redacted}`)
    expect(answer.headers.get('set-cookie')).toBeNull()
    expect(answer.headers.get('server')).toBeNull()
    expect(answer.headers.get('content-type')).toBe('application/json')
  })

  test('no answer within the limit: GatewayUnreachable("timeout"), and the call is aborted', async () => {
    let aborted = false
    const { fetch } = recordingFetch(
      (_sent, signal) =>
        new Promise<Response>((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            aborted = true
            reject(new Error('aborted'))
          })
        }),
    )
    const error = await new UpstreamClient(fetch).read(access('openai'), { path: '/decisions', body: {} }, 30).catch((caught) => caught)
    expect(error).toBeInstanceOf(GatewayUnreachable)
    expect((error as GatewayUnreachable).reason).toBe('timeout')
    expect(aborted).toBe(true)
  })

  test('a refused connection is "unreachable"; the caller hanging up is "client-closed"', async () => {
    const refused = recordingFetch(() => Promise.reject(new Error('ECONNREFUSED')))
    const unreachable = await new UpstreamClient(refused.fetch).read(access('openai'), { path: '/models' }, 1000).catch((caught) => caught)
    expect((unreachable as GatewayUnreachable).reason).toBe('unreachable')

    const hangUp = new AbortController()
    const waiting = recordingFetch((_sent, signal) => new Promise<Response>((_resolve, reject) => signal?.addEventListener('abort', () => reject(new Error('aborted')))))
    const pending = new UpstreamClient(waiting.fetch).read(access('openai'), { path: '/models', signal: hangUp.signal }, 5000).catch((caught) => caught)
    hangUp.abort()
    expect(((await pending) as GatewayUnreachable).reason).toBe('client-closed')
  })
})

describe('UpstreamClient.listModels', () => {
  test('the listed objects that have an id, from GET …/models or the path given', async () => {
    const { sent, fetch } = recordingFetch(() => Response.json({ object: 'list', data: [{ id: 'a' }, { name: 'no id' }, 'text', { id: 'b', owned_by: 'x' }] }))
    const models = await new UpstreamClient(fetch).listModels(access('openai'), AbortSignal.timeout(1000))
    expect(models).toEqual([{ id: 'a' }, { id: 'b', owned_by: 'x' }])
    await new UpstreamClient(fetch).listModels(access('openai'), AbortSignal.timeout(1000), '/models/user')
    expect(sent.map((call) => call.url)).toEqual(['http://gateway.test/openai/v1/models', 'http://gateway.test/openai/v1/models/user'])
  })

  test('a non-2xx answer or a listing without data: ModelListingFailed', async () => {
    const failing = recordingFetch(() => new Response('nope', { status: 503 }))
    expect(await new UpstreamClient(failing.fetch).listModels(access('openai'), AbortSignal.timeout(1000)).catch((caught) => caught)).toBeInstanceOf(ModelListingFailed)
    const empty = recordingFetch(() => Response.json({ object: 'list' }))
    expect(await new UpstreamClient(empty.fetch).listModels(access('openai'), AbortSignal.timeout(1000)).catch((caught) => caught)).toBeInstanceOf(ModelListingFailed)
  })
})
