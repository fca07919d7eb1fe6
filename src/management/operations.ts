/**
 * The management operations, each once: its name, whether it reads or writes, its rule function,
 * what the audit log records of it, and how each transport reaches it (the REST route with its
 * OpenAPI description, the MCP tool with its input schema). The REST API (api/admin), the MCP
 * tools (api/mcp), a replica's write-or-replay decision (app.ts) and the audit log are made from
 * this table; `perform` is the one way an operation runs. Framework-free: TypeBox schemas and data.
 */
import { Type, type TSchema } from '@sinclair/typebox'
import { gatewayCatalog, publicGatewayEntry } from '../gateways/catalog'
import { accountSnapshot } from './account'
import { listAuditEvents, type AuditQueryInput } from './audit'
import type { Actor, ManagementDeps } from './context'
import { badRequest } from './errors'
import { createKey, getKey, getRouting, listKeys, putRouting, revokeKey, rotateKey, updateKey, type KeyRef } from './keys'
import { createProvider, deleteProvider, getProvider, listProviders, providerNotes, requireGateway, setProviderNotes, updateProvider } from './providers'
import { addMcpServer, checkMcpServerUrl, checkWebhookUrl, keyNotifications, listMcpServers, removeMcpServer, setNotifyEmail, setWebhook } from './key-settings'
import { addMember, createManagementKey, createWorkspace, setManagementKeyReadOnly, setWorkspaceSettings, workspaceOverview } from './workspaces'
import { recentRequests } from './requests'
import { AllowedIpsInput } from './schemas'
import { describeGateway } from '../gateways/catalog'
import {
  AccountOutput,
  AuditListOutput,
  AuditQuery,
  GatewayOutput,
  KeyCreateInput,
  KeyOutput,
  KeyUpdateInput,
  LimitsInput,
  ProviderCreateInput,
  ProviderOutput,
  ProviderUpdateInput,
  RoutingInput,
  RoutingOutput,
  UsageBreakdownItemOutput,
  UsageQuery,
  UsageSeriesItemOutput,
  UsageSummaryOutput,
} from './schemas'
import { usageBreakdown, usageSeries, usageSummary, type UsageQueryInput } from './usage'

/** What an audit event names as the write's object. */
export interface AuditTarget {
  type: 'provider_key' | 'inference_key' | 'workspace' | 'management_key' | 'member' | 'gateway' | 'mcp_server'
  id: string
}

/** A REST request as an operation's input is read from it. */
export interface RestRequest {
  params: Record<string, string>
  body: unknown
  query: URLSearchParams
}

export interface RestBinding<I> {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  /** Under /api/v1, with `:name` path parameters. */
  path: string
  /** The success status (200 unless said). */
  status?: number
  /** The JSON body's schema (validated before the rule runs). */
  body?: TSchema
  /** The query's schema (validated before the rule runs). */
  query?: TSchema
  tags: string[]
  summary: string
  /** Query parameters documented without a schema that would validate them (the rule checks them). */
  parameters?: Record<string, unknown>[]
  /** The `data` of a success, and what it is. */
  output: { schema: TSchema; description: string }
  /** Error statuses the route answers, with what each means (documentation: only thrown errors answer them). */
  errors: Record<number, string>
  /** The output is the whole body, not wrapped in `{data}` (a page with its own `data`). */
  bare?: boolean
  input(request: RestRequest): I
}

export interface McpBinding<I> {
  tool: string
  description: string
  input: TSchema
  from(args: Record<string, unknown>): I
}

/** A dashboard call (under /dashboard/api; hidden from the OpenAPI document). */
export interface DashboardBinding<I> {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  path: string
  body?: TSchema
  input(request: RestRequest): I
  /** The part of the operation's answer the page uses (default: all of it). */
  output?(result: any): unknown
}

export interface Operation<I = any> {
  /** `area.verb`, e.g. `keys.create`: the audit log's `action`. */
  name: string
  access: 'read' | 'write'
  /**
   * Checks that need the outside (a webhook's host resolved), before the write: the write itself is
   * synchronous, so its audit event is in its transaction. Answers the input the write runs with.
   */
  prepare?(deps: ManagementDeps, actor: Actor, input: I): Promise<I>
  /** A write that removes or replaces what was there (MCP `destructiveHint`). */
  destructive?: boolean
  /** Repeating it with the same input changes nothing more (MCP `idempotentHint`). */
  idempotent?: boolean
  run(deps: ManagementDeps, actor: Actor, input: I): unknown
  /**
   * A write's audit event: its target and the fields it set (secrets are redacted afterwards), and
   * its workspace when the actor is not bound to one (the operator CLI).
   */
  audit?(input: I, output: any, deps: ManagementDeps): { target: AuditTarget; changes: unknown; workspaceId?: string }
  rest?: RestBinding<I>
  mcp?: McpBinding<I>
  dashboard?: DashboardBinding<I>
}

