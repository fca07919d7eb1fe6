/**
 * No hidden concurrency cap (SPEC "What the service does" 6: the service imposes no rate limit of its
 * own). Started the way operators start it (./scripts/start), the service holds 1,200 streams open at
 * once to one tenant's slow gateway, each with its first byte delivered, while another workspace's
 * request to a healthy gateway answers at once. Bun's default of 256 concurrent upstream requests
 * left the rest queued with no byte, and the other tenant's request waiting behind them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { baseEnvironment, repoRoot, startService, tempDir, type ServiceProcess } from '../harness/service-process'

const openStreams = 1_200

let slowGateway: ReturnType<typeof Bun.serve>
const heldStreams: ReadableStreamDefaultController<Uint8Array>[] = []
let healthyGateway: MockGateway

beforeAll(async () => {
  const chunk = new TextEncoder().encode(
    `data: ${JSON.stringify({ id: 'chatcmpl-slow', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`,
  )
  // A gateway that starts every stream at once and then keeps it open: slow generation.
  slowGateway = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    // Its model list (the catalog crawl a new provider key sets off) is answered at once; every other call is a held stream.
    fetch: (request) =>
      new URL(request.url).pathname.endsWith('/models')
        ? Response.json({ object: 'list', data: [{ id: 'openai/gpt-4o-mini', object: 'model', created: 1, owned_by: 'slow' }] })
        : new Response(
            new ReadableStream<Uint8Array>({
              start(controller) {
                controller.enqueue(chunk)
                heldStreams.push(controller)
              },
            }),
            { headers: { 'content-type': 'text/event-stream' } },
          ),
  })
  healthyGateway = await startMockGateway()
})

afterAll(async () => {
  for (const controller of heldStreams.splice(0)) {
    try {
      controller.close()
    } catch {}
  }
  slowGateway?.stop(true)
  await healthyGateway?.close()
})

/** A streaming chat request on a raw socket (no client-side connection cap); resolves at the first SSE byte. */
function openStream(port: number, secret: string): { firstEvent: Promise<void>; close(): void } {
  const body = JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Hi' }] })
  const request = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${secret}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  let received = ''
  let socketRef: { end(): void } | undefined
  const firstEvent = new Promise<void>((resolve, reject) => {
    void Bun.connect({
      hostname: '127.0.0.1',
      port,
      socket: {
        open(socket) {
          socketRef = socket
          socket.write(request)
        },
        data(_socket, data) {
          received += data.toString()
          if (received.includes('data: ')) resolve()
        },
        close() {
          reject(new Error(`closed before the first event: ${received.slice(0, 200)}`))
        },
        error(_socket, error) {
          reject(error)
        },
      },
    }).catch(reject)
  })
  return { firstEvent, close: () => socketRef?.end() }
}

async function cli(dataDir: string, ...argv: string[]) {
  const child = Bun.spawn([`${repoRoot}/scripts/cli`, ...argv], { env: { ...baseEnvironment(), RT_DATA_DIR: dataDir, RT_SKIP_INSTALL: '1' }, stdout: 'pipe', stderr: 'pipe' })
  const [text, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
  expect(code).toBe(0)
  return JSON.parse(text)
}

async function management(rootUrl: string, key: string, path: string, body: unknown) {
  const response = await fetch(rootUrl + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  expect(response.status).toBe(201)
  return ((await response.json()) as { data: any }).data
}

describe('concurrent upstream requests', () => {
  test(`${openStreams} streams open at once to a slow gateway all start, and another workspace is served meanwhile`, async () => {
    const dataDir = tempDir()
    const environment = {
      RT_SKIP_INSTALL: '1',
      RT_GATEWAY_URL_OPENAI: `http://127.0.0.1:${slowGateway.port}`,
      RT_GATEWAY_URL_GROQ: healthyGateway.url,
      // Empty, as if unset: the setting must come from scripts/start, not from the shell running the tests.
      BUN_CONFIG_MAX_HTTP_REQUESTS: '',
    }
    const service: ServiceProcess = startService(dataDir, environment, ['scripts/start'])
    const { rootUrl } = await service.listening()
    const port = Number(new URL(rootUrl).port)
    const busyTenant = await service.managementKey()
    const otherTenant = (await cli(dataDir, 'workspace', 'create', '--name', 'other')).management_key as string

    const slowProvider = await management(rootUrl, busyTenant, '/api/v1/providers', { gateway: 'openai', key: 'sk-slow' })
    const busyKey = await management(rootUrl, busyTenant, '/api/v1/keys', { routing: { strategy: 'priority', targets: [{ provider_key_id: slowProvider.id }] } })
    const healthyProvider = await management(rootUrl, otherTenant, '/api/v1/providers', { gateway: 'groq', key: 'gsk-healthy' })
    const otherKey = await management(rootUrl, otherTenant, '/api/v1/keys', { routing: { strategy: 'priority', targets: [{ provider_key_id: healthyProvider.id }] } })

    const streams = Array.from({ length: openStreams }, () => openStream(port, busyKey.key))
    try {
      const started = await Promise.race([
        Promise.all(streams.map((stream) => stream.firstEvent)).then(() => 'all started'),
        Bun.sleep(15_000).then(() => `only ${heldStreams.length} of ${openStreams} reached the gateway`),
      ])
      expect(started).toBe('all started')
      expect(heldStreams.length).toBe(openStreams)

      const before = performance.now()
      const served = await fetch(`${rootUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${otherKey.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }),
      })
      const elapsedMs = performance.now() - before
      expect(served.status).toBe(200)
      expect(served.headers.get('x-router-provider')).toBe('groq')
      await served.text()
      expect(elapsedMs).toBeLessThan(3_000)
    } finally {
      for (const stream of streams) stream.close()
    }
  }, 60_000)
})
