/**
 * `bun run bench [--check] [--baseline REF] [--round-ms N] [--rounds N]`: measures the router against
 * a bare Bun pass-through and a direct call in one run, interleaving the systems round by round so
 * machine drift cancels; with --baseline, the router of another git ref (a previous release) runs in
 * the same rounds. Writes bench/results/latest.json and prints a Markdown table; with --check, exits
 * non-zero when the performance budget fails.
 */
import { Database } from 'bun:sqlite'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readSegment, requestJournalDirectory } from '../src/storage/request-journal'
import { drain, load, managementClient, percentile, readLine, type Child } from './bench/children'
import { guardedPrompt, personalDataGuardrails } from './bench/guardrail-set'

const repoRoot = join(import.meta.dir, '..')
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`usage: ./scripts/benchmark [--check] [--baseline REF] [--rounds N] [--round-ms N] [--soak N] [--only TEXT] [--stages] [--floor-parts] [--scale [--scale-rows N] [--scale-window-ms N]]

Measures the router against a bare Bun pass-through and a direct call to a mock upstream, round
after round, prints a Markdown table and writes bench/results/latest.json.
  --check        exit non-zero when the performance budget fails
  --baseline REF also run the router of git ref REF (a tag, commit or branch; checked out in a
                 temporary worktree with its own dependencies) in the same rounds; --check then also
                 fails when the plain path's CPU per request is more than 5% above the baseline's or
                 the burst stream throughput more than 5% below it
  --floor-parts  only the floor's price list: floor variants each leaving one mandatory part out,
                 beside the bare hop at c=64 (scripts/bench/floor-parts.ts)
  --rounds N     rounds per scenario, default 2 (4 with --baseline)
  --round-ms N   length of one system's turn in a round, default 2500
  --soak N       requests of the memory soak, default 1000000
  --only TEXT    run only the scenarios whose name contains TEXT (profiling; the budget needs all)
  --stages       only the per-stage micro-benchmarks of the hot path (bench/stages.ts: ns and bytes
                 per op); a full run prints them after the end-to-end table
  --scale        only the scale curves (bench/scale.ts): snapshot rebuild with 10 to 10,000 keys,
                 usage queries over 30 days with 10^4 to 10^7 request-log rows (--scale-rows N caps them),
                 inference p99 while keys are written and usage queries run (--scale-window-ms N: the
                 length of each of the 9 load windows, default 2500), and the retention curve: 120
                 simulated days with 90-day retention, the file size every 10 days and the serving
                 thread's longest stall during a prune (--scale-rows-per-day N, default 20,000;
                 --scale-retention-only: that curve alone)
`)
  process.exit(0)
}
const check = process.argv.includes('--check')
const argument = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : Number(process.argv[index + 1])
}
const roundMs = argument('round-ms', 2500)
/** Rounds per scenario: 2, or 4 beside a baseline (two turns each in each place: its lines are within 5%). */
const rounds = argument('rounds', process.argv.includes('--baseline') ? 4 : 2)
const soakTotal = argument('soak', 1_000_000)
const clockTicks = 100 // getconf CLK_TCK on Linux
const baselineIndex = process.argv.indexOf('--baseline')
/** `--baseline REF`: the git ref whose router runs beside the current one. */
const baselineRef = baselineIndex === -1 ? undefined : process.argv[baselineIndex + 1]
if (baselineIndex !== -1 && (!baselineRef || baselineRef.startsWith('--'))) {
  process.stderr.write('bench: --baseline needs a git ref (a tag, commit or branch)\n')
  process.exit(2)
}
const onlyIndex = process.argv.indexOf('--only')
/** `--only TEXT`: run only the scenarios whose name contains TEXT (profiling; the budget needs all). */
const only = onlyIndex === -1 ? undefined : process.argv[onlyIndex + 1]

function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) / clockTicks) * 1e6
}

function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match ? Number(match[1]) / 1024 : 0
}

interface SystemTarget {
  url: string
  headers: Record<string, string>
  body: string
  pid?: number
}

/** One system's figures in one scenario (a stream's first-byte times and a process's CPU only where measured: NaN-free arithmetic is the caller's). */
type SystemStats = Record<'requests' | 'errors' | 'rps' | 'p50' | 'p90' | 'p99' | 'ttfb_p50' | 'ttfb_p99' | 'cpu_us_per_request' | 'gc_count' | 'gc_full' | 'gc_max_pause_ms', number>

interface Aggregate {
  requests: number
  errors: number
  elapsedMs: number
  latencies: number[]
  firstBytes: number[]
  cpuMicros: number
}

const emptyAggregate = (): Aggregate => ({ requests: 0, errors: 0, elapsedMs: 0, latencies: [], firstBytes: [], cpuMicros: 0 })

let routerRequestsSent = 0

/**
 * Garbage collections of the router, from JavaScriptCore's log (BUN_JSC_logGC=1 on its stderr):
 * each collection's kind (eden or full), when it ended and its longest pause. A collection logs a
 * START line naming its kind, a line per stop-the-world pause carrying `p=P ms` and an END line
 * (the `(max …)` beside them is the process's running maximum, not the collection's).
 */
