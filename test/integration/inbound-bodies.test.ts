/**
 * Inbound request bodies (SPEC "Limits", "Errors", "Error envelopes"): an inference body is counted
 * as it arrives and cut at 10 MB with 413 request_too_large in the key's envelope, whatever its
 * framing, the rest of the upload cancelled; management bodies stop at their 1 MB limit the same way;
 * a body naming a top-level key twice is refused on every inference endpoint that reads JSON.
 */
import { describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { readFileSync } from 'node:fs'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { startService, tempDir } from '../harness/service-process'

const model = 'openai/gpt-4o-mini'
const megabyte = 1024 * 1024
const userMessages = [{ role: 'user', content: 'hi' }]

/**
 * A JSON body of `totalBytes` made as the client pulls it (never held whole): a chat body whose one
 * message runs on. `sent()` is how much the client has taken so far.
 */
function generatedBody(totalBytes: number) {
  const head = new TextEncoder().encode(`{"model":"${model}","messages":[{"role":"user","content":"`)
  const filler = new Uint8Array(64 * 1024).fill(0x78)
  let sent = 0
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= totalBytes) return controller.close()
      const chunk = sent === 0 ? head : filler.subarray(0, Math.min(filler.byteLength, totalBytes - sent))
      sent += chunk.byteLength
      controller.enqueue(chunk)
    },
  })
  return { stream, sent: () => sent }
}

interface Answer {
  status: number
  headers: Headers
  json: any
  /** Bytes of the body the client had handed over when the answer arrived. */
  sentAtAnswer: number
}

/** A chunked upload (no content-length: `duplex: 'half'` with a stream body) of `totalBytes`. */
async function uploadChunked(url: string, totalBytes: number, headers: Record<string, string>): Promise<Answer> {
  const body = generatedBody(totalBytes)
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: body.stream, duplex: 'half' } as RequestInit)
  const sentAtAnswer = body.sent()
  const text = await response.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: response.status, headers: response.headers, json, sentAtAnswer }
}

interface RawAnswer {
  status: number
  body: string
  /** Every byte the server wrote on the connection. */
  raw: string
}

/**
 * One request on a raw socket: the head as given (any content-length, true or not), then
 * `bodyBytes` of body. Resolves with the first response as soon as it is complete.
 */
function rawRequest(port: number, head: string, bodyBytes: Uint8Array): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0)
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head)
      socket.write(bodyBytes, () => {})
    })
    const finish = () => {
      const text = received.toString('latin1')
      const headEnd = text.indexOf('\r\n\r\n')
      if (headEnd === -1) return false
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd))
      if (!length || text.length < headEnd + 4 + Number(length[1])) return false
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)![1])
      resolve({ status, body: Buffer.from(text.slice(headEnd + 4, headEnd + 4 + Number(length[1])), 'latin1').toString('utf8'), raw: text })
      socket.destroy()
      return true
    }
    socket.on('data', (data: Buffer) => {
      received = Buffer.concat([received, data])
      finish()
    })
    // A write into a connection the server closed early is expected here.
    socket.on('error', () => {})
    socket.on('close', () => {
      if (!finish()) reject(new Error(`connection closed without a complete response: ${JSON.stringify(received.toString('latin1').slice(0, 300))}`))
    })
  })
}

function expectTooLarge(answer: { status: number; json: any; headers?: Headers }, envelope: 'chat' | 'messages' | 'content') {
  expect(answer.status).toBe(413)
  if (envelope === 'chat') expect(answer.json).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', code: 'request_too_large' } })
  if (envelope === 'messages') expect(answer.json).toEqual({ type: 'error', error: { type: 'request_too_large', message: expect.stringContaining('request_too_large') } })
  if (envelope === 'content') expect(answer.json).toEqual({ error: { code: 413, message: expect.stringContaining('request_too_large'), status: 'INVALID_ARGUMENT' } })
  if (answer.headers) {
    expect(answer.headers.get('x-router-request-id')).toBeTruthy()
    expect(answer.headers.get('x-router-attempts')).toBe('0')
  }
}

