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
import { usageCosts, type PriceOf } from '../management/usage'
import { spellingFor } from '../gateways/model-catalog'
import { badRequest } from '../management/errors'
import { isPlainObject } from '../management/context'
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
    }, { detail: { hide: true } })
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
    // The key's notifications and MCP servers (SPEC leaves them to the dashboard). Each checks first
    // that the key is the signed-in workspace's (404 otherwise, as /api/v1 answers).
    .get('/keys/:id/extras', ({ actor, params }) => {
      getKey(deps, actor, params.id)
      return data({ ...keyNotifications(deps, params.id), mcp_servers: listMcpServers(deps, params.id).servers })
    }, { detail: { hide: true } })
    // A new webhook URL, or a rotation: the signing secret is in this answer only.
    .put('/keys/:id/webhook', async ({ actor, params, body }) => {
      getKey(deps, actor, params.id)
      return data(await setWebhook(deps, params.id, { url: stringField(body, 'url', true) }))
    }, { parse: ['managementJson'], detail: { hide: true } })
    .post('/keys/:id/webhook/rotate', async ({ actor, params }) => {
      getKey(deps, actor, params.id)
      return data(await setWebhook(deps, params.id, { rotateSecret: true }))
    }, { detail: { hide: true } })
    .delete('/keys/:id/webhook', async ({ actor, params }) => {
      getKey(deps, actor, params.id)
      return data(await setWebhook(deps, params.id, { clear: true }))
    }, { detail: { hide: true } })
    .put('/keys/:id/notify-email', ({ actor, params, body }) => {
      getKey(deps, actor, params.id)
      const on = isPlainObject(body) ? body.on : undefined
      if (typeof on !== 'boolean') throw badRequest('Invalid on: expected true or false.')
      return data(setNotifyEmail(deps, params.id, on))
    }, { parse: ['managementJson'], detail: { hide: true } })
    .post('/keys/:id/mcp-servers', async ({ actor, params, body }) => {
      getKey(deps, actor, params.id)
      return data((await addMcpServer(deps, params.id, stringField(body, 'url', true)!, stringField(body, 'name', false))).servers)
    }, { parse: ['managementJson'], detail: { hide: true } })
    .delete('/keys/:id/mcp-servers/:server', ({ actor, params }) => {
      getKey(deps, actor, params.id)
      return data(removeMcpServer(deps, params.id, params.server).servers)
    }, { detail: { hide: true } })
    // The workspace: settings, members, management keys (created with the secret shown once; the
    // read-only flag is changed here only, SPEC "Management key").
    .get('/workspace', ({ actor }) => data(workspaceOverview(deps, actor.workspaceId)), { detail: { hide: true } })
    .patch('/workspace', ({ actor, body }) => {
      if (!isPlainObject(body)) throw badRequest('Request body must be a JSON object.')
      const flag = body.capture_bodies
      if (flag !== undefined && typeof flag !== 'boolean') throw badRequest('Invalid capture_bodies: expected true or false.')
      return data(
        setWorkspaceSettings(deps, actor.workspaceId, {
          allowedIps: stringField(body, 'allowed_ips', false),
          steeringMessage: stringField(body, 'steering_message', false),
          captureBodies: flag,
        }),
      )
    }, { parse: ['managementJson'], detail: { hide: true } })
    .post('/workspace/members', ({ actor, body }) => data(addMember(deps, actor.workspaceId, stringField(body, 'email', true)!)), { parse: ['managementJson'], detail: { hide: true } })
    .post('/workspace/management-keys', ({ actor, body }) => {
      const readOnly = isPlainObject(body) ? body.read_only : undefined
      if (readOnly !== undefined && typeof readOnly !== 'boolean') throw badRequest('Invalid read_only: expected true or false.')
      return data(createManagementKey(deps, actor.workspaceId, readOnly ?? false))
    }, { parse: ['managementJson'], detail: { hide: true } })
    .patch('/workspace/management-keys/:id', ({ actor, params, body }) => {
      const readOnly = isPlainObject(body) ? body.read_only : undefined
      if (typeof readOnly !== 'boolean') throw badRequest('Invalid read_only: expected true or false.')
      return data(setManagementKeyReadOnly(deps, params.id, readOnly, actor.workspaceId))
    }, { parse: ['managementJson'], detail: { hide: true } })
}

/** A string field of a JSON body: 400 naming it when it is not a string (or missing and required). */
function stringField(body: unknown, name: string, required: true): string
function stringField(body: unknown, name: string, required: false): string | undefined
function stringField(body: unknown, name: string, required: boolean): string | undefined {
  const value = isPlainObject(body) ? body[name] : undefined
  if (value === undefined && !required) return undefined
  if (typeof value !== 'string') throw badRequest(`Invalid ${name}: expected a string.`)
  return value
}
