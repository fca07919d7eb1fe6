/**
 * A scripted upstream for stream tests: a real Bun.serve on 127.0.0.1 whose every answer a test
 * writes per request — a status and JSON body, or an event stream in pieces (text, or bytes to split
 * a UTF-8 character or a record anywhere) that then ends, is cut (the body ends in error) or is held
 * open until the router lets go. Requests are recorded with their parsed bodies. Builders write the
 * chat and Responses streams of an answer piece by piece.
 */
import { afterAll, beforeAll, beforeEach } from 'bun:test'
import { gatewayOverrideSlug } from '../../src/gateways/catalog'
import { storeProvider } from './api'
import { startTestServer, type TestServer } from './server'

export interface ScriptRequest {
  path: string
  body: any
}

export interface Scripted {
  /** A buffered answer: this status (200) and JSON body. */
  status?: number
  json?: unknown
  /** An event stream: each piece one write, a few milliseconds apart. */
  pieces?: (string | Uint8Array)[]
  /** After the pieces: end the body (default), cut the connection, or hold it open. */
  then?: 'end' | 'cut' | 'hold'
}

export interface ScriptGateway {
  url: string
  requests: ScriptRequest[]
  /** Sets the answer to each request (`index`: the request's number at this gateway, from 0). */
  use(answer: (request: ScriptRequest, index: number) => Scripted): void
  /** Streams the router let go of before their end. */
  readonly cancelled: number
  close(): void
}

const encoder = new TextEncoder()
/** How long a cut waits after the last piece. */
const cutAfterMs = 100

export function startScriptGateway(pieceGapMs = 5): ScriptGateway {
  let answer: (request: ScriptRequest, index: number) => Scripted = () => ({ status: 500, json: { error: { message: 'no script' } } })
  const requests: ScriptRequest[] = []
  let cancelled = 0
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    development: false,
    async fetch(request) {
      const text = await request.text()
      let body: any
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = text
      }
      const recorded = { path: new URL(request.url).pathname, body }
      const index = requests.length
      requests.push(recorded)
      const scripted = answer(recorded, index)
      if (!scripted.pieces) return Response.json(scripted.json ?? {}, { status: scripted.status ?? 200 })
      const pieces = scripted.pieces.map((piece) => (typeof piece === 'string' ? encoder.encode(piece) : piece))
      let at = 0
      let open = true
      let release: () => void = () => {}
      const letGo = new Promise<void>((resolve) => (release = resolve))
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (at > 0) await Promise.race([Bun.sleep(pieceGapMs), letGo])
          if (!open) return
          if (at < pieces.length) {
            controller.enqueue(pieces[at++]!)
            return
          }
          if (scripted.then === 'hold') {
            await letGo
            return
          }
          open = false
          // Bun's fetch drops bytes it received but had not yet handed over when the connection is
          // reset: the cut waits until the reader has surely taken what came before it.
          if (scripted.then === 'cut') await Promise.race([Bun.sleep(cutAfterMs), letGo])
          if (scripted.then === 'cut') controller.error(new Error('script gateway: connection cut'))
          else controller.close()
        },
        cancel() {
          if (open) cancelled++
          open = false
          release()
        },
      })
      return new Response(stream, { status: scripted.status ?? 200, headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    requests,
    use(next) {
      answer = next
    },
    get cancelled() {
      return cancelled
    },
    close() {
      server.stop(true)
    },
  }
}

