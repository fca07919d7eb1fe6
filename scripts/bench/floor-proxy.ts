/**
 * The floor: the least a routed request must cost on this runtime. A Bun.serve hop that does only the
 * work SPEC.md makes mandatory for every request, written as leanly as it can be, through the
 * project's own storage layer:
 * - the key looked up in memory (the router's token cache is a Map too),
 * - the JSON body read, parsed and checked for `model` and `messages`,
 * - an abortable upstream call: an AbortController with an attempt timer, and the client's hang-up
 *   forwarded to it,
 * - the buffered answer read whole, its token counts taken from the usage object,
 * - the request id, provider and attempt count in the response headers,
 * - one request-log row per request, journaled before the answer and written in batches, through
 *   the router's own request-log queue, journal and repository (a SQLite file in WAL mode,
 *   checkpoints on the background worker).
 * No plan, failover, metrics, stage timings or header forwarding. Reported beside the bare hop so the
 * router's cost can be read as bare + mandatory work + the rest. Prints `port N`.
 */
import { join } from 'node:path'
import { Metrics } from '../../src/observability/metrics'
import { silentLogger } from '../../src/observability/logger'
import { createRequestLogQueue } from '../../src/pipeline/log-request'
import { databaseLogSink } from '../../src/cluster/writer'
import { openStorage } from '../../src/storage/client'
import { createRepositories } from '../../src/storage/repositories'
import { requestJournalDirectory, rowEntry } from '../../src/storage/request-journal'
import { serveOnLoopback } from './serve'

const upstream = process.env.BENCH_UPSTREAM_URL!
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

const decoder = new TextDecoder()
const abortAttempt = (controller: AbortController) => controller.abort('timeout')
const json = (status: number, body: string) => new Response(body, { status, headers: { 'content-type': 'application/json' } })

serveOnLoopback(async (request) => {
  const startedAt = performance.now()
  const requestId = crypto.randomUUID()
  const authorization = request.headers.get('authorization')
  const key = authorization?.startsWith('Bearer ') ? keys.get(authorization.slice(7)) : undefined
  if (!key) return json(401, '{"error":{"code":"invalid_api_key"}}')
  const bytes = await request.bytes()
  const body = JSON.parse(decoder.decode(bytes)) as { model?: unknown; messages?: unknown }
  if (typeof body.model !== 'string' || !Array.isArray(body.messages)) return json(400, '{"error":{"code":"invalid_request"}}')
  const controller = new AbortController()
  const timer = setTimeout(abortAttempt, 60_000, controller)
  const hangUp = () => controller.abort('client-closed')
  request.signal.addEventListener('abort', hangUp)
  let upstreamResponse: Response
  let answer: ArrayBuffer
  try {
    upstreamResponse = await fetch(upstream + '/v1/chat/completions', { method: 'POST', headers: upstreamHeaders, body: bytes, signal: controller.signal })
    answer = await upstreamResponse.arrayBuffer()
  } catch {
    return json(502, '{"error":{"code":"all_targets_failed"}}')
  } finally {
    clearTimeout(timer)
    request.signal.removeEventListener('abort', hangUp)
  }
  const tail = decoder.decode(new Uint8Array(answer, Math.max(0, answer.byteLength - 300)))
  const input = /"prompt_tokens":\s*(\d+)/.exec(tail)
  const output = /"completion_tokens":\s*(\d+)/.exec(tail)
  logQueue.push(
    rowEntry({
      id: requestId,
      workspaceId: key.workspaceId,
      keyId: key.id,
      createdAt: Date.now(),
      endpoint: 'chat',
      gateway: 'openai',
      providerKeyId,
      model: body.model,
      upstreamModel: body.model,
      status: upstreamResponse.status,
      errorCode: null,
      stream: false,
      latencyMs: performance.now() - startedAt,
      overheadMs: null,
      ttfbMs: null,
      attempts: 1,
      attemptPath: 'openai:ok',
      stageTimings: null,
      inputTokens: input ? Number(input[1]) : null,
      outputTokens: output ? Number(output[1]) : null,
      clientIp: null,
      requestBody: null,
    }),
  )
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
