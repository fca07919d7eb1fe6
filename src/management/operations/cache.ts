/** The response cache's own operation (CONTRACT §15): purging the entries a key's requests are answered from. */
import { Type } from '@sinclair/typebox'
import { purgeKeyCache } from '../cache'
import { keyNotFound, readOnly, unauthorized } from './error-statuses'
import { keyIdSchema, requireString, type IdInput } from './inputs'
import type { Operation } from './operation'
import { inferenceKey, keyRef, keyWorkspace } from './targets'

export const cachePurge = {
  name: 'cache.purge',
  access: 'write',
  destructive: true,
  idempotent: true,
  run: (deps, actor, input: IdInput) => purgeKeyCache(deps, keyRef(actor, input.id)),
  audit: (input, output: { purged: number }, deps) => ({ target: inferenceKey(input.id), changes: { purged: output.purged }, workspaceId: keyWorkspace(deps, input.id) }),
  rest: {
    method: 'DELETE',
    path: '/keys/:id/cache',
    tags: ['keys'],
    summary: "Purge the key's response cache entries on this node",
    output: {
      schema: Type.Object({ purged: Type.Integer({ minimum: 0, description: 'How many entries were deleted.' }) }),
      description: "The entries deleted: the key's own, or its workspace's shared entries when the key's cache scope is `workspace`. The cache is per node (CONTRACT §15).",
    },
    errors: { ...unauthorized, ...readOnly, ...keyNotFound },
    input: ({ params }) => ({ id: params.id! }),
  },
  mcp: {
    tool: 'purge_cache',
    description: "Delete an inference key's response cache entries (its workspace's shared entries when its cache scope is 'workspace'); answers {purged: <entries deleted>}.",
    input: keyIdSchema,
    from: (args) => ({ id: requireString(args, 'key_id') }),
  },
  dashboard: { method: 'DELETE', path: '/keys/:id/cache', input: ({ params }) => ({ id: params.id! }) },
} satisfies Operation<IdInput>
