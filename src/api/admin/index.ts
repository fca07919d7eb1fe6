/** The management REST API at /api/v1 (SPEC "Management API"): thin routes over management/. */
import { Elysia } from 'elysia'
import { readBodyWithin } from '../../pipeline/read-body'
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
  AccountOutput,
  GatewayOutput,
  KeyCreateInput,
  KeyOutput,
  KeyUpdateInput,
  ProviderCreateInput,
  ProviderOutput,
  ProviderUpdateInput,
  RoutingInput,
  RoutingOutput,
  UsageBreakdownItemOutput,
  UsageQuery,
  UsageSeriesItemOutput,
  UsageSummaryOutput,
  errorOutput,
} from '../../management/schemas'

const data = <T>(value: T) => ({ data: value })

/** The `{data: …}` envelope of a success; the description becomes the response's in the OpenAPI document. */
function envelope(schema: Parameters<typeof Type.Object>[0]['data'], description: string) {
  return Type.Object({ data: schema }, { description })
}

// The error statuses a route can answer (SPEC "Management API"), each with the `{error}` envelope.
// Only thrown errors answer them, so these schemas document and never validate.
const invalidInput = { 400: errorOutput('Invalid input; the message names the first bad field.') }
const unauthorized = { 401: errorOutput('Missing or invalid management key.') }
const readOnly = { 403: errorOutput('A read-only management key cannot write.') }
const providerNotFound = { 404: errorOutput('No provider key with this id in the workspace.') }
const keyNotFound = { 404: errorOutput('No inference key with this id in the workspace.') }
const keyRevoked = { 409: errorOutput('The key is revoked (`code: key_revoked`); send `revoked: false` to restore it first.') }
const usageErrors = {
  400: errorOutput('A malformed `api_key_id`, or (breakdown) a `by` other than model or gateway.'),
  ...unauthorized,
  404: errorOutput('An `api_key_id` that is not a key of this workspace.'),
}

/**
 * Bodies go through readManagementJson (the size limit, SPEC's messages). It always returns or throws,
 * so the second entry never parses: it names the media type, which the OpenAPI document reads from here.
 */
const jsonBody = (): ('managementJson' | 'application/json')[] => ['managementJson', 'application/json']

export const managementBodyLimit = 1_000_000

