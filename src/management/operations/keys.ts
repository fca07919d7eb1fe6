/** The inference-key operations: list, create, get, update, set limits, set the cache, set continuation, set guardrails, revoke (API), and rotate. */
import { Type, type TSchema } from '@sinclair/typebox'
import { badRequest } from '../errors'
import { createKey, getKey, listKeys, revokeKey, rotateKey, updateKey, type KeyView } from '../keys'
import type { Actor, ManagementDeps } from '../context'
import { CacheInput, ContinuationInput, GuardrailsInput, KeyCreateInput, KeyOutput, KeyUpdateInput, LimitsInput } from '../schemas'
import { setKeyCache, type SetCacheInput } from '../cache'
import { setKeyContinuation, type SetContinuationInput } from '../continuation'
import { setKeyGuardrails, type SetGuardrailsInput } from '../guardrails'
import { invalidInput, keyNotFound, keyRevoked, readOnly, unauthorized } from './error-statuses'
import { idSchema, requireString, withoutKeys, type IdBody, type IdInput } from './inputs'
import type { Operation } from './operation'
import { inferenceKey, keyRef, keyWorkspace } from './targets'

export const keysList = {
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
} satisfies Operation<{ offset?: string | number }>

export const keysCreate = {
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
} satisfies Operation<unknown>

export const keysGet = {
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
} satisfies Operation<IdInput>

/** Key fields a PATCH may set alone, with the operation such a PATCH is audited as. */
const narrowSettings: ReadonlyMap<string, string> = new Map([
  ['cache', 'keys.set_cache'],
  ['continuation', 'keys.set_continuation'],
  ['guardrails', 'keys.set_guardrails'],
])

export const keysUpdate = {
  name: 'keys.update',
  access: 'write',
  run: (deps, actor, input: IdBody) => updateKey(deps, actor, input.id, input.body),
  // A PATCH that sets only the response cache, only continuation or only guardrails is that operation
  // (CONTRACT §15, §16, §17: audited as keys.set_cache, keys.set_continuation or keys.set_guardrails,
  // the setting as it now stands).
  audit: (input, output: Record<string, unknown>) => {
    const fields = Object.keys(input.body)
    const only = fields.length === 1 ? narrowSettings.get(fields[0]!) : undefined
    return only ? { target: inferenceKey(input.id), changes: { [fields[0]!]: output[fields[0]!] }, action: only } : { target: inferenceKey(input.id), changes: input.body }
  },
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
    description: 'Update an inference key: label, revoked, allowlist, steering message, timeouts, features, limits, response cache, mid-stream continuation, guardrails.',
    input: Type.Composite([idSchema('Inference key UUID.'), KeyUpdateInput]),
    from: (args) => ({ id: requireString(args, 'id'), body: withoutKeys(args, 'id') }),
  },
} satisfies Operation<IdBody>

export const keysSetLimits = {
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
} satisfies Operation<IdBody>

/** The settings of a key kept whole as JSON and set by an operation of their own. */
type KeySettingField = 'cache' | 'continuation' | 'guardrails'

/**
 * The operation that sets one of those settings whole (null: off): `keys.set_<field>`, MCP
 * `set_key_<field>`, the dashboard's PUT /keys/:id/<field> (REST sets it through PATCH /keys/:id).
 * Its audit event holds the setting as it now stands (defaults filled in; null: off), whatever the
 * door sent. `offWhat` names what null turns off, in the MCP door's message for a missing value.
 */
function keySettingOperation<F extends KeySettingField, I extends { id: string } & { [K in F]: unknown }>(
  field: F,
  spec: { run: (deps: ManagementDeps, actor: Actor, input: I) => KeyView; schema: TSchema; description: string; offWhat: string },
): Operation<I> {
  const value = Type.Union([spec.schema, Type.Null()])
  const input = (id: string, setting: unknown) => ({ id, [field]: setting }) as I
  return {
    name: `keys.set_${field}`,
    access: 'write',
    idempotent: true,
    run: spec.run,
    audit: (input, output: Record<F, unknown>, deps) => ({ target: inferenceKey(input.id), changes: { [field]: output[field] }, workspaceId: keyWorkspace(deps, input.id) }),
    mcp: {
      tool: `set_key_${field}`,
      description: spec.description,
      input: Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }), [field]: value }),
      from: (args) => {
        if (!(field in args)) throw badRequest(`Invalid ${field}: required (an object, or null to turn ${spec.offWhat} off).`)
        return input(requireString(args, 'key_id'), args[field])
      },
    },
    dashboard: {
      method: 'PUT',
      path: `/keys/:id/${field}`,
      body: Type.Object({ [field]: value }),
      input: ({ params, body }) => input(params.id!, (body as Record<string, unknown>)[field]),
    },
  }
}

export const keysSetCache = keySettingOperation('cache', {
  run: (deps, actor, input: SetCacheInput) => setKeyCache(deps, actor, input),
  schema: CacheInput,
  offWhat: 'the cache',
  description:
    "Set an inference key's response cache (replaces the whole setting): {ttl_seconds (1-2592000, default 3600), scope ('key' default, or 'workspace': shared with the workspace's other workspace-scoped keys), semantic (null, or {threshold 0.8-1.0, provider_key_id of an embeddings-capable provider key, model})}; cache null turns it off. Completed answers are then served again to identical requests.",
})

export const keysSetContinuation = keySettingOperation('continuation', {
  run: (deps, actor, input: SetContinuationInput) => setKeyContinuation(deps, actor, input),
  schema: ContinuationInput,
  offWhat: 'continuation',
  description:
    "Set an inference key's mid-stream continuation (replaces the whole setting): {max_hops (1-3, default 1)}; continuation null turns it off. A streamed answer whose stream breaks after text was sent is then continued by the next target of the plan, in the same client stream, at most max_hops times.",
})

export const keysSetGuardrails = keySettingOperation('guardrails', {
  run: (deps, actor, input: SetGuardrailsInput) => setKeyGuardrails(deps, actor, input),
  schema: GuardrailsInput,
  offWhat: 'guardrails',
  description:
    "Set an inference key's guardrails (replaces the whole setting): {mode ('enforce' default, or 'monitor': findings only counted), input: [rule], output: [rule]} (at most 32 rules each, default none); guardrails null turns them off. A rule is {detector, action ('mask' or 'block'), name (optional)}; detectors email, phone, credit_card, iban, us_ssn, ip_address, secret, regex (with pattern) and moderation (input only, action block, with provider_key_id of a provider key whose gateway serves /moderations and categories such as hate, harassment, self-harm, sexual, violence, illicit).",
})

export const keysRevoke = {
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
} satisfies Operation<IdInput>

export const keysRotate = {
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
} satisfies Operation<{ id: string; graceSeconds?: number }>
