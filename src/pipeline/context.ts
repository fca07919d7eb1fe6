/** Per-request state: the response headers being built and what the request log will record. */
import type { Envelope } from '../errors/render'
import type { KeyEntry, Snapshot, WorkspaceEntry } from '../storage/snapshot'
import type { RequestLogRow } from '../storage/repositories/request-logs'

export class RequestContext {
  readonly requestId = crypto.randomUUID()
  readonly startedAt = performance.now()
  readonly createdAt = Date.now()
  readonly headers = new Headers()
  /** The configuration snapshot this request was authenticated against (one per request). */
  snapshot: Snapshot | undefined
  key: KeyEntry | undefined
  workspace: WorkspaceEntry | undefined
  model: string | undefined
  upstreamModel: string | undefined
  gateway: string | undefined
  providerKeyId: string | undefined
  attempts = 0
  path: string[] = []
  stream = false
  /** Time spent waiting on upstreams before the response could start, ms. */
  upstreamWaitMs = 0
  /** First-byte time of the serving attempt, ms. */
  ttfbMs: number | undefined
  inputTokens: number | undefined
  outputTokens: number | undefined
  requestBody: string | undefined
  /** Stage timings as a JSON object body, appended by mark() (cheaper than an object + stringify). */
  private stages = ''
  private lastMark = this.startedAt
  /** Set when the response headers are ready (overhead = ready - start - upstream wait). */
  readyAt: number | undefined

  private resolvedClientIp: string | undefined
  private clientIpResolved = false

  constructor(
    readonly endpoint: string,
    public envelope: Envelope,
    /** Resolves the caller address on demand: reading the socket's peer costs a system call. */
    private readonly resolveClientIp: () => string | undefined,
  ) {
    this.headers.set('x-router-request-id', this.requestId)
  }

  /** The caller address (CONTRACT §4 RT_TRUST_PROXY), resolved on first use. */
  get clientIp(): string | undefined {
    if (!this.clientIpResolved) {
      this.clientIpResolved = true
      this.resolvedClientIp = this.resolveClientIp()
    }
    return this.resolvedClientIp
  }

  /** Records the time since the previous mark under `stage` (stage timings of the log). */
  mark(stage: string) {
    const now = performance.now()
    this.stages += `${this.stages ? ',' : ''}"${stage}":${Math.round((now - this.lastMark) * 1000) / 1000}`
    this.lastMark = now
  }

  overheadMs(): number | undefined {
    if (this.readyAt === undefined) return undefined
    return Math.max(0, this.readyAt - this.startedAt - this.upstreamWaitMs)
  }

  logRow(status: number, errorCode: string | undefined, captureBodies: boolean): RequestLogRow {
    const latency = performance.now() - this.startedAt
    const overhead = this.overheadMs()
    return {
      id: this.requestId,
      workspaceId: this.workspace?.id ?? this.key?.workspaceId ?? '',
      keyId: this.key?.id ?? null,
      createdAt: this.createdAt,
      endpoint: this.endpoint,
      gateway: this.gateway ?? null,
      providerKeyId: this.providerKeyId ?? null,
      model: this.model ?? null,
      upstreamModel: this.upstreamModel ?? null,
      status,
      errorCode: errorCode ?? null,
      stream: this.stream,
      latencyMs: Math.round(latency * 1000) / 1000,
      overheadMs: overhead === undefined ? null : Math.round(overhead * 1000) / 1000,
      ttfbMs: this.ttfbMs === undefined ? null : Math.round(this.ttfbMs * 1000) / 1000,
      attempts: this.attempts,
      attemptPath: this.path.length ? this.path.join('>') : null,
      stageTimings: `{${this.stages}}`,
      inputTokens: this.inputTokens ?? null,
      outputTokens: this.outputTokens ?? null,
      // Logged when it was needed (allowlists); not looked up for the log alone.
      clientIp: this.clientIpResolved ? (this.resolvedClientIp ?? null) : null,
      requestBody: captureBodies ? (this.requestBody ?? null) : null,
    }
  }
}
