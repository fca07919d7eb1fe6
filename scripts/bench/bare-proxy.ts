/**
 * The bare pass-through: one Bun.serve hop that forwards the request with fetch and returns the
 * upstream body unchanged — the physical limit of a proxy hop on this runtime. Prints `port N`.
 */
const upstream = process.env.BENCH_UPSTREAM_URL!

const server = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  idleTimeout: 0,
  development: false,
  async fetch(request) {
    const url = new URL(request.url)
    const response = await fetch(upstream + url.pathname, {
      method: request.method,
      headers: { 'content-type': 'application/json', authorization: 'Bearer upstream' },
      body: request.method === 'GET' ? undefined : await request.arrayBuffer(),
    })
    return new Response(response.body, { status: response.status, headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' } })
  },
})
process.stdout.write(`port ${server.port}\n`)

export {}
