/** The OTEL_* settings of traces (CONTRACT §13), read by config/env.ts without loading the OpenTelemetry packages. */

/** The OTEL_* settings the router honours (config/env.ts reads them). */
export interface TracingSettings {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  url: string
  protocol: 'http/protobuf' | 'http/json'
  headers: Record<string, string>
  serviceName: string
  sampler: string
  samplerArg: string | undefined
  timeoutMs: number
}

/** Reads `OTEL_EXPORTER_OTLP_HEADERS`-style `k=v,k2=v2` (values URL-encoded). */
export function parseOtlpHeaders(text: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const pair of (text ?? '').split(',')) {
    const at = pair.indexOf('=')
    if (at <= 0) continue
    const name = pair.slice(0, at).trim()
    const value = pair.slice(at + 1).trim()
    try {
      headers[decodeURIComponent(name)] = decodeURIComponent(value)
    } catch {
      headers[name] = value
    }
  }
  return headers
}

/** The GenAI operation of an inference endpoint (semantic conventions' `gen_ai.operation.name`). */
export function genAiOperation(endpoint: string): string {
  if (endpoint === 'embeddings') return 'embeddings'
  if (endpoint === 'generate_content' || endpoint === 'stream_generate_content') return 'generate_content'
  if (endpoint === 'chat' || endpoint === 'messages' || endpoint === 'responses' || endpoint === 'decisions') return 'chat'
  return endpoint
}

