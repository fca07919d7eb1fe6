/**
 * The MCP tool registry: one map of tools, each with a JSON input schema and the management
 * function it calls (the same functions as the REST API). Write tools are refused to read-only keys.
 */
import { Type, type TSchema } from '@sinclair/typebox'
import type { Actor } from '../../management/context'
import type { AppDeps } from '../deps'
import { gatewayCatalog, publicGatewayEntry } from '../../gateways/catalog'
import { createProvider, deleteProvider, getProvider, listProviders, updateProvider } from '../../management/providers'
import { createKey, getKey, getRouting, listKeys, putRouting, revokeKey, updateKey } from '../../management/keys'
import { usageBreakdown, usageSeries, usageSummary } from '../../management/usage'
import { accountSnapshot } from '../../management/account'
import { KeyCreateInput, KeyUpdateInput, ProviderCreateInput, ProviderUpdateInput, RoutingInput } from '../../management/schemas'
import { badRequest } from '../../management/errors'

export interface McpTool {
  description: string
  inputSchema: TSchema
  write: boolean
  run(deps: AppDeps, actor: Actor, input: Record<string, unknown>): unknown
}

const IdInput = (description: string) => Type.Object({ id: Type.String({ description }) })

const UsageInput = Type.Object({
  range: Type.Optional(Type.String({ enum: ['24h', '7d', '30d'], description: 'Default 7d.' })),
  api_key_id: Type.Optional(Type.Array(Type.String(), { description: 'Inference key UUIDs to filter on.' })),
})

function withoutKeys(input: Record<string, unknown>, ...names: string[]) {
  const copy = { ...input }
  for (const name of names) delete copy[name]
  return copy
}

function requireString(input: Record<string, unknown>, name: string): string {
  const value = input[name]
  if (typeof value !== 'string' || value === '') throw badRequest(`Invalid ${name}: required string.`)
  return value
}

function usageQuery(input: Record<string, unknown>) {
  const ids = input.api_key_id
  return {
    range: typeof input.range === 'string' ? input.range : undefined,
    api_key_id: ids === undefined ? undefined : Array.isArray(ids) ? (ids as string[]) : [String(ids)],
    by: typeof input.by === 'string' ? input.by : undefined,
  }
}

export const mcpTools: Record<string, McpTool> = {
  list_gateways: {
    description: 'List the gateway catalog: slugs to use as `gateway` when storing a provider key, with capabilities.',
    inputSchema: Type.Object({}),
    write: false,
    run: () => gatewayCatalog.map(publicGatewayEntry),
  },
  list_provider_keys: {
    description: 'List stored provider keys (metadata only; secrets are never returned).',
    inputSchema: Type.Object({ gateway: Type.Optional(Type.String({ description: 'Filter by gateway slug.' })) }),
    write: false,
    run: (deps, actor, input) => listProviders(deps, actor, typeof input.gateway === 'string' ? input.gateway : undefined),
  },
  get_provider_key: {
    description: 'Get one provider key by its UUID.',
    inputSchema: IdInput('Provider key UUID.'),
    write: false,
    run: (deps, actor, input) => getProvider(deps, actor, requireString(input, 'id')),
  },
  create_provider_key: {
    description: 'Store a provider key for a gateway. The secret is encrypted and never returned.',
    inputSchema: ProviderCreateInput,
    write: true,
    run: (deps, actor, input) => createProvider(deps, actor, input),
  },
  update_provider_key: {
    description: 'Rename, disable or enable a provider key.',
    inputSchema: Type.Composite([IdInput('Provider key UUID.'), ProviderUpdateInput]),
    write: true,
    run: (deps, actor, input) => updateProvider(deps, actor, requireString(input, 'id'), withoutKeys(input, 'id')),
  },
  delete_provider_key: {
    description: 'Delete a provider key; it is stripped from every routing rule in the workspace.',
    inputSchema: IdInput('Provider key UUID.'),
    write: true,
    run: (deps, actor, input) => deleteProvider(deps, actor, requireString(input, 'id')),
  },
  list_api_keys: {
    description: 'List inference keys with their routing, most recent 100 per page.',
    inputSchema: Type.Object({ offset: Type.Optional(Type.Integer({ minimum: 0 })) }),
    write: false,
    run: (deps, actor, input) => listKeys(deps, actor, input.offset as number | undefined),
  },
  get_api_key: {
    description: 'Get one inference key by its UUID.',
    inputSchema: IdInput('Inference key UUID.'),
    write: false,
    run: (deps, actor, input) => getKey(deps, actor, requireString(input, 'id')),
  },
  create_api_key: {
    description: 'Create an inference key. The full secret is in this response only.',
    inputSchema: KeyCreateInput,
    write: true,
    run: (deps, actor, input) => createKey(deps, actor, input),
  },
  update_api_key: {
    description: 'Update an inference key: label, revoked, allowlist, steering message, timeouts, features.',
    inputSchema: Type.Composite([IdInput('Inference key UUID.'), KeyUpdateInput]),
    write: true,
    run: (deps, actor, input) => updateKey(deps, actor, requireString(input, 'id'), withoutKeys(input, 'id')),
  },
  revoke_api_key: {
    description: 'Revoke an inference key (idempotent; the row is kept).',
    inputSchema: IdInput('Inference key UUID.'),
    write: true,
    run: (deps, actor, input) => revokeKey(deps, actor, requireString(input, 'id')),
  },
  get_routing: {
    description: 'Get the routing rule of an inference key.',
    inputSchema: Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }) }),
    write: false,
    run: (deps, actor, input) => getRouting(deps, actor, requireString(input, 'key_id')),
  },
  set_routing: {
    description: 'Replace the routing rule of an inference key: strategy, targets, model_remaps, decisioner.',
    inputSchema: Type.Composite([Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }) }), RoutingInput]),
    write: true,
    run: (deps, actor, input) => putRouting(deps, actor, requireString(input, 'key_id'), withoutKeys(input, 'key_id')),
  },
  get_usage_summary: {
    description: 'Usage totals: requests, errors, errorRate (percent), avgLatency, avgOverhead, models.',
    inputSchema: UsageInput,
    write: false,
    run: (deps, actor, input) => usageSummary(deps, actor, usageQuery(input)),
  },
  get_usage_series: {
    description: 'Usage per time bucket: hourly for 24h, daily otherwise.',
    inputSchema: UsageInput,
    write: false,
    run: (deps, actor, input) => usageSeries(deps, actor, usageQuery(input)),
  },
  get_usage_breakdown: {
    description: 'Top 12 models or gateways by request count.',
    inputSchema: Type.Composite([Type.Object({ by: Type.String({ enum: ['model', 'gateway'] }) }), UsageInput]),
    write: false,
    run: (deps, actor, input) => usageBreakdown(deps, actor, usageQuery(input)),
  },
  get_account: {
    description: 'Workspace snapshot: workspace, key counts, provider keys, management keys, members.',
    inputSchema: Type.Object({}),
    write: false,
    run: (deps, actor) => accountSnapshot(deps, actor),
  },
}

/** The tools/list view: plain JSON schemas (TypeBox symbols dropped). */
export function listTools() {
  return Object.entries(mcpTools).map(([name, tool]) => ({
    name,
    description: tool.description,
    inputSchema: { type: 'object', ...JSON.parse(JSON.stringify(tool.inputSchema)) },
    annotations: { readOnlyHint: !tool.write, destructiveHint: tool.write && /delete|revoke|set_routing/.test(name) },
  }))
}