/** One SSE record of `data`. */
export const sseRecord = (data: unknown) => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`

export interface ChatStreamOptions {
  id?: string
  model?: string
  /** The finish reason and usage after the texts (omit for a stream that breaks). */
  finish?: string
  usage?: { prompt_tokens: number; completion_tokens: number }
  reasoning?: string[]
}

/** A chat stream's records: the role chunk, optional reasoning, one chunk per text, and (with `finish`) the end. */
export function chatStream(texts: string[], options: ChatStreamOptions = {}): string[] {
  const base = { id: options.id ?? 'chatcmpl-upstream', object: 'chat.completion.chunk', created: 1_700_000_000, model: options.model ?? 'gpt-4o-mini' }
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => sseRecord({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
  const records = [chunk({ role: 'assistant', content: '' })]
  for (const piece of options.reasoning ?? []) records.push(chunk({ reasoning_content: piece }))
  for (const text of texts) records.push(chunk({ content: text }))
  if (options.finish) {
    records.push(chunk({}, options.finish))
    if (options.usage) records.push(sseRecord({ ...base, choices: [], usage: { ...options.usage, total_tokens: options.usage.prompt_tokens + options.usage.completion_tokens } }))
    records.push(sseRecord('[DONE]'))
  }
  return records
}

/** A Responses stream's events: created, the text deltas, and (with `complete`) the completed event with usage. */
export function responsesStream(texts: string[], complete?: { input_tokens: number; output_tokens: number }, id = 'resp_upstream'): string[] {
  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  const response = { id, object: 'response', created_at: 1_700_000_000, model: 'gpt-4o-mini', status: 'in_progress', output: [] }
  const records = [event('response.created', { response })]
  records.push(event('response.output_item.added', { output_index: 0, item: { id: 'msg_1', type: 'message', role: 'assistant', content: [] } }))
  for (const text of texts) records.push(event('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: text }))
  if (complete) {
    const whole = texts.join('')
    records.push(
      event('response.completed', {
        response: {
          ...response,
          status: 'completed',
          output: [{ id: 'msg_1', type: 'message', role: 'assistant', content: [{ type: 'output_text', text: whole, annotations: [] }] }],
          usage: { ...complete, total_tokens: complete.input_tokens + complete.output_tokens },
        },
      }),
    )
  }
  return records
}

/** A client stream's text without its comment records (each a record of its own), and the comment lines. */
export function withoutComments(text: string): { text: string; comments: string[] } {
  const records = text.split('\n\n')
  return { text: records.filter((record) => !record.startsWith(':')).join('\n\n'), comments: records.filter((record) => record.startsWith(':')).map((record) => record.trim()) }
}

/** A test server whose gateway kinds are scripted upstreams, each with a stored provider key. */
export interface ScriptedService<K extends string> extends AsyncDisposable {
  server: TestServer
  gateways: Record<K, ScriptGateway>
  /** Each kind's provider key id. */
  providers: Record<K, string>
  /** Forgets the requests the gateways recorded. */
  reset(): void
}

/**
 * Starts a scripted upstream per kind (`name → gateway kind`, or with its gap between pieces) and a
 * test server whose gateway URLs point at them, and stores a provider key for each.
 */
export async function startScriptedService<K extends string>(kinds: Record<K, string | { gateway: string; gapMs: number }>, environment: Record<string, string> = {}): Promise<ScriptedService<K>> {
  const gateways = {} as Record<K, ScriptGateway>
  const overrides: Record<string, string> = {}
  const names = Object.keys(kinds) as K[]
  const gatewayOf = (name: K) => {
    const kind = kinds[name]
    return typeof kind === 'string' ? kind : kind.gateway
  }
  for (const name of names) {
    const kind = kinds[name]
    gateways[name] = startScriptGateway(typeof kind === 'string' ? undefined : kind.gapMs)
    overrides[`RT_GATEWAY_URL_${gatewayOverrideSlug(gatewayOf(name))}`] = gateways[name].url
  }
  const server = await startTestServer({ ...overrides, ...environment })
  const providers = {} as Record<K, string>
  for (const name of names) providers[name] = (await storeProvider(server, { gateway: gatewayOf(name), key: `sk-test-${name}-0123456789abcdef` })).id
  return {
    server,
    gateways,
    providers,
    reset() {
      for (const gateway of Object.values<ScriptGateway>(gateways)) gateway.requests.length = 0
    },
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]()
      for (const gateway of Object.values<ScriptGateway>(gateways)) gateway.close()
    },
  }
}

/**
 * A suite's scripted service: started before its tests and handed to `use` (which keeps what the
 * tests read), its gateways' recorded requests forgotten before each test, stopped after the last.
 */
export function useScriptedService<K extends string>(
  kinds: Record<K, string | { gateway: string; gapMs: number }>,
  use: (service: ScriptedService<K>) => void | Promise<void>,
  environment: Record<string, string> = {},
): void {
  let service: ScriptedService<K> | undefined
  beforeAll(async () => {
    service = await startScriptedService(kinds, environment)
    await use(service)
  })
  afterAll(() => service?.[Symbol.asyncDispose]())
  beforeEach(() => service?.reset())
}
