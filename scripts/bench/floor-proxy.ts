/**
 * The floor: the least a routed request must cost on this runtime. A Bun.serve hop that does only the
 * work SPEC.md makes mandatory for every request, written as leanly as it can be, through the
 * project's own storage layer:
 * - the key looked up in memory (the router's token cache is a Map too), after a look at whether another
 *   process changed the configuration (CONTRACT §3: a change is seen by the next request), which is
 *   SQLite's PRAGMA data_version at most once a millisecond, as the router's snapshot does,
 * - the JSON body read, parsed and checked for `model` and `messages`,
 * - an abortable upstream call: an AbortController with an attempt timer, and the client's hang-up
 *   forwarded to it,
 * - the buffered answer read whole, its token counts taken from the usage object; a streamed answer
 *   read up to its first record, which is checked (JSON after `data: `) before the client's answer is
 *   committed (SPEC: a stream fails over until its first byte), then piped chunk by chunk,
 * - the request id, provider and attempt count in the response headers,
 * - one request-log row per request, journaled before the answer and written in batches, through
 *   the router's own request-log queue, journal and repository (a SQLite file in WAL mode,
 *   checkpoints on the background worker).
 * No plan, failover, metrics, stage timings, header forwarding, stream idle limit or usage from the
 * stream. Reported beside the bare hop so the
 * router's cost can be read as bare + mandatory work + the rest. Prints `port N`.
 */
import { join } from 'node:path'
import { Metrics } from '../../src/observability/metrics'
import { silentLogger } from '../../src/observability/logger'
import { createRequestLogQueue } from '../../src/pipeline/log/log-request'
import { databaseLogSink } from '../../src/cluster/writer'
import { openStorage } from '../../src/storage/client'
import { createRepositories } from '../../src/storage/repositories'
import { requestJournalDirectory, rowEntry } from '../../src/storage/request-journal'
import { serveOnLoopback } from './serve'

const upstream = process.env.BENCH_UPSTREAM_URL!
/**
 * BENCH_FLOOR_WITHOUT: comma-separated mandatory parts left out (`bench --floor-parts`, which prices
 * each part by what leaving it out saves): log, version, signal, parse, buffer.
 */
const without = new Set((process.env.BENCH_FLOOR_WITHOUT ?? '').split(',').filter(Boolean))
const dataDir = process.env.BENCH_FLOOR_DIR!
const storage = openStorage(join(dataDir, 'floor.db'))
const checkpoints = await storage.startBackgroundCheckpoints({})
const metrics = new Metrics()
const logQueue = createRequestLogQueue(databaseLogSink(createRepositories(storage), metrics), metrics, silentLogger)
logQueue.openJournal(requestJournalDirectory(dataDir))
logQueue.start()

