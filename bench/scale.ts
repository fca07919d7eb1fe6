/**
 * Costs as data grows (`bun run bench --scale`): the configuration snapshot's rebuild with 10, 1,000
 * and 10,000 inference keys beside 1,000 provider keys, and the usage queries over 30 days with
 * 10⁴, 10⁶ and 10⁷ request-log rows (written as the log queue writes them, roll-ups included), each
 * on a real SQLite file. Prints a Markdown table; `--scale-rows N` caps the largest row count.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../src/config/env'
import { createRuntime, type Runtime } from '../src/runtime'
import { createWorkspace } from '../src/management/workspaces'
import { silentLogger } from '../src/observability/logger'
import { hashSecret } from '../src/storage/crypto'
import { inferenceKeys, providerKeys, routingTargets } from '../src/storage/schema'
import type { RequestLogRow } from '../src/storage/repositories/request-logs'
import { usageBreakdown, usageSeries, usageSummary } from '../src/management/usage'
import type { Actor } from '../src/management/context'
import { drain, load, managementClient, percentile, readLine, type Child } from '../scripts/bench/children'
import type { RetentionCommand, RetentionReply } from './retention-worker'
import type { LogEntry } from '../src/pipeline/log/log-request'

const repoRoot = join(import.meta.dir, '..')

export interface ScaleLine {
  what: string
  size: string
  ms: number
}

const dayMs = 86_400_000

async function withRuntime<T>(run: (runtime: Runtime) => T | Promise<T>, environment: Record<string, string> = {}): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), 'router-scale-'))
  const runtime = createRuntime(loadConfig({ RT_DATA_DIR: dataDir, RT_MASTER_KEY: Buffer.alloc(32, 5).toString('base64'), RT_LOG_LEVEL: 'error', ...environment }), { logger: silentLogger })
  try {
    return await run(runtime)
  } finally {
    runtime.reads.close()
    runtime.snapshots.close()
    runtime.storage.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** The median of `runs` timings of `fn` (awaited), ms. */
async function median(runs: number, fn: () => unknown): Promise<number> {
  const times: number[] = []
  for (let run = 0; run < runs; run++) {
    const started = performance.now()
    await fn()
    times.push(performance.now() - started)
  }
  times.sort((left, right) => left - right)
  return times[Math.floor(times.length / 2)]!
}

/**
 * The longest the event loop went without a turn while `fn` ran, ms: what a request in flight on
 * the serving thread would have waited. A chain of immediates notes the gap between two turns.
 */
async function loopStall(fn: () => Promise<unknown>): Promise<number> {
  let longest = 0
  let last = performance.now()
  let running = true
  const probe = () => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
    if (running) setImmediate(probe)
  }
  setImmediate(probe)
  await fn()
  running = false
  return longest
}

/** `keyCount` inference keys with two targets each among 1,000 provider keys, written as one transaction. */
function seedKeys(runtime: Runtime, workspaceId: string, keyCount: number) {
  const now = new Date().toISOString()
  const providerIds: string[] = []
  runtime.storage.db.transaction((tx) => {
    for (let index = 0; index < 1_000; index++) {
      const id = crypto.randomUUID()
      providerIds.push(id)
      tx.insert(providerKeys).values({ id, workspaceId, gateway: index % 2 ? 'openai' : 'groq', secretCiphertext: runtime.secretBox.encrypt(`sk-scale-${index}`), keyLast4: 'abcd', createdAt: now }).run()
    }
    for (let index = 0; index < keyCount; index++) {
      const id = crypto.randomUUID()
      const secret = `rt_live_scale${index}`
      tx.insert(inferenceKeys).values({ id, workspaceId, keyPrefix: secret.slice(0, 16), secretHash: hashSecret(secret), createdAt: now }).run()
      tx.insert(routingTargets).values({ keyId: id, position: 0, providerKeyId: providerIds[index % providerIds.length]!, weight: null, ttfbMs: null }).run()
      tx.insert(routingTargets).values({ keyId: id, position: 1, providerKeyId: providerIds[(index + 1) % providerIds.length]!, weight: null, ttfbMs: null }).run()
    }
  })
  // Another connection's write is seen by a rebuild, not by an invalidation: the runtime's own repositories were bypassed.
  runtime.storage.bumpConfigVersion()
}

