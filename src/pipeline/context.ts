/** Per-request state: the response headers being built and what the request log will record. */
import type { Envelope } from '../errors/render'
import type { KeyEntry, Snapshot, WorkspaceEntry } from '../storage/snapshot'
import type { RequestLogRow } from '../storage/repositories/request-logs'
import { callerAddress } from './authenticate'

/** Response headers by lower-case name: a plain object, handed to `new Response` once at the end. */
export type ResponseHeaders = Record<string, string>

export type Stage = 'auth' | 'body' | 'plan' | 'upstream'

/** The headers of a finished request (its answer has been built). */
const finishedHeaders: ResponseHeaders = Object.freeze({}) as ResponseHeaders

const round3 = (value: number) => Math.round(value * 1000) / 1000

/**
 * One request's state. Everything the log row needs is kept as plain fields; the row itself (and
 * its number formatting) is built when the log queue writes it, not while the request is served.
 */
export class RequestContext {
  readonly requestId = crypto.randomUUID()
  readonly startedAt = performance.now()
  readonly createdAt = Date.now()
  headers: ResponseHeaders
  /** The configuration snapshot this request was authenticated against (one per request). */
  snapshot: Snapshot | undefined
  key: KeyEntry | undefined
  workspace: WorkspaceEntry | undefined
  model: string | undefined
  upstreamModel: string | undefined
  gateway: string | undefined
  providerKeyId: string | undefined
  attempts = 0
  path: readonly string[] | undefined
  stream = false
  /** Time spent waiting on upstreams before the response could start, ms. */
  upstreamWaitMs = 0
  /** First-byte time of the serving attempt, ms. */
  ttfbMs: number | undefined
  inputTokens: number | undefined
  outputTokens: number | undefined
  requestBody: string | undefined
  /** Set when the response headers are ready (overhead = ready - start - upstream wait). */
  readyAt: number | undefined
  /** End times of the stages (performance.now(); 0 = not reached), written to the log as durations. */
  private authAt = 0
  private bodyAt = 0
  private planAt = 0
  private upstreamAt = 0
  /** What the log records about the answer, set once by finish(). */
  private status = 0
  private errorCode: string | undefined
  private finishedAt = 0
  private captureBodies = false

  private resolvedClientIp: string | undefined
  private clientIpResolved = false

  constructor(
    readonly endpoint: string,
    public envelope: Envelope,
    private request: Request | undefined,
    /** Reads the socket's peer address (a system call), only when an allowlist or the log needs it. */
    private socketAddress: (() => string | undefined) | undefined,
    private readonly trustProxy: boolean,
  ) {
    this.headers = { 'x-router-request-id': this.requestId }
  }

  /** The caller address (CONTRACT §4 RT_TRUST_PROXY), resolved on first use. */
  get clientIp(): string | undefined {
    if (!this.clientIpResolved) {
      this.clientIpResolved = true
      this.resolvedClientIp = this.request && this.socketAddress ? callerAddress(this.request.headers, this.socketAddress, this.trustProxy) : undefined
    }
    return this.resolvedClientIp
  }

  /** Records the end of a stage (stage timings of the log: each stage's time since the previous one). */
  mark(stage: Stage) {
    const now = performance.now()
    if (stage === 'auth') this.authAt = now
    else if (stage === 'body') this.bodyAt = now
    else if (stage === 'plan') this.planAt = now
    else this.upstreamAt = now
  }

  /** The headers of the answer, with X-Router-Attempts as it stands now. */
  responseHeaders(): ResponseHeaders {
    this.headers['x-router-attempts'] = String(this.attempts)
    return this.headers
  }

  overheadMs(): number | undefined {
    if (this.readyAt === undefined) return undefined
    return Math.max(0, this.readyAt - this.startedAt - this.upstreamWaitMs)
  }

  /**
   * Records the answer for the log row, and lets go of what the row does not need: the context waits
   * in the log queue, and the request, its headers and the response headers should not wait with it
   * (objects that outlive a young collection are only reclaimed by a full one).
   */
  finish(status: number, errorCode: string | undefined) {
    this.status = status
    this.errorCode = errorCode
    this.finishedAt = performance.now()
    this.captureBodies = this.workspace?.captureBodies ?? false
    if (!this.captureBodies) this.requestBody = undefined
    this.request = undefined
    this.socketAddress = undefined
    this.snapshot = undefined
    this.headers = finishedHeaders
  }

  private stageTimings(): string {
    // Each reached stage's time since the previous reached one, in stage order.
    let text = '{'
    let previous = this.startedAt
    if (this.authAt !== 0) {
      text += `"auth":${round3(this.authAt - previous)}`
      previous = this.authAt
    }
    if (this.bodyAt !== 0) {
      text += `${text.length > 1 ? ',' : ''}"body":${round3(this.bodyAt - previous)}`
      previous = this.bodyAt
    }
    if (this.planAt !== 0) {
      text += `${text.length > 1 ? ',' : ''}"plan":${round3(this.planAt - previous)}`
      previous = this.planAt
    }
    if (this.upstreamAt !== 0) text += `${text.length > 1 ? ',' : ''}"upstream":${round3(this.upstreamAt - previous)}`
    return text + '}'
  }

  /** The request-log row (built by the log queue's flush, off the request path). */
  logRow(): RequestLogRow {
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
      status: this.status,
      errorCode: this.errorCode ?? null,
      stream: this.stream,
      latencyMs: round3(this.finishedAt - this.startedAt),
      overheadMs: overhead === undefined ? null : round3(overhead),
      ttfbMs: this.ttfbMs === undefined ? null : round3(this.ttfbMs),
      attempts: this.attempts,
      attemptPath: this.path && this.path.length ? this.path.join('>') : null,
      stageTimings: this.stageTimings(),
      inputTokens: this.inputTokens ?? null,
      outputTokens: this.outputTokens ?? null,
      // Logged when it was needed (allowlists); not looked up for the log alone.
      clientIp: this.clientIpResolved ? (this.resolvedClientIp ?? null) : null,
      requestBody: this.captureBodies ? (this.requestBody ?? null) : null,
    }
  }
}
