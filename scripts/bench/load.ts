/**
 * Closed-loop load generator (a separate process so it never shares the router's event loop):
 * `concurrency` loops, each sending the next request as soon as the previous one completed, for
 * `durationMs` or until `count` requests. Records latency, and for streams the time to first
 * byte. Prints one JSON line of results.
 */
interface LoadConfig {
  url: string
  body: string
  headers: Record<string, string>
  concurrency: number
  durationMs?: number
  count?: number
  stream: boolean
}

const config = JSON.parse(process.argv[2]!) as LoadConfig
const latencies: number[] = []
const firstBytes: number[] = []
const gaps: number[] = []
let errors = 0
let sent = 0
const started = performance.now()
const deadline = config.durationMs ? started + config.durationMs : Number.POSITIVE_INFINITY

async function loop() {
  while (performance.now() < deadline && (config.count === undefined || sent < config.count)) {
    sent++
    const begin = performance.now()
    try {
      const response = await fetch(config.url, { method: 'POST', headers: config.headers, body: config.body })
      if (config.stream && response.body) {
        const reader = response.body.getReader()
        let first: number | undefined
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          if (first === undefined && value.byteLength > 0) first = performance.now()
        }
        firstBytes.push((first ?? performance.now()) - begin)
      } else await response.arrayBuffer()
      if (response.status !== 200) errors++
      const end = performance.now()
      latencies.push(end - begin)
      if (config.stream && firstBytes.length) gaps.push(end - begin - firstBytes[firstBytes.length - 1]!)
    } catch {
      errors++
    }
  }
}

await Promise.all(Array.from({ length: config.concurrency }, loop))
const elapsed = performance.now() - started
process.stdout.write(JSON.stringify({ sent, completed: latencies.length, errors, elapsedMs: elapsed, latencies, firstBytes, gaps }) + '\n')

export {}
