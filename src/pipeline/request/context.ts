/** Per-request state: the response headers being built and what the request log will record. */
import type { Envelope } from '../../errors/render'
import type { KeyEntry, Snapshot, WorkspaceEntry } from '../read-model/entries'
import type { RequestLogRow } from '../../storage/repositories/request-logs'
import { stageTimingsText, type RecordWriter } from '../../storage/request-journal'
import { callerAddress } from './authenticate'
import { costOf, type ReportedUsage } from '../../gateways/model-prices'
import type { RouterError } from '../../errors/router-error'
import type { Usage } from '../../dialects/stream-parts'
import type { PlannedAttempt } from '../routing/plan-route'
import type { Span } from '@opentelemetry/api'

/**
 * One call's priced usage in nano-dollars, from the snapshot's catalog prices of the model as sent to
 * the gateway that answered: undefined when it reported no usage, null when that model lists no
 * price for what it used (unknown, never 0).
 */
function pricedUsage(snapshot: Snapshot | undefined, gateway: string | undefined, model: string | undefined, usage: ReportedUsage): number | null | undefined {
  if (usage.input === undefined && usage.output === undefined) return undefined
  if (gateway === undefined) return null
  const pricing = model === undefined ? undefined : snapshot?.catalogs.get(gateway)?.prices.get(model)
  return costOf(usage, pricing) ?? null
}

/**
 * What a finished request cost (CONTRACT §11), nano-dollars: each model call's reported usage at its
 * model's listed prices (a tool loop's rounds each at the target that served it). A key with a USD cap
 * is charged as its admission settles it (limits/admission.ts: never below the reservation for lack
 * of usage). Otherwise, no usage reported: 0 when no gateway served an answer or the answer failed
 * (refused, an upstream error, a stream the upstream ended with an error, a hang-up: a failed or
 * cancelled request costs what the upstream reported, else 0); null for a success whose usage is
 * unknown, which is not free; null too when a model that was used lists no price.
 */
function requestCost(context: RequestContext, status: number, errorCode: string | undefined): number | null {
  const failed = status >= 400 || errorCode !== undefined
  const snapshot = context.snapshot
  const limited = context.limited?.usdCap ? context.limited : undefined
  const answered = !failed || context.answerStarted
  // On a key with a USD cap, an answer whose usage leaves out a side it used (no completion count,
  // say) is charged as one without usage: never below its reservation (CONTRACT §11).
  const price = (gateway: string | undefined, model: string | undefined, usage: ReportedUsage) =>
    limited && answered && (usage.input === undefined || (usage.output === undefined && limited.operation !== 'embeddings')) ? undefined : pricedUsage(snapshot, gateway, model, usage)
  const rounds = context.rounds?.map((round) => price(round.step.gateway, round.step.model, { input: round.usage?.inputTokens, output: round.usage?.outputTokens, cachedInput: round.usage?.cachedInputTokens }))
  const single = rounds ? undefined : price(context.gateway, context.upstreamModel, { input: context.inputTokens, output: context.outputTokens, cachedInput: context.cachedInputTokens })
  if (limited) return limited.charge(single, rounds, answered)
  if (rounds) {
    let total = 0
    for (const cost of rounds) {
      if (cost === null || (cost === undefined && !failed)) return null
      total += cost ?? 0
    }
    return total
  }
  if (single === undefined) return context.gateway === undefined || failed ? 0 : null
  return single
}

/**
 * What a spend cap (pipeline/limits) is to the rest of a request: the cost its finish charges, and
 * the side calls other stages make (the decisioner's), reserved before they are made and charged.
 */
export interface SpendCap {
  readonly usdCap: boolean
  readonly operation: string
  /** Admitted: it holds a ticket in the key's ledger. */
  readonly admitted: boolean
  charge(single: number | null | undefined, rounds: readonly (number | null | undefined)[] | undefined, answered: boolean): number
  reserveSide(worst: number): RouterError | undefined
  chargeSide(spent: number): void
}

/** What observes a request to its end (the key's chain opened for it; a batch submit's spend cap): its last word before the row is written. */
export interface RequestObserver {
  finished(): void
}