async function inProcessSetup() {
  const mock = await startMockGateway()
  const server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
  const provider = (await storeProvider(server, { gateway: 'openai', key: 'sk-openai-upstream-secret' })).id as string
  const keyOf = async (apiShape: string) => (await createInferenceKey(server, { api_shape: apiShape, routing: { strategy: 'priority', targets: [{ provider_key_id: provider }] } })).key as string
  return {
    mock,
    server,
    keys: { chat: await keyOf('chat'), messages: await keyOf('messages'), content: await keyOf('content') },
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]()
      await mock.close()
    },
  }
}

describe('inference bodies are counted as they arrive', () => {
  test('a 100 MB chunked upload is cut at 10 MB: 413 in the key envelope before the client sent it all, nothing sent upstream', async () => {
    await using env = await inProcessSetup()
    const cases = [
      ['/v1/chat/completions', env.keys.chat, 'chat'],
      ['/v1/embeddings', env.keys.chat, 'chat'],
      ['/v1/responses', env.keys.chat, 'chat'],
      ['/v1/messages', env.keys.messages, 'messages'],
      ['/v1/messages/count_tokens', env.keys.messages, 'messages'],
      [`/v1/models/${model}:generateContent`, env.keys.content, 'content'],
    ] as const
    for (const [path, secret, envelope] of cases) {
      const answer = await uploadChunked(env.server.rootUrl + path, 100 * megabyte, bearerHeader(secret))
      expectTooLarge(answer, envelope)
      // Read up to the limit, not to the end: today's whole read took all 100 MB first.
      expect({ path, cutEarly: answer.sentAtAnswer < 30 * megabyte }).toEqual({ path, cutEarly: true })
    }
    expect(env.mock.requests).toHaveLength(0)
  })

  test('a chunked body just under 10 MB is read whole and served', async () => {
    await using env = await inProcessSetup()
    const content = 'y'.repeat(10 * megabyte - 200)
    const text = JSON.stringify({ model, messages: [{ role: 'user', content }] })
    expect(text.length).toBeLessThan(10 * megabyte)
    const bytes = new TextEncoder().encode(text)
    let offset = 0
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= bytes.length) return controller.close()
        controller.enqueue(bytes.subarray(offset, offset + 64 * 1024))
        offset += 64 * 1024
      },
    })
    const response = await fetch(`${env.server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearerHeader(env.keys.chat) },
      body: stream,
      duplex: 'half',
    } as RequestInit)
    expect(response.status).toBe(200)
    await response.text()
    expect(env.mock.calls('/chat/completions')).toHaveLength(1)
    expect(env.mock.calls('/chat/completions')[0]!.body.messages[0].content.length).toBe(content.length)
  })

  test('a declared length over 10 MB is refused before its body arrives; a short declared length frames the body', async () => {
    await using env = await inProcessSetup()
    const port = Number(new URL(env.server.rootUrl).port)
    const head = (length: number) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${env.keys.chat}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`
    // 50 MB announced, 1 KB sent: the answer comes without waiting for the rest.
    const announced = await rawRequest(port, head(50 * megabyte), new Uint8Array(1024).fill(0x20))
    expectTooLarge({ status: announced.status, json: JSON.parse(announced.body) }, 'chat')

    // A content-length shorter than what follows: the body is the declared bytes, the rest is not
    // read into it (it is the next request on the connection, which the server refuses).
    const small = new TextEncoder().encode(JSON.stringify({ model }))
    const lying = await rawRequest(port, head(small.byteLength), Buffer.concat([small, Buffer.alloc(20 * megabyte, 0x78)]))
    expect(lying.status).toBe(400)
    expect(JSON.parse(lying.body).error.code).toBe('missing_messages')
    expect(env.mock.requests).toHaveLength(0)
  })
})

