/** GET /healthz (no auth) and GET /metrics (Prometheus text), on every role. */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps'
import { jsonResponse } from '../http/json-response'

export function healthRoutes(deps: AppDeps) {
  return new Elysia({ name: 'health' })
    .get(
      '/healthz',
      () => {
        try {
          deps.storage.dataVersion()
          return { ok: true }
        } catch {
          return jsonResponse(503, { ok: false })
        }
      },
      { detail: { hide: true } },
    )
    .get('/metrics', () => new Response(deps.metrics.render(), { headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }), {
      detail: { hide: true },
    })
}
