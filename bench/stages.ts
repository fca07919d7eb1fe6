/**
 * Per-stage micro-benchmarks of the hot path (`bun run bench --stages`): each stage of a plain
 * buffered chat request, run on its own against the real objects of a configured service (a real
 * SQLite file, a snapshot with a key, the request journal), in ns/op and bytes allocated per op
 * (mitata: bun:jsc's heap counters). Optimisations are decided from this table, not from sampling
 * profiles that attribute idle time.
 */
import { bench, do_not_optimize, run } from 'mitata'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../src/config/env'
import { createRuntime } from '../src/runtime'
import { buildApp } from '../src/app'
import { createWorkspace } from '../src/management/workspaces'
import { silentLogger } from '../src/observability/logger'
import { requestJournalDirectory } from '../src/storage/request-journal'
import { authenticate, presentedKey } from '../src/pipeline/request/authenticate'
import { RequestContext } from '../src/pipeline/request/context'
import { parseJsonBody, readBodyBytes } from '../src/http/read-body'
import { validateChatBody, stripRouterFields, siblingsOf } from '../src/pipeline/request/prepare-chat'
import { planRoute } from '../src/pipeline/routing/plan-route'
import { readUsageFromBody } from '../src/pipeline/answer/respond'
import { logRequest } from '../src/pipeline/answer/finish'
import { scanReply } from '../src/dialects/reply-shape'
import type { InferenceDeps } from '../src/pipeline/types'
import type { StageRun } from '../src/pipeline/stages/stage'
import { admitLimited } from '../src/pipeline/limits/admission'
import { guardedPrompt, personalDataGuardrails } from '../scripts/bench/guardrail-set'

/** The guardrails stage line (scripts/bench.ts reads its budget from it). */
export const guardrailsStageName = 'guardrails: the personal-data set over a 1 KB prompt (scan + mask)'

const heapSuffix = ' (heap)'

export interface StageResult {
  stage: string
  nsPerOp: number
  bytesPerOp: number | undefined
}

const chatBody = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(900) }] })
const completion = new TextEncoder().encode(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'y'.repeat(600) }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 230, completion_tokens: 150, total_tokens: 380 },
  }),
).buffer as ArrayBuffer

/**
 * ns per op of `op` run as requests run: a turn of the event loop every 16 ops (what a server's I/O
 * gives it), less what the same turns cost without the op; the median of 15 rounds of 2,048 ops.
 * `prepare` makes, before a round is timed, what each of its ops takes as a request would have it
 * already (its context, its parsed body).
 */
async function perOpWithTurns(prepare: (ops: number) => void, op: () => unknown): Promise<number> {
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve))
  const ops = 2048
  const round = async (withOp: boolean) => {
    if (withOp) prepare(ops)
    const started = performance.now()
    for (let index = 0; index < ops; index++) {
      if (withOp) await op()
      if (index % 16 === 15) await turn()
    }
    return performance.now() - started
  }
  for (let warm = 0; warm < 3; warm++) {
    await round(true)
    await round(false)
  }
  const differences: number[] = []
  for (let index = 0; index < 15; index++) differences.push((await round(true)) - (await round(false)))
  differences.sort((left, right) => left - right)
  return (differences[7]! * 1e6) / ops
}

