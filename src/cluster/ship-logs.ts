/**
 * A replica's log shipper (CONTRACT §10): sends the spool's rows to the primary in batches,
 * `POST {primary}/internal/v1/logs` with the cluster secret, and drops a batch from the spool only
 * once the primary has answered that it holds every row. A primary that is away, slow or answering
 * errors costs nothing but time: the rows wait in the spool, the shipper backs off (up to 10 s
 * between tries) and sends them again, and the primary's insert by row id keeps a batch sent twice
 * (its acknowledgement lost) from landing twice.
 */
import type { Logger } from '../observability/logger'
import type { Metrics } from '../observability/metrics'
import type { LogSpool } from './spool'

export const internalLogsPath = '/internal/v1/logs'

/** The primary's base URL: RT_PRIMARY_URL, else its fly.io private address. */
export function primaryBaseUrl(options: { primaryUrl: string | undefined; flyAppName: string | undefined; port: number; primaryHost: string | undefined }): string | undefined {
  if (options.primaryUrl) return options.primaryUrl
  if (!options.primaryHost || !options.flyAppName) return undefined
  return `http://${options.primaryHost}.vm.${options.flyAppName}.internal:${options.port}`
}

export interface ShipperOptions {
  spool: LogSpool
  /** Where to send now (the primary may change while rows wait); undefined: nowhere known yet. */
  primaryUrl(): string | undefined
  secret: string | undefined
  fetch: typeof fetch
  logger: Logger
  metrics: Metrics
  /** Rows per POST at most (also at most 16 MB of them). */
  batchSize?: number
  /** How long one POST may take before it counts as failed. */
  timeoutMs?: number
}

const maxBackoffMs = 10_000
const defaultBatchSize = 500
/** Well under the primary's 64 MB body limit, whatever captured bodies the rows carry. */
const maxBatchBytes = 16 * 1024 * 1024

function rowIdOf(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { id?: string }).id
  } catch {
    return undefined
  }
}

export class LogShipper {
  private timer: ReturnType<typeof setInterval> | undefined
  private running: Promise<void> | undefined
  private failures = 0
  private retryAt = 0
  /** Why the last try failed, logged once per outage (not once per try). */
  private outage: string | undefined
  /** Rows per batch now: halved while the primary refuses batches, back to full after one is taken. */
  private limit: number

  constructor(private readonly options: ShipperOptions) {
    this.limit = options.batchSize ?? defaultBatchSize
  }

  start(intervalMs = 250): void {
    if (this.timer) return
    this.timer = setInterval(() => void this.ship(), intervalMs)
    this.timer.unref?.()
  }

  /** Stops the timer; resolves when a batch on its way has been answered. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    await this.running
  }

  /** Sends batches until the spool is empty or the primary does not take one. One run at a time. */
  ship(): Promise<void> {
    if (this.running) return this.running
    if (Date.now() < this.retryAt) return Promise.resolve()
    this.running = this.drain().finally(() => (this.running = undefined))
    return this.running
  }

  private async drain(): Promise<void> {
    const { spool, secret, logger, metrics } = this.options
    for (;;) {
      const batch = spool.take(this.limit, maxBatchBytes)
      if (!batch) return
      const outcome = secret === undefined ? { failure: 'RT_CLUSTER_SECRET is not set on this replica' } : await this.send(batch.texts, secret)
      if (outcome.rejected) {
        if (batch.texts.length > 1) {
          // Some row in it is refused (or the batch is too large): smaller batches find it.
          this.limit = Math.max(1, Math.floor(batch.texts.length / 2))
          continue
        }
        // One row the primary will never take (it says why): set aside, counted and logged, so the
        // rows behind it are not held up for ever.
        spool.remove(batch.upTo)
        metrics.logRowsRejected++
        logger.error('log_row_rejected', { error: outcome.failure, row_id: rowIdOf(batch.texts[0]!) })
        continue
      }
      if (outcome.failure !== undefined) {
        metrics.logShipFailures++
        this.failures++
        this.retryAt = Date.now() + Math.min(maxBackoffMs, 250 * 2 ** Math.min(this.failures, 6))
        if (this.outage !== outcome.failure) logger.warn('log_ship_failed', { rows_waiting: spool.count(), error: outcome.failure, message: 'Request-log rows stay in the spool and are sent again.' })
        this.outage = outcome.failure
        return
      }
      spool.remove(batch.upTo)
      metrics.logRowsShipped += batch.texts.length
      if (this.outage !== undefined) logger.info('log_ship_resumed', { rows_waiting: spool.count() })
      this.outage = undefined
      this.failures = 0
      this.limit = this.options.batchSize ?? defaultBatchSize
    }
  }

  /**
   * One POST. `failure` undefined: the primary acknowledged every row. `rejected`: it answered 400
   * or 413, refusing what was sent (sending it again would get the same); other failures are worth
   * sending again.
   */
  private async send(texts: string[], secret: string): Promise<{ failure?: string; rejected?: boolean }> {
    const base = this.options.primaryUrl()
    if (base === undefined) return { failure: 'no primary known (RT_PRIMARY_URL unset, and no primary host or FLY_APP_NAME)' }
    try {
      const response = await this.options.fetch(base + internalLogsPath, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
        body: `{"rows":[${texts.join(',')}]}`,
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      })
      const text = await response.text()
      if (response.status === 400 || response.status === 413) return { failure: `the primary refused the batch (${response.status}): ${text.slice(0, 200)}`, rejected: true }
      if (response.status !== 200) return { failure: `the primary answered ${response.status}: ${text.slice(0, 200)}` }
      const answer = JSON.parse(text) as { accepted?: unknown }
      if (answer.accepted !== texts.length) return { failure: `the primary acknowledged ${String(answer.accepted)} of ${texts.length} rows` }
      return {}
    } catch (error) {
      return { failure: `the primary could not be reached: ${error instanceof Error ? error.message : String(error)}` }
    }
  }
}
