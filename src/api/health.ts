/** GET /healthz (no auth) and GET /metrics (Prometheus text), on every role. */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps'

export function healthRoutes(deps: AppDeps) {
  return new Elysia({ name: 'health' })
    .get(
      '/healthz',
      () => {
        try {
          deps.storage.dataVersion()
          return { ok: true }
        } catch {
          return new Response(JSON.stringify({ ok: false }), { status: 503, headers: { 'content-type': 'application/json' } })
        }
      },
      { detail: { hide: true } },
    )
    .get('/metrics', () => new Response(deps.metrics.render(), { headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }), {
      detail: { hide: true },
    })
}
