/**
 * The app host's pages outside /api/v1: the live model translation table (GET /api/model-map), the
 * dashboard at `/` (src/dashboard/, bundled by Bun from its HTML and served with its assets by
 * Bun.serve's routes) and the dashboard's own calls under /dashboard/api: the actions SPEC leaves to
 * the dashboard, behind the same management-key authentication and rules as /api/v1.
 */
import { Elysia, type AnyElysia } from 'elysia'
import dashboardPage from '../dashboard/index.html'
import favicon from '../dashboard/favicon.svg' with { type: 'text' }
import type { AppDeps } from './deps'
import type { Config } from '../config/env'
import { managementAuth } from './admin/auth'
import { managementCaller, readManagementJson } from './admin/index'
import { accountSnapshot } from '../management/account'
import { usageCosts } from '../management/usage'
import { modelMap } from '../management/model-map'
import type { Actor } from '../management/context'
import { operationList } from '../management/operations'
import { perform } from '../management/perform'

/** Bun.serve's routes for the dashboard page and its bundled assets: on the app role only (CONTRACT §2). */
export function dashboardPageRoutes(config: Pick<Config, 'role'>): Record<string, typeof dashboardPage | Response> {
  if (config.role !== 'all' && config.role !== 'app') return {}
  // The page names its icon; a browser that asks for /favicon.ico on its own gets the same one, not a 404.
  return { '/': dashboardPage, '/favicon.ico': new Response(favicon, { headers: { 'content-type': 'image/svg+xml', 'cache-control': 'public, max-age=86400' } }) }
}

const data = <T>(value: T) => ({ data: value })

export function dashboardRoutes(deps: AppDeps) {
  return new Elysia({ name: 'dashboard' })
    .get('/api/model-map', () => ({ data: modelMap(deps) }), { detail: { hide: true } })
    .use(dashboardApiRoutes(deps))
}

/** The dashboard's own calls: the reads it alone makes, then every call of the operation table that has one (hidden from the OpenAPI document). */
function dashboardApiRoutes(deps: AppDeps) {
  const hidden = { detail: { hide: true } }
  let routes: AnyElysia = new Elysia({ prefix: '/dashboard/api', name: 'dashboard-api', normalize: false })
    .parser('managementJson', readManagementJson)
    .use(managementAuth(deps))
    // Who signed in: the workspace and whether the key may write (a read-only key sees no write control).
    .get('/session', ({ actor }) => data({ workspace: accountSnapshot(deps, actor).workspace, read_only: actor.readOnly }), hidden)
    // Tokens and the recorded cost by model and gateway, for the usage page's filters.
    .get('/usage/costs', async ({ actor, request }) => {
      const search = new URL(request.url).searchParams
      const ids = search.getAll('api_key_id')
      return data(await usageCosts(deps, actor, { range: search.get('range') ?? undefined, api_key_id: ids.length ? ids : undefined }))
    }, hidden)
  for (const operation of operationList) {
    const binding = operation.dashboard
    if (!binding) continue
    // Bodies are validated like /api/v1's (a violation is a 400 naming the field).
    const options = binding.body ? { parse: ['managementJson' as const], body: binding.body, ...hidden } : hidden
    const handler = async (context: { actor: Actor; params: Record<string, string>; body: unknown; request: Request }) => {
      const input = binding.input({ params: context.params, body: context.body, query: new URL(context.request.url).searchParams })
      const result = await perform(deps, managementCaller(deps, context.actor, 'dashboard', context.request), operation, input)
      return data(binding.output ? binding.output(result) : result)
    }
    routes = (routes as any)[binding.method.toLowerCase()](binding.path, handler, options)
  }
  return routes
}
