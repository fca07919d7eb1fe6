/**
 * Batch notifications (SPEC "Batch webhook", "Batch notifications"; CONTRACT §5 `key webhook`,
 * `key notify-email`, `jobs run webhooks`): a real webhook receiver on 127.0.0.1 that verifies the
 * signature as docs/FEATURES.md shows, a real SMTP server process-side (the smtp-server package) that
 * receives the e-mail; the batch-refresh run that records the end also makes the first delivery
 * (within about five minutes of the end, not at the delivery run after); a failed delivery retried
 * on the next two delivery runs with the same delivery id and then dropped; the two jobs never try
 * one row twice; a batch a client's read saw end is delivered by the next refresh run; a redirect
 * is a failure and is not followed; an SMTP server that is down never changes the batch.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { SMTPServer } from 'smtp-server'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { runJob } from '../../src/scheduler/jobs'
import { runJobNow } from '../../src/scheduler/lease'
import type { Runtime } from '../../src/runtime'
import { setNotifyEmail, setWebhook } from '../../src/management/key-settings'
import { addMember } from '../../src/management/workspaces'

const model = 'openai/gpt-4o-mini'

/** The receiver's check, as docs/FEATURES.md shows it: HMAC over `t.body`, 300 s tolerance, constant time. */
function verifySignature(secret: string, header: string | null, rawBody: string, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const parts = Object.fromEntries((header ?? '').split(',').map((part) => part.split('=', 2) as [string, string]))
  const timestamp = Number(parts.t)
  if (!Number.isInteger(timestamp) || Math.abs(nowSeconds - timestamp) > 300 || !parts.v1) return false
  const expected = Buffer.from(createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex'))
  const given = Buffer.from(parts.v1)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

interface Received {
  headers: Headers
  body: string
}

let gateway: BatchGateway
let server: TestServer
let receiver: ReturnType<typeof Bun.serve>
let receiverMode: 'ok' | 'fail' | 'redirect' = 'ok'
const received: Received[] = []
let redirectFollowed = 0
let smtp: SMTPServer
let smtpPort: number
const mails: string[] = []
let batchProvider: string

async function startSmtp(port = 0): Promise<number> {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      let text = ''
      stream.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
      stream.on('end', () => {
        mails.push(text)
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => smtp.listen(port, '127.0.0.1', () => resolve()))
  return (smtp.server.address() as { port: number }).port
}

beforeAll(async () => {
  gateway = await startBatchGateway({ models: [model, `${model}:batch`] })
  receiver = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      if (new URL(request.url).pathname === '/elsewhere') {
        redirectFollowed++
        return new Response('ok')
      }
      received.push({ headers: request.headers, body: await request.text() })
      if (receiverMode === 'fail') return new Response('nope', { status: 500 })
      if (receiverMode === 'redirect') return new Response(null, { status: 302, headers: { location: '/elsewhere' } })
      return new Response(null, { status: 204 })
    },
  })
  smtpPort = await startSmtp()
  server = await startTestServer({ RT_GATEWAY_URL_OPENROUTER: gateway.url, RT_WEBHOOK_ALLOW_PRIVATE: '1', RT_SMTP_URL: `smtp://127.0.0.1:${smtpPort}` })
  batchProvider = (await storeProvider(server, { gateway: 'openrouter', key: 'sk-or-notify-0123456789' })).id
  addMember(server.runtime, server.workspaceId, 'ops@example.com')
})

afterAll(async () => {
  await server?.[Symbol.asyncDispose]()
  await gateway?.close()
  await receiver?.stop(true)
  await new Promise<void>((resolve) => smtp.close(() => resolve()))
})