const gcLog = {
  collections: [] as { at: number; full: boolean; maxPauseMs: number }[],
  current: { full: false, maxPauseMs: 0 },
  read(line: string): boolean {
    // The log's own lines, and the pieces of one that another write to stderr broke in two.
    if (!/\[GC<|^Requesting GC|^GC END!| p=[\d.]+ms|=> \d+kb|v=\d+kb/.test(line)) return false
    if (line.includes(': START ')) this.current = { full: line.includes('FullCollection'), maxPauseMs: 0 }
    for (const pause of line.matchAll(/ p=([\d.]+)ms/g)) this.current.maxPauseMs = Math.max(this.current.maxPauseMs, Number(pause[1]))
    if (/ END\]/.test(line)) this.collections.push({ at: performance.now(), ...this.current })
    return true
  },
  /** The collections that ended inside the windows. */
  within(windows: readonly [number, number][]) {
    const inside = this.collections.filter((entry) => windows.some(([from, to]) => entry.at >= from && entry.at <= to))
    return { gc_count: inside.length, gc_full: inside.filter((entry) => entry.full).length, gc_max_pause_ms: inside.reduce((max, entry) => Math.max(max, entry.maxPauseMs), 0) }
  },
}

async function measure(name: string, systems: Record<string, SystemTarget>, concurrency: number, stream = false) {
  if (only && !name.includes(only)) return { name, concurrency, stream, systems: {} as Record<string, SystemStats> }
  const totals: Record<string, Aggregate> = {}
  for (const system of Object.keys(systems)) totals[system] = emptyAggregate()
  // Warm-up for every system (JIT, connection pools), not measured.
  for (const [system, target] of Object.entries(systems)) {
    const warm = await load({ ...target, concurrency, durationMs: 400, stream })
    if (system === 'router' || system === 'guarded') routerRequestsSent += warm.sent
  }
  const routerWindows: [number, number][] = []
  const order = Object.entries(systems)
  for (let round = 0; round < rounds; round++) {
    // The router and the baseline swap places every round, so neither always runs right after the
    // same system (what the one before leaves behind, a warm cache or a collection due, is shared).
    const routerAt = order.findIndex(([system]) => system === 'router')
    const baselineAt = order.findIndex(([system]) => system === 'baseline')
    if (round > 0 && routerAt !== -1 && baselineAt !== -1) [order[routerAt], order[baselineAt]] = [order[baselineAt]!, order[routerAt]!]
    for (const [system, target] of order) {
      const cpuBefore = target.pid ? cpuMicros(target.pid) : 0
      const from = performance.now()
      const result = await load({ ...target, concurrency, durationMs: roundMs, stream })
      // The log line comes a moment after the collection: a little slack at the window's end.
      if (system === 'router') routerWindows.push([from, performance.now() + 50])
      const aggregate = totals[system]!
      if (system === 'router' || system === 'guarded') routerRequestsSent += result.sent
      aggregate.requests += result.completed
      aggregate.errors += result.errors
      aggregate.elapsedMs += result.elapsedMs
      for (const value of result.latencies) aggregate.latencies.push(value)
      for (const value of result.firstBytes) aggregate.firstBytes.push(value)
      if (target.pid) aggregate.cpuMicros += cpuMicros(target.pid) - cpuBefore
    }
  }
  const summary: Record<string, unknown> = {}
  for (const [system, aggregate] of Object.entries(totals)) {
    summary[system] = {
      requests: aggregate.requests,
      errors: aggregate.errors,
      rps: Math.round((aggregate.requests / aggregate.elapsedMs) * 1000),
      p50: percentile(aggregate.latencies, 50),
      p90: percentile(aggregate.latencies, 90),
      p99: percentile(aggregate.latencies, 99),
      ...(stream ? { ttfb_p50: percentile(aggregate.firstBytes, 50), ttfb_p99: percentile(aggregate.firstBytes, 99) } : {}),
      ...(systems[system]!.pid ? { cpu_us_per_request: aggregate.requests ? aggregate.cpuMicros / aggregate.requests : Number.NaN } : {}),
      ...(system === 'router' ? gcLog.within(routerWindows) : {}),
    }
  }
  process.stderr.write(`bench: ${name} done\n`)
  return { name, concurrency, stream, systems: summary as Record<string, SystemStats> }
}

interface CrashCheck {
  answered: number
  rows: number
  replayed: number
  lost: number
  duplicates: number
}

/**
 * kill -9 under load (SPEC "What the service does" 7: billing rows survive a crash of the process):
 * closed-loop clients in this process at `concurrency` (they record each 200's request id), the
 * router killed with SIGKILL after `killAfterMs`, started again on the same data dir, and every
 * request answered 200 looked up in request_logs. Rows written before this check count too.
 */
