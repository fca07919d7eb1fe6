/**
 * The app host's pages outside /api/v1: the live model translation table (GET /api/model-map), the
 * dashboard at `/` (src/dashboard/, bundled by Bun from its HTML and served with its assets by
 * Bun.serve's routes) and the dashboard's own calls under /dashboard/api: the actions SPEC leaves to
 * the dashboard, behind the same management-key authentication and rules as /api/v1.
 */
import { Elysia } from 'elysia'
import dashboardPage from '../dashboard/index.html'
import type { AppDeps } from './deps'
import type { Config } from '../config/env'
import { managementAuth } from './admin/auth'
import { readManagementJson } from './admin/index'
import { accountSnapshot } from '../management/account'
import { getKey, rotateKey } from '../management/keys'
import { recentRequests } from '../management/requests'
import { badRequest } from '../management/errors'
import { isPlainObject } from '../management/context'
import { catalogStaleAfterMs } from '../gateways/model-catalog'
import { pricingOfStoredObject } from '../gateways/model-prices'

export function modelMap(deps: AppDeps) {
  const now = Date.now()
  const models = new Map<string, { id: string; canonical_id: string; pricing?: { prompt: number | null; completion: number | null } }[]>()
  for (const row of deps.repositories.gatewayCatalogs.listModels()) {
    const list = models.get(row.gateway) ?? []
    // Prices where the gateway lists them (USD per token); a side it does not list is null (unknown, never zero).
    const pricing = pricingOfStoredObject(row.object)
    list.push({ id: row.modelId, canonical_id: row.canonicalId, ...(pricing ? { pricing: { prompt: pricing.prompt ?? null, completion: pricing.completion ?? null } } : {}) })
    models.set(row.gateway, list)
  }
  return deps.repositories.gatewayCatalogs.listCatalogs().map((catalog) => ({
    gateway: catalog.gateway,
    fetched_at: new Date(catalog.fetchedAt).toISOString(),
    stale: now - catalog.fetchedAt > catalogStaleAfterMs,
    models: (models.get(catalog.gateway) ?? []).sort((left, right) => left.canonical_id.localeCompare(right.canonical_id)),
  }))
}

/** Bun.serve's routes for the dashboard page and its bundled assets: on the app role only (CONTRACT §2). */
export function dashboardPageRoutes(config: Pick<Config, 'role'>): Record<string, typeof dashboardPage> {
  return config.role === 'all' || config.role === 'app' ? { '/': dashboardPage } : {}
}

const data = <T>(value: T) => ({ data: value })

export function dashboardRoutes(deps: AppDeps) {
  return new Elysia({ name: 'dashboard' })
    .get('/api/model-map', () => ({ data: modelMap(deps) }), { detail: { hide: true } })
    .use(dashboardApiRoutes(deps))
}

/** The dashboard's own calls. Not part of the public API: hidden from the OpenAPI document. */
function dashboardApiRoutes(deps: AppDeps) {
  return new Elysia({ prefix: '/dashboard/api', name: 'dashboard-api', normalize: false })
    .parser('managementJson', readManagementJson)
    .use(managementAuth(deps))
    // Who signed in: the workspace and whether the key may write (a read-only key sees no write control).
    .get('/session', ({ actor }) => data({ workspace: accountSnapshot(deps, actor).workspace, read_only: actor.readOnly }), { detail: { hide: true } })
    .get('/requests', async ({ actor, request }) => {
      const search = new URL(request.url).searchParams
      const text = (name: string) => search.get(name) ?? undefined
      return data(await recentRequests(deps, actor, { range: text('range'), api_key_id: text('api_key_id'), status: text('status'), model: text('model') }))
    }, { detail: { hide: true } })
    // Rotation with a grace window (SPEC: the previous secret keeps working until grace_until); the new key is shown once.
    .post(
      '/keys/:id/rotate',
      ({ actor, params, body }) => {
        getKey(deps, actor, params.id)
        const grace = isPlainObject(body) ? body.grace_seconds : undefined
        if (grace !== undefined && typeof grace !== 'number') throw badRequest('Invalid grace_seconds: expected a whole number of 0 or more.')
        return data(rotateKey(deps, params.id, grace))
      },
      { parse: ['managementJson'], detail: { hide: true } },
    )
}
