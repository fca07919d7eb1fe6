/** The benchmark's child processes: reading a line they print, draining their output, and the load generator (load.ts). */
import { join } from 'node:path'

export type Child = ReturnType<typeof Bun.spawn>

export async function readLine(child: Child, pattern: RegExp, timeoutMs = 60_000, from: 'stdout' | 'stderr' = 'stdout'): Promise<RegExpMatchArray> {
  const reader = (child[from] as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const { value, done } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    const match = buffer.match(pattern)
    if (match) {
      reader.releaseLock()
      return match
    }
  }
  throw new Error(`timed out waiting for ${pattern}: ${buffer.slice(-500)}`)
}

export function drain(child: Child, from: 'stdout' | 'stderr' = 'stdout') {
  void (async () => {
    const reader = (child[from] as ReadableStream<Uint8Array>).getReader()
    while (!(await reader.read()).done) {}
  })()
}

export interface LoadResult {
  sent: number
  completed: number
  errors: number
  elapsedMs: number
  latencies: number[]
  firstBytes: number[]
  gaps: number[]
}

export async function load(config: { url: string; body: string; headers: Record<string, string>; concurrency: number; durationMs?: number; count?: number; stream?: boolean }): Promise<LoadResult> {
  const child = Bun.spawn(['bun', join(import.meta.dir, 'load.ts'), JSON.stringify({ stream: false, ...config })], { stdout: 'pipe', stderr: 'inherit' })
  const text = await new Response(child.stdout).text()
  await child.exited
  return JSON.parse(text) as LoadResult
}

export const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}


/** A management API client for the router at `url`: answers `data`, throws on a non-2xx answer. */
export function managementClient(url: string, managementKey: string) {
  return async (method: string, path: string, body?: unknown) => {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const json = (await response.json()) as { data: any }
    if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json)}`)
    return json.data
  }
}