async function killUnderLoad(options: { url: string; headers: Record<string, string>; body: string; concurrency: number; killAfterMs: number; router: Child; dataDir: string; restart: () => Promise<Child> }): Promise<CrashCheck> {
  const answered: string[] = []
  let killed = false
  const loop = async () => {
    while (!killed) {
      try {
        const response = await fetch(options.url, { method: 'POST', headers: options.headers, body: options.body })
        await response.arrayBuffer()
        if (response.status === 200) answered.push(response.headers.get('x-router-request-id')!)
      } catch {
        // Refused or cut by the kill: never answered, so no row is owed.
      }
    }
  }
  const clients = Promise.all(Array.from({ length: options.concurrency }, loop))
  await Bun.sleep(options.killAfterMs)
  options.router.kill('SIGKILL')
  await options.router.exited
  killed = true
  await clients
  // Rows only the journal held at the kill (the restart replays them before it listens).
  const journalDir = requestJournalDirectory(options.dataDir)
  const replayed = readdirSync(journalDir).reduce((sum, name) => sum + readSegment(join(journalDir, name)).rows.length, 0)
  await options.restart()
  const database = new Database(join(options.dataDir, 'router.db'), { readonly: true })
  const ids = (database.query('select id from request_logs').all() as { id: string }[]).map((row) => row.id)
  database.close()
  const stored = new Set(ids)
  return { answered: answered.length, rows: ids.length, replayed, lost: answered.filter((id) => !stored.has(id)).length, duplicates: ids.length - stored.size }
}

/** The bench's providers and keys, made through a router's management API (the same calls on the baseline). */
async function configureRouter(admin: ReturnType<typeof managementClient>) {
  const working = await admin('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-bench-working' })
  const failing = await admin('POST', '/api/v1/providers', { gateway: 'groq', key: 'gsk-bench-failing' })
  const remaps = [{ match: 'bench/remapped-model', provider_key_id: working.id, upstream_model: 'gpt-4o' }]
  const plainKey = await admin('POST', '/api/v1/keys', {
    name: 'bench plain',
    routing: { strategy: 'priority', targets: [{ provider_key_id: working.id }, { provider_key_id: failing.id }], model_remaps: remaps },
  })
  const failoverKey = await admin('POST', '/api/v1/keys', {
    name: 'bench failover',
    routing: { strategy: 'priority', targets: [{ provider_key_id: failing.id }, { provider_key_id: working.id }] },
  })
  const messagesKey = await admin('POST', '/api/v1/keys', { name: 'bench messages', api_shape: 'messages', routing: { targets: [{ provider_key_id: working.id }] } })
  // Chat answered by a Responses-only gateway kind: the chat → Responses translation.
  const responsesOnly = await admin('POST', '/api/v1/providers', { gateway: 'openai-responses', key: 'sk-bench-responses' })
  const toResponsesKey = await admin('POST', '/api/v1/keys', { name: 'bench chat → responses', routing: { targets: [{ provider_key_id: responsesOnly.id }] } })
  return { plain: plainKey.key as string, failover: failoverKey.key as string, messages: messagesKey.key as string, toResponses: toResponsesKey.key as string, working: working.id as string }
}

/** A key with a response cache (CONTRACT §15), on the current router only (a baseline may predate the setting). */
async function cachedKey(admin: ReturnType<typeof managementClient>, providerKeyId: string): Promise<string> {
  const key = await admin('POST', '/api/v1/keys', { name: 'bench cached', cache: { ttl_seconds: 86_400 }, routing: { targets: [{ provider_key_id: providerKeyId }] } })
  return key.key as string
}

async function guardedKey(admin: ReturnType<typeof managementClient>, providerKeyId: string): Promise<string> {
  const key = await admin('POST', '/api/v1/keys', { name: 'bench guarded', guardrails: personalDataGuardrails, routing: { targets: [{ provider_key_id: providerKeyId }] } })
  return key.key as string
}

type RouterKeys = Awaited<ReturnType<typeof configureRouter>>

/**
 * A git ref's router in a temporary worktree (`--baseline`): its own dependencies installed by its own
 * scripts/start, on its own data dir, with the same gateway overrides as the current router.
 */
async function startBaseline(ref: string, environment: Record<string, string | undefined>, scratch: string, children: Child[]) {
  const worktree = join(scratch, 'baseline')
  const added = Bun.spawnSync(['git', '-C', repoRoot, 'worktree', 'add', '--detach', worktree, ref], { stdout: 'pipe', stderr: 'pipe' })
  if (added.exitCode !== 0) throw new Error(`bench: --baseline ${ref}: git worktree add failed: ${added.stderr.toString().trim()}`)
  const commit = Bun.spawnSync(['git', '-C', worktree, 'rev-parse', '--short', 'HEAD'], { stdout: 'pipe' }).stdout.toString().trim()
  const dataDir = join(scratch, 'baseline-data')
  mkdirSync(dataDir)
  const child = Bun.spawn([join(worktree, 'scripts/start')], { stdout: 'pipe', stderr: 'pipe', env: { ...environment, RT_DATA_DIR: dataDir } })
  children.push(child)
  const managementKey = (await readLine(child, /management key: (rt_mgmt_\S+)/, 300_000, 'stderr'))[1]!
  drain(child, 'stderr')
  const port = (await readLine(child, /listening on http:\/\/127\.0\.0\.1:(\d+)/))[1]
  drain(child)
  const url = `http://127.0.0.1:${port}`
  const keys = await configureRouter(managementClient(url, managementKey))
  return {
    ref,
    commit,
    url,
    pid: child.pid,
    keys,
    remove: () => Bun.spawnSync(['git', '-C', repoRoot, 'worktree', 'remove', '--force', worktree], { stdout: 'ignore', stderr: 'ignore' }),
  }
}

