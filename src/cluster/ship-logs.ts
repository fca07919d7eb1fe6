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
  /** Rows per POST. */
  batchSize?: number
  /** How long one POST may take before it counts as failed. */
  timeoutMs?: number
}

const maxBackoffMs = 10_000

export class LogShipper {
  private timer: ReturnType<typeof setInterval> | undefined
  private running: Promise<void> | undefined
  private failures = 0
  private retryAt = 0
  /** Why the last try failed, logged once per outage (not once per try). */
  private outage: string | undefined

  constructor(private readonly options: ShipperOptions) {}

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
    const batchSize = this.options.batchSize ?? 500
    for (;;) {
      const batch = spool.take(batchSize)
      if (!batch) return
      const failure = secret === undefined ? 'RT_CLUSTER_SECRET is not set on this replica' : await this.send(batch.rows, secret)
      if (failure !== undefined) {
        metrics.logShipFailures++
        this.failures++
        this.retryAt = Date.now() + Math.min(maxBackoffMs, 250 * 2 ** Math.min(this.failures, 6))
        if (this.outage !== failure) logger.warn('log_ship_failed', { rows_waiting: spool.count(), error: failure, message: 'Request-log rows stay in the spool and are sent again.' })
        this.outage = failure
        return
      }
      spool.remove(batch.upTo)
      metrics.logRowsShipped += batch.rows.length
      if (this.outage !== undefined) logger.info('log_ship_resumed', { rows_waiting: spool.count() })
      this.outage = undefined
      this.failures = 0
    }
  }

  /** One POST; undefined when the primary acknowledged every row, else why not. */
  private async send(rows: unknown[], secret: string): Promise<string | undefined> {
    const base = this.options.primaryUrl()
    if (base === undefined) return 'no primary URL (set RT_PRIMARY_URL, or FLY_APP_NAME on fly.io)'
    try {
      const response = await this.options.fetch(base + internalLogsPath, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
        body: JSON.stringify({ rows }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      })
      const text = await response.text()
      if (response.status !== 200) return `the primary answered ${response.status}: ${text.slice(0, 200)}`
      const answer = JSON.parse(text) as { accepted?: unknown }
      if (answer.accepted !== rows.length) return `the primary acknowledged ${String(answer.accepted)} of ${rows.length} rows`
      return undefined
    } catch (error) {
      return `the primary could not be reached: ${error instanceof Error ? error.message : String(error)}`
    }
  }
}
