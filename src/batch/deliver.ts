/**
 * The delivery run (`jobs run webhooks`, every 5 minutes): every pending outbox row is tried once.
 * A delivery that fails is tried again on each of the next two runs with the same id (the
 * X-Router-Delivery header), then dropped (SPEC "Batch webhook"). A failure never changes the batch.
 *
 * The first try of a new row is made sooner, by the batch-refresh run that recorded the batch's end
 * (deliverNewRows), so a webhook goes out within about five minutes of the end (SPEC "Batch
 * webhook"), not at the delivery run after. Both take the `webhooks` job's lease to deliver, so the
 * two jobs, in one process or several, never try one row at once: each try is made once.
 *
 * Webhooks: the target rule is checked again at every delivery and the request goes to the checked
 * address (net/outbound-target.ts); redirects are not followed; 10 s limit; any 2xx
 * acknowledges. The signature is hex HMAC-SHA256 keyed with the key's signing secret over
 * `<unix seconds>.<raw body>`. E-mails go through RT_SMTP_URL with nodemailer.
 */
import { createHmac } from 'node:crypto'
import { hostname } from 'node:os'
import nodemailer from 'nodemailer'
import { fetchOutboundTarget, resolveOutboundTarget } from '../net/outbound-target'
import type { Config } from '../config/env'
import type { JobDeps, JobProgress } from '../scheduler/job-deps'
import { createHolderId, defaultLeaseMs, defaultRenewEveryMs } from '../scheduler/lease'
import { scheduleOf } from '../scheduler/schedules'
import type { Repositories } from '../storage/repositories'
import type { OutboxRow } from '../storage/repositories/batches'
import type { EmailPayload } from './notify'

/** One send and two retries. */
export const deliveryAttempts = 3
export const webhookTimeoutMs = 10_000