function firstKeyId(runtime: Runtime): string {
  return (runtime.storage.sqlite.query('select id from inference_keys limit 1').get() as { id: string }).id
}

/** `rowCount` request-log rows over the last 30 days, as the log queue writes them (roll-ups included). */
function seedLogRows(runtime: Runtime, workspaceId: string, rowCount: number) {
  const now = Date.now()
  const keys = Array.from({ length: 20 }, () => crypto.randomUUID())
  const models = ['openai/gpt-4o-mini', 'openai/gpt-4.1', 'anthropic/claude-sonnet', 'meta-llama/llama-3.1-8b', 'google/gemini-2.5-flash']
  const batch: RequestLogRow[] = []
  for (let index = 0; index < rowCount; index++) {
    batch.push({
      id: `r${index}`,
      workspaceId,
      keyId: keys[index % keys.length]!,
      createdAt: now - Math.floor((index / rowCount) * 30 * dayMs),
      endpoint: 'chat',
      gateway: index % 3 ? 'openai' : 'groq',
      model: models[index % models.length]!,
      status: index % 50 ? 200 : 502,
      stream: false,
      latencyMs: 100 + (index % 400),
      overheadMs: 0.2,
      attempts: 1,
    })
    // In the log queue's batches of 128, in transactions of 8,192 rows (a big flush).
    if (batch.length === 8_192) {
      runtime.repositories.requestLogs.insertMany(batch)
      batch.length = 0
    }
  }
  runtime.repositories.requestLogs.insertMany(batch)
}

async function snapshotRebuilds(lines: ScaleLine[]) {
  for (const keyCount of [10, 1_000, 10_000]) {
    await withRuntime(async (runtime) => {
      const { workspace } = createWorkspace(runtime, 'scale')
      seedKeys(runtime, workspace.id, keyCount)
      const size = `${keyCount.toLocaleString('en')} keys`
      const rebuilt = () => {
        runtime.snapshots.invalidate()
        return runtime.snapshots.fresh()
      }
      // The first build reads in place (start-up); the rest are the background rebuilds a write starts.
      runtime.snapshots.current()
      await rebuilt()
      lines.push({ what: 'snapshot rebuild (1,000 provider keys), write to swap', size, ms: await median(5, rebuilt) })
      const stalls: number[] = []
      for (let run = 0; run < 5; run++) stalls.push(await loopStall(async () => rebuilt()))
      lines.push({ what: 'event-loop stall during the rebuild', size, ms: stalls.sort((left, right) => left - right)[2]! })
      // A key written by this process: its row read again and the snapshot swapped, on the serving thread.
      const keyId = firstKeyId(runtime)
      lines.push({ what: "one key's write by this process: row read again + swap", size, ms: await median(5, () => runtime.snapshots.invalidate({ table: 'keys', id: keyId })) })
    })
  }
}

async function usageQueries(lines: ScaleLine[], maxRows: number) {
  for (const rowCount of [10_000, 1_000_000, 10_000_000].filter((count) => count <= maxRows)) {
    await withRuntime(async (runtime) => {
      const { workspace } = createWorkspace(runtime, 'scale')
      const actor = { workspaceId: workspace.id, readOnly: true } as unknown as Actor
      seedLogRows(runtime, workspace.id, rowCount)
      const query = { range: '30d' }
      const size = `${rowCount.toLocaleString('en')} rows`
      // The first query starts the read thread: not a query's cost.
      await usageSummary(runtime, actor, query)
      lines.push({ what: 'GET /usage/summary 30d', size, ms: await median(5, () => usageSummary(runtime, actor, query)) })
      lines.push({ what: 'GET /usage/series 30d', size, ms: await median(5, () => usageSeries(runtime, actor, query)) })
      lines.push({ what: 'GET /usage/breakdown 30d by model', size, ms: await median(5, () => usageBreakdown(runtime, actor, { ...query, by: 'model' })) })
      // The queries run on the read thread: the serving thread's longest wait while all three run.
      const stall = await loopStall(() => Promise.all([usageSummary(runtime, actor, query), usageSeries(runtime, actor, query), usageBreakdown(runtime, actor, { ...query, by: 'model' })]))
      lines.push({ what: 'event-loop stall while the three run', size, ms: stall })
    })
  }
}