/** Who calls, through which door (the audit log's actor, via, caller_ip and request_id). */
export interface Caller {
  actor: Actor
  via: 'rest' | 'mcp' | 'cli' | 'dashboard'
  ip: string | undefined
  requestId: string | undefined
}

// ---------------------------------------------------------------------------------------------
// Inputs shared by several operations

interface IdInput {
  id: string
}
interface IdBody {
  id: string
  body: Record<string, unknown>
}

const idSchema = (description: string) => Type.Object({ id: Type.String({ description }) })
const keyIdSchema = Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }) })

function requireString(input: Record<string, unknown>, name: string): string {
  const value = input[name]
  if (typeof value !== 'string' || value === '') throw badRequest(`Invalid ${name}: required string.`)
  return value
}

function withoutKeys(input: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const copy = { ...input }
  for (const name of names) delete copy[name]
  return copy
}

const UsageArguments = Type.Object({
  range: Type.Optional(Type.String({ enum: ['24h', '7d', '30d'], description: 'Default 7d.' })),
  api_key_id: Type.Optional(Type.Array(Type.String(), { description: 'Inference key UUIDs to filter on.' })),
})

function usageFromQuery(query: URLSearchParams): UsageQueryInput {
  const ids = query.getAll('api_key_id')
  return { range: query.get('range') ?? undefined, api_key_id: ids.length === 0 ? undefined : ids, by: query.get('by') ?? undefined }
}

function usageFromArguments(input: Record<string, unknown>): UsageQueryInput {
  const ids = input.api_key_id
  return {
    range: typeof input.range === 'string' ? input.range : undefined,
    api_key_id: ids === undefined ? undefined : Array.isArray(ids) ? (ids as string[]) : [String(ids)],
    by: typeof input.by === 'string' ? input.by : undefined,
  }
}

const unauthorized = { 401: 'Missing or invalid management key.' }
const readOnly = { 403: 'A read-only management key cannot write.' }
const invalidInput = { 400: 'Invalid input; the message names the first bad field.' }
const providerNotFound = { 404: 'No provider key with this id in the workspace.' }
const keyNotFound = { 404: 'No inference key with this id in the workspace.' }
const keyRevoked = { 409: 'The key is revoked (`code: key_revoked`); send `revoked: false` to restore it first.' }
const usageErrors = {
  400: 'A malformed `api_key_id`, or (breakdown) a `by` other than model or gateway.',
  ...unauthorized,
  404: 'An `api_key_id` that is not a key of this workspace.',
}

const provider = (id: string): AuditTarget => ({ type: 'provider_key', id })
const inferenceKey = (id: string): AuditTarget => ({ type: 'inference_key', id })

// ---------------------------------------------------------------------------------------------
// The table

