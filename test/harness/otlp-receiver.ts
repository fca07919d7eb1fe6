/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1 (what a collector's `otlphttp` receiver answers):
 * `POST /v1/traces` with `application/json` (OTLP/JSON, decoded into spans here) or
 * `application/x-protobuf` (kept as bytes: the tests look for names in them). `down()` makes it
 * answer 503, as a collector that is failing would.
 */

export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  /** 1 INTERNAL, 2 SERVER, 3 CLIENT. */
  kind: number
  attributes: Record<string, string | number | boolean>
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string }
  serviceName: string
}

export interface OtlpReceiver extends AsyncDisposable {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string
  spans: ReceivedSpan[]
  /** Bodies of protobuf exports, as they came. */
  protobufBodies: Uint8Array[]
  /** Requests as they came: content type and headers. */
  requests: { path: string; contentType: string; headers: Headers }[]
  failWith(status: number | undefined): void
  close(): Promise<void>
}

type AnyValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean }

function valueOf(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.boolValue !== undefined) return value.boolValue
  return JSON.stringify(value)
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const protobufBodies: Uint8Array[] = []
  const requests: OtlpReceiver['requests'] = []
  let failing: number | undefined
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname
      const contentType = request.headers.get('content-type') ?? ''
      requests.push({ path, contentType, headers: request.headers })
      const bytes = new Uint8Array(await request.arrayBuffer())
      if (failing !== undefined) return new Response('collector failing', { status: failing })
      if (path !== '/v1/traces') return new Response('not found', { status: 404 })
      if (contentType.startsWith('application/x-protobuf')) {
        protobufBodies.push(bytes)
        return new Response(new Uint8Array(0), { headers: { 'content-type': 'application/x-protobuf' } })
      }
      const body = JSON.parse(new TextDecoder().decode(bytes)) as { resourceSpans?: any[] }
      for (const resourceSpans of body.resourceSpans ?? []) {
        const serviceName = String(valueOf((resourceSpans.resource?.attributes ?? []).find((attribute: any) => attribute.key === 'service.name')?.value ?? {}))
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            const attributes: ReceivedSpan['attributes'] = {}
            for (const attribute of span.attributes ?? []) attributes[attribute.key] = valueOf(attribute.value)
            spans.push({ traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, kind: span.kind, attributes, status: span.status ?? { code: 0 }, serviceName })
          }
        }
      }
      return Response.json({})
    },
  })
  const close = async () => {
    await server.stop(true)
  }
  return {
    url: `http://127.0.0.1:${server.port}`,
    spans,
    protobufBodies,
    requests,
    failWith: (status) => (failing = status),
    close,
    [Symbol.asyncDispose]: close,
  }
}