const workspaceId = crypto.randomUUID()
const keyId = crypto.randomUUID()
const providerKeyId = crypto.randomUUID()
const keys = new Map([['rt_live_floor', { id: keyId, workspaceId }]])
const upstreamHeaders = { 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer upstream' }
const streamHeaders = { ...upstreamHeaders, accept: 'text/event-stream' }

const decoder = new TextDecoder()
const abortAttempt = (controller: AbortController) => controller.abort('timeout')
const json = (status: number, body: string) => new Response(body, { status, headers: { 'content-type': 'application/json' } })
let versionCheckedAt = 0
let dataVersion = storage.dataVersion()

/** The request's log row (the same 22 values the router's rows carry). */
function logRow(requestId: string, key: { id: string; workspaceId: string }, model: string, status: number, stream: boolean, startedAt: number, input: number | null, output: number | null) {
  logQueue.push(
    rowEntry({
      id: requestId,
      workspaceId: key.workspaceId,
      keyId: key.id,
      createdAt: Date.now(),
      endpoint: 'chat',
      gateway: 'openai',
      providerKeyId,
      model,
      upstreamModel: model,
      status,
      errorCode: null,
      stream,
      latencyMs: performance.now() - startedAt,
      overheadMs: null,
      ttfbMs: null,
      attempts: 1,
      attemptPath: 'openai:ok',
      stageTimings: null,
      inputTokens: input,
      outputTokens: output,
      clientIp: null,
      requestBody: null,
    }),
  )
}

/** The direct-stream sink Bun hands to pull(). */
interface DirectSink {
  write(chunk: Uint8Array): unknown
  flush(): unknown
  close(): void
}

/** A streamed 2xx answer: its first chunk checked (a whole `data: {...}` line), then piped. */
async function relayStream(upstreamResponse: Response, requestId: string, controller: AbortController, onEnd: () => void): Promise<Response | undefined> {
  const reader = upstreamResponse.body!.getReader()
  const first = await reader.read()
  const text = first.done ? '' : decoder.decode(first.value)
  const lineEnd = text.indexOf('\n')
  if (!text.startsWith('data: ') || lineEnd === -1) return undefined
  JSON.parse(text.slice(6, lineEnd))
  const headers = { 'content-type': 'text/event-stream', 'x-router-request-id': requestId, 'x-router-provider': 'openai', 'x-router-attempts': '1' }
  let ended = false
  const end = () => {
    if (!ended) onEnd()
    ended = true
  }
  return new Response(
    new ReadableStream({
      type: 'direct',
      async pull(sink: DirectSink) {
        try {
          let chunk = first
          while (!chunk.done) {
            sink.write(chunk.value)
            const flushed = sink.flush()
            if (flushed instanceof Promise) await flushed
            chunk = await reader.read()
          }
        } catch {}
        sink.close()
        end()
      },
      cancel() {
        controller.abort('client-closed')
        end()
      },
    } as unknown as UnderlyingDefaultSource<Uint8Array>),
    { status: upstreamResponse.status, headers },
  )
}

serveOnLoopback(async (request) => {
  const startedAt = performance.now()
  const requestId = crypto.randomUUID()
  if (!without.has('version') && startedAt - versionCheckedAt >= 1) {
    versionCheckedAt = startedAt
    const version = storage.dataVersion()
    // Here the router would rebuild its snapshot; the floor's one key never changes.
    if (version !== dataVersion) dataVersion = version
  }
  const authorization = request.headers.get('authorization')
  const key = authorization?.startsWith('Bearer ') ? keys.get(authorization.slice(7)) : undefined
  if (!key) return json(401, '{"error":{"code":"invalid_api_key"}}')
  const bytes = await request.bytes()
  const body = (without.has('parse') ? { model: 'openai/gpt-4o-mini', messages: [], stream: false } : JSON.parse(decoder.decode(bytes))) as { model?: unknown; messages?: unknown; stream?: unknown }
  if (typeof body.model !== 'string' || !Array.isArray(body.messages)) return json(400, '{"error":{"code":"invalid_request"}}')
  const model = body.model
  const signalled = !without.has('signal')
  const controller = new AbortController()
  const timer = signalled ? setTimeout(abortAttempt, 60_000, controller) : undefined
  const hangUp = () => controller.abort('client-closed')
  if (signalled) request.signal.addEventListener('abort', hangUp)
  let upstreamResponse: Response
  let answer: ArrayBuffer
  try {
    upstreamResponse = await fetch(upstream + '/v1/chat/completions', { method: 'POST', headers: body.stream === true ? streamHeaders : upstreamHeaders, body: bytes, signal: signalled ? controller.signal : undefined })
    if (body.stream === true && upstreamResponse.ok) {
      const relayed = await relayStream(upstreamResponse, requestId, controller, () => logRow(requestId, key, model, 200, true, startedAt, null, null))
      return relayed ?? json(502, '{"error":{"code":"all_targets_failed"}}')
    }
    if (without.has('buffer')) {
      if (!without.has('log')) logRow(requestId, key, model, upstreamResponse.status, false, startedAt, null, null)
      return new Response(upstreamResponse.body, {
        status: upstreamResponse.status,
        headers: { 'content-type': upstreamResponse.headers.get('content-type') ?? 'application/json', 'x-router-request-id': requestId, 'x-router-provider': 'openai', 'x-router-attempts': '1' },
      })
    }
    answer = await upstreamResponse.arrayBuffer()
  } catch {
    return json(502, '{"error":{"code":"all_targets_failed"}}')
  } finally {
    if (signalled) {
      clearTimeout(timer)
      request.signal.removeEventListener('abort', hangUp)
    }
  }
  const tail = decoder.decode(new Uint8Array(answer, Math.max(0, answer.byteLength - 300)))
  const input = /"prompt_tokens":\s*(\d+)/.exec(tail)
  const output = /"completion_tokens":\s*(\d+)/.exec(tail)
  if (!without.has('log')) logRow(requestId, key, model, upstreamResponse.status, false, startedAt, input ? Number(input[1]) : null, output ? Number(output[1]) : null)
  return new Response(answer, {
    status: upstreamResponse.status,
    headers: { 'content-type': upstreamResponse.headers.get('content-type') ?? 'application/json', 'x-router-request-id': requestId, 'x-router-provider': 'openai', 'x-router-attempts': '1' },
  })
})

process.on('SIGTERM', async () => {
  logQueue.stop()
  await checkpoints.stop()
  storage.close()
  process.exit(0)
})