describe('the real service under large uploads', () => {
  async function startRealService(gateway: MockGateway) {
    const service = startService(tempDir(), { RT_GATEWAY_URL_OPENAI: gateway.url })
    const { rootUrl } = await service.listening()
    const managementKey = await service.managementKey()
    const post = async (path: string, body: unknown) => {
      const response = await fetch(rootUrl + path, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
      expect(response.status).toBe(201)
      return ((await response.json()) as { data: any }).data
    }
    const provider = await post('/api/v1/providers', { gateway: 'openai', key: 'sk-real-service' })
    const key = (await post('/api/v1/keys', { routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })).key as string
    return { service, rootUrl, port: Number(new URL(rootUrl).port), managementKey, key }
  }

  /** kB figures of the process's /proc status: current and peak resident memory. */
  function memoryOf(pid: number): { rss: number; peak: number } {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024
    return { rss: field('VmRSS'), peak: field('VmHWM') }
  }

  test('four concurrent 100 MB chunked uploads: each 413 in the envelope, the server grows by far less than one upload', async () => {
    await using gateway = await startMockGateway()
    const real = await startRealService(gateway)
    const before = memoryOf(real.service.child.pid)
    const answers = await Promise.all(Array.from({ length: 4 }, () => uploadChunked(`${real.rootUrl}/v1/chat/completions`, 100 * megabyte, bearerHeader(real.key))))
    for (const answer of answers) {
      expectTooLarge(answer, 'chat')
      expect(answer.sentAtAnswer).toBeLessThan(30 * megabyte)
    }
    const after = memoryOf(real.service.child.pid)
    // Reading each upload whole took the peak from about 260 MB to 560 MB.
    expect(after.peak - before.rss).toBeLessThan(100 * megabyte)
    // Nothing of the uploads went upstream (the one listing is the catalog crawl the provider key set off).
    expect(gateway.requests.filter((request) => !request.path.endsWith('/models'))).toHaveLength(0)
  }, 60_000)

  test('a chunked inference upload over 110 MB (Bun.serve maxRequestBodySize) is 413 in the envelope, not an empty body', async () => {
    await using gateway = await startMockGateway()
    const real = await startRealService(gateway)
    const answer = await uploadChunked(`${real.rootUrl}/v1/chat/completions`, 150 * megabyte, bearerHeader(real.key))
    expectTooLarge(answer, 'chat')
  }, 60_000)

  test('a chunked management body of 100 MB is 400 naming the 1 MB limit, before the client sent it all', async () => {
    await using gateway = await startMockGateway()
    const real = await startRealService(gateway)
    const answer = await uploadChunked(`${real.rootUrl}/api/v1/keys`, 100 * megabyte, { authorization: `Bearer ${real.managementKey}` })
    expect(answer.status).toBe(400)
    expect(answer.json).toEqual({ error: expect.stringContaining('limit is 1000000 bytes') })
    expect(answer.sentAtAnswer).toBeLessThan(30 * megabyte)
  }, 60_000)

  test('a chunked MCP body of 100 MB is a JSON-RPC 400, before the client sent it all', async () => {
    await using gateway = await startMockGateway()
    const real = await startRealService(gateway)
    const answer = await uploadChunked(`${real.rootUrl}/mcp`, 100 * megabyte, { authorization: `Bearer ${real.managementKey}` })
    expect(answer.status).toBe(400)
    expect(answer.json).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('too large') } })
    expect(answer.sentAtAnswer).toBeLessThan(30 * megabyte)
  }, 60_000)

  // Bun.serve has no size cap of its own (src/main.ts): a declared length Bun would have refused
  // itself, with an empty 413, reaches the routes.
  test('a declared length over 110 MB is answered by the routes: 413 in the inference envelope, 400 on the management API', async () => {
    await using gateway = await startMockGateway()
    const real = await startRealService(gateway)
    const inference = await rawRequest(
      real.port,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${real.key}\r\nContent-Type: application/json\r\nContent-Length: ${150 * megabyte}\r\n\r\n`,
      new Uint8Array(1024).fill(0x20),
    )
    expect(inference.status).toBe(413)
    expectTooLarge({ status: inference.status, json: JSON.parse(inference.body || 'null') }, 'chat')
    const management = await rawRequest(
      real.port,
      `POST /api/v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${real.managementKey}\r\nContent-Type: application/json\r\nContent-Length: ${150 * megabyte}\r\n\r\n`,
      new Uint8Array(1024).fill(0x20),
    )
    expect(management.status).toBe(400)
    expect(JSON.parse(management.body || 'null')).toEqual({ error: expect.stringContaining('limit is 1000000 bytes') })
  }, 60_000)
})

describe('a top-level key named twice', () => {
  test('is 400 invalid_json naming the key on every inference endpoint that reads JSON, nothing sent upstream', async () => {
    await using env = await inProcessSetup()
    // The cheap model last: JSON.parse keeps it for routing, billing and logs, while an upstream
    // reading the first would serve the expensive one from the same forwarded bytes.
    const twice = (rest: string) => `{"model":"openai/gpt-4o",${rest},"model":"${model}"}`
    const cases = [
      ['/v1/chat/completions', env.keys.chat, 'chat', twice(`"messages":${JSON.stringify(userMessages)}`), 'model'],
      ['/v1/embeddings', env.keys.chat, 'chat', twice('"input":"hi"'), 'model'],
      ['/v1/responses', env.keys.chat, 'chat', twice('"input":"hi"'), 'model'],
      ['/v1/messages', env.keys.messages, 'messages', twice(`"max_tokens":16,"messages":${JSON.stringify(userMessages)}`), 'model'],
      ['/v1/messages/count_tokens', env.keys.messages, 'messages', twice(`"messages":${JSON.stringify(userMessages)}`), 'model'],
      // The path names the model here; any repeated key is as ambiguous.
      [`/v1/models/${model}:generateContent`, env.keys.content, 'content', '{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"contents":[]}', 'contents'],
      // A \u escape spells the same key: JSON.parse treats it as one.
      ['/v1/chat/completions', env.keys.chat, 'chat', `{"model":"openai/gpt-4o","messages":${JSON.stringify(userMessages)},"mod\\u0065l":"${model}"}`, 'model'],
    ] as const
    for (const [path, secret, envelope, body, repeated] of cases) {
      const result = await httpCall(env.server, 'POST', path, body, bearerHeader(secret))
      expect({ path, status: result.status }).toEqual({ path, status: 400 })
      expect(result.headers.get('x-router-attempts')).toBe('0')
      const message: string = envelope === 'chat' ? result.json.error.message : result.json.error.message
      expect(message).toContain(`\`${repeated}\``)
      if (envelope === 'chat') expect(result.json.error).toEqual({ message: expect.any(String), type: 'invalid_request_error', code: 'invalid_json' })
      if (envelope === 'messages') expect(result.json).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('invalid_json') } })
      if (envelope === 'content') expect(result.json).toEqual({ error: { code: 400, message: expect.stringContaining('invalid_json'), status: 'INVALID_ARGUMENT' } })
    }
    expect(env.mock.requests).toHaveLength(0)
  })

  test('the same key inside nested objects is allowed and goes upstream as sent', async () => {
    await using env = await inProcessSetup()
    const body = `{"model":"${model}","messages":[{"role":"user","content":"hi","model":"a","model":"b"}],"metadata":{"model":"c"}}`
    const result = await httpCall(env.server, 'POST', '/v1/chat/completions', body, bearerHeader(env.keys.chat))
    expect(result.status).toBe(200)
    expect(env.mock.calls('/chat/completions')[0]!.rawBody).toBe(body)
  })
})
