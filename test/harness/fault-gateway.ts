/**
 * A misbehaving upstream for tests: a real Bun.serve on 127.0.0.1, port 0, that answers by path
 * suffix as every gateway kind does (CONTRACT §6: chat completions, Responses, embeddings, models)
 * and fails on demand the ways real gateways fail: no head at all, a stream that goes silent or is
 * cut after N chunks, a 200 whose body is cut short, not JSON or an HTML page, a slow drip, a 400
 * that echoes the credential it was sent. `drip` without a chunk count holds a stream open until
 * the client lets go, one chunk every N ms (for load tests with many streams open at once).
 *
 * Bun.serve sends a response's head together with its first body byte, so a stream that stalls
 * before any chunk never sends its head either; `startHeadOnlyGateway` is the one raw-socket helper
 * here, for the head-then-silence case.
 *
 * `await using gateway = await startFaultGateway()`; `gateway.use(fault)` sets what the next
 * requests get (a function picks per request). Every request is recorded, and streams are counted
 * while open and when the client let go of them early.
 */

export type Fault =
  /** A well-formed answer for the path (a stream when the body asks for one). */
  | { mode: 'ok' }
  /** Never answers: no head, no body, until the client gives up. */
  | { mode: 'hang' }
  /** 200 and the first `afterChunks` chunks of the answer, then silence with the connection held open. */
  | { mode: 'stall'; afterChunks: number }
  /** 200 and the first `afterChunks` chunks, then the connection is cut (the body ends in error). */
  | { mode: 'reset'; afterChunks: number }
  /**
   * 200 and one chunk every `everyMs`: a stream of `chunks` content chunks and its normal end, or
   * with no `chunks`, content chunks until the client lets go. Buffered calls get their answer after
   * `everyMs`.
   */
  | { mode: 'drip'; everyMs: number; chunks?: number }
  /** 200 whose body ends cleanly but cut short: half the JSON, or a stream whose last record is cut in half. */
  | { mode: 'truncated'; afterChunks?: number }
  /** 200 whose body is not JSON; a stream with a `data:` record that is not JSON after `afterChunks` chunks, then the rest and its end. */
  | { mode: 'malformed'; afterChunks?: number }
  /** 200 `text/html`: a proxy's error page. */
  | { mode: 'html' }
  /** 200 with an empty body. */
  | { mode: 'empty' }
  /** A fixed answer, whatever was asked: `body` (JSON-encoded unless a string), `status` (200), `contentType` (application/json). */
  | { mode: 'fixed'; body: unknown; status?: number; contentType?: string }
  /**
   * `status` (default 400) whose JSON error echoes the credential: the whole Authorization value
   * and OpenAI's masked form of the key; with `inHeader`, also in an `x-ratelimit-*` header.
   */
  | { mode: 'echo-auth'; status?: number; inHeader?: boolean }

export interface FaultRequest {
  method: string
  path: string
  headers: Record<string, string>
  body: any
}

export interface FaultGateway extends AsyncDisposable {
  url: string
  requests: FaultRequest[]
  /** Streams being sent now. */
  readonly openStreams: number
  /** Streams the client let go of before their end (a router aborting its upstream request). */
  readonly cancelledStreams: number
  /** Resolves when `cancelledStreams` reaches `count` (no sleeping in tests to wait for it). */
  waitForCancelled(count: number): Promise<void>
  /** What the following requests get: one fault, or a function of the request. */
  use(fault: Fault | ((request: FaultRequest) => Fault)): void
  /** Requests whose path ends with the suffix. */
  calls(suffix: string): FaultRequest[]
  close(): Promise<void>
}

const encoder = new TextEncoder()
const created = 1_700_000_000

type Dialect = 'chat' | 'responses'

/** The records of a normal stream, each one SSE event as bytes. */
function streamRecords(dialect: Dialect, model: string, pieces: string[]): Uint8Array[] {
  if (dialect === 'chat') {
    const base = { id: 'chatcmpl-fault', object: 'chat.completion.chunk', created, model }
    return [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      ...pieces.map((piece) => ({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })),
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      { ...base, choices: [], usage: { prompt_tokens: 9, completion_tokens: pieces.length, total_tokens: 9 + pieces.length } },
      '[DONE]',
    ].map((record) => encoder.encode(`data: ${typeof record === 'string' ? record : JSON.stringify(record)}\n\n`))
  }
  const response = { id: 'resp_fault', object: 'response', created_at: created, model, status: 'in_progress', output: [], usage: null, error: null, incomplete_details: null }
  const item = { id: 'msg_fault', type: 'message', role: 'assistant', status: 'in_progress', content: [] }
  const text = pieces.join('')
  const done = { ...item, status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }
  const events: Record<string, unknown>[] = [
    { type: 'response.created', response },
    { type: 'response.in_progress', response },
    { type: 'response.output_item.added', output_index: 0, item },
    { type: 'response.content_part.added', item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
    ...pieces.map((delta) => ({ type: 'response.output_text.delta', item_id: item.id, output_index: 0, content_index: 0, delta })),
    { type: 'response.output_text.done', item_id: item.id, output_index: 0, content_index: 0, text },
    { type: 'response.content_part.done', item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } },
    { type: 'response.output_item.done', output_index: 0, item: done },
    {
      type: 'response.completed',
      response: { ...response, status: 'completed', output: [done], usage: { input_tokens: 9, output_tokens: pieces.length, total_tokens: 9 + pieces.length } },
    },
  ]
  return events.map((event, index) => encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: index })}\n\n`))
}

/** One more content record, for drips without an end. */
function dripRecord(dialect: Dialect, model: string, index: number): Uint8Array {
  if (dialect === 'chat') {
    const chunk = { id: 'chatcmpl-fault', object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta: { content: `tick${index} ` }, finish_reason: null }] }
    return encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`)
  }
  const event = { type: 'response.output_text.delta', item_id: 'msg_fault', output_index: 0, content_index: 0, delta: `tick${index} `, sequence_number: 4 + index }
  return encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
}

