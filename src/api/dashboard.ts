/**
 * The app host's pages outside /api/v1: the live model translation table (GET /api/model-map), the
 * dashboard at `/` (src/dashboard/, bundled by Bun from its HTML and served with its assets by
 * Bun.serve's routes) and the dashboard's own calls under /dashboard/api: the actions SPEC leaves to
 * the dashboard, behind the same management-key authentication and rules as /api/v1.
 */
import { Elysia } from 'elysia'
import dashboardPage from '../dashboard/index.html'
import favicon from '../dashboard/favicon.svg' with { type: 'text' }
import type { AppDeps } from './deps'
import type { Config } from '../config/env'
import { managementAuth } from './admin/auth'
import { readManagementJson } from './admin/index'
import { accountSnapshot } from '../management/account'
import { rotateKey, type KeyRef } from '../management/keys'
import { providerNotes, setProviderNotes } from '../management/providers'
import { recentRequests } from '../management/requests'
import { usageCosts, type PriceOf } from '../management/usage'
import { spellingFor } from '../gateways/model-catalog'
import type { Actor } from '../management/context'
import { AllowedIpsInput } from '../management/schemas'
import { Type } from '@sinclair/typebox'
import { addMcpServer, keyNotifications, listMcpServers, removeMcpServer, setNotifyEmail, setWebhook } from '../management/key-settings'
import { addMember, createManagementKey, setManagementKeyReadOnly, setWorkspaceSettings, workspaceOverview } from '../management/workspaces'
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

// The dashboard's bodies, validated like /api/v1's (a violation is a 400 naming the field).
const RotateInput = Type.Object({ grace_seconds: Type.Optional(Type.Number()) })
const WebhookInput = Type.Object({ url: Type.String() })
const NotifyInput = Type.Object({ on: Type.Boolean() })
const McpServerInput = Type.Object({ url: Type.String(), name: Type.Optional(Type.String()) })
const WorkspaceInput = Type.Object({ allowed_ips: Type.Optional(AllowedIpsInput), steering_message: Type.Optional(Type.String()), capture_bodies: Type.Optional(Type.Boolean()) })
const MemberInput = Type.Object({ email: Type.String() })
const ManagementKeyInput = Type.Object({ read_only: Type.Optional(Type.Boolean()) })
const ReadOnlyInput = Type.Object({ read_only: Type.Boolean() })
const NotesInput = Type.Object({ notes: Type.String() })

/** The dashboard's own calls. Not part of the public API: hidden from the OpenAPI document. */
function dashboardApiRoutes(deps: AppDeps) {
  const hidden = { detail: { hide: true } }
  const json = { parse: ['managementJson' as const], ...hidden }
  // A key of the signed-in workspace: another workspace's is not found, as on /api/v1.
  const keyOf = (actor: Actor, id: string): KeyRef => ({ id, workspaceId: actor.workspaceId })
  return new Elysia({ prefix: '/dashboard/api', name: 'dashboard-api', normalize: false })
    .parser('managementJson', readManagementJson)
    .use(managementAuth(deps))
    // Who signed in: the workspace and whether the key may write (a read-only key sees no write control).
    .get('/session', ({ actor }) => data({ workspace: accountSnapshot(deps, actor).workspace, read_only: actor.readOnly }), hidden)
    // Tokens and estimated cost by model and gateway, for the usage page's filters.
    .get('/usage/costs', async ({ actor, request }) => {
      const search = new URL(request.url).searchParams
      const ids = search.getAll('api_key_id')
      const priceOf: PriceOf = (gateway, model) => {
        const catalog = deps.snapshots.current().catalogs.get(gateway)
        const spelled = catalog && spellingFor(catalog, model)
        return spelled ? catalog.prices.get(spelled) : undefined
      }
      return data(await usageCosts(deps, actor, { range: search.get('range') ?? undefined, api_key_id: ids.length ? ids : undefined }, priceOf))
    }, hidden)
    .get('/requests', async ({ actor, request }) => {
      const search = new URL(request.url).searchParams
      const text = (name: string) => search.get(name) ?? undefined
      return data(await recentRequests(deps, actor, { range: text('range'), api_key_id: text('api_key_id'), status: text('status'), model: text('model') }))
    }, hidden)
    // Rotation with a grace window (SPEC: the previous secret keeps working until grace_until); the new key is shown once.
    .post('/keys/:id/rotate', ({ actor, params, body }) => data(rotateKey(deps, keyOf(actor, params.id), body.grace_seconds)), { ...json, body: RotateInput })
    // The key's notifications and MCP servers (SPEC leaves them to the dashboard).
    .get('/keys/:id/extras', ({ actor, params }) => data({ ...keyNotifications(deps, keyOf(actor, params.id)), mcp_servers: listMcpServers(deps, keyOf(actor, params.id)).servers }), hidden)
    // A new webhook URL, or a rotation: the signing secret is in this answer only.
    .put('/keys/:id/webhook', async ({ actor, params, body }) => data(await setWebhook(deps, keyOf(actor, params.id), { url: body.url })), { ...json, body: WebhookInput })
    .post('/keys/:id/webhook/rotate', async ({ actor, params }) => data(await setWebhook(deps, keyOf(actor, params.id), { rotateSecret: true })), hidden)
    .delete('/keys/:id/webhook', async ({ actor, params }) => data(await setWebhook(deps, keyOf(actor, params.id), { clear: true })), hidden)
    .put('/keys/:id/notify-email', ({ actor, params, body }) => data(setNotifyEmail(deps, keyOf(actor, params.id), body.on)), { ...json, body: NotifyInput })
    .post('/keys/:id/mcp-servers', async ({ actor, params, body }) => data((await addMcpServer(deps, keyOf(actor, params.id), body.url, body.name)).servers), { ...json, body: McpServerInput })
    .delete('/keys/:id/mcp-servers/:server', ({ actor, params }) => data(removeMcpServer(deps, keyOf(actor, params.id), params.server).servers), hidden)
    // Provider notes: free text, dashboard-only (SPEC "Provider key").
    .get('/providers/notes', ({ actor }) => data(providerNotes(deps, actor)), hidden)
    .put('/providers/:id/notes', ({ actor, params, body }) => data(setProviderNotes(deps, actor, params.id, body.notes)), { ...json, body: NotesInput })
    // The workspace: settings, members, management keys (created with the secret shown once; the
    // read-only flag is changed here only, SPEC "Management key").
    .get('/workspace', ({ actor }) => data(workspaceOverview(deps, actor.workspaceId)), hidden)
    .patch(
      '/workspace',
      ({ actor, body }) => data(setWorkspaceSettings(deps, actor.workspaceId, { allowedIps: body.allowed_ips, steeringMessage: body.steering_message, captureBodies: body.capture_bodies })),
      { ...json, body: WorkspaceInput },
    )
    .post('/workspace/members', ({ actor, body }) => data(addMember(deps, actor.workspaceId, body.email)), { ...json, body: MemberInput })
    .post('/workspace/management-keys', ({ actor, body }) => data(createManagementKey(deps, actor.workspaceId, body.read_only ?? false)), { ...json, body: ManagementKeyInput })
    .patch('/workspace/management-keys/:id', ({ actor, params, body }) => data(setManagementKeyReadOnly(deps, params.id, body.read_only, actor.workspaceId)), { ...json, body: ReadOnlyInput })
}