/**
 * Inference p99 while the configuration changes and while usage queries run (the issue: "inference
 * p99 unchanged (± 10%) while either happens"). The router runs as it is run (scripts/start, its own
 * process) beside the benchmark's mock upstream, with 10,000 inference keys and 1,000 provider keys
 * and `rowCount` request-log rows written from another connection, as the CLI writes. The load is
 * the closed-loop generator at c=16 on a key of its own. Three kinds of window, interleaved round by
 * round so drift cancels: nothing else; a management write (PATCH of a key's label through the API)
 * every 250 ms; the three usage queries over 30 days at once, every 250 ms. (Back to back, the
 * usage queries keep one of this machine's two cores busy, and inference slows for want of CPU,
 * not of the event loop.)
 */
async function inferenceWhileChanging(lines: ScaleLine[], rowCount: number, windowMs: number) {
  const dataDir = mkdtempSync(join(tmpdir(), 'router-scale-load-'))
  const masterKey = Buffer.alloc(32, 5).toString('base64')
  const children: Child[] = []
  try {
    const upstream = Bun.spawn(['bun', join(repoRoot, 'scripts/bench/upstream.ts')], { stdout: 'pipe', stderr: 'inherit' })
    children.push(upstream)
    const upstreamUrl = `http://127.0.0.1:${(await readLine(upstream, /port (\d+)/))[1]}`
    drain(upstream)
    const router = Bun.spawn([join(repoRoot, 'scripts/start')], {
      stdout: 'pipe',
      stderr: 'pipe',
      env: { ...process.env, PORT: '0', RT_DATA_DIR: dataDir, RT_MASTER_KEY: masterKey, RT_LOG_LEVEL: 'warn', RT_SKIP_INSTALL: '1', RT_GATEWAY_URL_OPENAI: `${upstreamUrl}/ok/v1` },
    })
    children.push(router)
    const managementKey = (await readLine(router, /management key: (rt_mgmt_\S+)/, 60_000, 'stderr'))[1]!
    drain(router, 'stderr')
    const routerUrl = `http://127.0.0.1:${(await readLine(router, /listening on http:\/\/127\.0\.0\.1:(\d+)/))[1]}`
    drain(router)
    const admin = managementClient(routerUrl, managementKey)
    const provider = await admin('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-scale-load' })
    const loaded = await admin('POST', '/api/v1/keys', { name: 'scale load', routing: { targets: [{ provider_key_id: provider.id }] } })
    const written = await admin('POST', '/api/v1/keys', { name: 'scale written', routing: { targets: [{ provider_key_id: provider.id }] } })

    const seeding = createRuntime(loadConfig({ RT_DATA_DIR: dataDir, RT_MASTER_KEY: masterKey, RT_LOG_LEVEL: 'error' }), { logger: silentLogger })
    try {
      const workspaceId = seeding.repositories.workspaces.listAll()[0]!.id
      seedKeys(seeding, workspaceId, 10_000)
      seedLogRows(seeding, workspaceId, rowCount)
    } finally {
      seeding.reads.close()
      seeding.storage.close()
    }
    const target = {
      url: `${routerUrl}/v1/chat/completions`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${loaded.key}` },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say something about foxes.' }], max_tokens: 200 }),
      concurrency: 16,
    }
    // Warm-up: the router has rebuilt for the seeded keys, the JIT and the usage thread are warm.
    await load({ ...target, durationMs: 1500 })
    await admin('GET', '/api/v1/usage/summary?range=30d')

    // Four a second: more than a dashboard or an operator sends.
    const everyMs = 250
    const kinds = {
      quiet: async () => {},
      writes: async (round: number, index: number) => {
        await admin('PATCH', `/api/v1/keys/${written.id}`, { name: `scale written ${round}.${index}` })
        await Bun.sleep(everyMs)
      },
      usage: async () => {
        await Promise.all([admin('GET', '/api/v1/usage/summary?range=30d'), admin('GET', '/api/v1/usage/series?range=30d'), admin('GET', '/api/v1/usage/breakdown?range=30d&by=model')])
        await Bun.sleep(everyMs)
      },
    }
    const latencies: Record<keyof typeof kinds, number[]> = { quiet: [], writes: [], usage: [] }
    const happened: Record<keyof typeof kinds, number> = { quiet: 0, writes: 0, usage: 0 }
    for (let round = 0; round < 3; round++) {
      for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) {
        let running = true
        const background = (async () => {
          for (let index = 0; running && kind !== 'quiet'; index++) {
            await kinds[kind](round, index)
            happened[kind]++
          }
        })()
        const result = await load({ ...target, durationMs: windowMs })
        running = false
        await background
        for (const value of result.latencies) latencies[kind].push(value)
      }
    }
    const size = `10,000 keys, ${rowCount.toLocaleString('en')} rows`
    const quiet = percentile(latencies.quiet, 99)
    lines.push({ what: 'inference p99 at c=16, nothing else running', size, ms: quiet })
    lines.push({ what: `inference p99 at c=16, a key written through the API every ${everyMs} ms (${happened.writes} writes)`, size, ms: percentile(latencies.writes, 99) })
    lines.push({ what: `inference p99 at c=16, the three usage queries every ${everyMs} ms (${happened.usage} times)`, size, ms: percentile(latencies.usage, 99) })
  } finally {
    for (const child of children) child.kill()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export interface RetentionLine {
  day: number
  rowsKept: number
  fileMb: number
  /** The longest the serving thread's event loop went without a turn during the prunes of the last 10 days, ms. */
  gapMs: number
  /** The same, in a window as long before each prune, with no prune running. */
  controlGapMs: number
}

export interface RetentionCurve {
  rowsPerDay: number
  lines: RetentionLine[]
  /** The file's growth from the first line after the retention filled to the last, percent. */
  growthPercent: number
  longestGapMs: number
  longestControlGapMs: number
  /** Log flushes the serving thread put off because a prune transaction held the write lock. */
  deferredFlushes: number
}

const simulatedDays = 120
const retentionDays = 90

/**
 * Watches the serving thread while `running` is pending: 16 request-log rows pushed to the log queue
 * every 10 ms (the queue's own 50 ms timer flushes them, as in the service), and a chain of
 * immediates that notes the longest gap between two turns of the event loop: how long a request
 * in flight would have waited. Returns that gap and how many rows were pushed.
 */
async function watchServing(push: () => void, running: Promise<unknown>): Promise<{ gapMs: number; pushed: number }> {
  // What this thread allocated before is its own garbage, not the watched work's: collected first.
  Bun.gc(true)
  let watching = true
  let gapMs = 0
  let last = performance.now()
  const probe = () => {
    const at = performance.now()
    gapMs = Math.max(gapMs, at - last)
    last = at
    if (watching) setImmediate(probe)
  }
  setImmediate(probe)
  let pushed = 0
  const timer = setInterval(() => {
    for (let index = 0; index < 16; index++) push()
    pushed += 16
  }, 10)
  await running
  watching = false
  clearInterval(timer)
  return { gapMs, pushed }
}

/**
 * The retention curve (CONTRACT §14): 120 simulated days at constant traffic, `rowsPerDay` request-log
 * rows a day (one in ten with a captured body of 1.5 kB), with RT_LOG_RETENTION_DAYS=90 and
 * RT_BODY_RETENTION_DAYS=7. At each day's end the `log-prune` job runs as the scheduler runs it: on
 * a thread of its own with its own connection, while the serving thread keeps logging requests
 * through its log queue (part of the day's traffic) and is watched; and, before it, a window as long
 * with no prune, as the control. Every 10 days the file size (after a checkpoint) and the rows kept
 * are noted. The file must level off once it holds the 90 days, and the serving thread must not
 * stall 5 ms while a prune runs.
 */
export async function retentionCurve(rowsPerDay: number): Promise<RetentionCurve> {
  const start = Date.UTC(2026, 0, 1)
  const models = ['openai/gpt-4o-mini', 'openai/gpt-4.1', 'anthropic/claude-sonnet', 'meta-llama/llama-3.1-8b', 'google/gemini-2.5-flash']
  const keys = Array.from({ length: 20 }, () => crypto.randomUUID())
  const body = JSON.stringify({ model: models[0], messages: [{ role: 'user', content: 'a question about foxes '.repeat(60) }] })
  let serial = 0
  const row = (workspaceId: string, createdAt: number): RequestLogRow => {
    const index = serial++
    return {
      id: crypto.randomUUID(),
      workspaceId,
      keyId: keys[index % keys.length]!,
      createdAt,
      endpoint: 'chat',
      gateway: index % 3 ? 'openai' : 'groq',
      providerKeyId: keys[(index + 1) % keys.length]!,
      model: models[index % models.length]!,
      upstreamModel: 'gpt-4o-mini',
      status: index % 50 ? 200 : 502,
      stream: index % 2 === 0,
      latencyMs: 100 + (index % 400),
      overheadMs: 0.2,
      ttfbMs: 80 + (index % 300),
      attempts: 1,
      attemptPath: index % 3 ? 'openai:ok' : 'groq:ok',
      stageTimings: '{"auth":0.01,"body":0.02,"plan":0.01,"upstream":120.5}',
      inputTokens: 120,
      outputTokens: 80,
      clientIp: '203.0.113.7',
      requestBody: index % 10 === 0 ? body : null,
    }
  }
  return withRuntime(
    async (runtime) => {
      const { workspace } = createWorkspace(runtime, 'retention')
      const worker = new Worker(new URL('./retention-worker.ts', import.meta.url))
      const ask = (command: RetentionCommand) =>
        new Promise<RetentionReply>((resolve) => {
          worker.onmessage = (event: MessageEvent<RetentionReply>) => resolve(event.data)
          worker.postMessage(command)
        })
      await ask({ type: 'open', config: runtime.config })
      // As the service runs: the WAL is copied into the file on a thread of its own, not by a commit,
      // and request-log rows go through the log queue, flushed every 50 ms.
      const checkpoints = await runtime.storage.startBackgroundCheckpoints({})
      runtime.logQueue.start()
      const lines: RetentionLine[] = []
      let longestGapMs = 0
      let longestControlGapMs = 0
      let gapMs = 0
      let controlGapMs = 0
      let lastPruneMs = 0
      // Rows the serving thread logged around a prune: taken off the next day's, so every day has the same traffic.
      let loggedAhead = 0
      const pushAt = (time: number) => () => runtime.logQueue.push({ logRow: () => row(workspace.id, time) } as LogEntry)
      try {
        for (let day = 1; day <= simulatedDays; day++) {
          const dayStart = start + (day - 1) * dayMs
          // The day's traffic, in large batches (not watched: a day of flushes at once).
          const count = Math.max(0, rowsPerDay - loggedAhead)
          const batch: RequestLogRow[] = []
          for (let index = 0; index < count; index++) {
            batch.push(row(workspace.id, dayStart + Math.floor((index / count) * (dayMs - 1))))
            if (batch.length === 500) {
              runtime.repositories.requestLogs.insertMany(batch)
              batch.length = 0
            }
          }
          runtime.repositories.requestLogs.insertMany(batch)
          const now = dayStart + dayMs
          // The control: the same watch and traffic with no prune, as long as the last prune took.
          const control = await watchServing(pushAt(now), Bun.sleep(Math.max(50, lastPruneMs)))
          runtime.logQueue.flush()
          controlGapMs = Math.max(controlGapMs, control.gapMs)
          // The prune at the day's end, on its thread.
          const started = performance.now()
          const watched = await watchServing(pushAt(now), ask({ type: 'prune', nowMs: now }))
          lastPruneMs = performance.now() - started
          runtime.logQueue.flush()
          loggedAhead = watched.pushed + control.pushed
          gapMs = Math.max(gapMs, watched.gapMs)
          if (day % 10 === 0) {
            runtime.storage.sqlite.exec('PRAGMA wal_checkpoint(TRUNCATE)')
            const rowsKept = (runtime.storage.sqlite.query('select count(*) as n from request_logs').get() as { n: number }).n
            lines.push({ day, rowsKept, fileMb: statSync(runtime.config.dbPath).size / 1_048_576, gapMs, controlGapMs })
            longestGapMs = Math.max(longestGapMs, gapMs)
            longestControlGapMs = Math.max(longestControlGapMs, controlGapMs)
            gapMs = 0
            controlGapMs = 0
          }
        }
        // From the first line after the 90 days filled (day 100) to the last (day 120).
        const filled = lines.find((line) => line.day >= retentionDays + 10)!
        const growthPercent = ((lines.at(-1)!.fileMb - filled.fileMb) / filled.fileMb) * 100
        return { rowsPerDay, lines, growthPercent, longestGapMs, longestControlGapMs, deferredFlushes: runtime.metrics.logFlushesDeferred }
      } finally {
        runtime.logQueue.stop()
        await checkpoints.stop()
        await ask({ type: 'close' })
        worker.terminate()
      }
    },
    { RT_LOG_RETENTION_DAYS: String(retentionDays), RT_BODY_RETENTION_DAYS: '7' },
  )
}

export function retentionTable(curve: RetentionCurve): string {
  return [
    `Retention: ${simulatedDays} simulated days at ${curve.rowsPerDay.toLocaleString('en')} request-log rows a day, RT_LOG_RETENTION_DAYS=${retentionDays}, RT_BODY_RETENTION_DAYS=7, log-prune at each day's end on its own thread`,
    '',
    '| simulated day | rows kept | file MB | longest serving-thread stall during the prunes, ms | the same before them, no prune, ms |',
    '|---:|---:|---:|---:|---:|',
    ...curve.lines.map((line) => `| ${line.day} | ${line.rowsKept.toLocaleString('en')} | ${line.fileMb.toFixed(2)} | ${line.gapMs.toFixed(2)} | ${line.controlGapMs.toFixed(2)} |`),
    '',
    `file growth from day ${retentionDays + 10} to day ${simulatedDays}: ${curve.growthPercent.toFixed(2)}% (levels off: ${Math.abs(curve.growthPercent) < 2 ? 'yes' : 'NO'})`,
    `longest stall of the serving thread during a prune: ${curve.longestGapMs.toFixed(2)} ms (under 5 ms: ${curve.longestGapMs < 5 ? 'yes' : 'NO'}); in the windows with no prune: ${curve.longestControlGapMs.toFixed(2)} ms`,
    `log flushes put off a few ms because a prune transaction held the write lock: ${curve.deferredFlushes.toLocaleString('en')}`,
  ].join('\n')
}

/** `windowMs`: the length of one load window of the inference curves (3 rounds of 3 windows). */
export async function runScale(maxRows = 10_000_000, windowMs = 2500): Promise<ScaleLine[]> {
  const lines: ScaleLine[] = []
  await snapshotRebuilds(lines)
  await usageQueries(lines, maxRows)
  await inferenceWhileChanging(lines, Math.min(maxRows, 1_000_000), windowMs)
  return lines
}

export function scaleTable(lines: readonly ScaleLine[]): string {
  return ['| what | size | ms |', '|---|---|---:|', ...lines.map((line) => `| ${line.what} | ${line.size} | ${line.ms.toFixed(2)} |`)].join('\n')
}

if (import.meta.main) {
  const argument = (name: string) => {
    const index = process.argv.indexOf(name)
    return index === -1 ? undefined : Number(process.argv[index + 1])
  }
  process.stdout.write(scaleTable(await runScale(argument('--scale-rows'), argument('--scale-window-ms'))) + '\n')
}