/** The normal buffered answer for a path. */
function bufferedAnswer(path: string, model: string): unknown {
  if (path.endsWith('/responses')) {
    return {
      id: 'resp_fault',
      object: 'response',
      created_at: created,
      model,
      status: 'completed',
      output: [{ id: 'msg_fault', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello from the fault gateway.', annotations: [] }] }],
      usage: { input_tokens: 9, output_tokens: 6, total_tokens: 15 },
    }
  }
  if (path.endsWith('/embeddings')) {
    return { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }], model, usage: { prompt_tokens: 3, total_tokens: 3 } }
  }
  if (path.endsWith('/models')) return { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'fault' }] }
  return {
    id: 'chatcmpl-fault',
    object: 'chat.completion',
    created,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the fault gateway.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15 },
  }
}

/** The pause before a stream's fault (a bad record, a cut), so it arrives apart from the chunks before it. */
const faultPauseMs = 30

const htmlPage = '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>\n'
const pieces = ['Hel', 'lo', '!']

export async function startFaultGateway(initial: Fault = { mode: 'ok' }): Promise<FaultGateway> {
  const requests: FaultRequest[] = []
  let pick: (request: FaultRequest) => Fault = () => initial
  let openStreams = 0
  let cancelledStreams = 0
  const cancelWaiters: { count: number; resolve: () => void }[] = []
  const noteCancelled = () => {
    cancelledStreams++
    for (const waiter of cancelWaiters.splice(0)) {
      if (cancelledStreams >= waiter.count) waiter.resolve()
      else cancelWaiters.push(waiter)
    }
  }

  /**
   * A stream of `records`, then its `ending`: the normal end, silence until the client lets go, or
   * a cut. `everyMs` paces the records; `endless` makes more content records forever.
   */
  function stream(records: Uint8Array[], ending: 'end' | 'silence' | 'cut', everyMs = 0, endless?: (index: number) => Uint8Array, pauseAt = -1): Response {
    let index = 0
    let open = true
    let release: () => void = () => {}
    const letGo = new Promise<void>((resolve) => (release = resolve))
    const close = () => {
      if (!open) return
      open = false
      openStreams--
    }
    openStreams++
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (index > 0 && everyMs > 0) await Promise.race([Bun.sleep(everyMs), letGo])
        // The fault comes in a chunk of its own, after what came before it has reached the client.
        if (index === pauseAt && index > 0) await Promise.race([Bun.sleep(faultPauseMs), letGo])
        if (!open) return
        if (endless) {
          controller.enqueue(index < records.length ? records[index]! : endless(index - records.length))
          index++
          return
        }
        if (index < records.length) {
          controller.enqueue(records[index++]!)
          return
        }
        if (ending === 'silence') {
          await letGo
          return
        }
        close()
        if (ending === 'cut') controller.error(new Error('fault gateway: connection cut'))
        else controller.close()
      },
      cancel() {
        if (open) noteCancelled()
        close()
        release()
      },
    })
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
  }

  function answer(request: FaultRequest, fault: Fault, signal: AbortSignal): Response | Promise<Response> {
    const model = String(request.body?.model ?? 'fault/model')
    const dialect: Dialect = request.path.endsWith('/responses') ? 'responses' : 'chat'
    const streaming = request.body?.stream === true
    const records = () => streamRecords(dialect, model, pieces)
    const json = JSON.stringify(bufferedAnswer(request.path, model))
    const jsonHeaders = { 'content-type': 'application/json' }
    switch (fault.mode) {
      case 'ok':
        return streaming ? stream(records(), 'end') : new Response(json, { headers: jsonHeaders })
      case 'hang':
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(new Response(null, { status: 499 }))))
      case 'stall':
      case 'reset': {
        const ending = fault.mode === 'stall' ? 'silence' : 'cut'
        if (streaming) return stream(records().slice(0, fault.afterChunks), ending, 0, undefined, fault.afterChunks)
        // Buffered: the first half of the body, then silence or the cut.
        return stream([encoder.encode(json.slice(0, json.length >> 1))], ending, 0, undefined, 1)
      }
      case 'drip':
        if (!streaming) return Bun.sleep(fault.everyMs).then(() => new Response(json, { headers: jsonHeaders }))
        if (fault.chunks === undefined) return stream(records().slice(0, 1), 'end', fault.everyMs, (index) => dripRecord(dialect, model, index))
        return stream(streamRecords(dialect, model, Array.from({ length: fault.chunks }, (_, index) => `tick${index} `)), 'end', fault.everyMs)
      case 'truncated': {
        if (!streaming) return new Response(json.slice(0, json.length >> 1), { headers: jsonHeaders })
        const kept = records().slice(0, fault.afterChunks ?? 2)
        const last = records()[kept.length]!
        return stream([...kept, last.subarray(0, last.byteLength >> 1)], 'end', 0, undefined, kept.length)
      }
      case 'malformed': {
        if (!streaming) return new Response('{"id": "chatcmpl-fault", "choices": [ {"message": oops } ]}', { headers: jsonHeaders })
        const all = records()
        const at = fault.afterChunks ?? 0
        return stream([...all.slice(0, at), encoder.encode('data: {"id":"chatcmpl-fault","choices":[{"delta":{"content":oops}}]}\n\n'), ...all.slice(at)], 'end', 0, undefined, at)
      }
      case 'html':
        return new Response(htmlPage, { headers: { 'content-type': 'text/html; charset=utf-8' } })
      case 'empty':
        return new Response('', { headers: jsonHeaders })
      case 'fixed':
        return new Response(typeof fault.body === 'string' ? fault.body : JSON.stringify(fault.body), {
          status: fault.status ?? 200,
          headers: { 'content-type': fault.contentType ?? 'application/json' },
        })
      case 'echo-auth': {
        const authorization = request.headers.authorization ?? ''
        const key = authorization.replace(/^Bearer\s+/i, '')
        const masked = key.length > 12 ? `${key.slice(0, 8)}${'*'.repeat(24)}${key.slice(-4)}` : '****'
        const body = {
          error: {
            message: `Incorrect API key provided: ${masked}. You can find your API key at https://platform.example/account/api-keys. (Received header: Authorization: ${authorization})`,
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_api_key',
          },
        }
        const headers: Record<string, string> = { ...jsonHeaders }
        if (fault.inHeader) headers['x-ratelimit-echo'] = `key=${key}`
        return new Response(JSON.stringify(body), { status: fault.status ?? 400, headers })
      }
      default: {
        const exhaustive: never = fault
        return exhaustive
      }
    }
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    // Stalled streams are the point: Bun's own idle cut would end them.
    idleTimeout: 0,
    development: false,
    // A cut stream errors on purpose; nothing to report.
    error: () => new Response(null, { status: 500 }),
    async fetch(request) {
      const rawBody = request.method === 'GET' || request.method === 'HEAD' ? '' : await request.text()
      let body: unknown
      try {
        body = rawBody ? JSON.parse(rawBody) : undefined
      } catch {}
      const recorded: FaultRequest = { method: request.method, path: new URL(request.url).pathname, headers: Object.fromEntries(request.headers), body }
      requests.push(recorded)
      return answer(recorded, pick(recorded), request.signal)
    },
  })

  const gateway: FaultGateway = {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    get openStreams() {
      return openStreams
    },
    get cancelledStreams() {
      return cancelledStreams
    },
    waitForCancelled(count) {
      if (cancelledStreams >= count) return Promise.resolve()
      return new Promise((resolve) => cancelWaiters.push({ count, resolve }))
    },
    use(fault) {
      pick = typeof fault === 'function' ? fault : () => fault
    },
    calls: (suffix) => requests.filter((request) => request.path.endsWith(suffix)),
    close: () => server.stop(true),
    [Symbol.asyncDispose]: () => server.stop(true),
  }
  return gateway
}

export interface HeadOnlyGateway extends AsyncDisposable {
  url: string
  /** Requests received (their head was read). */
  readonly requests: number
  close(): void
}

/**
 * An upstream that answers every request with a 200 event-stream head and then nothing, the
 * connection held open: the stall after the head and before the first byte, which Bun.serve
 * cannot produce (it sends the head with the first body byte).
 */
export async function startHeadOnlyGateway(): Promise<HeadOnlyGateway> {
  let requests = 0
  const head = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'
  const listener = Bun.listen<{ answered: boolean; received: string }>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { answered: false, received: '' }
      },
      data(socket, chunk) {
        // Answer once the request head is in (a body after it is not read).
        if (socket.data.answered) return
        socket.data.received += chunk.toString('latin1')
        if (!socket.data.received.includes('\r\n\r\n')) return
        socket.data.answered = true
        requests++
        socket.write(head)
      },
    },
  })
  return {
    url: `http://127.0.0.1:${listener.port}`,
    get requests() {
      return requests
    },
    close: () => listener.stop(true),
    [Symbol.asyncDispose]: async () => listener.stop(true),
  }
}