async function main() {
  const started = performance.now()
  const dataDir = mkdtempSync(join(tmpdir(), 'router-bench-'))
  const scratch = mkdtempSync(join(tmpdir(), 'router-bench-baseline-'))
  const children: Child[] = []
  let removeWorktree: (() => unknown) | undefined
  const cleanup = () => {
    for (const child of children) child.kill()
    removeWorktree?.()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(scratch, { recursive: true, force: true })
  }
  process.on('SIGINT', () => {
    cleanup()
    process.exit(130)
  })
  try {
    const upstream = Bun.spawn(['bun', join(repoRoot, 'scripts/bench/upstream.ts')], { stdout: 'pipe', stderr: 'inherit', env: { ...process.env } })
    children.push(upstream)
    const upstreamPort = (await readLine(upstream, /port (\d+)/))[1]
    const upstreamUrl = `http://127.0.0.1:${upstreamPort}`
    const bare = Bun.spawn(['bun', join(repoRoot, 'scripts/bench/bare-proxy.ts')], { stdout: 'pipe', stderr: 'inherit', env: { ...process.env, BENCH_UPSTREAM_URL: `${upstreamUrl}/ok` } })
    children.push(bare)
    const barePort = (await readLine(bare, /port (\d+)/))[1]
    const floor = Bun.spawn(['bun', join(repoRoot, 'scripts/bench/floor-proxy.ts')], {
      stdout: 'pipe',
      stderr: 'inherit',
      env: { ...process.env, BENCH_UPSTREAM_URL: `${upstreamUrl}/ok`, BENCH_FLOOR_DIR: dataDir },
    })
    children.push(floor)
    const floorPort = (await readLine(floor, /port (\d+)/))[1]
    const gatewayEnvironment = {
      RT_LOG_LEVEL: 'warn',
      RT_SKIP_INSTALL: '1',
      RT_GATEWAY_URL_OPENAI: `${upstreamUrl}/ok/v1`,
      RT_GATEWAY_URL_GROQ: `${upstreamUrl}/fail/v1`,
      RT_GATEWAY_URL_OPENAI_RESPONSES: `${upstreamUrl}/ok/v1`,
    }
    const routerEnvironment = {
      ...process.env,
      PORT: '0',
      RT_DATA_DIR: dataDir,
      // JavaScriptCore logs each collection with its pauses on stderr: the GC columns of the table.
      BUN_JSC_logGC: '1',
      ...gatewayEnvironment,
    }
    // The baseline first: its install (a fresh worktree) must not overlap the current router's measurements.
    let baseline: Awaited<ReturnType<typeof startBaseline>> | undefined
    if (baselineRef) {
      // Its own install (the ref's lock file): not skipped like the current router's. It logs its
      // collections too (read by no one): the log costs CPU, and both routers must pay it alike.
      const { RT_SKIP_INSTALL: _skip, ...baselineEnvironment } = { ...process.env, PORT: '0', BUN_JSC_logGC: '1', ...gatewayEnvironment }
      baseline = await startBaseline(baselineRef, baselineEnvironment, scratch, children)
      removeWorktree = baseline.remove
      process.stderr.write(`bench: baseline ${baselineRef} (${baseline.commit}) listening\n`)
    }
    const router = Bun.spawn([join(repoRoot, 'scripts/start')], {
      stdout: 'pipe',
      // The one-time management key line comes on stderr; the rest of stderr is passed on.
      stderr: 'pipe',
      env: routerEnvironment,
    })
    children.push(router)
    const managementKey = (await readLine(router, /management key: (rt_mgmt_\S+)/, 60_000, 'stderr'))[1]!
    void (async () => {
      const decoder = new TextDecoder()
      let pending = ''
      for await (const chunk of router.stderr as ReadableStream<Uint8Array>) {
        pending += decoder.decode(chunk, { stream: true })
        const lines = pending.split('\n')
        pending = lines.pop()!
        const passed = lines.filter((line) => !gcLog.read(line))
        if (passed.length) process.stderr.write(passed.join('\n') + '\n')
      }
    })()
    const routerPort = (await readLine(router, /listening on http:\/\/127\.0\.0\.1:(\d+)/))[1]
    drain(router)
    drain(upstream)
    drain(bare)
    drain(floor)
    const routerUrl = `http://127.0.0.1:${routerPort}`
    const keys = await configureRouter(managementClient(routerUrl, managementKey))
    const cachedSecret = await cachedKey(managementClient(routerUrl, managementKey), keys.working)
    const guardedSecret = await guardedKey(managementClient(routerUrl, managementKey), keys.working)
    const routerPid = router.pid
    const barePid = bare.pid
    const rssAtStart = rssMb(routerPid)

    const chatBody = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say something about foxes.' }], max_tokens: 200 })
    const streamBody = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Stream please.' }], stream: true })
    // The upstream sends this one's chunks at once (scripts/bench/upstream.ts): streams per second.
    const burstBody = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Stream please.' }], stream: true, user: 'burst' })
    const messagesBody = JSON.stringify({ model: 'openai/gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'Say something about foxes.' }] })
    const responsesBody = JSON.stringify({ model: 'openai/gpt-4o-mini', input: 'Say something about foxes.' })
    const json = { 'content-type': 'application/json' }
    /** The router and, with --baseline, the baseline router, on the same path with each one's own key. */
    const routers = (path: string, key: keyof RouterKeys, body: string, headers: (key: string) => Record<string, string> = (secret) => ({ ...json, authorization: `Bearer ${secret}` })): Record<string, SystemTarget> => ({
      router: { url: `${routerUrl}${path}`, headers: headers(keys[key]), body, pid: routerPid },
      ...(baseline ? { baseline: { url: `${baseline.url}${path}`, headers: headers(baseline.keys[key]), body, pid: baseline.pid } } : {}),
    })
    const chatSystems = (key: keyof RouterKeys, body = chatBody): Record<string, SystemTarget> => ({
      direct: { url: `${upstreamUrl}/ok/v1/chat/completions`, headers: json, body },
      bare: { url: `http://127.0.0.1:${barePort}/v1/chat/completions`, headers: json, body, pid: barePid },
      ...routers('/v1/chat/completions', key, body),
    })

    /** The cached key's answers: every request after the first is a hit (no upstream call), beside the bare hop that makes one. */
    const cachedSystems = (body: string): Record<string, SystemTarget> => ({
      direct: { url: `${upstreamUrl}/ok/v1/chat/completions`, headers: json, body },
      bare: { url: `http://127.0.0.1:${barePort}/v1/chat/completions`, headers: json, body, pid: barePid },
      router: { url: `${routerUrl}/v1/chat/completions`, headers: { ...json, authorization: `Bearer ${cachedSecret}` }, body, pid: routerPid },
    })

    const scenarios = []
    const floorSystem = (body: string): SystemTarget => ({ url: `http://127.0.0.1:${floorPort}/v1/chat/completions`, headers: { ...json, authorization: 'Bearer rt_live_floor' }, body, pid: floor.pid })
    // The floor (scripts/bench/floor-proxy.ts) runs beside bare and the router where a budget line is read.
    scenarios.push(await measure('buffered chat, c=1', { ...chatSystems('plain'), floor: floorSystem(chatBody) }, 1))
    scenarios.push(await measure('buffered chat, c=16', chatSystems('plain'), 16))
    scenarios.push(await measure('buffered chat, c=64', { ...chatSystems('plain'), floor: floorSystem(chatBody) }, 64))
    scenarios.push(await measure('streaming chat, c=1', { ...chatSystems('plain', streamBody), floor: floorSystem(streamBody) }, 1, true))
    scenarios.push(await measure('streaming chat, c=16', chatSystems('plain', streamBody), 16, true))
    scenarios.push(await measure('streaming chat (burst), c=16', { ...chatSystems('plain', burstBody), floor: floorSystem(burstBody) }, 16, true))
    // Added latency of the failover path is measured without queueing (c=1), like the c=1 added p50;
    // c=16 shows what failing over costs in throughput and CPU.
    scenarios.push(await measure('failover (first target 500), c=1', chatSystems('failover'), 1))
    scenarios.push(await measure('failover (first target 500), c=16', chatSystems('failover'), 16))
    scenarios.push(
      await measure(
        'messages → chat translation, c=16',
        {
          direct: { url: `${upstreamUrl}/ok/v1/chat/completions`, headers: json, body: chatBody },
          bare: { url: `http://127.0.0.1:${barePort}/v1/chat/completions`, headers: json, body: chatBody, pid: barePid },
          ...routers('/v1/messages', 'messages', messagesBody, (secret) => ({ ...json, 'x-api-key': secret, 'anthropic-version': '2023-06-01' })),
        },
        16,
      ),
    )
    scenarios.push(
      await measure(
        'chat → Responses translation, c=16',
        {
          direct: { url: `${upstreamUrl}/ok/v1/responses`, headers: json, body: responsesBody },
          bare: { url: `http://127.0.0.1:${barePort}/v1/responses`, headers: json, body: responsesBody, pid: barePid },
          ...routers('/v1/chat/completions', 'toResponses', chatBody),
        },
        16,
      ),
    )
    scenarios.push(
      await measure(
        'responses (native), c=16',
        {
          direct: { url: `${upstreamUrl}/ok/v1/responses`, headers: json, body: responsesBody },
          bare: { url: `http://127.0.0.1:${barePort}/v1/responses`, headers: json, body: responsesBody, pid: barePid },
          ...routers('/v1/responses', 'plain', responsesBody),
        },
        16,
      ),
    )

    // The response cache (CONTRACT §15): a hit makes no upstream call, so it costs less than the bare hop.
    scenarios.push(await measure('cache hit (buffered chat), c=64', cachedSystems(chatBody), 64))
    // Time to first byte one request at a time: a closed loop of 16 callers would keep the router's
    // CPU busy with hits (each answered at once) while the bare hop idles through its upstream's
    // stream, and the hit's first byte would wait in the router's queue, not on its work.
    scenarios.push(await measure('cache hit (streamed chat), c=1', cachedSystems(streamBody), 1, true))

    // Guardrails (CONTRACT §17): the personal-data set on a streamed answer, one request at a time,
    // beside the plain key's stream (the 'streaming chat, c=1' scenario) in the same rounds.
    scenarios.push(
      await measure(
        'guardrails (personal-data set), streamed, c=1',
        {
          ...chatSystems('plain', streamBody),
          guarded: { url: `${routerUrl}/v1/chat/completions`, headers: { ...json, authorization: `Bearer ${guardedSecret}` }, body: streamBody, pid: routerPid },
        },
        1,
        true,
      ),
    )

    // Memory: RSS after the first 10k requests against RSS after soakTotal.
    const soakTarget = chatSystems('plain').router!
    if (only) {
      for (const scenario of scenarios) if (Object.keys(scenario.systems).length) process.stdout.write(JSON.stringify(scenario) + '\n')
      return
    }
    const first = await load({ ...soakTarget, concurrency: 64, count: 10_000 })
    routerRequestsSent += first.sent
    const rssAfter10k = rssMb(routerPid)
    const rest = await load({ ...soakTarget, concurrency: 64, count: soakTotal - 10_000 })
    routerRequestsSent += rest.sent
    const rssAfterSoak = rssMb(routerPid)
    process.stderr.write('bench: soak done\n')

    // Every router request must have its log row: wait for the batched flush to catch up.
    const database = new Database(join(dataDir, 'router.db'), { readonly: true })
    let logRows = 0
    for (let attempt = 0; attempt < 50; attempt++) {
      logRows = (database.query('select count(*) as n from request_logs').get() as { n: number }).n
      if (logRows >= routerRequestsSent) break
      await Bun.sleep(100)
    }
    database.close()
    const rssAtEnd = rssMb(routerPid)

    // Last, as it ends the router: kill -9 at the c=64 load of the budget lines, then a restart on
    // the same data dir (stopped by cleanup()).
    const crash = await killUnderLoad({
      ...soakTarget,
      concurrency: 64,
      killAfterMs: 2000,
      router,
      dataDir,
      restart: async () => {
        const { BUN_JSC_logGC: _gcLog, ...quietEnvironment } = routerEnvironment
        const restarted = Bun.spawn([join(repoRoot, 'scripts/start')], { stdout: 'pipe', stderr: 'inherit', env: quietEnvironment })
        children.push(restarted)
        await readLine(restarted, /listening on http:\/\/127\.0\.0\.1:(\d+)/)
        drain(restarted)
        return restarted
      },
    })
    process.stderr.write('bench: kill -9 check done\n')

    const byName = Object.fromEntries(scenarios.map((scenario) => [scenario.name, scenario.systems]))
    const c64 = byName['buffered chat, c=64']!
    const c1 = byName['buffered chat, c=1']!
    const c16 = byName['buffered chat, c=16']!
    const streaming1 = byName['streaming chat, c=1']!
    const streaming = byName['streaming chat, c=16']!
    const burst = byName['streaming chat (burst), c=16']!
    const failover = byName['failover (first target 500), c=1']!
    const translated = [byName['messages → chat translation, c=16']!, byName['chat → Responses translation, c=16']!]
    const cacheHit = byName['cache hit (buffered chat), c=64']!
    const cacheStream = byName['cache hit (streamed chat), c=1']!
    const guarded = byName['guardrails (personal-data set), streamed, c=1']!
    const guardedTtfb = guarded.guarded!.ttfb_p50 - guarded.router!.ttfb_p50
    const ttfbAdded = (systems: Record<string, SystemStats>, system = 'router') => systems[system]!.ttfb_p50 - systems.bare!.ttfb_p50
    const cpuRatio = (systems: Record<string, SystemStats>, over = 'bare', system = 'router') => systems[system]!.cpu_us_per_request / systems[over]!.cpu_us_per_request
    const line = (rule: string, value: number, limit: number, pass: boolean) => ({ rule, value, limit, pass })
    // The budget of the performance issue (pay only for what a key uses), line by line.
    const budget = [
      line('c=64 router CPU/request ≤ 1.6× bare', cpuRatio(c64), 1.6, cpuRatio(c64) <= 1.6),
      line('c=64 router throughput ≥ 0.7× bare', c64.router!.rps / c64.bare!.rps, 0.7, c64.router!.rps >= 0.7 * c64.bare!.rps),
      line('c=1 added p99 over bare < 0.5 ms', c1.router!.p99 - c1.bare!.p99, 0.5, c1.router!.p99 - c1.bare!.p99 < 0.5),
      line('stream TTFB p50 added over bare, c=16 ≤ 0.5 ms', ttfbAdded(streaming), 0.5, ttfbAdded(streaming) <= 0.5),
      line('burst streams per second, c=16 ≥ 0.7× bare', burst.router!.rps / burst.bare!.rps, 0.7, burst.router!.rps >= 0.7 * burst.bare!.rps),
      ...translated.map((systems, index) => {
        const ratio = systems.router!.cpu_us_per_request / c16.router!.cpu_us_per_request
        return line(`${index === 0 ? 'messages → chat' : 'chat → Responses'} CPU/request ≤ 1.3× the plain path's (c=16)`, ratio, 1.3, ratio <= 1.3)
      }),
      line('cache hit (c=64): router CPU/request < the bare hop\'s', cpuRatio(cacheHit), 1, cpuRatio(cacheHit) < 1),
      line('cache hit, streamed (c=1): TTFB p50 below the bare hop\'s (ms over bare)', ttfbAdded(cacheStream), 0, ttfbAdded(cacheStream) < 0),
      line('guardrails (personal-data set), streamed (c=1): TTFB p50 over the plain key\'s ≤ 1 ms', guardedTtfb, 1, guardedTtfb <= 1),
      line('stream chunks delivered as they arrive (TTFB < half the stream)', streaming.router!.ttfb_p50 / streaming.router!.p50, 0.5, streaming.router!.ttfb_p50 < streaming.router!.p50 / 2),
      line('failover (c=1) added over a direct call to the 2nd target < 1 ms', failover.router!.p50 - failover.direct!.p50, 1, failover.router!.p50 - failover.direct!.p50 < 1),
      line(`RSS growth from 10k to ${soakTotal / 1000}k requests < 30 MB`, rssAfterSoak - rssAfter10k, 30, rssAfterSoak - rssAfter10k < 30),
      line('request-log rows = requests sent', logRows - routerRequestsSent, 0, logRows === routerRequestsSent),
      line('kill -9 under load (c=64): rows lost of requests answered 200', crash.lost + crash.duplicates, 0, crash.lost === 0 && crash.duplicates === 0),
      // Against the previous release in the same rounds: a change may not make the plain path dearer.
      ...(baseline
        ? [
            line(`c=64 plain CPU/request ≤ 1.05× the baseline's (${baseline.ref})`, cpuRatio(c64, 'baseline'), 1.05, cpuRatio(c64, 'baseline') <= 1.05),
            line(`burst streams per second, c=16 ≥ 0.95× the baseline's (${baseline.ref})`, burst.router!.rps / burst.baseline!.rps, 0.95, burst.router!.rps >= 0.95 * burst.baseline!.rps),
          ]
        : []),
    ]
    // Not budget lines: how the router's cost splits into the bare hop, the mandatory work (the
    // floor) and the rest, and the first performance pass's limits. A floor near or over the CPU
    // limit means the limit leaves no room for routing.
    const reference = [
      { line: 'c=64 floor CPU/request vs bare', value: c64.floor!.cpu_us_per_request / c64.bare!.cpu_us_per_request },
      { line: 'c=64 floor throughput vs bare', value: c64.floor!.rps / c64.bare!.rps },
      { line: 'c=64 router CPU/request vs floor', value: c64.router!.cpu_us_per_request / c64.floor!.cpu_us_per_request },
      { line: 'c=64 CPU µs/request: bare, floor, router', value: [c64.bare!.cpu_us_per_request, c64.floor!.cpu_us_per_request, c64.router!.cpu_us_per_request] },
      { line: 'burst stream CPU µs/stream: bare, floor, router', value: [burst.bare!.cpu_us_per_request, burst.floor!.cpu_us_per_request, burst.router!.cpu_us_per_request] },
      { line: 'burst streams per second: floor vs bare', value: burst.floor!.rps / burst.bare!.rps },
      { line: 'c=1 added p99 over bare, floor (ms)', value: c1.floor!.p99 - c1.bare!.p99 },
      { line: 'c=64 added p99 over bare, router (ms)', value: c64.router!.p99 - c64.bare!.p99 },
      { line: 'c=1 added p50 over bare, router and floor (ms)', value: [c1.router!.p50 - c1.bare!.p50, c1.floor!.p50 - c1.bare!.p50] },
      { line: 'stream TTFB added over bare, c=1, router and floor (ms)', value: [ttfbAdded(streaming1), ttfbAdded(streaming1, 'floor')] },
      ...(baseline
        ? [
            { line: `baseline ${baseline.ref} (${baseline.commit}): c=64 CPU µs/request, router vs baseline`, value: [c64.router!.cpu_us_per_request, c64.baseline!.cpu_us_per_request] },
            { line: `baseline ${baseline.ref}: burst streams per second, router vs baseline`, value: [burst.router!.rps, burst.baseline!.rps] },
            { line: `baseline ${baseline.ref}: c=1 added p99 over bare, router vs baseline (ms)`, value: [c1.router!.p99 - c1.bare!.p99, c1.baseline!.p99 - c1.bare!.p99] },
          ]
        : []),
    ]
    const results = {
      at: new Date().toISOString(),
      machine: { cores: navigator.hardwareConcurrency, bun: Bun.version },
      load_generator: 'closed-loop Bun fetch client in a separate process (scripts/bench/load.ts)',
      round_ms: roundMs,
      rounds,
      scenarios,
      router_rss_mb: { start: rssAtStart, after_10k: rssAfter10k, [`after_${soakTotal / 1000}k`]: rssAfterSoak, end: rssAtEnd },
      log_rows: { written: logRows, requests_sent: routerRequestsSent },
      kill_9: crash,
      ...(baseline ? { baseline: { ref: baseline.ref, commit: baseline.commit } } : {}),
      budget,
      reference,
      duration_s: (performance.now() - started) / 1000,
    }
    // The per-stage micro-benchmarks, beside the end-to-end table (after the load, on a quiet machine).
    const { runStages, stagesTable, guardrailsStageName } = await import('../bench/stages')
    const stages = await runStages()
    // A miss on a cached key, on the serving thread (the per-stage micro-benchmark: the entry key,
    // the lookup, the flight, the answer decoded and queued for the writer thread).
    const miss = stages.find((stage) => stage.stage.startsWith('cache: a miss'))
    if (miss) budget.push(line('cache miss on the serving thread < 10 µs (stage micro-benchmark)', miss.nsPerOp / 1000, 10, miss.nsPerOp < 10_000))
    // The personal-data guardrail set over a 1 KB prompt, on the serving thread (CONTRACT §17).
    const guardrails = stages.find((stage) => stage.stage === guardrailsStageName)
    if (guardrails) {
      const perKb = (guardrails.nsPerOp / 1000) * (1024 / new TextEncoder().encode(guardedPrompt).length)
      budget.push(line('guardrails, personal-data set: µs per KB of prompt on the serving thread ≤ 20 (stage micro-benchmark)', perKb, 20, perKb <= 20))
    }
    mkdirSync(join(repoRoot, 'bench/results'), { recursive: true })
    writeFileSync(join(repoRoot, 'bench/results/latest.json'), JSON.stringify({ ...results, stages }, null, 2) + '\n')
    process.stdout.write(renderTable(results) + '\n\n' + stagesTable(stages) + '\n')
    const failed = budget.filter((entry) => !entry.pass)
    if (check && failed.length) {
      process.stderr.write(`bench --check: budget failed: ${failed.map((entry) => entry.rule).join('; ')}\n`)
      process.exitCode = 1
    }
  } finally {
    cleanup()
  }
}

const fixed = (value: number, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : '–')

function renderTable(results: any): string {
  const lines = [
    '| scenario | system | req/s | p50 ms | p90 ms | p99 ms | TTFB p50 ms | CPU µs/req | GCs (full), longest pause ms | added p50 vs bare (ms, ratio) | added p50 vs direct (ms) |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const scenario of results.scenarios) {
    const systems = scenario.systems
    for (const [system, stats] of Object.entries<any>(systems)) {
      const vsBare = system === 'router' || system === 'floor' || system === 'baseline' ? `${fixed(stats.p50 - systems.bare.p50, 3)} (${fixed(stats.p50 / systems.bare.p50)}×)` : ''
      const vsDirect = system === 'direct' ? '' : fixed(stats.p50 - systems.direct.p50, 3)
      lines.push(
        `| ${scenario.name} | ${system} | ${stats.rps} | ${fixed(stats.p50, 3)} | ${fixed(stats.p90, 3)} | ${fixed(stats.p99, 3)} | ${stats.ttfb_p50 !== undefined ? fixed(stats.ttfb_p50, 3) : ''} | ${stats.cpu_us_per_request !== undefined ? fixed(stats.cpu_us_per_request, 0) : ''} | ${stats.gc_count !== undefined ? `${stats.gc_count} (${stats.gc_full}), ${fixed(stats.gc_max_pause_ms, 2)}` : ''} | ${vsBare} | ${vsDirect} |`,
      )
    }
  }
  lines.push('', `Router RSS (MB): ${Object.entries<number>(results.router_rss_mb).map(([name, value]) => `${name} ${fixed(value, 1)}`).join(', ')}`)
  lines.push(`Request-log rows: ${results.log_rows.written} written for ${results.log_rows.requests_sent} requests sent`)
  const crash: CrashCheck = results.kill_9
  lines.push(`kill -9 under load (c=64): ${crash.answered} requests answered 200 before the kill; after the restart ${crash.rows} rows in all (${crash.replayed} replayed from the journal), ${crash.lost} lost, ${crash.duplicates} duplicated`)
  lines.push('', '| budget | value | limit | pass |', '|---|---|---|---|')
  for (const entry of results.budget) lines.push(`| ${entry.rule} | ${fixed(entry.value, 3)} | ${entry.limit} | ${entry.pass ? 'yes' : 'NO'} |`)
  lines.push('', '| reference (not budget) | value |', '|---|---|')
  for (const entry of results.reference) lines.push(`| ${entry.line} | ${Array.isArray(entry.value) ? entry.value.map((value: number) => fixed(value, Math.abs(value) < 10 ? 3 : 1)).join(', ') : fixed(entry.value, 3)} |`)
  return lines.join('\n')
}

if (process.argv.includes('--scale')) {
  const { runScale, scaleTable, retentionCurve, retentionTable } = await import('../bench/scale')
  const optional = (name: string) => (process.argv.includes(`--${name}`) ? argument(name, Number.NaN) : undefined)
  if (!process.argv.includes('--scale-retention-only')) process.stdout.write(scaleTable(await runScale(optional('scale-rows'), optional('scale-window-ms'))) + '\n\n')
  process.stdout.write(retentionTable(await retentionCurve(optional('scale-rows-per-day') ?? 20_000)) + '\n')
} else if (process.argv.includes('--floor-parts')) {
  const { runFloorParts } = await import('./bench/floor-parts')
  process.stdout.write((await runFloorParts({ rounds: argument('rounds', 3), roundMs, concurrency: 64 })) + '\n')
} else if (process.argv.includes('--stages')) {
  const { runStages, stagesTable } = await import('../bench/stages')
  process.stdout.write(stagesTable(await runStages()) + '\n')
} else await main()