/** Management bodies: JSON of at most 1 MB, counted as read (a chunked body has no length header). */
export async function readManagementJson({ request }: { request: Request }): Promise<unknown> {
  if (!request.body) throw new ManagementError(400, 'Request body must be a JSON object.')
  const bytes = await readBodyWithin(request, managementBodyLimit)
  if (bytes === undefined) throw new ManagementError(400, `Request body too large: the limit is ${managementBodyLimit} bytes.`)
  try {
    return JSON.parse(new TextDecoder().decode(bytes))
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
      response: { 200: envelope(Type.Array(GatewayOutput), 'The gateway catalog.'), ...unauthorized },
    })
    .get('/providers', ({ actor, query }) => data(listProviders(deps, actor, (query as Record<string, string>).gateway)), {
      detail: {
        tags: ['providers'],
        summary: 'List provider keys',
        // Documented here rather than as a query schema, which would start validating it (a repeated
        // parameter would then answer differently).
        parameters: [{ name: 'gateway', in: 'query', required: false, description: 'Only the provider keys of this gateway slug.', schema: { type: 'string' } }],
      },
      response: { 200: envelope(Type.Array(ProviderOutput), 'The provider keys of the workspace.'), ...unauthorized },
    })
    .post(
      '/providers',
      ({ actor, body, set }) => {
        const provider = createProvider(deps, actor, body)
        created(set)
        return data(provider)
      },
      {
        parse: jsonBody(),
        body: ProviderCreateInput,
        detail: { tags: ['providers'], summary: 'Store a provider key' },
        response: {
          201: envelope(ProviderOutput, 'The stored provider key; the secret is never returned.'),
          400: errorOutput('Invalid input: unknown gateway, a missing or too long secret, or a required config field missing.'),
          ...unauthorized,
          ...readOnly,
        },
      },
    )
    .get('/providers/:id', ({ actor, params }) => data(getProvider(deps, actor, params.id)), {
      detail: { tags: ['providers'], summary: 'Get a provider key' },
      response: { 200: envelope(ProviderOutput, 'The provider key.'), ...unauthorized, ...providerNotFound },
    })
    .patch('/providers/:id', ({ actor, params, body }) => data(updateProvider(deps, actor, params.id, body)), {
      parse: jsonBody(),
      body: ProviderUpdateInput,
      detail: { tags: ['providers'], summary: 'Rename, disable or enable a provider key' },
      response: {
        200: envelope(ProviderOutput, 'The updated provider key.'),
        400: errorOutput('An empty body or an invalid field.'),
        ...unauthorized,
        ...readOnly,
        ...providerNotFound,
      },
    })
    .delete('/providers/:id', ({ actor, params }) => data(deleteProvider(deps, actor, params.id)), {
      detail: { tags: ['providers'], summary: 'Delete a provider key and strip it from every rule' },
      response: {
        200: envelope(Type.Object({ id: Type.String(), deleted: Type.Boolean() }), 'The provider key is deleted.'),
        ...unauthorized,
        ...readOnly,
        ...providerNotFound,
      },
    })
    .get('/keys', ({ actor, query }) => data(listKeys(deps, actor, (query as Record<string, string>).offset)), {
      detail: {
        tags: ['keys'],
        summary: 'List inference keys, most recent 100 per page',
        // Documented here rather than as a query schema: listKeys checks it, with SPEC's message.
        parameters: [
          {
            name: 'offset',
            in: 'query',
            required: false,
            description: 'How many keys to skip, most recent first; pages are 100 keys.',
            schema: { type: 'integer', minimum: 0, default: 0 },
          },
        ],
      },
      response: {
        200: envelope(Type.Array(KeyOutput), 'Up to 100 keys, most recent first, with their routing rules.'),
        400: errorOutput('An offset that is not a whole number of 0 or more.'),
        ...unauthorized,
      },
    })
    .post(
      '/keys',
      ({ actor, body, set }) => {
        const key = createKey(deps, actor, body)
        created(set)
        return data(key)
      },
      {
        parse: jsonBody(),
        body: KeyCreateInput,
        detail: { tags: ['keys'], summary: 'Create an inference key' },
        response: {
          201: envelope(KeyOutput, 'The new key, with its secret in `key`: shown this once.'),
          ...invalidInput,
          ...unauthorized,
          ...readOnly,
        },
      },
    )
    .get('/keys/:id', ({ actor, params }) => data(getKey(deps, actor, params.id)), {
      detail: { tags: ['keys'], summary: 'Get an inference key' },
      response: { 200: envelope(KeyOutput, 'The key.'), ...unauthorized, ...keyNotFound },
    })
    .patch('/keys/:id', ({ actor, params, body }) => data(updateKey(deps, actor, params.id, body)), {
      parse: jsonBody(),
      body: KeyUpdateInput,
      detail: { tags: ['keys'], summary: 'Update an inference key (all-or-nothing)' },
      response: { 200: envelope(KeyOutput, 'The updated key.'), ...invalidInput, ...unauthorized, ...readOnly, ...keyNotFound, ...keyRevoked },
    })
    .delete('/keys/:id', ({ actor, params }) => data(revokeKey(deps, actor, params.id)), {
      detail: { tags: ['keys'], summary: 'Revoke an inference key (idempotent)' },
      response: { 200: envelope(KeyOutput, 'The revoked key, with `revoked_at`.'), ...unauthorized, ...readOnly, ...keyNotFound },
    })
    .get('/keys/:id/routing', ({ actor, params }) => data(getRouting(deps, actor, params.id)), {
      detail: { tags: ['routing'], summary: 'Get the routing rule of a key' },
      response: { 200: envelope(RoutingOutput, 'The rule; empty `targets` means inference answers 402.'), ...unauthorized, ...keyNotFound },
    })
    .put('/keys/:id/routing', ({ actor, params, body }) => data(putRouting(deps, actor, params.id, body)), {
      parse: jsonBody(),
      body: RoutingInput,
      detail: { tags: ['routing'], summary: 'Replace the routing rule of a key' },
      response: {
        200: envelope(RoutingOutput, 'The stored rule, with `gateway` filled in.'),
        ...invalidInput,
        ...unauthorized,
        ...readOnly,
        ...keyNotFound,
        ...keyRevoked,
      },
    })
    .get('/usage/summary', async ({ actor, request }) => data(await usageSummary(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Usage totals' },
      response: { 200: envelope(UsageSummaryOutput, 'Totals over the range.'), ...usageErrors },
    })
    .get('/usage/series', async ({ actor, request }) => data(await usageSeries(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Usage in time buckets: hourly for 24h, daily otherwise' },
      response: { 200: envelope(Type.Array(UsageSeriesItemOutput), 'One item per bucket, oldest first, empty buckets included.'), ...usageErrors },
    })
    .get('/usage/breakdown', async ({ actor, request }) => data(await usageBreakdown(deps, actor, usageQuery(request))), {
      query: UsageQuery,
      detail: { tags: ['usage'], summary: 'Top 12 models or gateways by requests' },
      response: { 200: envelope(Type.Array(UsageBreakdownItemOutput), 'Up to 12 names, most requests first.'), ...usageErrors },
    })
    .get('/account', ({ actor }) => data(accountSnapshot(deps, actor)), {
      detail: { tags: ['account'], summary: 'Workspace snapshot' },
      response: { 200: envelope(AccountOutput, 'The workspace snapshot.'), ...unauthorized },
    })
}
