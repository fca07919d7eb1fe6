/**
 * Traces (CONTRACT §13): OpenTelemetry spans exported over OTLP/HTTP with the official packages, off
 * unless an OTLP endpoint is set. One SERVER span per inference request, a CLIENT child per upstream
 * attempt (its W3C `traceparent` goes upstream with it), an INTERNAL child per MCP tool call and per
 * plug-in call (the decisioner's included). GenAI semantic-convention attributes, token usage and
 * status; never prompt or completion text, never a secret.
 *
 * Spans are passed along explicitly (on the request's context), not through a context manager: no
 * async-local storage on the request path. The batch processor exports on its own timer, off the
 * request path; an unreachable collector drops spans and says so at most once a minute.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api'
import { ExportResultCode, parseTraceParent, TraceState } from '@opentelemetry/core'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler, type SpanExporter } from '@opentelemetry/sdk-trace'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import type { Logger } from './logger'
import { genAiOperation, type TracingSettings } from './tracing-settings'

/** One warning a minute at most while the collector refuses or cannot be reached. */
const warnEveryMs = 60_000

function samplerFrom(name: string, arg: string | undefined): Sampler {
  const ratio = () => {
    const value = arg === undefined || arg === '' ? 1 : Number(arg)
    return Number.isFinite(value) && value >= 0 && value <= 1 ? value : 1
  }
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio())
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) })
    default:
      // parentbased_always_on, the specification's default.
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

/** A URL as it may be logged: no user info (a collector's credentials), no query, no fragment. */
export function loggableUrl(url: string): string {
  try {
    const parsed = new URL(url)
    parsed.username = ''
    parsed.password = ''
    parsed.search = ''
    parsed.hash = ''
    return parsed.toString()
  } catch {
    return '(unreadable URL)'
  }
}

/** The exporter, with failures turned into a warning line at most once a minute (spans dropped, requests untouched). */
function warningExporter(inner: SpanExporter, logger: Logger, url: string): SpanExporter {
  let warnedAt = -Infinity
  return {
    export(spans, done) {
      inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS && performance.now() - warnedAt >= warnEveryMs) {
          warnedAt = performance.now()
          logger.warn('trace_export_failed', { spans: spans.length, endpoint: loggableUrl(url), error: result.error?.message ?? 'export failed', message: 'Spans are dropped while the collector cannot take them; requests are not affected.' })
        }
        done(result)
      })
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  }
}

/** What the request's span is told when the request is finished. */
export interface FinishedRequest {
  endpoint: string
  status: number
  errorCode: string | undefined
  requestId: string
  keyId: string | undefined
  model: string | undefined
  gateway: string | undefined
  upstreamModel: string | undefined
  /** The model the upstream's answer names (`model` of a completion, a chunk, a Response). */
  responseModel: string | undefined
  inputTokens: number | undefined
  outputTokens: number | undefined
  attempts: number
}

export class RouterTracing {
  private readonly provider: TracerProvider
  private readonly tracer: Tracer