export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`
}

class DeliveryFailed extends Error {}

/** What a delivery run uses: the outbox, the key's webhook and its signing secret, the outside fetch, the target rule and SMTP settings. */
export type DeliveryDeps = Pick<JobDeps, 'secretBox' | 'fetch' | 'logger'> & {
  repositories: Pick<Repositories, 'batches' | 'inferenceKeys'>
  config: Pick<Config, 'webhookAllowPrivate' | 'smtpUrl'>
}

/** deliverNewRows also takes the `webhooks` lease for the time it delivers. */
export type NewRowsDeliveryDeps = DeliveryDeps & Pick<JobDeps, 'random' | 'now'> & { repositories: Pick<Repositories, 'jobLeases'> }

async function deliverWebhook(deps: DeliveryDeps, row: OutboxRow): Promise<void> {
  const key = deps.repositories.inferenceKeys.getById(row.keyId)
  if (!key?.webhookUrl || !key.webhookSecretCiphertext) throw new DeliveryFailed('the key has no webhook URL any more')
  const secret = deps.secretBox.decrypt(key.webhookSecretCiphertext)
  let target
  try {
    target = await resolveOutboundTarget(key.webhookUrl, deps.config.webhookAllowPrivate, 'Webhook')
  } catch (error) {
    throw new DeliveryFailed(error instanceof Error ? error.message : String(error))
  }
  const timestamp = Math.floor(Date.now() / 1000)
  let response: Response
  try {
    response = await fetchOutboundTarget(
      target,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Router-Webhooks/1',
          'x-router-event': row.event,
          'x-router-delivery': row.id,
          'x-router-signature': signWebhook(secret, timestamp, row.payload),
        },
        body: row.payload,
        signal: AbortSignal.timeout(webhookTimeoutMs),
      },
      deps.fetch,
    )
  } catch (error) {
    const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')
    throw new DeliveryFailed(timedOut ? `no answer within ${webhookTimeoutMs / 1000} s` : `could not connect: ${error instanceof Error ? error.message : String(error)}`)
  }
  await response.body?.cancel().catch(() => {})
  if (response.status < 200 || response.status > 299) {
    throw new DeliveryFailed(response.status >= 300 && response.status < 400 ? `HTTP ${response.status} (redirects are not followed)` : `HTTP ${response.status}`)
  }
}

function mailer(deps: DeliveryDeps) {
  const url = deps.config.smtpUrl
  if (!url) throw new DeliveryFailed('RT_SMTP_URL is not set')
  return nodemailer.createTransport(url, { from: process.env.RT_SMTP_FROM || `Router <router@${hostname()}>` } as never)
}

async function deliverEmail(row: OutboxRow, transport: ReturnType<typeof mailer>): Promise<void> {
  const email = JSON.parse(row.payload) as EmailPayload
  try {
    await transport.sendMail({ to: email.to, subject: email.subject, text: email.text, headers: { 'X-Router-Delivery': row.id, 'X-Router-Event': row.event } })
  } catch (error) {
    throw new DeliveryFailed(`SMTP: ${error instanceof Error ? error.message : String(error)}`)
  }
}

interface DeliveryCounts {
  delivered: number
  failed: number
  dropped: number
}

/**
 * One try of each row, its outcome recorded (a failure counts one of the row's three tries). Stops
 * before the next row when `mayGoOn` says no (the lease was lost); returns the counts and how many
 * rows it tried.
 */
async function tryEach(deps: DeliveryDeps, rows: readonly OutboxRow[], mayGoOn: () => boolean, tried: () => void): Promise<DeliveryCounts & { tried: number }> {
  const counts = { delivered: 0, failed: 0, dropped: 0, tried: 0 }
  let transport: ReturnType<typeof mailer> | undefined
  try {
    for (const row of rows) {
      if (!mayGoOn()) break
      const at = Date.now()
      try {
        if (row.kind === 'webhook') await deliverWebhook(deps, row)
        else await deliverEmail(row, (transport ??= mailer(deps)))
        deps.repositories.batches.recordDelivery(row.id, { delivered: true, at })
        counts.delivered++
      } catch (error) {
        const message = error instanceof DeliveryFailed ? error.message : `internal: ${error instanceof Error ? error.message : String(error)}`
        deps.repositories.batches.recordDelivery(row.id, { delivered: false, at, error: message, maxAttempts: deliveryAttempts })
        counts.failed++
        const dropped = row.attempts + 1 >= deliveryAttempts
        if (dropped) counts.dropped++
        deps.logger.warn(dropped ? 'delivery_dropped' : 'delivery_failed', { delivery: row.id, kind: row.kind, batch_id: row.batchId, attempt: row.attempts + 1, error: message })
      }
      counts.tried++
      tried()
    }
  } finally {
    transport?.close()
  }
  return counts
}

/** The delivery run: runs under the `webhooks` lease (scheduler/lease.ts), so no other delivery runs meanwhile. */
export async function deliverOutbox(deps: DeliveryDeps, progress: JobProgress): Promise<Record<string, unknown>> {
  const rows = deps.repositories.batches.pendingOutbox()
  progress(0, rows.length)
  let done = 0
  const counts = await tryEach(deps, rows, () => true, () => progress(++done, rows.length))
  return { pending: rows.length, delivered: counts.delivered, failed: counts.failed, dropped: counts.dropped }
}

/** The lease both delivering jobs take: the delivery run's own. */
const deliveryLease = 'webhooks'

/**
 * The first try of the rows no run has tried yet, for the batch-refresh run once its transactions
 * have committed: the batches it saw end, and any a client's read saw end since the last run (so
 * those too go out within five minutes of the end). A failure is the row's first try; the next two
 * delivery runs retry it, as they would their own.
 *
 * It holds the `webhooks` lease while it delivers, renewed as a run's is, then frees it without
 * recording a run: the delivery runs' schedule and last result stay theirs. When a delivery run
 * holds the lease (here or in another process), nothing is tried: that run, or the next of either
 * job, delivers the rows.
 */
export async function deliverNewRows(deps: NewRowsDeliveryDeps): Promise<Record<string, number>> {
  const fresh = () => deps.repositories.batches.pendingOutbox().filter((row) => row.attempts === 0)
  // Read first, take second: a run that ended no batch costs a read, not the lease.
  const waiting = fresh().length
  if (waiting === 0) return { pending: 0 }
  const leases = deps.repositories.jobLeases
  const holder = createHolderId(deps.random)
  const now = () => deps.now().getTime()
  const startedAt = now()
  if (!leases.acquire(deliveryLease, holder, startedAt, defaultLeaseMs, { dueOnly: false, firstRunAt: startedAt + scheduleOf(deliveryLease).firstAfterMs })) {
    return { pending: waiting, deferred: waiting }
  }
  let held = true
  const renewal = setInterval(() => {
    try {
      if (!leases.renew(deliveryLease, holder, now() + defaultLeaseMs)) held = false
    } catch (error) {
      deps.logger.error('job_lease_renew_failed', { job: deliveryLease, error: error instanceof Error ? error.message : String(error) })
    }
  }, defaultRenewEveryMs)
  try {
    // Read again under the lease: a delivery run that just ended may have tried some.
    const rows = fresh()
    const counts = await tryEach(deps, rows, () => held, () => {})
    if (!held) deps.logger.warn('job_lease_lost', { job: deliveryLease, holder })
    return { pending: rows.length, delivered: counts.delivered, failed: counts.failed, dropped: counts.dropped, deferred: rows.length - counts.tried }
  } finally {
    clearInterval(renewal)
    leases.abandon(holder)
  }
}
