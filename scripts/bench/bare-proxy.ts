/**
 * The bare pass-through: one Bun.serve hop that forwards the request with fetch and returns the
 * upstream body unchanged — the physical limit of a proxy hop on this runtime. Prints `port N`.
 */
import { serveOnLoopback } from './serve'

const upstream = process.env.BENCH_UPSTREAM_URL!

serveOnLoopback(async (request) => {
  const url = new URL(request.url)
  const response = await fetch(upstream + url.pathname, {
    method: request.method,
    headers: { 'content-type': 'application/json', authorization: 'Bearer upstream' },
    body: request.method === 'GET' ? undefined : await request.arrayBuffer(),
  })
  return new Response(response.body, { status: response.status, headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' } })
})