export const operations = {
  gatewaysList: {
    name: 'gateways.list',
    access: 'read',
    run: () => gatewayCatalog.map(publicGatewayEntry),
    rest: { method: 'GET', path: '/gateways', tags: ['gateways'], summary: 'Gateway catalog', output: { schema: Type.Array(GatewayOutput), description: 'The gateway catalog.' }, errors: unauthorized, input: () => ({}) },
    mcp: {
      tool: 'list_gateways',
      description: 'List the gateway catalog: slugs to use as `gateway` when storing a provider key, with capabilities.',
      input: Type.Object({}),
      from: () => ({}),
    },
  } satisfies Operation<Record<string, never>>,

  providersList: {
    name: 'providers.list',
    access: 'read',
    run: (deps, actor, input: { gateway?: string }) => listProviders(deps, actor, input.gateway),
    rest: {
      method: 'GET',
      path: '/providers',
      tags: ['providers'],
      summary: 'List provider keys',
      // Documented here rather than as a query schema, which would start validating it (a repeated
      // parameter would then answer differently).
      parameters: [{ name: 'gateway', in: 'query', required: false, description: 'Only the provider keys of this gateway slug.', schema: { type: 'string' } }],
      output: { schema: Type.Array(ProviderOutput), description: 'The provider keys of the workspace.' },
      errors: unauthorized,
      input: ({ query }) => ({ gateway: query.get('gateway') ?? undefined }),
    },
    mcp: {
      tool: 'list_provider_keys',
      description: 'List stored provider keys (metadata only; secrets are never returned).',
      input: Type.Object({ gateway: Type.Optional(Type.String({ description: 'Filter by gateway slug.' })) }),
      from: (args) => ({ gateway: typeof args.gateway === 'string' ? args.gateway : undefined }),
    },
  } satisfies Operation<{ gateway?: string }>,

  providersCreate: {
    name: 'providers.create',
    access: 'write',
    run: (deps, actor, input: unknown) => createProvider(deps, actor, input),
    audit: (input, output: { id: string }) => ({ target: provider(output.id), changes: input }),
    rest: {
      method: 'POST',
      path: '/providers',
      status: 201,
      body: ProviderCreateInput,
      tags: ['providers'],
      summary: 'Store a provider key',
      output: { schema: ProviderOutput, description: 'The stored provider key; the secret is never returned.' },
      errors: { 400: 'Invalid input: unknown gateway, a missing or too long secret, or a required config field missing.', ...unauthorized, ...readOnly },
      input: ({ body }) => body,
    },
    mcp: { tool: 'create_provider_key', description: 'Store a provider key for a gateway. The secret is encrypted and never returned.', input: ProviderCreateInput, from: (args) => args },
  } satisfies Operation<unknown>,

  providersGet: {
    name: 'providers.get',
    access: 'read',
    run: (deps, actor, input: IdInput) => getProvider(deps, actor, input.id),
    rest: {
      method: 'GET',
      path: '/providers/:id',
      tags: ['providers'],
      summary: 'Get a provider key',
      output: { schema: ProviderOutput, description: 'The provider key.' },
      errors: { ...unauthorized, ...providerNotFound },
      input: ({ params }) => ({ id: params.id! }),
    },
    mcp: { tool: 'get_provider_key', description: 'Get one provider key by its UUID.', input: idSchema('Provider key UUID.'), from: (args) => ({ id: requireString(args, 'id') }) },
  } satisfies Operation<IdInput>,

  providersUpdate: {
    name: 'providers.update',
    access: 'write',
    run: (deps, actor, input: IdBody) => updateProvider(deps, actor, input.id, input.body),
    audit: (input) => ({ target: provider(input.id), changes: input.body }),
    rest: {
      method: 'PATCH',
      path: '/providers/:id',
      body: ProviderUpdateInput,
      tags: ['providers'],
      summary: 'Rename, disable or enable a provider key',
      output: { schema: ProviderOutput, description: 'The updated provider key.' },
      errors: { 400: 'An empty body or an invalid field.', ...unauthorized, ...readOnly, ...providerNotFound },
      input: ({ params, body }) => ({ id: params.id!, body: body as Record<string, unknown> }),
    },
    mcp: {
      tool: 'update_provider_key',
      description: 'Rename, disable or enable a provider key.',
      input: Type.Composite([idSchema('Provider key UUID.'), ProviderUpdateInput]),
      from: (args) => ({ id: requireString(args, 'id'), body: withoutKeys(args, 'id') }),
    },
  } satisfies Operation<IdBody>,

  providersDelete: {
    name: 'providers.delete',
    access: 'write',
    destructive: true,
    run: (deps, actor, input: IdInput) => deleteProvider(deps, actor, input.id),
    audit: (input) => ({ target: provider(input.id), changes: { deleted: true } }),
    rest: {
      method: 'DELETE',
      path: '/providers/:id',
      tags: ['providers'],
      summary: 'Delete a provider key and strip it from every rule',
      output: { schema: Type.Object({ id: Type.String(), deleted: Type.Boolean() }), description: 'The provider key is deleted.' },
      errors: { ...unauthorized, ...readOnly, ...providerNotFound },
      input: ({ params }) => ({ id: params.id! }),
    },
    mcp: {
      tool: 'delete_provider_key',
      description: 'Delete a provider key; it is stripped from every routing rule in the workspace.',
      input: idSchema('Provider key UUID.'),
      from: (args) => ({ id: requireString(args, 'id') }),
    },
  } satisfies Operation<IdInput>,

  keysList: {
    name: 'keys.list',
    access: 'read',
    run: (deps, actor, input: { offset?: string | number }) => listKeys(deps, actor, input.offset),
    rest: {
      method: 'GET',
      path: '/keys',
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
      output: { schema: Type.Array(KeyOutput), description: 'Up to 100 keys, most recent first, with their routing rules.' },
      errors: { 400: 'An offset that is not a whole number of 0 or more.', ...unauthorized },
      input: ({ query }) => ({ offset: query.get('offset') ?? undefined }),
    },
    mcp: {
      tool: 'list_api_keys',
      description: 'List inference keys with their routing, most recent 100 per page.',
      input: Type.Object({ offset: Type.Optional(Type.Integer({ minimum: 0 })) }),
      from: (args) => ({ offset: args.offset as number | undefined }),
    },
  } satisfies Operation<{ offset?: string | number }>,

  keysCreate: {
    name: 'keys.create',
    access: 'write',
    run: (deps, actor, input: unknown) => createKey(deps, actor, input),
    audit: (input, output: { id: string }) => ({ target: inferenceKey(output.id), changes: input }),
    rest: {
      method: 'POST',
      path: '/keys',
      status: 201,
      body: KeyCreateInput,
      tags: ['keys'],
      summary: 'Create an inference key',
      output: { schema: KeyOutput, description: 'The new key, with its secret in `key`: shown this once.' },
      errors: { ...invalidInput, ...unauthorized, ...readOnly },
      input: ({ body }) => body,
    },
    mcp: { tool: 'create_api_key', description: 'Create an inference key. The full secret is in this response only.', input: KeyCreateInput, from: (args) => args },
  } satisfies Operation<unknown>,

  keysGet: {
    name: 'keys.get',
    access: 'read',
    run: (deps, actor, input: IdInput) => getKey(deps, actor, input.id),
    rest: {
      method: 'GET',
      path: '/keys/:id',
      tags: ['keys'],
      summary: 'Get an inference key',
      output: { schema: KeyOutput, description: 'The key.' },
      errors: { ...unauthorized, ...keyNotFound },
      input: ({ params }) => ({ id: params.id! }),
    },
    mcp: { tool: 'get_api_key', description: 'Get one inference key by its UUID.', input: idSchema('Inference key UUID.'), from: (args) => ({ id: requireString(args, 'id') }) },
  } satisfies Operation<IdInput>,

  keysUpdate: {
    name: 'keys.update',
    access: 'write',
    run: (deps, actor, input: IdBody) => updateKey(deps, actor, input.id, input.body),
    audit: (input) => ({ target: inferenceKey(input.id), changes: input.body }),
    rest: {
      method: 'PATCH',
      path: '/keys/:id',
      body: KeyUpdateInput,
      tags: ['keys'],
      summary: 'Update an inference key (all-or-nothing)',
      output: { schema: KeyOutput, description: 'The updated key.' },
      errors: { ...invalidInput, ...unauthorized, ...readOnly, ...keyNotFound, ...keyRevoked },
      input: ({ params, body }) => ({ id: params.id!, body: body as Record<string, unknown> }),
    },
    mcp: {
      tool: 'update_api_key',
      description: 'Update an inference key: label, revoked, allowlist, steering message, timeouts, features, limits.',
      input: Type.Composite([idSchema('Inference key UUID.'), KeyUpdateInput]),
      from: (args) => ({ id: requireString(args, 'id'), body: withoutKeys(args, 'id') }),
    },
  } satisfies Operation<IdBody>,

  keysSetLimits: {
    name: 'keys.set_limits',
    access: 'write',
    idempotent: true,
    // The operator CLI names a key of any workspace: the rule runs in the key's own.
    run: (deps, actor, input: IdBody) => updateKey(deps, actor.kind === 'cli' ? { ...actor, workspaceId: keyWorkspace(deps, input.id) ?? '' } : actor, input.id, { limits: input.body.limits }),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { limits: input.body.limits }, workspaceId: keyWorkspace(deps, input.id) }),
    mcp: {
      tool: 'set_key_limits',
      description:
        'Set spend caps and rate limits on an inference key: requests_per_minute, tokens_per_minute, usd_per_day, usd_per_month (each a positive number, or null for no limit; fields not named stay; limits null clears all). Requests over a limit are refused with 429.',
      input: Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }), limits: Type.Union([LimitsInput, Type.Null()]) }),
      from: (args) => {
        if (!('limits' in args)) throw badRequest('Invalid limits: required (an object, or null to clear every limit).')
        return { id: requireString(args, 'key_id'), body: { limits: args.limits } }
      },
    },
  } satisfies Operation<IdBody>,

  keysRevoke: {
    name: 'keys.revoke',
    access: 'write',
    destructive: true,
    idempotent: true,
    run: (deps, actor, input: IdInput) => revokeKey(deps, actor, input.id),
    audit: (input) => ({ target: inferenceKey(input.id), changes: { revoked: true } }),
    rest: {
      method: 'DELETE',
      path: '/keys/:id',
      tags: ['keys'],
      summary: 'Revoke an inference key (idempotent)',
      output: { schema: KeyOutput, description: 'The revoked key, with `revoked_at`.' },
      errors: { ...unauthorized, ...readOnly, ...keyNotFound },
      input: ({ params }) => ({ id: params.id! }),
    },
    mcp: { tool: 'revoke_api_key', description: 'Revoke an inference key (idempotent; the row is kept).', input: idSchema('Inference key UUID.'), from: (args) => ({ id: requireString(args, 'id') }) },
  } satisfies Operation<IdInput>,

  routingGet: {
    name: 'routing.get',
    access: 'read',
    run: (deps, actor, input: IdInput) => getRouting(deps, actor, input.id),
    rest: {
      method: 'GET',
      path: '/keys/:id/routing',
      tags: ['routing'],
      summary: 'Get the routing rule of a key',
      output: { schema: RoutingOutput, description: 'The rule; empty `targets` means inference answers 402.' },
      errors: { ...unauthorized, ...keyNotFound },
      input: ({ params }) => ({ id: params.id! }),
    },
    mcp: { tool: 'get_routing', description: 'Get the routing rule of an inference key.', input: keyIdSchema, from: (args) => ({ id: requireString(args, 'key_id') }) },
  } satisfies Operation<IdInput>,

  routingSet: {
    name: 'routing.set',
    access: 'write',
    destructive: true,
    idempotent: true,
    run: (deps, actor, input: IdBody) => putRouting(deps, actor, input.id, input.body),
    audit: (input) => ({ target: inferenceKey(input.id), changes: input.body }),
    rest: {
      method: 'PUT',
      path: '/keys/:id/routing',
      body: RoutingInput,
      tags: ['routing'],
      summary: 'Replace the routing rule of a key',
      output: { schema: RoutingOutput, description: 'The stored rule, with `gateway` filled in.' },
      errors: { ...invalidInput, ...unauthorized, ...readOnly, ...keyNotFound, ...keyRevoked },
      input: ({ params, body }) => ({ id: params.id!, body: body as Record<string, unknown> }),
    },
    mcp: {
      tool: 'set_routing',
      description: 'Replace the routing rule of an inference key: strategy, targets, model_remaps, decisioner.',
      input: Type.Composite([keyIdSchema, RoutingInput]),
      from: (args) => ({ id: requireString(args, 'key_id'), body: withoutKeys(args, 'key_id') }),
    },
  } satisfies Operation<IdBody>,

  usageSummary: {
    name: 'usage.summary',
    access: 'read',
    run: (deps, actor, input: UsageQueryInput) => usageSummary(deps, actor, input),
    rest: {
      method: 'GET',
      path: '/usage/summary',
      query: UsageQuery,
      tags: ['usage'],
      summary: 'Usage totals',
      output: { schema: UsageSummaryOutput, description: 'Totals over the range.' },
      errors: usageErrors,
      input: ({ query }) => usageFromQuery(query),
    },
    mcp: {
      tool: 'get_usage_summary',
      description: 'Usage totals: requests, errors, errorRate (percent), avgLatency, avgOverhead, models.',
      input: UsageArguments,
      from: usageFromArguments,
    },
  } satisfies Operation<UsageQueryInput>,

  usageSeries: {
    name: 'usage.series',
    access: 'read',
    run: (deps, actor, input: UsageQueryInput) => usageSeries(deps, actor, input),
    rest: {
      method: 'GET',
      path: '/usage/series',
      query: UsageQuery,
      tags: ['usage'],
      summary: 'Usage in time buckets: hourly for 24h, daily otherwise',
      output: { schema: Type.Array(UsageSeriesItemOutput), description: 'One item per bucket, oldest first, empty buckets included.' },
      errors: usageErrors,
      input: ({ query }) => usageFromQuery(query),
    },
    mcp: { tool: 'get_usage_series', description: 'Usage per time bucket: hourly for 24h, daily otherwise.', input: UsageArguments, from: usageFromArguments },
  } satisfies Operation<UsageQueryInput>,

  usageBreakdown: {
    name: 'usage.breakdown',
    access: 'read',
    run: (deps, actor, input: UsageQueryInput) => usageBreakdown(deps, actor, input),
    rest: {
      method: 'GET',
      path: '/usage/breakdown',
      query: UsageQuery,
      tags: ['usage'],
      summary: 'Top 12 models or gateways by requests',
      output: { schema: Type.Array(UsageBreakdownItemOutput), description: 'Up to 12 names, most requests first.' },
      errors: usageErrors,
      input: ({ query }) => usageFromQuery(query),
    },
    mcp: {
      tool: 'get_usage_breakdown',
      description: 'Top 12 models or gateways by request count.',
      input: Type.Composite([Type.Object({ by: Type.String({ enum: ['model', 'gateway'] }) }), UsageArguments]),
      from: usageFromArguments,
    },
  } satisfies Operation<UsageQueryInput>,

  accountGet: {
    name: 'account.get',
    access: 'read',
    run: (deps, actor) => accountSnapshot(deps, actor),
    rest: { method: 'GET', path: '/account', tags: ['account'], summary: 'Workspace snapshot', output: { schema: AccountOutput, description: 'The workspace snapshot.' }, errors: unauthorized, input: () => ({}) },
    mcp: {
      tool: 'get_account',
      description: 'Workspace snapshot: workspace, key counts, provider keys, management keys, members.',
      input: Type.Object({}),
      from: () => ({}),
    },
  } satisfies Operation<Record<string, never>>,

  auditList: {
    name: 'audit.list',
    access: 'read',
    run: (deps, actor, input: AuditQueryInput) => listAuditEvents(deps, actor, input),
    rest: {
      method: 'GET',
      path: '/audit',
      query: AuditQuery,
      tags: ['audit'],
      summary: 'Audit events of the workspace, newest first',
      output: { schema: AuditListOutput, description: 'A page of events; `last_id` is the `after` of the next page.' },
      bare: true,
      errors: { 400: 'A `limit` outside 1 to 100, or an `after` that is not an event of this workspace.', ...unauthorized },
      input: ({ query }) => ({ limit: query.get('limit') ?? undefined, after: query.get('after') ?? undefined, action: query.get('action') ?? undefined, target_id: query.get('target_id') ?? undefined }),
    },
    mcp: {
      tool: 'list_audit_events',
      description: 'Audit events of the workspace, newest first: every management write, who made it, through which door, what it changed (secrets redacted).',
      input: Type.Object({
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Default 50.' })),
        after: Type.Optional(Type.String({ description: 'An event id: the events older than it (the next page).' })),
        action: Type.Optional(Type.String({ description: 'Only this operation, e.g. keys.create.' })),
        target_id: Type.Optional(Type.String({ description: 'Only events about this object.' })),
      }),
      from: (args) => ({ limit: args.limit as number | undefined, after: args.after as string | undefined, action: args.action as string | undefined, target_id: args.target_id as string | undefined }),
    },
    dashboard: {
      method: 'GET',
      path: '/audit',
      input: ({ query }) => ({ limit: query.get('limit') ?? undefined, after: query.get('after') ?? undefined, action: query.get('action') ?? undefined, target_id: query.get('target_id') ?? undefined }),
    },
  } satisfies Operation<AuditQueryInput>,
}