export async function runStages(): Promise<StageResult[]> {
  /** Stages timed by perOpWithTurns instead of mitata. */
  const timedWithTurns = new Map<string, { prepare: (ops: number) => void; run: () => Promise<void> }>()
  let cacheStoreClose: (() => Promise<void>) | undefined
  const dataDir = mkdtempSync(join(tmpdir(), 'router-stages-'))
  const config = loadConfig({ RT_DATA_DIR: dataDir, RT_MASTER_KEY: Buffer.alloc(32, 3).toString('base64'), RT_LOG_LEVEL: 'error' })
  const runtime = createRuntime(config, { logger: silentLogger })
  runtime.logQueue.openJournal(requestJournalDirectory(config.dataDir))
  try {
    const { management_key: managementKey } = createWorkspace(runtime, 'bench')
    const app = buildApp(runtime)
    const manage = async (path: string, body: unknown) => {
      const response = await app.handle(new Request(`http://bench${path}`, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }))
      return ((await response.json()) as { data: any }).data
    }
    const provider = await manage('/api/v1/providers', { gateway: 'openai', key: 'sk-bench-upstream' })
    const key = await manage('/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.id }] } })
    const deps = runtime as unknown as InferenceDeps
    const snapshot = runtime.snapshots.current()
    const headers = new Headers({ authorization: `Bearer ${key.key}`, 'content-type': 'application/json' })
    const token = presentedKey(headers, null)
    const caller = () => undefined
    const authenticated = authenticate(snapshot, token, caller, Date.now())
    const entry = authenticated.key
    const providerEntry = snapshot.providers.get(provider.id)!
    const chatBytes = new TextEncoder().encode(chatBody)
    const stages: [string, () => unknown][] = []
    const stage = (name: string, fn: () => unknown) => void stages.push([name, fn])

    stage('authenticate (token cache warm)', () => do_not_optimize(authenticate(snapshot, presentedKey(headers, null), caller, Date.now())))
    stage('request context', () => do_not_optimize(new RequestContext('chat', 'chat', undefined, undefined, false)))
    stage('body read + parse (~1 KB)', async () => {
      const request = new Request('http://bench/v1/chat/completions', { method: 'POST', headers, body: chatBody })
      const parsed = parseJsonBody(await readBodyBytes(request))
      const body = validateChatBody(parsed.value)
      do_not_optimize(stripRouterFields(body))
      do_not_optimize(siblingsOf(body))
    })
    stage('body parse only (bytes in hand)', () => do_not_optimize(validateChatBody(parseJsonBody(chatBytes).value)))
    stage('plan (uncached)', () =>
      do_not_optimize(
        planRoute({
          rule: entry.rule,
          keyFailoverTtfbMs: entry.failoverTtfbMs,
          keyUpstreamTimeoutMs: entry.upstreamTimeoutMs,
          model: 'openai/gpt-4o-mini',
          operation: 'chat',
          providers: snapshot.providers,
          gatewayEnabled: snapshot.gatewayEnabled,
          catalogs: snapshot.catalogs,
          budgets: snapshot.budgets,
          now: Date.now(),
          random: Math.random,
        }),
      ),
    )
    stage('upstream request build', () => do_not_optimize(new Request(`${providerEntry.baseUrl}/chat/completions`, { method: 'POST', headers: providerEntry.postHeaders.json, body: chatBytes })))
    stage('reply check (scan, no parse)', () => scanReply('chat', completion))
    stage('usage read (body tail)', () => {
      const context = new RequestContext('chat', 'chat', undefined, undefined, false)
      readUsageFromBody(completion, context)
      do_not_optimize(context.inputTokens)
    })
    stage('response + headers', () => {
      const context = new RequestContext('chat', 'chat', undefined, undefined, false)
      context.headers['x-router-provider'] = 'openai'
      context.headers['content-type'] = 'application/json'
      do_not_optimize(new Response(completion, { status: 200, headers: context.responseHeaders() }))
    })
    stage('log enqueue (journal record) + metrics', () => {
      const context = new RequestContext('chat', 'chat', undefined, undefined, false)
      context.key = entry
      context.workspace = authenticated.workspace
      context.model = 'openai/gpt-4o-mini'
      context.gateway = 'openai'
      context.readyAt = performance.now()
      logRequest(context, deps, 200, undefined)
    })

    // A key with limits (CONTRACT §11): its admission (worst case priced over the plan, the ledger's
    // windows) and its settlement, which a key without limits never reaches. A key without limits
    // pays one property read for all of it (answer.ts). The ledger is read again now and then,
    // as the sync timer does, so the own shares of logged requests leave it.
    runtime.repositories.gatewayCatalogs.replaceCatalog('openai', Date.now(), [
      { modelId: 'gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: JSON.stringify({ id: 'gpt-4o-mini', pricing: { prompt: '0.00000015', completion: '0.0000006' } }) },
    ])
    const limitedKey = await manage('/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.id }] } })
    await app.handle(
      new Request(`http://bench/api/v1/keys/${limitedKey.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ limits: { requests_per_minute: 1_000_000_000, tokens_per_minute: 1_000_000_000, usd_per_day: 1_000_000 } }),
      }),
    )
    const limitedSnapshot = await runtime.snapshots.fresh()
    const limitedHeaders = new Headers({ authorization: `Bearer ${limitedKey.key}` })
    const limited = authenticate(limitedSnapshot, presentedKey(limitedHeaders, null), caller, Date.now())
    const parsedChat = { model: 'openai/gpt-4o-mini', stream: false, operation: 'chat' as const, upstreamBody: JSON.parse(chatBody) as Record<string, unknown>, siblings: { adRequest: undefined, linkRequest: undefined } }
    let admitted = 0
    const settleLimited = (context: import('../src/pipeline/request/context').AuthenticatedContext) => {
      const ticket = (context.limited as import('../src/pipeline/limits/admission').LimitedRequest).ticket!
      runtime.limiter.settle(ticket, 380, 126_000)
      // The sync timer's read (once a second in the service, whatever the rate): amortised here.
      if (++admitted % 65536 === 0) return runtime.limiter.sync()
    }
    // One context for all (its making is the 'request context' line): only what admission sets is reset.
    const limitedContext = new RequestContext('chat', 'chat', undefined, undefined, false) as import('../src/pipeline/request/context').AuthenticatedContext
    limitedContext.key = limited.key
    limitedContext.workspace = limited.workspace
    limitedContext.snapshot = limitedSnapshot
    limitedContext.requestBody = chatBody
    stage('limits: admit + settle (a key with limits only)', () => {
      const context = limitedContext
      context.limited = undefined
      const refusal = admitLimited(context, deps, limited.key.limits!, parsedChat)
      if (refusal instanceof Promise) return refusal.then(() => settleLimited(context))
      do_not_optimize(refusal)
      return settleLimited(context)
    })

    // A key with a response cache (CONTRACT §15): a miss's work on the serving thread — the entry key
    // (the canonical request, serialised and hashed), the indexed read that misses, the flight
    // identical requests would wait on, and, when the answer is in, its decoding into the neutral
    // form and its queueing for the cache's writer thread. A key without a cache pays none of it.
    const cachedKey = await manage('/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.id }] }, cache: { ttl_seconds: 3600 } })
    // The serving thread's share: a store whose writer thread answers each batch without writing it.
    const { CacheStore } = await import('../src/storage/cache-store')
    const cacheStore = new CacheStore(join(dataDir, 'bench-cache.db'), {
      maxBytes: 256 * 1024 * 1024,
      pruneEveryMs: 0,
      writer: { beside: new URL('./cache-writer-stub.ts', import.meta.url), underSrc: './bench/cache-writer-stub.ts' },
    })
    const cacheDeps: InferenceDeps = { ...deps, cache: { open: () => cacheStore } }
    cacheStoreClose = () => cacheStore.close()
    const cachedSnapshot = await runtime.snapshots.fresh()
    const cached = authenticate(cachedSnapshot, presentedKey(new Headers({ authorization: `Bearer ${cachedKey.key}` }), null), caller, Date.now())
    const { responseCacheStage } = await import('../src/pipeline/stages/cache/stage')
    const { chatDialect } = await import('../src/pipeline/endpoints/dialect-endpoints')
    const cacheRequestHeaders = new Headers({ 'content-type': 'application/json' })
    // A question of ~1 KB as a client's JSON makes it (flat strings), asked with a new seed each time: every op misses.
    const flatMessages = JSON.parse(JSON.stringify([{ role: 'user', content: 'x'.repeat(900) }])) as unknown[]
    const servedStep = { kind: 'attempt' as const, provider: providerEntry, gateway: 'openai', model: 'gpt-4o-mini', remap: false, failoverTimeoutMs: 60_000, upstreamTimeoutMs: 60_000 }
    const answered = { kind: 'success', step: servedStep, replyKind: 'chat', response: new Response(null), body: completion, value: undefined, stream: undefined, controller: new AbortController(), startedAt: 0, headersAt: 0, failures: [], attempts: 1, path: [] } as unknown as import('../src/pipeline/routing/run-attempts').RunResult
    let missed = 0
    const answer = () => Promise.resolve(answered)
    const missName = 'cache: a miss (a key with a cache only)'
    type Asked = { context: import('../src/pipeline/request/context').AuthenticatedContext; parsed: typeof parsedChat }
    /** A request as the answer path has it when the chain opens: its context, its body parsed (the plain path makes them too). */
    const ask = (): Asked => {
      const context = new RequestContext('chat', 'chat', undefined, undefined, false) as Asked['context']
      context.key = cached.key
      context.workspace = cached.workspace
      context.snapshot = cachedSnapshot
      return { context, parsed: { ...parsedChat, upstreamBody: { model: 'openai/gpt-4o-mini', messages: flatMessages, seed: ++missed } } }
    }
    const miss = async ({ context, parsed }: Asked) => {
      const run = responseCacheStage.open!({ context, deps: cacheDeps, parsed, dialect: chatDialect, clientSignal: undefined, deadlineAt: performance.now() + 60_000, requestHeaders: cacheRequestHeaders, answered: false }) as StageRun
      do_not_optimize(run.beforeRouting!(parsed))
      await run.wrapCall!({} as never, answer)
      // What the answer path records of a served answer (the plain path does the same).
      context.gateway = 'openai'
      context.providerKeyId = provider.id
      context.status = 200
      context.costNanoUsd = 126_000
      run.finished!(context)
    }
    // Its time is taken as requests run (perOpWithTurns): the store posts its queued writes to its
    // thread once per turn of the event loop, which the micro-benchmark's loop would not give it.
    // Its bytes are mitata's, with the queue posted at each op (the writes of millions of ops
    // queued at once would be the heap's growth, not the stage's).
    let asked: Asked[] = []
    let next = 0
    timedWithTurns.set(missName, {
      prepare: (ops) => {
        asked = Array.from({ length: ops }, ask)
        next = 0
      },
      run: () => miss(asked[next++]!),
    })
    const postQueued = () => (cacheStore as unknown as { send(): void }).send()
    stage(missName, async () => {
      await miss(ask())
      postQueued()
    })

    // Guardrails (CONTRACT §17): the personal-data set over a 1 KB prompt on the serving thread —
    // every text scanned by the six detectors, the matches masked with their placeholders, the body
    // written anew. A key without guardrails pays none of it (its chain has no such stage).
    const guardedKey = await manage('/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.id }] }, guardrails: personalDataGuardrails })
    const guardedSnapshot = await runtime.snapshots.fresh()
    const guarded = authenticate(guardedSnapshot, presentedKey(new Headers({ authorization: `Bearer ${guardedKey.key}` }), null), caller, Date.now())
    const { guardrailsStage } = await import('../src/pipeline/stages/guardrails/stage')
    const guardedContext = new RequestContext('chat', 'chat', undefined, undefined, false) as import('../src/pipeline/request/context').AuthenticatedContext
    guardedContext.key = guarded.key
    guardedContext.workspace = guarded.workspace
    guardedContext.snapshot = guardedSnapshot
    const guardedParsed = { ...parsedChat, upstreamBody: { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: guardedPrompt }] } }
    stage(guardrailsStageName, () => {
      const run = guardrailsStage.open!({ context: guardedContext, deps, parsed: guardedParsed, dialect: { name: 'chat', enriched: true }, clientSignal: undefined, deadlineAt: 0, requestHeaders: cacheRequestHeaders, answered: false }) as StageRun
      do_not_optimize(run.rewrite!(guardedParsed))
    })

    // Traces on at 100% sampling (CONTRACT §13): what a traced request adds, its SERVER span and one
    // CLIENT span made, attributed and ended, the attempt's traceparent written, both handed to the
    // batch processor (its exporter here takes the batches and drops them: the export is off the
    // request path, on the processor's timer). Off, a request pays two property reads for all of it.
    const { RouterTracing } = await import('../src/observability/tracing')
    const tracing = new RouterTracing(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_SAMPLER: 'always_on' }).tracing!, silentLogger, {
      export: (_spans, done) => done({ code: 0 }),
      shutdown: () => Promise.resolve(),
    })
    const inbound = new Headers({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })
    stage('traces on: request span + one attempt span (100% sampled)', () => {
      const span = tracing.startRequest('chat', inbound, Date.now())
      const attempt = tracing.startAttempt(span, 'chat', 'openai', 'gpt-4o-mini')
      do_not_optimize(attempt.traceparent)
      tracing.endAttempt(attempt.span, 'ok', 200)
      tracing.endRequest(span, {
        endpoint: 'chat',
        status: 200,
        errorCode: undefined,
        requestId: 'bench-request',
        keyId: entry.id,
        model: 'openai/gpt-4o-mini',
        gateway: 'openai',
        upstreamModel: 'gpt-4o-mini',
        responseModel: 'gpt-4o-mini-2024-07-18',
        inputTokens: 230,
        outputTokens: 150,
        attempts: 1,
      })
    })

    // Each stage twice: timed as it runs (no forced collection inside the loop, which would be timed
    // too), then with a collection around each iteration so the heap growth is the stage's own bytes.
    // Timed before mitata's runs, on the heap the service would have (theirs grow it).
    const timed = new Map<string, number>()
    for (const [name, op] of timedWithTurns) timed.set(name, await perOpWithTurns(op.prepare, op.run))
    for (const [name, fn] of stages) {
      bench(name, fn)
      bench(`${name}${heapSuffix}`, fn).gc('inner')
    }
    const report = (await run({ format: 'quiet' as never, throw: true })) as unknown as { benchmarks: { alias: string; runs: { stats?: { avg: number; heap?: { avg: number } } }[] }[] }
    const results = new Map<string, StageResult>()
    for (const benchmark of report.benchmarks) {
      const stats = benchmark.runs[0]?.stats
      if (!stats) continue
      const name = benchmark.alias.endsWith(heapSuffix) ? benchmark.alias.slice(0, -heapSuffix.length) : benchmark.alias
      const result = results.get(name) ?? { stage: name, nsPerOp: 0, bytesPerOp: undefined }
      if (benchmark.alias.endsWith(heapSuffix)) result.bytesPerOp = stats.heap?.avg
      else result.nsPerOp = stats.avg
      results.set(name, result)
    }
    for (const [name, ns] of timed) results.get(name)!.nsPerOp = ns
    // The queue's rows go to SQLite, as its timer would have done.
    runtime.logQueue.flush()
    return [...results.values()]
  } finally {
    await cacheStoreClose?.()
    runtime.logQueue.stop()
    runtime.storage.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export function stagesTable(results: readonly StageResult[]): string {
  const lines = ['| stage | ns/op | bytes/op |', '|---|---:|---:|']
  for (const result of results) lines.push(`| ${result.stage} | ${Math.round(result.nsPerOp)} | ${result.bytesPerOp === undefined ? 'n/a' : Math.round(result.bytesPerOp)} |`)
  return lines.join('\n')
}

if (import.meta.main) process.stdout.write(stagesTable(await runStages()) + '\n')