  constructor(
    readonly settings: TracingSettings,
    logger: Logger,
    /** Tests and the stage table: another exporter in place of OTLP. */
    exporter?: SpanExporter,
  ) {
    const headers = settings.headers
    const otlp =
      exporter ??
      (settings.protocol === 'http/json'
        ? new JsonExporter({ url: settings.url, headers, timeoutMillis: settings.timeoutMs })
        : new ProtobufExporter({ url: settings.url, headers, timeoutMillis: settings.timeoutMs }))
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
      sampler: samplerFrom(settings.sampler, settings.samplerArg),
      spanProcessors: [new BatchSpanProcessor({ exporter: warningExporter(otlp, logger, settings.url), scheduledDelayMillis: 1000, maxQueueSize: 8192, maxExportBatchSize: 512 })],
    })
    this.tracer = this.provider.getTracer('router')
  }

  /**
   * The SERVER span of an inference request, started at its start: a child of the caller's span when
   * the request carries a valid `traceparent` (and its `tracestate`), else a new trace. `headers`
   * undefined: the caller is not trusted with the trace (a request that failed authentication), so
   * the sampler decides alone and no client can push spans into the export queue.
   */
  startRequest(endpoint: string, headers: Headers | undefined, startedAtMs: number): Span {
    let parent = ROOT_CONTEXT
    const traceparent = headers?.get('traceparent')
    if (traceparent) {
      const spanContext = parseTraceParent(traceparent)
      if (spanContext) {
        const state = headers!.get('tracestate')
        parent = trace.setSpanContext(ROOT_CONTEXT, { ...spanContext, isRemote: true, ...(state ? { traceState: new TraceState(state) } : {}) })
      }
    }
    return this.tracer.startSpan(endpoint, { kind: SpanKind.SERVER, startTime: startedAtMs, attributes: { 'gen_ai.operation.name': genAiOperation(endpoint) } }, parent)
  }

  /** Names and ends the request's span with what the request came to. */
  endRequest(span: Span, finished: FinishedRequest) {
    const operation = genAiOperation(finished.endpoint)
    if (finished.model) span.updateName(`${operation} ${finished.model}`)
    const attributes: Attributes = { 'router.request_id': finished.requestId, 'http.response.status_code': finished.status, 'router.attempts': finished.attempts }
    if (finished.keyId) attributes['router.key_id'] = finished.keyId
    if (finished.model) attributes['gen_ai.request.model'] = finished.model
    if (finished.gateway) attributes['gen_ai.provider.name'] = finished.gateway
    // The model the answer names (a dated snapshot of the one asked for, say): only when it names one.
    if (finished.responseModel) attributes['gen_ai.response.model'] = finished.responseModel
    if (finished.inputTokens !== undefined) attributes['gen_ai.usage.input_tokens'] = finished.inputTokens
    if (finished.outputTokens !== undefined) attributes['gen_ai.usage.output_tokens'] = finished.outputTokens
    if (finished.errorCode) attributes['error.type'] = finished.errorCode
    span.setAttributes(attributes)
    if (finished.status >= 500 || finished.errorCode) span.setStatus({ code: SpanStatusCode.ERROR, ...(finished.errorCode ? { message: finished.errorCode } : {}) })
    span.end()
  }

  /** A CLIENT span for one upstream attempt, a child of the request's; its `traceparent` for the call. */
  startAttempt(parent: Span, operation: string, gateway: string, model: string): { span: Span; traceparent: string | undefined } {
    const span = this.tracer.startSpan(
      `${operation} ${model}`,
      { kind: SpanKind.CLIENT, attributes: { 'gen_ai.operation.name': operation, 'gen_ai.provider.name': gateway, 'gen_ai.request.model': model } },
      trace.setSpan(ROOT_CONTEXT, parent),
    )
    const context = span.spanContext()
    // A span the sampler dropped still carries the trace: the upstream continues it unsampled.
    const traceparent = trace.isSpanContextValid(context) ? `00-${context.traceId}-${context.spanId}-0${context.traceFlags & 1}` : undefined
    return { span, traceparent }
  }

  /** Ends an attempt's span: `ok`, or the failover reason (SPEC's attempt path word). */
  endAttempt(span: Span, outcome: string, status: number | undefined) {
    if (status !== undefined) span.setAttribute('http.response.status_code', status)
    if (outcome !== 'ok') {
      span.setAttribute('router.failover_reason', outcome)
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome })
    }
    span.end()
  }

  /** An INTERNAL span around `work` (an MCP tool call, a plug-in call, the decisioner's call). */
  async internal<T>(parent: Span, name: string, attributes: Attributes, work: () => Promise<T>, failed?: (value: T) => string | undefined): Promise<T> {
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, trace.setSpan(ROOT_CONTEXT, parent))
    try {
      const value = await work()
      const error = failed?.(value)
      if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error })
      return value
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
      throw error
    } finally {
      span.end()
    }
  }

  /** Sends what is queued (a clean stop, and tests); a collector that refuses them is the warning's, not the caller's. */
  flush(): Promise<void> {
    return this.provider.forceFlush().catch(() => undefined)
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown()
  }
}