// ---------------------------------------------------------------------------------------------
// Operations of the dashboard and the operator CLI (SPEC leaves them out of the API)

/** A key the actor may touch: any key for the operator CLI, else a key of the actor's workspace. */
const keyRef = (actor: Actor, id: string): KeyRef => (actor.kind === 'cli' ? id : { id, workspaceId: actor.workspaceId })

/** The workspace an inference key belongs to (the audit event of a CLI write names it). */
const keyWorkspace = (deps: ManagementDeps, id: string) => deps.repositories.inferenceKeys.getById(id)?.workspaceId

/** The workspace a write acts on: the one a CLI flag names, else the actor's. */
const workspaceOf = (actor: Actor, input: { workspaceId?: string }) => (actor.kind === 'cli' && input.workspaceId !== undefined ? input.workspaceId : actor.workspaceId)

interface KeyIdInput {
  id: string
}
interface WebhookInput {
  id: string
  url?: string
  rotateSecret?: boolean
  clear?: boolean
}
interface McpServerAddInput {
  id: string
  url: string
  name?: string
}
interface WorkspaceSetInput {
  workspaceId?: string
  allowedIps?: string | string[]
  steeringMessage?: string
  captureBodies?: boolean
  suspended?: boolean
}

const managementKey = (id: string): AuditTarget => ({ type: 'management_key', id })
const workspace = (id: string): AuditTarget => ({ type: 'workspace', id })

