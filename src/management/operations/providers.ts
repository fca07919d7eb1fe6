/** The provider-key operations: list, store, get, update, delete (API), and the dashboard's notes. */
import { Type } from '@sinclair/typebox'
import { createProvider, deleteProvider, getProvider, listProviders, providerNotes, setProviderNotes, updateProvider } from '../providers'
import { ProviderCreateInput, ProviderOutput, ProviderUpdateInput } from '../schemas'
import { readOnly, unauthorized } from './error-statuses'
import { idSchema, requireString, withoutKeys, type IdBody, type IdInput } from './inputs'
import type { Operation } from './operation'
import { provider } from './targets'

const providerNotFound = { 404: 'No provider key with this id in the workspace.' }

export const providersList = {
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
} satisfies Operation<{ gateway?: string }>

export const providersCreate = {
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
} satisfies Operation<unknown>

export const providersGet = {
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
} satisfies Operation<IdInput>

export const providersUpdate = {
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
} satisfies Operation<IdBody>

export const providersDelete = {
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
} satisfies Operation<IdInput>

export const providersNotesGet = {
  name: 'providers.notes.get',
  access: 'read',
  run: (deps, actor) => providerNotes(deps, actor),
  dashboard: { method: 'GET', path: '/providers/notes', input: () => ({}) },
} satisfies Operation<Record<string, never>>

export const providersNotesSet = {
  name: 'providers.notes.set',
  access: 'write',
  run: (deps, actor, input: { id: string; notes: string }) => setProviderNotes(deps, actor, input.id, input.notes),
  audit: (input) => ({ target: provider(input.id), changes: { notes: input.notes } }),
  dashboard: { method: 'PUT', path: '/providers/:id/notes', body: Type.Object({ notes: Type.String() }), input: ({ params, body }) => ({ id: params.id!, notes: (body as { notes: string }).notes }) },
} satisfies Operation<{ id: string; notes: string }>
