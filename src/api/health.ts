/** GET /healthz (no auth) and GET /metrics (Prometheus text), on every role. */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps'
import { jsonResponse } from '../http/json-response'
import { readLagMs } from '../cluster/position'

export function healthRoutes(deps: AppDeps) {
  return new Elysia({ name: 'health' })
    .get(
      '/healthz',
      () => {
        try {
          deps.storage.dataVersion()
        } catch {
          return jsonResponse(503, { ok: false })
        }
        // A LiteFS replica says how far behind the primary it is, and fails past RT_MAX_LAG_MS (CONTRACT §10).
        // Not while it knows no primary: LiteFS's lag then grows on every replica alike (a primary that
        // died holds its lease until the TTL, 10 s by default), and failing them all at once would take
        // every machine out of rotation, standby included, while their copies are as fresh as any.
        const { litefsDir, maxLagMs } = deps.config
        const lagMs = litefsDir && deps.writer.replica && deps.writer.primaryHost() !== '' ? readLagMs(litefsDir) : undefined
        if (lagMs === undefined) return { ok: true }
        return lagMs > maxLagMs ? jsonResponse(503, { ok: false, lag_ms: lagMs, max_lag_ms: maxLagMs }) : { ok: true, lag_ms: lagMs }
      },
      { detail: { hide: true } },
    )
    .get('/metrics', () => new Response(deps.metrics.render(), { headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }), {
      detail: { hide: true },
    })
}
