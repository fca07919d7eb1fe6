/**
 * A fake upstream gateway: a real HTTP server on 127.0.0.1 that answers by path suffix
 * (CONTRACT §6), records every request, and can be told to fail, stall, stream slowly or break.
 */

export interface RecordedRequest {
  method: string
  path: string
  headers: Record<string, string>
  body: any
  rawBody: string
}

export interface MockReply {
  status?: number
  json?: unknown
  text?: string
  headers?: Record<string, string>
  /** SSE `data:` payloads (objects are JSON-encoded; strings sent as-is, e.g. '[DONE]'). */
  sse?: unknown[]
  /** Wait before sending headers. */
  delayMs?: number
  /** Wait between SSE events. */
  chunkDelayMs?: number
  /** Send this many SSE events, then cut the connection. */
  breakAfter?: number
  /** Never answer (until the client gives up). */
  hang?: boolean
}

export type MockHandler = (request: RecordedRequest) => MockReply | Response | undefined | Promise<MockReply | Response | undefined>

export interface MockGateway extends AsyncDisposable {
  url: string
  requests: RecordedRequest[]
  /** Replaces the behaviour; return undefined to fall back to the default answers. */
  handle(handler: MockHandler): void
  /** Requests whose path ends with the suffix. */
  calls(suffix: string): RecordedRequest[]
  close(): Promise<void>
}

export function chatCompletion(model: string, content = 'Hello from the mock.', extra: Record<string, unknown> = {}) {
  return {
    id: 'chatcmpl-mock',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    ...extra,
  }
}

export function chatChunks(model: string, pieces = ['Hel', 'lo', '!']): unknown[] {
  const base = { id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1_700_000_000, model }
  return [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    ...pieces.map((piece) => ({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    { ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: pieces.length, total_tokens: 11 + pieces.length } },
    '[DONE]',
  ]
}

function defaultReply(request: RecordedRequest, models: string[]): MockReply {
  if (request.path.endsWith('/chat/completions')) {
    const model = String(request.body?.model ?? 'unknown')
    return request.body?.stream ? { sse: chatChunks(model) } : { json: chatCompletion(model) }
  }
  if (request.path.endsWith('/embeddings')) {
    return {
      json: {
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
        model: request.body?.model,
        usage: { prompt_tokens: 3, total_tokens: 3 },
      },
    }
  }
  if (request.path.endsWith('/models')) {
    return { json: { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'mock' })) } }
  }
  return { status: 404, json: { error: { message: `mock: no route ${request.path}`, type: 'invalid_request_error' } } }
}

const encoder = new TextEncoder()

function toResponse(reply: MockReply): Response | Promise<Response> {
  const headers = new Headers(reply.headers)
  if (reply.sse) {
    headers.set('content-type', 'text/event-stream')
    const events = reply.sse
    let index = 0
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (reply.breakAfter !== undefined && index >= reply.breakAfter) {
          controller.error(new Error('mock: connection cut'))
          return
        }
        if (index >= events.length) {
          controller.close()
          return
        }
        if (index > 0 && reply.chunkDelayMs) await Bun.sleep(reply.chunkDelayMs)
        const event = events[index++]
        controller.enqueue(encoder.encode(`data: ${typeof event === 'string' ? event : JSON.stringify(event)}\n\n`))
      },
    })
    return new Response(stream, { status: reply.status ?? 200, headers })
  }
  if (reply.json !== undefined) {
    headers.set('content-type', 'application/json')
    return new Response(JSON.stringify(reply.json), { status: reply.status ?? 200, headers })
  }
  return new Response(reply.text ?? '', { status: reply.status ?? 200, headers })
}

/** A request as the test servers of the harness record it: its body read whole, parsed when JSON. */
export async function recordRequest(request: Request): Promise<RecordedRequest> {
  const rawBody = request.method === 'GET' || request.method === 'HEAD' ? '' : await request.text()
  let body: unknown = undefined
  try {
    body = rawBody ? JSON.parse(rawBody) : undefined
  } catch {}
  return { method: request.method, path: new URL(request.url).pathname, headers: Object.fromEntries(request.headers), body, rawBody }
}

export async function startMockGateway(options: { models?: string[]; handler?: MockHandler; port?: number } = {}): Promise<MockGateway> {
  const requests: RecordedRequest[] = []
  let handler: MockHandler | undefined = options.handler
  const models = options.models ?? ['openai/gpt-4o-mini', 'anthropic/claude-sonnet-4']
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: options.port ?? 0,
    idleTimeout: 0,
    development: false,
    async fetch(request) {
      const recorded = await recordRequest(request)
      requests.push(recorded)
      const custom = handler ? await handler(recorded) : undefined
      if (custom instanceof Response) return custom
      const reply = custom ?? defaultReply(recorded, models)
      if (reply.hang) {
        await new Promise<void>((resolve) => request.signal.addEventListener('abort', () => resolve()))
        return new Response(null, { status: 499 })
      }
      if (reply.delayMs) await Bun.sleep(reply.delayMs)
      return toResponse(reply)
    },
  })
  const gateway: MockGateway = {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    handle(next) {
      handler = next
    },
    calls: (suffix) => requests.filter((request) => request.path.endsWith(suffix)),
    close: () => server.stop(true),
    [Symbol.asyncDispose]: () => server.stop(true),
  }
  return gateway
}
