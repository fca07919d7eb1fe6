/** The usage operations: totals, time buckets, the top models or gateways; one query read from REST or MCP. */
import { Type } from '@sinclair/typebox'
import { UsageBreakdownItemOutput, UsageQuery, UsageSeriesItemOutput, UsageSummaryOutput } from '../schemas'
import * as usage from '../usage'
import type { UsageQueryInput } from '../usage'
import { unauthorized } from './error-statuses'
import type { Operation } from './operation'

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

const usageErrors = {
  400: 'A malformed `api_key_id`, or (breakdown) a `by` other than model or gateway.',
  ...unauthorized,
  404: 'An `api_key_id` that is not a key of this workspace.',
}

export const usageSummary = {
  name: 'usage.summary',
  access: 'read',
  run: (deps, actor, input: UsageQueryInput) => usage.usageSummary(deps, actor, input),
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
} satisfies Operation<UsageQueryInput>

export const usageSeries = {
  name: 'usage.series',
  access: 'read',
  run: (deps, actor, input: UsageQueryInput) => usage.usageSeries(deps, actor, input),
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
} satisfies Operation<UsageQueryInput>

export const usageBreakdown = {
  name: 'usage.breakdown',
  access: 'read',
  run: (deps, actor, input: UsageQueryInput) => usage.usageBreakdown(deps, actor, input),
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
} satisfies Operation<UsageQueryInput>