/**
 * A request past authentication: its key, its workspace and the snapshot it was authenticated
 * against are known (every endpoint handler, dialect, stage and routed call works on one). Until the
 * request is finished: RequestContext.finish() lets go of the snapshot for the log queue's sake.
 */
export type AuthenticatedContext = RequestContext & { key: KeyEntry; workspace: WorkspaceEntry; snapshot: Snapshot }

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
  /** Of the prompt tokens, those the upstream read from its prompt cache (priced at the cache-read price where listed). */
  cachedInputTokens: number | undefined
  /** The request's cost in nano-dollars (storage/money.ts), set by finish(): null when unknown (an unpriced model), 0 when nothing was billed. */
  costNanoUsd: number | null = null
  /** A limited key's request: its spend cap (pipeline/limits), set when it is admitted. */
  limited: SpendCap | undefined
  /** The key's chain opened for this request (stages/chain.ts), or another observer of its end. */
  chain: RequestObserver | undefined
  /** The router asked the upstream for the usage chunk the client did not ask for: it is kept from the client. */
  hideUsageChunk = false
  /** A tool loop's model rounds, each with the attempt that served it and the usage it reported (its cost is priced per round). */
  rounds: { step: PlannedAttempt; usage: Usage | undefined }[] | undefined
  /** A stream's answer went out to the client (a byte of it was sent): it is an answer, whatever ends it. */
  answerStarted = false
  /** The response cache's part in the answer (CONTRACT §15): it came from the cache, or from an identical request in flight. */
  cache: 'hit' | 'semantic-hit' | 'coalesced' | undefined
  /** What a cached answer saved: the cost of the answer it repeats, nano-dollars (null: that was unpriced). */
  savedNanoUsd: number | null | undefined
  /** Mid-stream continuations the answer took (CONTRACT §16). */
  continued: number | undefined
  /** Guardrail findings (CONTRACT §17), never the matched text. */
  guardrails: { rule: string; where: 'input' | 'output'; action: string; count: number }[] | undefined
  /** The request's SERVER span when traces are on (observability/tracing.ts); undefined otherwise. */
  span: Span | undefined
  /** The model the upstream's answer names, for the span (read only while traced). */
  responseModel: string | undefined
  requestBody: string | undefined
  /** What enrichment stages did, as the log's JSON text (pipeline/stages); undefined when none ran. */
  enrichment: string | undefined
  /** Set when the response headers are ready (overhead = ready - start - upstream wait). */
  readyAt: number | undefined
  /** The upstream wait when a stream's headers went out: later waits (a tool loop's next rounds) are not before them. */
  waitAtReady: number | undefined
  /** End times of the stages (performance.now(); 0 = not reached), written to the log as durations. */
  private authAt = 0
  private bodyAt = 0
  private planAt = 0
  private upstreamAt = 0
  /** What the log records about the answer, set once by finish(). */
  /** The answer's status and error code, once finished (finish()). */
  status = 0
  errorCode: string | undefined
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
    return Math.max(0, this.readyAt - this.startedAt - (this.waitAtReady ?? this.upstreamWaitMs))
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
    this.costNanoUsd = requestCost(this, status, errorCode)
    this.captureBodies = this.key?.pipeline.captureBodies ?? false
    if (!this.captureBodies) this.requestBody = undefined
    this.request = undefined
    this.socketAddress = undefined
    this.snapshot = undefined
    this.headers = finishedHeaders
  }

  /** Each reached stage's milliseconds since the previous reached one (rounded), computed once by settleStages. */
  private authMs: number | undefined
  private bodyMs: number | undefined
  private planMs: number | undefined
  private upstreamMs: number | undefined
  private stagesSettled = false

  private settleStages() {
    if (this.stagesSettled) return
    this.stagesSettled = true
    let previous = this.startedAt
    if (this.authAt !== 0) {
      this.authMs = round3(this.authAt - previous)
      previous = this.authAt
    }
    if (this.bodyAt !== 0) {
      this.bodyMs = round3(this.bodyAt - previous)
      previous = this.bodyAt
    }
    if (this.planAt !== 0) {
      this.planMs = round3(this.planAt - previous)
      previous = this.planAt
    }
    if (this.upstreamAt !== 0) this.upstreamMs = round3(this.upstreamAt - previous)
  }

  /** UTF-16 units of this request's journal record texts in all (storage/request-journal.ts recordBound). */
  recordTextUnits(): number {
    let units = this.requestId.length + (this.workspace?.id ?? this.key?.workspaceId ?? '').length + (this.key?.id.length ?? 0) + this.endpoint.length
    units += (this.gateway?.length ?? 0) + (this.providerKeyId?.length ?? 0) + (this.model?.length ?? 0) + (this.upstreamModel?.length ?? 0) + (this.errorCode?.length ?? 0)
    if (this.path) for (const step of this.path) units += step.length + 1
    if (this.clientIpResolved) units += this.resolvedClientIp?.length ?? 0
    if (this.captureBodies) units += this.requestBody?.length ?? 0
    units += this.enrichment?.length ?? 0
    units += (this.cache?.length ?? 0) + (this.guardrailsText()?.length ?? 0)
    return units
  }

  private guardrailsJson: string | undefined

  /** The guardrail findings as the row keeps them (JSON), made once, when the request is done. */
  private guardrailsText(): string | undefined {
    if (!this.guardrails) return undefined
    return (this.guardrailsJson ??= JSON.stringify(this.guardrails))
  }

  /**
   * The request-log row, written as its journal record field by field (request_logs column order,
   * storage/request-journal.ts): called once, when the request is done, and makes no row object.
   * The same values as logRow(), which the log queue builds later, off the request's path.
   */
  writeRecord(writer: RecordWriter) {
    const overhead = this.overheadMs()
    writer.text(this.requestId)
    writer.text(this.workspace?.id ?? this.key?.workspaceId ?? '')
    writer.text(this.key?.id)
    writer.number(this.createdAt)
    writer.text(this.endpoint)
    writer.text(this.gateway)
    writer.text(this.providerKeyId)
    writer.text(this.model)
    writer.text(this.upstreamModel)
    writer.number(this.status)
    writer.text(this.errorCode)
    writer.flag(this.stream)
    writer.number(round3(this.finishedAt - this.startedAt))
    writer.number(overhead === undefined ? undefined : round3(overhead))
    writer.number(this.ttfbMs === undefined ? undefined : round3(this.ttfbMs))
    writer.number(this.attempts)
    writer.joined(this.path, '>')
    this.settleStages()
    writer.stages(this.authMs, this.bodyMs, this.planMs, this.upstreamMs)
    writer.number(this.inputTokens)
    writer.number(this.outputTokens)
    // Logged when it was needed (allowlists); not looked up for the log alone.
    writer.text(this.clientIpResolved ? this.resolvedClientIp : undefined)
    writer.text(this.captureBodies ? this.requestBody : undefined)
    writer.text(this.enrichment)
    writer.number(this.costNanoUsd)
    writer.text(this.cache)
    writer.number(this.savedNanoUsd)
    writer.number(this.continued)
    // A key without guardrails makes no text here (CONTRACT §17: it pays nothing for them).
    writer.text(this.guardrailsText())
  }

  /** The request-log row (built by the log queue's flush, off the request path): the journal record's values. */
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
      stageTimings: (this.settleStages(), stageTimingsText(this.authMs, this.bodyMs, this.planMs, this.upstreamMs)),
      inputTokens: this.inputTokens ?? null,
      outputTokens: this.outputTokens ?? null,
      // Logged when it was needed (allowlists); not looked up for the log alone.
      clientIp: this.clientIpResolved ? (this.resolvedClientIp ?? null) : null,
      requestBody: this.captureBodies ? (this.requestBody ?? null) : null,
      enrichment: this.enrichment ?? null,
      costNanoUsd: this.costNanoUsd,
      cache: this.cache ?? null,
      savedNanoUsd: this.savedNanoUsd ?? null,
      continued: this.continued ?? null,
      guardrails: this.guardrailsText() ?? null,
    }
  }
}