export const operatorOperations = {
  workspacesCreate: {
    name: 'workspaces.create',
    access: 'write',
    run: (deps, _actor, input: { name: string }) => createWorkspace(deps, input.name),
    audit: (input, output: { workspace: { id: string } }) => ({ target: workspace(output.workspace.id), changes: { name: input.name }, workspaceId: output.workspace.id }),
  } satisfies Operation<{ name: string }>,

  workspaceGet: {
    name: 'workspace.get',
    access: 'read',
    run: (deps, actor) => workspaceOverview(deps, actor.workspaceId),
    dashboard: { method: 'GET', path: '/workspace', input: () => ({}) },
  } satisfies Operation<Record<string, never>>,

  workspaceSet: {
    name: 'workspace.set',
    access: 'write',
    run: (deps, actor, input: WorkspaceSetInput) => setWorkspaceSettings(deps, workspaceOf(actor, input), input),
    audit: (input, output: { id: string }) => {
      const { workspaceId: _named, ...changes } = input
      return { target: workspace(output.id), changes, workspaceId: output.id }
    },
    dashboard: {
      method: 'PATCH',
      path: '/workspace',
      body: Type.Object({ allowed_ips: Type.Optional(AllowedIpsInput), steering_message: Type.Optional(Type.String()), capture_bodies: Type.Optional(Type.Boolean()) }),
      input: ({ body }) => {
        const fields = body as { allowed_ips?: string | string[]; steering_message?: string; capture_bodies?: boolean }
        return { allowedIps: fields.allowed_ips, steeringMessage: fields.steering_message, captureBodies: fields.capture_bodies }
      },
    },
  } satisfies Operation<WorkspaceSetInput>,

  membersAdd: {
    name: 'members.add',
    access: 'write',
    run: (deps, actor, input: { workspaceId?: string; email: string }) => addMember(deps, workspaceOf(actor, input), input.email),
    // The address is the member's own: the log names the member, not the address.
    audit: (input, output: { id: string }) => ({ target: { type: 'member', id: output.id }, changes: { added: true }, workspaceId: input.workspaceId }),
    dashboard: { method: 'POST', path: '/workspace/members', body: Type.Object({ email: Type.String() }), input: ({ body }) => ({ email: (body as { email: string }).email }) },
  } satisfies Operation<{ workspaceId?: string; email: string }>,

  managementKeysCreate: {
    name: 'management_keys.create',
    access: 'write',
    run: (deps, actor, input: { workspaceId?: string; readOnly: boolean }) => createManagementKey(deps, workspaceOf(actor, input), input.readOnly),
    audit: (input, output: { id: string }) => ({ target: managementKey(output.id), changes: { read_only: input.readOnly }, workspaceId: input.workspaceId }),
    dashboard: {
      method: 'POST',
      path: '/workspace/management-keys',
      body: Type.Object({ read_only: Type.Optional(Type.Boolean()) }),
      input: ({ body }) => ({ readOnly: (body as { read_only?: boolean }).read_only ?? false }),
    },
  } satisfies Operation<{ workspaceId?: string; readOnly: boolean }>,

  managementKeysSet: {
    name: 'management_keys.set',
    access: 'write',
    // From the dashboard only the workspace's own keys, and never its last one that can write.
    run: (deps, actor, input: { id: string; readOnly: boolean }) => setManagementKeyReadOnly(deps, input.id, input.readOnly, actor.kind === 'cli' ? undefined : actor.workspaceId),
    audit: (input, output: { workspace_id: string }) => ({ target: managementKey(input.id), changes: { read_only: input.readOnly }, workspaceId: output.workspace_id }),
    dashboard: {
      method: 'PATCH',
      path: '/workspace/management-keys/:id',
      body: Type.Object({ read_only: Type.Boolean() }),
      input: ({ params, body }) => ({ id: params.id!, readOnly: (body as { read_only: boolean }).read_only }),
    },
  } satisfies Operation<{ id: string; readOnly: boolean }>,

  keysRotate: {
    name: 'keys.rotate',
    access: 'write',
    run: (deps, actor, input: { id: string; graceSeconds?: number }) => rotateKey(deps, keyRef(actor, input.id), input.graceSeconds),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { rotated: true, ...(input.graceSeconds !== undefined ? { grace_seconds: input.graceSeconds } : {}) }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: {
      method: 'POST',
      path: '/keys/:id/rotate',
      body: Type.Object({ grace_seconds: Type.Optional(Type.Number()) }),
      input: ({ params, body }) => ({ id: params.id!, graceSeconds: (body as { grace_seconds?: number }).grace_seconds }),
    },
  } satisfies Operation<{ id: string; graceSeconds?: number }>,

  keysExtras: {
    name: 'keys.extras',
    access: 'read',
    run: (deps, actor, input: KeyIdInput) => ({ ...keyNotifications(deps, keyRef(actor, input.id)), mcp_servers: listMcpServers(deps, keyRef(actor, input.id)).servers }),
    dashboard: { method: 'GET', path: '/keys/:id/extras', input: ({ params }) => ({ id: params.id! }) },
  } satisfies Operation<KeyIdInput>,

  keysWebhookSet: {
    name: 'keys.webhook.set',
    access: 'write',
    prepare: async (deps, actor, input: WebhookInput) => (input.url !== undefined && !input.clear ? { ...input, url: await checkWebhookUrl(deps, keyRef(actor, input.id), input.url) } : input),
    run: (deps, actor, input: WebhookInput) => setWebhook(deps, keyRef(actor, input.id), input),
    audit: (input, _output, deps) => ({
      target: inferenceKey(input.id),
      changes: input.clear ? { webhook_url: null } : input.url !== undefined ? { webhook_url: input.url, signing_secret_rotated: true } : { signing_secret_rotated: true },
      workspaceId: keyWorkspace(deps, input.id),
    }),
    dashboard: { method: 'PUT', path: '/keys/:id/webhook', body: Type.Object({ url: Type.String() }), input: ({ params, body }) => ({ id: params.id!, url: (body as { url: string }).url }) },
  } satisfies Operation<WebhookInput>,

  keysWebhookRotate: {
    name: 'keys.webhook.rotate',
    access: 'write',
    run: (deps, actor, input: KeyIdInput) => setWebhook(deps, keyRef(actor, input.id), { rotateSecret: true }),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { signing_secret_rotated: true }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: { method: 'POST', path: '/keys/:id/webhook/rotate', input: ({ params }) => ({ id: params.id! }) },
  } satisfies Operation<KeyIdInput>,

  keysWebhookClear: {
    name: 'keys.webhook.clear',
    access: 'write',
    destructive: true,
    idempotent: true,
    run: (deps, actor, input: KeyIdInput) => setWebhook(deps, keyRef(actor, input.id), { clear: true }),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { webhook_url: null }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: { method: 'DELETE', path: '/keys/:id/webhook', input: ({ params }) => ({ id: params.id! }) },
  } satisfies Operation<KeyIdInput>,

  keysNotifyEmail: {
    name: 'keys.notify_email.set',
    access: 'write',
    idempotent: true,
    run: (deps, actor, input: { id: string; on: boolean }) => setNotifyEmail(deps, keyRef(actor, input.id), input.on),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { notify_email: input.on }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: { method: 'PUT', path: '/keys/:id/notify-email', body: Type.Object({ on: Type.Boolean() }), input: ({ params, body }) => ({ id: params.id!, on: (body as { on: boolean }).on }) },
  } satisfies Operation<{ id: string; on: boolean }>,

  keysMcpServersList: {
    name: 'keys.mcp_servers.list',
    access: 'read',
    run: (deps, actor, input: KeyIdInput) => listMcpServers(deps, keyRef(actor, input.id)),
  } satisfies Operation<KeyIdInput>,

  keysMcpServersAdd: {
    name: 'keys.mcp_servers.add',
    access: 'write',
    prepare: async (deps, actor, input: McpServerAddInput) => ({ ...input, url: await checkMcpServerUrl(deps, keyRef(actor, input.id), input.url) }),
    run: (deps, actor, input: McpServerAddInput) => addMcpServer(deps, keyRef(actor, input.id), input.url, input.name),
    audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { mcp_server_url: input.url, ...(input.name !== undefined ? { name: input.name } : {}) }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: {
      method: 'POST',
      path: '/keys/:id/mcp-servers',
      body: Type.Object({ url: Type.String(), name: Type.Optional(Type.String()) }),
      input: ({ params, body }) => ({ id: params.id!, url: (body as { url: string }).url, name: (body as { name?: string }).name }),
      output: (result: { servers: unknown[] }) => result.servers,
    },
  } satisfies Operation<McpServerAddInput>,

  keysMcpServersRemove: {
    name: 'keys.mcp_servers.remove',
    access: 'write',
    destructive: true,
    run: (deps, actor, input: { id: string; server: string }) => removeMcpServer(deps, keyRef(actor, input.id), input.server),
    audit: (input, _output, deps) => ({ target: { type: 'mcp_server', id: input.server }, changes: { removed: true, key_id: input.id }, workspaceId: keyWorkspace(deps, input.id) }),
    dashboard: { method: 'DELETE', path: '/keys/:id/mcp-servers/:server', input: ({ params }) => ({ id: params.id!, server: params.server! }), output: (result: { servers: unknown[] }) => result.servers },
  } satisfies Operation<{ id: string; server: string }>,

  providersNotesGet: {
    name: 'providers.notes.get',
    access: 'read',
    run: (deps, actor) => providerNotes(deps, actor),
    dashboard: { method: 'GET', path: '/providers/notes', input: () => ({}) },
  } satisfies Operation<Record<string, never>>,

  providersNotesSet: {
    name: 'providers.notes.set',
    access: 'write',
    run: (deps, actor, input: { id: string; notes: string }) => setProviderNotes(deps, actor, input.id, input.notes),
    audit: (input) => ({ target: provider(input.id), changes: { notes: input.notes } }),
    dashboard: { method: 'PUT', path: '/providers/:id/notes', body: Type.Object({ notes: Type.String() }), input: ({ params, body }) => ({ id: params.id!, notes: (body as { notes: string }).notes }) },
  } satisfies Operation<{ id: string; notes: string }>,

  requestsRecent: {
    name: 'requests.recent',
    access: 'read',
    run: (deps, actor, input: { range?: string; api_key_id?: string; status?: string; model?: string }) => recentRequests(deps, actor, input),
    dashboard: {
      method: 'GET',
      path: '/requests',
      input: ({ query }) => ({ range: query.get('range') ?? undefined, api_key_id: query.get('api_key_id') ?? undefined, status: query.get('status') ?? undefined, model: query.get('model') ?? undefined }),
    },
  } satisfies Operation<{ range?: string; api_key_id?: string; status?: string; model?: string }>,

  gatewaysSet: {
    name: 'gateways.set',
    access: 'write',
    run: (deps, _actor, input: { gateway: string; enabled: boolean }) => {
      const gateway = requireGateway(input.gateway)
      const row = deps.repositories.providerKeys.setGatewayEnabled(gateway.id, input.enabled, deps.now().toISOString())
      return { gateway: row.gateway, enabled: row.enabled, updated_at: row.updatedAt }
    },
    // A platform-wide switch: no workspace's (the operator's record, in no workspace's log).
    audit: (input) => ({ target: { type: 'gateway', id: input.gateway }, changes: { enabled: input.enabled }, workspaceId: '' }),
  } satisfies Operation<{ gateway: string; enabled: boolean }>,

  gatewaysDescribe: {
    name: 'gateways.describe',
    access: 'read',
    run: (deps) => ({ gateways: gatewayCatalog.map((gateway) => describeGateway(gateway, deps.config.gatewayUrlOverrides)) }),
  } satisfies Operation<Record<string, never>>,
}

/** Every operation: the API's and the operator's. */
export const operationList: readonly Operation[] = [...Object.values(operations), ...Object.values(operatorOperations)]

/** An operation by its name (the CLI's commands name theirs). */
export function operationNamed(name: string): Operation | undefined {
  return operationList.find((operation) => operation.name === name)
}

/** The operations that have a REST route, with their paths as patterns (for the replica's decision before routing). */
const restPatterns = operationList
  .filter((operation) => operation.rest)
  .map((operation) => ({ operation, method: operation.rest!.method, pattern: new RegExp(`^${operation.rest!.path.replace(/:[a-z_]+/g, '[^/]+')}/?$`) }))

/** The operation a REST request reaches (`path` under /api/v1), or undefined for no route. */
export function restOperation(method: string, path: string): Operation | undefined {
  for (const route of restPatterns) if (route.method === method && route.pattern.test(path)) return route.operation
  return undefined
}

/** The operation an MCP tool runs. */
export function toolOperation(name: string): Operation | undefined {
  return operationList.find((operation) => operation.mcp?.tool === name)
}