/** A key with a webhook to the receiver and e-mail on, and a batch of it submitted (still running). */
async function submittedBatch(): Promise<{ id: string; upstreamId: string; key: { id: string; key: string }; secret: string }> {
  const key = await createInferenceKey(server, { name: 'notified', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
  const saved = await setWebhook(server.runtime, key.id, { url: `http://127.0.0.1:${receiver.port}/hook` })
  setNotifyEmail(server.runtime, key.id, true)
  const created = await httpCall(server, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model, requests: [{ custom_id: 'a', body: { messages: [{ role: 'user', content: 'hi' }] } }, { custom_id: 'b', body: { messages: [{ role: 'user', content: 'yo' }] } }] }, bearerHeader(key.key))
  expect(created.status).toBe(202)
  return { id: created.json.id, upstreamId: [...gateway.batches.values()].at(-1)!.id, key, secret: saved.signing_secret! }
}

/** A submitted batch the gateway completes and one batch-refresh run records (and, now, first delivers). */
async function completedBatch(runtime: Runtime = server.runtime): Promise<{ id: string; key: { id: string; key: string }; secret: string; refreshed: Record<string, any> }> {
  const { id, upstreamId, key, secret } = await submittedBatch()
  gateway.advance(upstreamId, 'completed')
  const refreshed = await runJob(runtime, 'batch-refresh')
  expect(refreshed.finished).toBeGreaterThanOrEqual(1)
  return { id, key, secret, refreshed }
}

/** `jobs run NAME` as the CLI runs it: under the job's lease, as a process of its own (its own holder). */
const jobsRun = (name: string) => runJobNow(server.runtime, name, { holder: `cli-test:${name}:${Math.random().toString(36).slice(2, 8)}` }) as Promise<Record<string, any>>

const outboxOf = (id: string, kind: 'webhook' | 'email') => server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === kind)

