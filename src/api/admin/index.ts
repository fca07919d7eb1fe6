/** The management REST API at /api/v1 (SPEC "Management API"): thin routes over management/. */
import { Elysia } from 'elysia'
import { Type } from '@sinclair/typebox'
import type { AppDeps } from '../deps'
import { managementAuth } from './auth'
import { gatewayCatalog, publicGatewayEntry } from '../../gateways/catalog'
import { createProvider, deleteProvider, getProvider, listProviders, updateProvider } from '../../management/providers'
import { createKey, getKey, getRouting, listKeys, putRouting, revokeKey, updateKey } from '../../management/keys'
import { usageBreakdown, usageSeries, usageSummary, type UsageQueryInput } from '../../management/usage'
import { accountSnapshot } from '../../management/account'
import { ManagementError } from '../../management/errors'
import {
  KeyCreateInput,
  KeyOutput,
  KeyUpdateInput,
  ProviderCreateInput,
  ProviderOutput,
  ProviderUpdateInput,
  RoutingInput,
  RoutingOutput,
  UsageQuery,
  ErrorOutput,
} from '../../management/schemas'

const data = <T>(value: T) => ({ data: value })

function envelope(schema: Parameters<typeof Type.Object>[0]['data']) {
  return Type.Object({ data: schema })
}

const errorResponses = {
  400: ErrorOutput,
  401: ErrorOutput,
  403: ErrorOutput,
  404: ErrorOutput,
}

export const managementBodyLimit = 1_000_000

/** Management bodies: JSON of at most 1 MB, counted as read (a chunked body has no length header). */
async function readManagementJson({ request }: { request: Request }): Promise<unknown> {
  const reader = request.body?.getReader()
  if (!reader) throw new ManagementError(400, 'Request body must be a JSON object.')
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > managementBodyLimit) {
      await reader.cancel()
      throw new ManagementError(400, `Request body too large: the limit is ${managementBodyLimit} bytes.`)
    }
    chunks.push(value)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    throw new ManagementError(400, 'Malformed JSON body.')
  }
}

function usageQuery(request: Request): UsageQueryInput {
  const search = new URL(request.url).searchParams
  const ids = search.getAll('api_key_id')
  return {
    range: search.get('range') ?? undefined,
    api_key_id: ids.length === 0 ? undefined : ids,
    by: search.get('by') ?? undefined,
  }
}

export function adminRoutes(deps: AppDeps) {
  const created = (set: { status?: number | string }) => {
    set.status = 201
  }
  // normalize: false — a body is validated as sent, never reshaped (an array is not an object).
  return new Elysia({ prefix: '/api/v1', name: 'admin', normalize: false })
    .parser('managementJson', readManagementJson)
    .use(managementAuth(deps))
    .get('/gateways', () => data(gatewayCatalog.map(publicGatewayEntry)), {
      detail: { tags: ['gateways'], summary: 'Gateway catalog' },
    })
    .get('/providers', ({ actor, query }) => data(listProviders(deps, actor, (query as Record<string, string>).gateway)), {
      detail: { tags: ['providers'], summary: 'List provider keys' },
      response: { 200: envelope(Type.Array(ProviderOutput)), ...errorResponses },
    })
    .post(
      '/providers',
      ({ actor, body, set }) => {
        const provider = createProvider(deps, actor, body)
        created(set)
        return data(provider)
      },
      { parse: 'managementJson', body: ProviderCreateInput, detail: { tags: ['providers'], summary: 'Store a provider key' }, response: { 201: envelope(ProviderOutput), ...errorResponses } },
    )
    .get('/providers/:id', ({ actor, params }) => data(getProvider(deps, actor, params.id)), {
      detail: { tags: ['providers'], summary: 'Get a provider key' },
      response: { 200: envelope(ProviderOutput), ...errorResponses },
    })
    .patch('/providers/:id', ({ actor, params, body }) => data(updateProvider(deps, actor, params.id, body)), {
      parse: 'managementJson',
      body: ProviderUpdateInput,
      detail: { tags: ['providers'], summary: 'Rename, disable or enable a provider key' },
      response: { 200: envelope(ProviderOutput), ...errorResponses },
    })
    .delete('/providers/:id', ({ actor, params }) => data(deleteProvider(deps, actor, params.id)), {
      detail: { tags: ['providers'], summary: 'Delete a provider key and strip it from every rule' },
      response: { 200: envelope(Type.Object({ id: Type.String(), deleted: Type.Boolean() })), ...errorResponses },
    })
    .get('/keys', ({ actor, query }) => data(listKeys(deps, actor, (query as Record<string, string>).offset)), {
      detail: { tags: ['keys'], summary: 'List inference keys, most recent 100 per page' },
      response: { 200: envelope(Type.Array(KeyOutput)), ...errorResponses },
    })
    .post(
      '/keys',
      ({ actor, body, set }) => {
        const key = createKey(deps, actor, body)
        created(set)
        return data(key)
      },
      { parse: 'managementJson', body: KeyCreateInput, detail: { tags: ['keys'], summary: 'Create an inference key' }, response: { 201: envelope(KeyOutput), ...errorResponses } },
    )
    .get('/keys/:id', ({ actor, params }) => data(getKey(deps, actor, params.id)), {
      detail: { tags: ['keys'], summary: 'Get an inference key' },
      response: { 200: envelope(KeyOutput), ...errorResponses },
    })
    .patch('/keys/:id', ({ actor, params, body }) => data(updateKey(deps, actor, params.id, body)), {
      parse: 'managementJson',
      body: KeyUpdateInput,
      detail: { tags: ['keys'], summary: 'Update an inference key (all-or-nothing)' },
      response: { 200: envelope(KeyOutput), ...errorResponses, 409: ErrorOutput },
    })
    .delete('/keys/:id', ({ actor, params }) => data(revokeKey(deps, actor, params.id)), {
      detail: { tags: ['keys'], summary: 'Revoke an inference key (idempotent)' },
      response: { 200: envelope(KeyOutput), ...errorResponses },
    })
    .get('/keys/:id/routing', ({ actor, params }) => data(getRouting(deps, actor, params.id)), {
      detail: { tags: ['routing'], summary: 'Get the routing rule of a key' },
      response: { 200: envelope(RoutingOutput), ...errorResponses },
    })
    .put('/keys/:id/routing', ({ actor, params, body }) => data(putRouting(deps, actor, params.id, body)), {
      parse: 'managementJson',
      body: RoutingInput,
      detail: { tags: ['routing'], summary: 'Replace the routing rule of a key' },
      response: { 200: envelope(RoutingOutput), ...errorResponses, 409: ErrorOutput },
    })
    .get('/usage/summary', ({ actor, request }) => data(usageSummary(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Usage totals' },
    })
    .get('/usage/series', ({ actor, request }) => data(usageSeries(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Usage in time buckets: hourly for 24h, daily otherwise' },
    })
    .get('/usage/breakdown', ({ actor, request }) => data(usageBreakdown(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Top 12 models or gateways by requests' },
    })
    .get('/account', ({ actor }) => data(accountSnapshot(deps, actor)), {
      detail: { tags: ['account'], summary: 'Workspace snapshot' },
    })
}
