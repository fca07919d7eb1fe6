/**
 * The Batch API against the real service process (started as operators start it, ./scripts/start),
 * driven through HTTP only, with the scheduled jobs run from the operator CLI (CONTRACT §5):
 * - kill -9 at two points of a batch's life (after the submit; after the refresh wrote the terminal
 *   state and its notification, before the webhook was delivered: the receiver refuses the refresh
 *   run's first try) loses neither the batch, nor its results, nor the pending webhook, and the
 *   webhook is acknowledged exactly once (SPEC "Batch webhook": sent once);
 * - a submit of almost 100 MB streams through to the gateway without the router holding it
 *   (SPEC "Limits": keep a submit under 100 MB) — measured on the server process's RSS;
 * - an upload that stalls is dropped with 408 and nothing is created upstream (SPEC "Limits",
 *   shortened here with RT_BATCH_UPLOAD_IDLE_MS).
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { baseEnvironment, repoRoot, startService, tempDir, type ServiceProcess } from '../harness/service-process'
import { readCallResult } from '../harness/api'

const model = 'openai/gpt-4o-mini'
const encoder = new TextEncoder()

const gateways: BatchGateway[] = []
const receivers: ReturnType<typeof Bun.serve>[] = []

afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close()
  for (const receiver of receivers.splice(0)) await receiver.stop(true)
})

async function batchGateway(options: Parameters<typeof startBatchGateway>[0]): Promise<BatchGateway> {
  const gateway = await startBatchGateway(options)
  gateways.push(gateway)
  return gateway
}

/** `./scripts/cli …` on the service's data dir; its one JSON object (exit 0 expected). */
async function cli(environment: Record<string, string>, ...argv: string[]): Promise<any> {
  const child = Bun.spawn([`${repoRoot}/scripts/cli`, ...argv], { cwd: repoRoot, env: { ...baseEnvironment(), RT_SKIP_INSTALL: '1', ...environment }, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  if (code !== 0) throw new Error(`cli ${argv.join(' ')} exited ${code}\nstdout: ${stdout}\nstderr: ${stderr}`)
  return JSON.parse(stdout)
}

interface Started {
  service: ServiceProcess
  rootUrl: string
}

async function start(dataDir: string, environment: Record<string, string>): Promise<Started> {
  const service = startService(dataDir, { RT_SKIP_INSTALL: '1', RT_LOG_LEVEL: 'warn', ...environment }, ['scripts/start'])
  const { rootUrl } = await service.listening()
  return { service, rootUrl }
}

async function kill9(service: ServiceProcess) {
  service.child.kill('SIGKILL')
  await service.child.exited
  expect(service.child.signalCode).toBe('SIGKILL')
}

async function manage(rootUrl: string, managementKey: string, path: string, body: unknown) {
  const response = await fetch(`${rootUrl}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await response.text()
  expect({ path, status: response.status, text: response.status === 201 ? '' : text }).toEqual({ path, status: 201, text: '' })
  return (JSON.parse(text) as { data: any }).data
}

/** A first start: the management key, an openrouter provider key on the mock and a chat key routed to it. */
async function setUp(started: Started): Promise<{ managementKey: string; key: { id: string; key: string } }> {
  const managementKey = await started.service.managementKey()
  const provider = await manage(started.rootUrl, managementKey, '/providers', { gateway: 'openrouter', key: 'sk-or-e2e-batch-0123456789' })
  const key = await manage(started.rootUrl, managementKey, '/keys', { name: 'batch e2e', routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } })
  return { managementKey, key }
}

async function call(rootUrl: string, secret: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const response = await fetch(`${rootUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return readCallResult(response)
}

function verifySignature(secret: string, header: string | null, rawBody: string): boolean {
  const parts = Object.fromEntries((header ?? '').split(',').map((part) => part.split('=', 2) as [string, string]))
  const timestamp = Number(parts.t)
  if (!Number.isInteger(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > 300 || !parts.v1) return false
  const expected = Buffer.from(createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex'))
  const given = Buffer.from(parts.v1)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

// ---- the server process and its RSS --------------------------------------------------------------

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return undefined
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
  } catch {
    return ''
  }
}

/**
 * The process that runs the server: ./scripts/start ends in `exec bun run src/main.ts`, so it is
 * normally the spawned process itself; should a wrapper ever fork instead, the deepest descendant
 * running src/main.ts is the one.
 */
function serverPid(rootPid: number): number {
  const descendants = new Map<number, number>([[rootPid, 0]])
  for (let grew = true; grew; ) {
    grew = false
    for (const name of readdirSync('/proc')) {
      const pid = Number(name)
      if (!Number.isInteger(pid) || descendants.has(pid)) continue
      const parent = parentOf(pid)
      if (parent !== undefined && descendants.has(parent)) {
        descendants.set(pid, descendants.get(parent)! + 1)
        grew = true
      }
    }
  }
  const candidates = [...descendants].filter(([pid]) => commandLine(pid).includes('src/main.ts')).sort((a, b) => b[1] - a[1])
  return candidates[0]?.[0] ?? rootPid
}

/** VmRSS in bytes. */
function rssOf(pid: number): number {
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (!match) throw new Error(`no VmRSS for ${pid}`)
  return Number(match[1]) * 1024
}

// ---- streamed submit bodies --------------------------------------------------------------------

const submitHead = `{"endpoint":"/v1/chat/completions","model":"${model}","requests":[`
const submitTail = ']}'

function item(index: number, content: string): string {
  return `{"custom_id":"r${index}","body":{"messages":[{"role":"user","content":"${content}"}]}}`
}

/**
 * A submit of just under `limitBytes`, generated as it is pulled (several ~10 KB items per chunk):
 * neither side of the test holds it whole. `sent()` counts the bytes handed to fetch so far.
 */
function generatedSubmit(limitBytes: number): { stream: ReadableStream<Uint8Array>; sent: () => number; items: () => number } {
  // ~10 KB of plain text (no characters JSON would escape), a little different per item.
  const filler = 'lorem ipsum dolor sit amet consectetur adipiscing elit '.repeat(186).slice(0, 10_200)
  let sent = 0
  let index = 0
  let finished = false
  const tailBytes = encoder.encode(submitTail).byteLength
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (finished) return
      let chunk = index === 0 ? submitHead : ''
      for (let inChunk = 0; inChunk < 6; inChunk++) {
        const next = (index === 0 ? '' : ',') + item(index, `${index} ${filler}`)
        // Head, items and tail together stay under the limit.
        if (sent + chunk.length + next.length + tailBytes > limitBytes) {
          chunk += submitTail
          finished = true
          break
        }
        chunk += next
        index++
      }
      const bytes = encoder.encode(chunk)
      sent += bytes.byteLength
      controller.enqueue(bytes)
      if (finished) controller.close()
    },
  })
  return { stream, sent: () => sent, items: () => index }
}

describe('batch durability (real service process)', () => {
  test(
    "kill -9 in the middle of a batch's life loses no batch, no result and no pending notification",
    async () => {
      const gateway = await batchGateway({ models: [model, `${model}:batch`] })
      /** Deliveries acknowledged (204), and the ones refused (503) while `refusing`. */
      const received: { headers: Headers; body: string; path: string }[] = []
      const refused: { headers: Headers }[] = []
      let refusing = false
      const receiver = Bun.serve({
        hostname: '127.0.0.1',
        port: 0,
        async fetch(request) {
          if (refusing) {
            refused.push({ headers: request.headers })
            return new Response('not now', { status: 503 })
          }
          received.push({ headers: request.headers, body: await request.text(), path: new URL(request.url).pathname })
          return new Response(null, { status: 204 })
        },
      })
      receivers.push(receiver)
      const dataDir = tempDir()
      const environment = { RT_GATEWAY_URL_OPENROUTER: gateway.url, RT_WEBHOOK_ALLOW_PRIVATE: '1' }
      const cliEnvironment = { ...environment, RT_DATA_DIR: dataDir }

      // Life 1: set-up and submit.
      const first = await start(dataDir, environment)
      const { key } = await setUp(first)
      const webhook = await cli(cliEnvironment, 'key', 'webhook', '--id', key.id, '--url', `http://127.0.0.1:${receiver.port}/hook`)
      expect(webhook.url).toBe(`http://127.0.0.1:${receiver.port}/hook`)
      expect(webhook.signing_secret).toStartWith('whsec_')
      const requests = ['a', 'b', 'c', 'd'].map((id) => ({ custom_id: id, body: { messages: [{ role: 'user', content: `question ${id}` }] } }))
      const submitted = await call(first.rootUrl, key.key, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model, requests })
      expect(submitted.status).toBe(202)
      expect(submitted.json).toMatchObject({ object: 'batch', status: 'validating', request_counts: { total: 4 }, results: null })
      const batchId: string = submitted.json.id
      expect(batchId).toStartWith('batch_rt_')
      expect(gateway.batches.size).toBe(1)
      const upstreamId = [...gateway.batches.keys()][0]!
      await kill9(first.service)

      // Life 2: the batch is there; the gateway finishes it; the refresh job records it (and its
      // notification, in the same transaction) and tries the webhook at once, which the receiver
      // refuses; then kill -9 with the webhook still pending.
      const second = await start(dataDir, environment)
      const afterFirstKill = await call(second.rootUrl, key.key, 'GET', `/v1/batches/${batchId}`)
      expect(afterFirstKill.status).toBe(200)
      expect(afterFirstKill.json).toMatchObject({ id: batchId, object: 'batch', status: 'validating', model, endpoint: '/v1/chat/completions', results: null })
      gateway.advance(upstreamId, 'completed')
      refusing = true
      const refreshed = await cli(cliEnvironment, 'jobs', 'run', 'batch-refresh')
      expect(refreshed).toMatchObject({ finished: 1, deliveries: { pending: 1, delivered: 0, failed: 1 } })
      expect(refused).toHaveLength(1)
      expect(received).toHaveLength(0)
      await kill9(second.service)
      expect(received).toHaveLength(0)
      refusing = false

      // Life 3: one delivery run sends the webhook once (the same delivery id); the batch has its results.
      const third = await start(dataDir, environment)
      const delivered = await cli(cliEnvironment, 'jobs', 'run', 'webhooks')
      expect(JSON.stringify(delivered)).toContain('"delivered":1')
      const hooks = () => received.filter((hook) => JSON.parse(hook.body)?.data?.id === batchId)
      expect(received).toHaveLength(1)
      expect(hooks()).toHaveLength(1)
      const [hook] = hooks()
      expect(hook!.path).toBe('/hook')
      expect(hook!.headers.get('x-router-delivery')).toBe(refused[0]!.headers.get('x-router-delivery'))
      expect(hook!.headers.get('x-router-event')).toBe('batch.completed')
      expect(hook!.headers.get('user-agent')).toBe('Router-Webhooks/1')
      expect(verifySignature(webhook.signing_secret, hook!.headers.get('x-router-signature'), hook!.body)).toBe(true)
      expect(JSON.parse(hook!.body)).toMatchObject({ type: 'batch.completed', data: { id: batchId, status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 } } })
      expect(JSON.parse(hook!.body).data.results).toBeUndefined()

      const final = await call(third.rootUrl, key.key, 'GET', `/v1/batches/${batchId}`)
      expect(final.status).toBe(200)
      expect(final.json).toMatchObject({ id: batchId, status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 } })
      expect(final.json.usage?.cost).toBeNumber()
      const results = final.json.results as { custom_id: string; response: unknown; error: unknown }[]
      expect(results.map((result) => result.custom_id).sort()).toEqual(['a', 'b', 'c', 'd'])
      for (const result of results) expect([result.custom_id, (result.response === null) !== (result.error === null)]).toEqual([result.custom_id, true])

      // A second run (after the GET, which reads the finished batch again) sends nothing more.
      const again = await cli(cliEnvironment, 'jobs', 'run', 'webhooks')
      expect(JSON.stringify(again)).toContain('"pending":0')
      expect(received).toHaveLength(1)
    },
    45_000,
  )

  test(
    'a 100 MB submit streams through: router RSS grows by less than 64 MB',
    async () => {
      const gateway = await batchGateway({ models: [model, `${model}:batch`], discardItems: true })
      const dataDir = tempDir()
      const started = await start(dataDir, { RT_GATEWAY_URL_OPENROUTER: gateway.url })
      const { key } = await setUp(started)
      const pid = serverPid(started.service.child.pid)

      // A small submit first, so the batch code paths are loaded before the baseline.
      const warmUp = await call(started.rootUrl, key.key, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model, requests: [{ custom_id: 'w', body: { messages: [{ role: 'user', content: 'warm up' }] } }] })
      expect(warmUp.status).toBe(202)
      await Bun.sleep(200)

      const limit = 100 * 1024 * 1024
      const upload = generatedSubmit(limit - 4096)
      const before = rssOf(pid)
      let peak = before
      const sampler = setInterval(() => {
        try {
          peak = Math.max(peak, rssOf(pid))
        } catch {}
      }, 50)
      const began = performance.now()
      let response: Response
      let text: string
      try {
        response = await fetch(`${started.rootUrl}/v1/batches`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
          body: upload.stream,
          duplex: 'half',
        } as RequestInit)
        text = await response.text()
      } finally {
        clearInterval(sampler)
      }
      peak = Math.max(peak, rssOf(pid))
      const seconds = (performance.now() - began) / 1000
      const growth = peak - before
      const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
      console.log(
        `100 MB submit: ${mb(upload.sent())} MB in ${upload.items()} items sent in ${seconds.toFixed(1)} s, gateway got ${mb(gateway.lastSubmitBytes)} MB; ` +
          `server RSS ${mb(before)} MB before, peak ${mb(peak)} MB, growth ${mb(growth)} MB`,
      )
      expect({ status: response.status, body: response.status === 202 ? '' : text.slice(0, 300) }).toEqual({ status: 202, body: '' })
      expect(JSON.parse(text)).toMatchObject({ object: 'batch', status: 'validating' })
      expect(upload.sent()).toBeLessThan(limit)
      expect(upload.sent()).toBeGreaterThan(99 * 1024 * 1024)
      // The gateway gets the items as sent; only the head differs (the :batch spelling, completion_window).
      expect(gateway.lastSubmitBytes).toBeGreaterThan(99 * 1024 * 1024)
      expect(Math.abs(gateway.lastSubmitBytes - upload.sent())).toBeLessThan(1024)
      expect(growth).toBeLessThan(64 * 1024 * 1024)
    },
    50_000,
  )

  test(
    'a stalled upload is dropped with 408',
    async () => {
      const gateway = await batchGateway({ models: [model, `${model}:batch`] })
      const dataDir = tempDir()
      const started = await start(dataDir, { RT_GATEWAY_URL_OPENROUTER: gateway.url, RT_BATCH_UPLOAD_IDLE_MS: '1000' })
      const { key } = await setUp(started)

      let closeTimer: ReturnType<typeof setTimeout> | undefined
      const stalled = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(encoder.encode(submitHead + item(0, 'the only item before the stall')))
          // Then silence for 3 s (the idle limit is 1 s), and an end that never makes the JSON whole.
          closeTimer = setTimeout(() => {
            try {
              controller.close()
            } catch {}
          }, 3000)
        },
      })
      const began = performance.now()
      try {
        const response = await fetch(`${started.rootUrl}/v1/batches`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
          body: stalled,
          duplex: 'half',
        } as RequestInit)
        const text = await response.text()
        const elapsedMs = performance.now() - began
        console.log(`stalled upload: ${response.status} after ${Math.round(elapsedMs)} ms: ${text.slice(0, 200)}`)
        expect(response.status).toBe(408)
        const body = JSON.parse(text)
        expect(body.error.code).toBe('batch_upload_timeout')
        expect(body.error.message).toBeString()
        expect(elapsedMs).toBeGreaterThanOrEqual(900)
      } finally {
        clearTimeout(closeTimer)
      }
      // The upload was aborted before its end: the gateway created no batch.
      await Bun.sleep(100)
      expect(gateway.batches.size).toBe(0)
      // And the router shows none to the key.
      const listed = await call(started.rootUrl, key.key, 'GET', '/v1/batches')
      expect(listed.status).toBe(200)
      expect(listed.json.data).toEqual([])
    },
    20_000,
  )
})