describe('batch notifications', () => {
  test('a completed batch: one signed webhook with the SPEC headers and body, and one e-mail with model, counts and cost, sent by the refresh run that records the end', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'ok'
    const { id, secret, refreshed } = await completedBatch()
    expect(received).toHaveLength(1)
    expect(refreshed.deliveries).toMatchObject({ pending: 2, delivered: 2, failed: 0 })
    const [hook] = received
    expect(hook!.headers.get('content-type')).toBe('application/json')
    expect(hook!.headers.get('user-agent')).toBe('Router-Webhooks/1')
    expect(hook!.headers.get('x-router-event')).toBe('batch.completed')
    expect(hook!.headers.get('x-router-delivery')).toBeString()
    expect(hook!.headers.get('x-router-signature')).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    expect(verifySignature(secret, hook!.headers.get('x-router-signature'), hook!.body)).toBe(true)
    expect(verifySignature('whsec_wrong', hook!.headers.get('x-router-signature'), hook!.body)).toBe(false)
    expect(verifySignature(secret, hook!.headers.get('x-router-signature'), hook!.body.replace('completed', 'failed'))).toBe(false)
    const body = JSON.parse(hook!.body)
    expect(Object.keys(body).sort()).toEqual(['created_at', 'data', 'type'])
    expect(body.type).toBe('batch.completed')
    expect(Object.keys(body.data).sort()).toEqual(['created_at', 'endpoint', 'error', 'finalized_at', 'id', 'model', 'object', 'request_counts', 'status', 'usage'].sort())
    expect(body.data).toMatchObject({ id, object: 'batch', status: 'completed', endpoint: '/v1/chat/completions', model, request_counts: { total: 2, completed: 2, failed: 0 }, usage: { cost: 0.0123 }, error: null })
    expect(mails).toHaveLength(1)
    expect(mails[0]).toContain('To: ops@example.com')
    expect(mails[0]).toContain(model)
    expect(mails[0]).toContain('2 in total, 2 completed, 0 failed')
    expect(mails[0]).toContain('$0.0123')
    // Delivered once: a later run sends nothing more.
    expect(await runJob(server.runtime, 'webhooks')).toMatchObject({ pending: 0 })
    expect(received).toHaveLength(1)
  })

  test('one `jobs run batch-refresh` records the end and delivers the webhook and the e-mail in that run; the `webhooks` lease is free after it and its schedule untouched', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'ok'
    const leases = server.runtime.repositories.jobLeases
    const nextDelivery = Date.now() + 4 * 60_000
    leases.setNextRunAt('webhooks', nextDelivery)
    const before = leases.get('webhooks')!
    const { id, upstreamId } = await submittedBatch()
    gateway.advance(upstreamId, 'completed')
    const refreshed = await jobsRun('batch-refresh')
    expect(server.runtime.repositories.batches.get(id)!.status).toBe('completed')
    expect(received.map((hook) => JSON.parse(hook.body).data)).toMatchObject([{ id, status: 'completed' }])
    expect(mails).toHaveLength(1)
    expect(mails[0]).toContain(`X-Router-Delivery: ${outboxOf(id, 'email')[0]!.id}`)
    expect(refreshed).toMatchObject({ job: 'batch-refresh', finished: 1, deliveries: { pending: 2, delivered: 2, failed: 0, dropped: 0, deferred: 0 } })
    for (const kind of ['webhook', 'email'] as const) {
      const [row] = outboxOf(id, kind)
      expect({ kind, attempts: row!.attempts, delivered: row!.deliveredAt !== null }).toEqual({ kind, attempts: 1, delivered: true })
    }
    // The refresh took the delivery lease only while it delivered, and recorded no delivery run.
    expect(leases.get('webhooks')).toMatchObject({ lockedUntil: 0, nextRunAt: nextDelivery, lastFinishedAt: before.lastFinishedAt, lastResult: before.lastResult })
    // The delivery run finds nothing left.
    expect(await jobsRun('webhooks')).toMatchObject({ pending: 0 })
    expect(received).toHaveLength(1)
    expect(mails).toHaveLength(1)
  })

  test('a first delivery that fails in the refresh run is retried by the next two `jobs run webhooks` with the same delivery id, then dropped; the batch is unchanged', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'fail'
    const { id, upstreamId } = await submittedBatch()
    gateway.advance(upstreamId, 'completed')
    const refreshed = await jobsRun('batch-refresh')
    expect(received).toHaveLength(1)
    expect(outboxOf(id, 'webhook')[0]).toMatchObject({ attempts: 1, deliveredAt: null, droppedAt: null })
    expect(outboxOf(id, 'webhook')[0]!.lastError).toContain('HTTP 500')
    // The e-mail went out in the refresh run and is not sent again.
    expect(mails).toHaveLength(1)
    expect(refreshed).toMatchObject({ finished: 1, deliveries: { pending: 2, delivered: 1, failed: 1, dropped: 0 } })

    expect(await jobsRun('webhooks')).toMatchObject({ pending: 1, delivered: 0, failed: 1, dropped: 0 })
    expect(received).toHaveLength(2)
    expect(outboxOf(id, 'webhook')[0]).toMatchObject({ attempts: 2, deliveredAt: null, droppedAt: null })
    expect(await jobsRun('webhooks')).toMatchObject({ pending: 1, delivered: 0, failed: 1, dropped: 1 })
    expect(received).toHaveLength(3)
    expect(outboxOf(id, 'webhook')[0]!.attempts).toBe(3)
    expect(outboxOf(id, 'webhook')[0]!.droppedAt).not.toBeNull()
    // Dropped: neither job tries it again.
    expect(await jobsRun('webhooks')).toMatchObject({ pending: 0 })
    expect((await jobsRun('batch-refresh')).deliveries).toEqual({ pending: 0 })
    expect(received).toHaveLength(3)
    expect(new Set(received.map((hook) => hook.headers.get('x-router-delivery')))).toEqual(new Set([outboxOf(id, 'webhook')[0]!.id]))
    expect(mails).toHaveLength(1)
    expect(server.runtime.repositories.batches.get(id)!.status).toBe('completed')
  })

  test('never twice across the two jobs: while a delivery run elsewhere holds the `webhooks` lease, the refresh run records the end and tries nothing; that run delivers each row once', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'ok'
    const leases = server.runtime.repositories.jobLeases
    const elsewhere = 'other-host:4242:abcdef'
    expect(leases.acquire('webhooks', elsewhere, Date.now(), 60_000, { dueOnly: false })).toBe(true)
    const { id, upstreamId } = await submittedBatch()
    gateway.advance(upstreamId, 'completed')
    const refreshed = await runJob(server.runtime, 'batch-refresh')
    expect(refreshed).toMatchObject({ finished: 1, deliveries: { pending: 2, deferred: 2 } })
    expect(server.runtime.repositories.batches.get(id)!.status).toBe('completed')
    expect(received).toHaveLength(0)
    expect(mails).toHaveLength(0)
    for (const kind of ['webhook', 'email'] as const) expect(outboxOf(id, kind)[0]!.attempts).toBe(0)
    // The other holder keeps its lease: the refresh did not take or free it.
    expect(leases.get('webhooks')).toMatchObject({ holder: elsewhere })
    expect(leases.get('webhooks')!.lockedUntil).toBeGreaterThan(Date.now())
    expect(leases.abandon(elsewhere)).toBe(1)

    // The delivery run sends each row once; the next refresh run finds nothing new to try.
    expect(await jobsRun('webhooks')).toMatchObject({ pending: 2, delivered: 2 })
    expect((await jobsRun('batch-refresh')).deliveries).toEqual({ pending: 0 })
    expect(received).toHaveLength(1)
    expect(mails).toHaveLength(1)

    // Both jobs at once (separate leases, as two processes run them): still one of each.
    const second = await submittedBatch()
    gateway.advance(second.upstreamId, 'completed')
    const [bothRefreshed] = await Promise.all([jobsRun('batch-refresh'), jobsRun('webhooks')])
    expect(bothRefreshed.finished).toBe(1)
    // Whichever of them sent the rows (or left them to the next delivery run), each went out once.
    await jobsRun('webhooks')
    expect(received.filter((hook) => JSON.parse(hook.body).data.id === second.id)).toHaveLength(1)
    expect(mails.filter((mail) => mail.includes(`X-Router-Delivery: ${outboxOf(second.id, 'email')[0]!.id}`))).toHaveLength(1)
    for (const kind of ['webhook', 'email'] as const) expect(outboxOf(second.id, kind)[0]).toMatchObject({ attempts: 1 })
  })

  test('a batch a client`s GET saw end: the GET writes the outbox rows, and the next refresh run (which ends nothing itself) delivers them', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'ok'
    const { id, upstreamId, key } = await submittedBatch()
    gateway.advance(upstreamId, 'completed')
    const read = await httpCall(server, 'GET', `/v1/batches/${id}`, undefined, bearerHeader(key.key))
    expect(read.status).toBe(200)
    expect(read.json.status).toBe('completed')
    expect(server.runtime.repositories.batches.listOutbox(id).map((row) => [row.kind, row.attempts]).sort()).toEqual([
      ['email', 0],
      ['webhook', 0],
    ])
    expect(received).toHaveLength(0)
    const refreshed = await jobsRun('batch-refresh')
    expect(received.map((hook) => JSON.parse(hook.body).data)).toMatchObject([{ id, status: 'completed' }])
    expect(mails).toHaveLength(1)
    expect(refreshed).toMatchObject({ finished: 0, deliveries: { pending: 2, delivered: 2 } })
  })

  test('a redirect is a failed delivery and is not followed', async () => {
    received.length = 0
    receiverMode = 'redirect'
    const { id } = await completedBatch()
    expect(received).toHaveLength(1)
    expect(redirectFollowed).toBe(0)
    const [row] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'webhook')
    expect(row!.deliveredAt).toBeNull()
    expect(row!.lastError).toContain('302')
  })

  test('an SMTP server that is down: the e-mail waits (the batch unchanged) and goes out on a later run once it is back', async () => {
    receiverMode = 'ok'
    mails.length = 0
    await new Promise<void>((resolve) => smtp.close(() => resolve()))
    const { id } = await completedBatch()
    const [pending] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'email')
    expect(pending!.deliveredAt).toBeNull()
    expect(pending!.attempts).toBe(1)
    expect(pending!.lastError).toContain('SMTP')
    expect(server.runtime.repositories.batches.get(id)!.status).toBe('completed')
    await startSmtp(smtpPort)
    await runJob(server.runtime, 'webhooks')
    expect(mails).toHaveLength(1)
    const [sent] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'email')
    expect(sent!.deliveredAt).not.toBeNull()
  })

  test('a webhook URL to a private address is refused at delivery without RT_WEBHOOK_ALLOW_PRIVATE', async () => {
    receiverMode = 'ok'
    received.length = 0
    const strict = { ...server.runtime, config: { ...server.runtime.config, webhookAllowPrivate: false } }
    const { id } = await completedBatch(strict)
    await runJob(strict, 'webhooks')
    expect(received).toHaveLength(0)
    const [row] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'webhook')
    expect(row!.lastError).toMatch(/https|loopback/)
  })
})
