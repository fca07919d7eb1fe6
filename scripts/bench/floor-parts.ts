/**
 * `bench --floor-parts`: prices each mandatory part of the floor (scripts/bench/floor-proxy.ts) by
 * running floor variants that leave one part out beside the bare hop and the whole floor, at c=64
 * buffered, interleaved round by round; prints CPU µs per request and throughput of each.
 */
import { join } from 'node:path'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { drain, load, readLine, type Child } from './children'

const repoRoot = join(import.meta.dir, '../..')
const cpuMicros = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) / 100) * 1e6
}

export async function runFloorParts(options: { rounds: number; roundMs: number; concurrency: number }) {
  const children: Child[] = []
  const dataDir = mkdtempSync(join(tmpdir(), 'router-floor-parts-'))
  try {
    const spawn = async (script: string, env: Record<string, string>) => {
      const child = Bun.spawn(['bun', join(repoRoot, script)], { stdout: 'pipe', stderr: 'inherit', env: { ...process.env, ...env } })
      children.push(child)
      const port = (await readLine(child, /port (\d+)/))[1]
      drain(child)
      return { child, port }
    }
    const upstream = await spawn('scripts/bench/upstream.ts', {})
    const upstreamUrl = `http://127.0.0.1:${upstream.port}/ok`
    const variants: Record<string, string | undefined> = { bare: undefined, floor: '', 'floor without log': 'log', 'floor without version': 'version', 'floor without signal': 'signal', 'floor without parse': 'parse', 'floor without buffer': 'buffer', 'floor without all': 'log,version,signal,parse,buffer' }
    const systems: { name: string; port: string; pid: number }[] = []
    for (const [name, without] of Object.entries(variants)) {
      const started =
        without === undefined
          ? await spawn('scripts/bench/bare-proxy.ts', { BENCH_UPSTREAM_URL: upstreamUrl })
          : await spawn('scripts/bench/floor-proxy.ts', { BENCH_UPSTREAM_URL: upstreamUrl, BENCH_FLOOR_DIR: mkdtempSync(join(dataDir, 'floor-')), BENCH_FLOOR_WITHOUT: without })
      systems.push({ name, port: started.port!, pid: started.child.pid })
    }
    const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say something about foxes.' }], max_tokens: 200 })
    const headers = { 'content-type': 'application/json', authorization: 'Bearer rt_live_floor' }
    const totals = new Map(systems.map((system) => [system.name, { requests: 0, elapsedMs: 0, cpu: 0 }]))
    for (const system of systems) await load({ url: `http://127.0.0.1:${system.port}/v1/chat/completions`, headers, body, concurrency: options.concurrency, durationMs: 400 })
    for (let round = 0; round < options.rounds; round++) {
      for (const system of systems) {
        const before = cpuMicros(system.pid)
        const result = await load({ url: `http://127.0.0.1:${system.port}/v1/chat/completions`, headers, body, concurrency: options.concurrency, durationMs: options.roundMs })
        const total = totals.get(system.name)!
        total.requests += result.completed
        total.elapsedMs += result.elapsedMs
        total.cpu += cpuMicros(system.pid) - before
      }
    }
    const bare = totals.get('bare')!
    const bareCpu = bare.cpu / bare.requests
    const lines = ['| system | req/s | CPU µs/req | CPU vs bare |', '|---|---:|---:|---:|']
    for (const [name, total] of totals) {
      const cpu = total.cpu / total.requests
      lines.push(`| ${name} | ${Math.round((total.requests / total.elapsedMs) * 1000)} | ${cpu.toFixed(1)} | ${(cpu / bareCpu).toFixed(2)}× |`)
    }
    return lines.join('\n')
  } finally {
    for (const child of children) child.kill()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

if (import.meta.main) process.stdout.write((await runFloorParts({ rounds: 3, roundMs: 2500, concurrency: 64 })) + "\n")
