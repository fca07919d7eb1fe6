/** The routing-rule operations: get and replace a key's rule. */
import { Type } from '@sinclair/typebox'
import { getRouting, putRouting } from '../keys'
import { RoutingInput, RoutingOutput } from '../schemas'
import { invalidInput, keyNotFound, keyRevoked, readOnly, unauthorized } from './error-statuses'
import { keyIdSchema, requireString, withoutKeys, type IdBody, type IdInput } from './inputs'
import type { Operation } from './operation'
import { inferenceKey } from './targets'

export const routingGet = {
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
} satisfies Operation<IdInput>

export const routingSet = {
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
} satisfies Operation<IdBody>
