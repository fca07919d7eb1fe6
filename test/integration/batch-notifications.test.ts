/**
 * Batch notifications (SPEC "Batch webhook", "Batch notifications"; CONTRACT §5 `key webhook`,
 * `key notify-email`, `jobs run webhooks`): a real webhook receiver on 127.0.0.1 that verifies the
 * signature as docs/FEATURES.md shows, a real SMTP server process-side (the smtp-server package) that
 * receives the e-mail; a failed delivery retried on the next two runs with the same delivery id and
 * then dropped; a redirect is a failure and is not followed; an SMTP server that is down never
 * changes the batch.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { SMTPServer } from 'smtp-server'
import { startBatchGateway, type BatchGateway } from '../harness/batch-gateway'
import { startTestServer, type TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall, storeProvider } from '../harness/api'
import { runJob } from '../../src/scheduler/jobs'
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

async function completedBatch(): Promise<{ id: string; key: { id: string; key: string }; secret: string }> {
  const key = await createInferenceKey(server, { name: 'notified', routing: { strategy: 'priority', targets: [{ provider_key_id: batchProvider }] } })
  const saved = await setWebhook(server.runtime, key.id, { url: `http://127.0.0.1:${receiver.port}/hook` })
  setNotifyEmail(server.runtime, key.id, true)
  const created = await httpCall(server, 'POST', '/v1/batches', { endpoint: '/v1/chat/completions', model, requests: [{ custom_id: 'a', body: { messages: [{ role: 'user', content: 'hi' }] } }, { custom_id: 'b', body: { messages: [{ role: 'user', content: 'yo' }] } }] }, bearerHeader(key.key))
  expect(created.status).toBe(202)
  gateway.advance([...gateway.batches.values()].at(-1)!.id, 'completed')
  const refreshed = await runJob(server.runtime, 'batch-refresh')
  expect(refreshed.finished).toBeGreaterThanOrEqual(1)
  return { id: created.json.id, key, secret: saved.signing_secret! }
}

describe('batch notifications', () => {
  test('a completed batch: one signed webhook with the SPEC headers and body, and one e-mail with model, counts and cost', async () => {
    received.length = 0
    mails.length = 0
    receiverMode = 'ok'
    const { id, secret } = await completedBatch()
    const result = await runJob(server.runtime, 'webhooks')
    expect(result).toMatchObject({ delivered: 2, failed: 0 })
    expect(received).toHaveLength(1)
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

  test('a failing receiver gets the same delivery id on the next two runs, then nothing; the batch is unchanged', async () => {
    received.length = 0
    receiverMode = 'fail'
    const { id } = await completedBatch()
    for (let run = 0; run < 4; run++) await runJob(server.runtime, 'webhooks')
    expect(received).toHaveLength(3)
    expect(new Set(received.map((hook) => hook.headers.get('x-router-delivery'))).size).toBe(1)
    const [row] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'webhook')
    expect(row!.attempts).toBe(3)
    expect(row!.droppedAt).not.toBeNull()
    expect(server.runtime.repositories.batches.get(id)!.status).toBe('completed')
  })

  test('a redirect is a failed delivery and is not followed', async () => {
    received.length = 0
    receiverMode = 'redirect'
    const { id } = await completedBatch()
    await runJob(server.runtime, 'webhooks')
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
    await runJob(server.runtime, 'webhooks')
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
    const { id } = await completedBatch()
    const strict = { ...server.runtime, config: { ...server.runtime.config, webhookAllowPrivate: false } }
    await runJob(strict, 'webhooks')
    expect(received).toHaveLength(0)
    const [row] = server.runtime.repositories.batches.listOutbox(id).filter((item) => item.kind === 'webhook')
    expect(row!.lastError).toMatch(/https|loopback/)
  })
})
