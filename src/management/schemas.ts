/**
 * TypeBox schemas of the management inputs and outputs. The REST routes validate with them and
 * the OpenAPI document is generated from them; management functions check the same schemas so
 * that REST, MCP and the CLI refuse bad input with the same message.
 */
import { Type, type TSchema, type Static } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { Value } from '@sinclair/typebox/value'
import { badRequest } from './errors'

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

/**
 * A JSON object with any members. Not `Type.Record`: that emits `patternProperties`, which OpenAPI 3.0
 * schema objects do not allow; the check is the same (an object, not an array).
 */
const AnyObject = (options: { description?: string } = {}) => Type.Object({}, { additionalProperties: true, ...options })

export const apiShapes = ['chat', 'chat_router', 'messages', 'content', 'decisions'] as const
export type ApiShape = (typeof apiShapes)[number]

export const TargetInput = Type.Object(
  {
    provider_key_id: Type.String({ description: 'A provider key UUID from GET /api/v1/providers.' }),
    weight: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Split only. 0 means failover-only.' })),
    ttfb_ms: Type.Optional(Nullable(Type.Integer({ minimum: 1000, maximum: 30000 }))),
    gateway: Type.Optional(Type.String({ description: 'Read-only; ignored on write.' })),
  },
  { additionalProperties: true },
)

export const RemapInput = Type.Object(
  {
    match: Type.String({ minLength: 1, maxLength: 200 }),
    percent: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    provider_key_id: Type.String(),
    upstream_model: Type.String({ minLength: 1, maxLength: 200 }),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
)

export const DecisionerInput = Type.Object(
  {
    provider_key_id: Type.Optional(Type.String()),
    objective: Type.Optional(Type.Union([Type.Literal('cost'), Type.Literal('capability'), Type.Literal('efficiency')])),
    allow_model_override: Type.Optional(Type.Boolean()),
    max_usd_m: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    notes: Type.Optional(Type.String({ maxLength: 500 })),
    models: Type.Optional(Type.Array(Type.String(), { maxItems: 12 })),
  },
  { additionalProperties: true },
)

export const RoutingInput = Type.Object(
  {
    strategy: Type.Optional(Type.Union([Type.Literal('priority'), Type.Literal('split')])),
    targets: Type.Array(TargetInput, { maxItems: 10 }),
    model_remaps: Type.Optional(Nullable(Type.Array(RemapInput, { maxItems: 20 }))),
    decisioner: Type.Optional(Nullable(DecisionerInput)),
  },
  { additionalProperties: true },
)
export type RoutingInput = Static<typeof RoutingInput>

export const AllowedIpsInput = Type.Union([Type.Array(Type.String()), Type.String()], {
  description: 'IPv4/IPv6 addresses or CIDR ranges: an array, or one string separated by commas or newlines.',
})

/** The key settings POST /keys and PATCH /keys/:id share (SPEC "POST /keys body", "PATCH /keys/:id fields"). */
/** CONTRACT §11: each a positive number, or null for no limit; checked by the rule, which names the field. */
export const LimitsInput = Type.Object(
  {
    requests_per_minute: Type.Optional(Nullable(Type.Number({ description: 'Requests over the last 60 s (sliding, 1-second resolution); a whole number.' }))),
    tokens_per_minute: Type.Optional(Nullable(Type.Number({ description: 'Prompt plus completion tokens over the last 60 s; a whole number.' }))),
    usd_per_day: Type.Optional(Nullable(Type.Number({ description: 'USD per UTC day.' }))),
    usd_per_month: Type.Optional(Nullable(Type.Number({ description: 'USD per UTC calendar month.' }))),
  },
  { additionalProperties: true, description: 'Spend caps and rate limits; fields not named stay, null clears one, null for the whole clears all.' },
)

/**
 * CONTRACT §15: the whole response cache setting (a change replaces it; fields not named take their
 * defaults), or null to turn it off. Types only: the rule checks ranges and unknown fields, naming
 * the field.
 */
export const CacheInput = Type.Object(
  {
    ttl_seconds: Type.Optional(Type.Number({ description: 'How long an answer is served from the cache: whole seconds, 1 to 2592000 (30 days); default 3600.' })),
    scope: Type.Optional(Type.String({ description: "'key' (default): only this key's requests share its entries; 'workspace': every workspace-scoped key of the workspace shares them." })),
    semantic: Type.Optional(
      Nullable(
        Type.Object(
          {
            threshold: Type.Number({ description: 'The least cosine similarity served, 0.8 to 1.0.' }),
            provider_key_id: Type.String({ description: "A provider key of the key's workspace whose gateway serves embeddings." }),
            model: Type.String({ description: 'The embeddings model (1 to 200 characters).' }),
          },
          { additionalProperties: true, description: 'After an exact miss, the last user turn is embedded with this provider key and model and compared with earlier entries; null (default): exact matches only.' },
        ),
      ),
    ),
  },
  { additionalProperties: true, description: 'The response cache (CONTRACT §15): the whole setting, replaced by each change; null turns it off.' },
)

export const CacheOutput = Type.Object(
  {
    ttl_seconds: Type.Integer(),
    scope: Type.Union([Type.Literal('key'), Type.Literal('workspace')]),
    semantic: Nullable(Type.Object({ threshold: Type.Number(), provider_key_id: Type.String(), model: Type.String() })),
  },
  { description: 'The response cache (CONTRACT §15), defaults filled in; null: off.' },
)

/**
 * CONTRACT §16: the whole mid-stream continuation setting (a change replaces it; `max_hops` not
 * named takes its default), or null to turn it off. Types only: the rule checks the range and
 * unknown fields, naming the field.
 */
export const ContinuationInput = Type.Object(
  {
    max_hops: Type.Optional(Type.Number({ description: 'How many times one streamed answer may be continued after its stream broke: a whole number, 1 to 3; default 1.' })),
  },
  { additionalProperties: true, description: 'Mid-stream continuation (CONTRACT §16): the whole setting, replaced by each change; null turns it off.' },
)

export const ContinuationOutput = Type.Object(
  { max_hops: Type.Integer({ minimum: 1, maximum: 3 }) },
  { description: 'Mid-stream continuation (CONTRACT §16), the default filled in; null: off (a broken stream ends with an in-stream error).' },
)

/**
 * CONTRACT §17: one guardrail rule. Types only: the rule checks the detector, the action (both
 * required there, so that a misspelt field is named as unknown rather than a required one as
 * missing), which fields each detector takes and unknown fields, naming the field.
 */
export const GuardrailRuleInput = Type.Object(
  {
    detector: Type.Optional(Type.String({ description: 'Required: email, phone, credit_card, iban, us_ssn, ip_address, secret, regex (with pattern) or moderation (input only, with provider_key_id and categories).' })),
    action: Type.Optional(Type.String({ description: "Required: 'mask': matches replaced (input: by placeholders restored in the answer; output: by [REDACTED:<DETECTOR>]); 'block': refused. A moderation rule only blocks." })),
    name: Type.Optional(Type.String({ description: "The rule's name in findings and errors: 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'; default the detector's name." })),
    pattern: Type.Optional(Type.String({ description: 'A regex rule only, required: the pattern in RE2 syntax (matched in time linear in the text: no backreferences or lookaround; inline flags such as (?i)), at most 1000 characters, not matching the empty string.' })),
    provider_key_id: Type.Optional(Type.String({ description: "A moderation rule only, required: a provider key of the key's workspace whose gateway serves /moderations (openai, mistral)." })),
    categories: Type.Optional(Type.Array(Type.String(), { description: 'A moderation rule only, required: the categories a flag in which blocks the request (hate, harassment, self-harm, sexual, violence, illicit, self-harm/intent, …).' })),
  },
  { additionalProperties: true, description: 'A guardrail rule: one detector and what is done with its matches.' },
)

/**
 * CONTRACT §17: the whole guardrails setting (a change replaces it; fields not named take their
 * defaults), or null to turn them off. Types only: the rule checks values and unknown fields, naming
 * the field.
 */
export const GuardrailsInput = Type.Object(
  {
    mode: Type.Optional(Type.String({ description: "'enforce' (default): findings change the request or answer; 'monitor': they are only counted." })),
    input: Type.Optional(Type.Array(GuardrailRuleInput, { description: 'Rules on every text the request sends, at most 32; default none.' })),
    output: Type.Optional(Type.Array(GuardrailRuleInput, { description: 'Rules on the answer, at most 32 (no moderation); default none.' })),
  },
  { additionalProperties: true, description: 'Guardrails (CONTRACT §17): the whole setting, replaced by each change; null turns them off.' },
)

const GuardrailRuleOutput = Type.Object({
  name: Type.String(),
  detector: Type.String(),
  action: Type.Union([Type.Literal('mask'), Type.Literal('block')]),
  pattern: Type.Optional(Type.String()),
  provider_key_id: Type.Optional(Type.String()),
  categories: Type.Optional(Type.Array(Type.String())),
})

export const GuardrailsOutput = Type.Object(
  {
    mode: Type.Union([Type.Literal('enforce'), Type.Literal('monitor')]),
    input: Type.Array(GuardrailRuleOutput),
    output: Type.Array(GuardrailRuleOutput),
  },
  { description: "Guardrails (CONTRACT §17), defaults filled in (each rule's name too); null: off." },
)

const keySettingFields = {
  name: Type.Optional(Nullable(Type.String())),
  label: Type.Optional(Nullable(Type.String())),
  companion_ads: Type.Optional(Type.Boolean()),
  keyterms: Type.Optional(Type.Boolean()),
  allowed_ips: Type.Optional(AllowedIpsInput),
  steering_message: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
  failover_ttfb_ms: Type.Optional(Nullable(Type.Integer({ minimum: 1000, maximum: 30000 }))),
  upstream_timeout_ms: Type.Optional(Nullable(Type.Integer({ minimum: 5000, maximum: 90000 }))),
  limits: Type.Optional(Type.Union([LimitsInput, Type.Null()])),
  cache: Type.Optional(Type.Union([CacheInput, Type.Null()])),
  continuation: Type.Optional(Type.Union([ContinuationInput, Type.Null()])),
  guardrails: Type.Optional(Type.Union([GuardrailsInput, Type.Null()])),
}

export const KeyCreateInput = Type.Object(
  {
    ...keySettingFields,
    // Checked by the management rule so an unknown value gets SPEC's exact 'Unsupported API shape.'
    api_shape: Type.Optional(Type.Any({ type: 'string', enum: [...apiShapes] })),
    routing: Type.Optional(RoutingInput),
  },
  { additionalProperties: true },
)
export type KeyCreateInput = Static<typeof KeyCreateInput>

export const KeyUpdateInput = Type.Object({ ...keySettingFields, revoked: Type.Optional(Type.Boolean()) }, { additionalProperties: true })
export type KeyUpdateInput = Static<typeof KeyUpdateInput>

export const ProviderCreateInput = Type.Object(
  {
    gateway: Type.String({ description: 'A gateway slug from GET /api/v1/gateways.' }),
    key: Type.Optional(Type.String({ maxLength: 2000 })),
    secret: Type.Optional(Type.String({ maxLength: 2000 })),
    name: Type.Optional(Nullable(Type.String())),
    label: Type.Optional(Nullable(Type.String())),
    config: Type.Optional(AnyObject({ description: 'Gateway settings; see `config_fields` in the gateway catalog.' })),
  },
  { additionalProperties: true },
)
export type ProviderCreateInput = Static<typeof ProviderCreateInput>

export const ProviderUpdateInput = Type.Object(
  {
    name: Type.Optional(Nullable(Type.String())),
    label: Type.Optional(Nullable(Type.String())),
    disabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
)
export type ProviderUpdateInput = Static<typeof ProviderUpdateInput>

export const UsageQuery = Type.Object(
  {
    range: Type.Optional(Type.String({ description: '24h, 7d (default) or 30d; any other value means 7d.' })),
    api_key_id: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
    by: Type.Optional(Type.String({ description: 'model or gateway (breakdown only).' })),
  },
  { additionalProperties: true },
)
export type UsageQuery = Static<typeof UsageQuery>

// Outputs (documentation).
export const ProviderOutput = Type.Object({
  id: Type.String({ format: 'uuid' }),
  gateway: Type.String(),
  label: Type.String(),
  key_last4: Type.String(),
  config: AnyObject(),
  created_at: Type.String(),
  disabled_at: Nullable(Type.String()),
})

export const DecisionerOutput = Type.Object({
  provider_key_id: Type.String(),
  objective: Type.Union([Type.Literal('cost'), Type.Literal('capability'), Type.Literal('efficiency')]),
  allow_model_override: Type.Boolean(),
  max_usd_m: Type.Optional(Type.Number()),
  notes: Type.Optional(Type.String()),
  models: Type.Optional(Type.Array(Type.String())),
})

export const RoutingOutput = Type.Object({
  strategy: Type.String(),
  targets: Type.Array(
    Type.Object({
      provider_key_id: Type.String(),
      gateway: Type.String(),
      weight: Type.Optional(Type.Integer()),
      ttfb_ms: Nullable(Type.Integer()),
    }),
  ),
  model_remaps: Type.Array(
    Type.Object({
      match: Type.String(),
      percent: Type.Integer(),
      provider_key_id: Type.String(),
      gateway: Type.String(),
      upstream_model: Type.String(),
      enabled: Type.Boolean(),
    }),
  ),
  decisioner: Nullable(DecisionerOutput),
})

export const KeyOutput = Type.Object({
  id: Type.String({ format: 'uuid' }),
  label: Nullable(Type.String()),
  key_prefix: Type.String(),
  api_shape: Type.String(),
  companion_ads: Type.Boolean(),
  keyterms: Type.Boolean(),
  allowed_ips: Type.Array(Type.String()),
  steering_message: Nullable(Type.String()),
  failover_ttfb_ms: Nullable(Type.Integer()),
  upstream_timeout_ms: Nullable(Type.Integer()),
  effective_timeouts: Type.Object({ failover_ttfb_ms: Type.Integer(), upstream_timeout_ms: Type.Integer() }),
  created_at: Type.String(),
  last_used_at: Nullable(Type.String()),
  revoked_at: Nullable(Type.String()),
  routing: RoutingOutput,
  limits: Type.Object(
    {
      requests_per_minute: Nullable(Type.Number()),
      tokens_per_minute: Nullable(Type.Number()),
      usd_per_day: Nullable(Type.Number()),
      usd_per_month: Nullable(Type.Number()),
    },
    { description: 'Spend caps and rate limits (CONTRACT §11); null: no limit.' },
  ),
  limit_state: Type.Object(
    {
      requests_last_minute: Type.Integer(),
      tokens_last_minute: Type.Integer(),
      usd_today: Type.Number({ description: 'UTC day; in-flight requests count at their worst-case reservation.' }),
      usd_this_month: Type.Number({ description: 'UTC calendar month.' }),
    },
    { description: 'What counts against the limits now.' },
  ),
  cache: Nullable(CacheOutput),
  continuation: Nullable(ContinuationOutput),
  guardrails: Nullable(GuardrailsOutput),
  key: Type.Optional(Type.String({ description: 'Only in the creation response.' })),
})

/** SPEC "Gateway catalog entry", as GET /gateways shows it (the operator's base URLs stay out). */
export const GatewayOutput = Type.Object({
  id: Type.String({ description: 'The gateway slug, passed as `gateway` when storing a provider key.' }),
  name: Type.String(),
  routable: Type.Boolean(),
  decisions: Type.Boolean({ description: 'Can serve keys of shape decisions.' }),
  config_fields: Type.Optional(
    Type.Array(Type.Object({ name: Type.String(), required: Type.Boolean(), default: Type.Optional(Type.String()) }), {
      description: 'Settings a provider key of this gateway takes in `config`.',
    }),
  ),
  auth_header: Type.String(),
  capabilities: Type.Object({
    chat: Type.Boolean(),
    embeddings: Type.Boolean(),
    responses: Type.Union([Type.Literal('native'), Type.Literal('translated'), Type.Literal('only')]),
    chain: Type.Boolean(),
    retrieve: Type.Boolean(),
    batch: Type.Boolean(),
    decisioner: Type.Boolean(),
    omit_params: Type.Array(Type.String()),
  }),
})

export const UsageSummaryOutput = Type.Object({
  requests: Type.Integer(),
  errors: Type.Integer({ description: 'Requests answered with a status of 400 or more.' }),
  errorRate: Type.Number({ description: 'Percent of requests, two decimals.' }),
  avgLatency: Type.Number({ description: 'Milliseconds; 0 without requests.' }),
  avgOverhead: Type.Number({ description: "Milliseconds of the router's own time; 0 when no request has it." }),
  models: Type.Integer({ description: 'Distinct models requested.' }),
  cost_usd: Type.Number({
    description:
      'USD, the known costs of the requests summed (CONTRACT §11): listed prices of the model on the gateway that answered, counted in whole nano-dollars (1e-9 USD) and shown in USD. 0 when no request was priced: see unpriced_requests.',
  }),
  unpriced_requests: Type.Integer({ description: 'Requests whose cost is unknown (the model lists no price): not counted in cost_usd, never as $0.' }),
  cache_hits: Type.Integer({ description: "Requests the response cache answered (CONTRACT §15): hits, semantic hits and requests coalesced onto an identical one in flight. Their cost_usd is 0." }),
  saved_usd: Type.Number({
    description: 'USD, what the cache answers saved: the known costs of the answers they repeat, summed (counted in whole nano-dollars, shown in USD). A hit whose original was unpriced adds nothing.',
  }),
})

export const UsageSeriesItemOutput = Type.Object({
  bucket: Type.String({ format: 'date-time', description: 'Start of the hour (24h) or day (7d, 30d).' }),
  requests: Type.Integer(),
  errors: Type.Integer(),
  avgLatency: Nullable(Type.Number({ description: 'Milliseconds; null for a bucket without requests.' })),
  avgOverhead: Nullable(Type.Number({ description: 'Milliseconds; null when no request of the bucket has it.' })),
})

export const UsageBreakdownItemOutput = Type.Object({
  name: Type.String({ description: 'A model id or a gateway slug.' }),
  requests: Type.Integer(),
  cost_usd: Nullable(
    Type.Number({ description: "USD, the known costs of this name's requests summed (counted in whole nano-dollars, shown in USD); null when every one of its requests is unpriced (unknown, never $0)." }),
  ),
  unpriced_requests: Type.Integer({ description: 'Of its requests, those whose cost is unknown: not counted in cost_usd.' }),
})

/** SPEC "Account snapshot"; member e-mails never appear. */
export const AccountOutput = Type.Object({
  workspace: Type.Object({ id: Type.String(), name: Type.String(), kind: Type.String(), created_at: Type.String() }),
  inference_keys: Type.Object({ total: Type.Integer(), live: Type.Integer(), revoked: Type.Integer() }),
  provider_keys: Type.Array(ProviderOutput),
  management_keys: Type.Object({ total: Type.Integer(), read_only: Type.Integer() }),
  members: Type.Object({ total: Type.Integer() }),
})

/** GET /audit's query (CONTRACT §12): checked by the rule, which names the bad field. */
export const AuditQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ description: 'Events per page, 1 to 100 (default 50).' })),
    after: Type.Optional(Type.String({ description: 'An event id (a page\'s `last_id`): the events older than it.' })),
    action: Type.Optional(Type.String({ description: 'Only this operation, e.g. keys.create, routing.set, providers.delete.' })),
    target_id: Type.Optional(Type.String({ description: 'Only the events about this object.' })),
  },
  { additionalProperties: true },
)

export const AuditEventOutput = Type.Object({
  id: Type.String(),
  time: Type.String({ description: 'ISO 8601.' }),
  workspace_id: Type.String(),
  actor: Type.Object({
    kind: Type.String({ description: '`management_key` or `cli` (the operator CLI).' }),
    id: Type.Union([Type.String(), Type.Null()]),
    prefix: Type.Union([Type.String(), Type.Null()]),
  }),
  via: Type.String({ description: '`rest`, `mcp`, `cli` or `dashboard`.' }),
  action: Type.String({ description: 'The operation, e.g. `keys.create`.' }),
  target: Type.Object({ type: Type.String(), id: Type.String() }),
  changes: Type.Unknown({ description: 'The fields the write set; secrets and key values are "[redacted]".' }),
  caller_ip: Type.Union([Type.String(), Type.Null()]),
  request_id: Type.Union([Type.String(), Type.Null()]),
})

export const AuditListOutput = Type.Object({
  data: Type.Array(AuditEventOutput),
  has_more: Type.Boolean(),
  last_id: Type.Union([Type.String(), Type.Null()]),
})

/** The `{error}` envelope of one status, with what that status means on the route that answers it. */
export const errorOutput = (description: string) => Type.Object({ error: Type.String(), code: Type.Optional(Type.String()) }, { description })

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>()

/** `/targets/0/weight` → `targets[0].weight` */
export function fieldName(pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((part, index) => (/^\d+$/.test(part) ? `[${part}]` : index === 0 ? part : `.${part}`))
    .join('')
}

interface Violation {
  path: string
  message: string
  value?: unknown
  schema?: TSchema
}

function kindOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value === 'number' ? 'number' : typeof value
}

/**
 * When a value fails a union (e.g. "an array or null"), the useful error is inside the variant of
 * the value's own type: `model_remaps[0].percent`, not `model_remaps`. Descends as far as it can.
 */
export function deepestViolation(error: Violation): Violation {
  const variants = (error.schema as { anyOf?: TSchema[] } | undefined)?.anyOf
  // A union of literals (an enum) is described as a whole: "must be 'a', 'b' or 'c'".
  if (!variants || variants.every((candidate) => 'const' in candidate)) return error
  const kind = kindOf(error.value)
  const variant = variants.find((candidate) => {
    const type = (candidate as { type?: string }).type
    return type === kind || (kind === 'number' && type === 'integer')
  })
  if (!variant) return error
  const inner = Value.Errors(variant, error.value).First()
  if (!inner) return error
  return deepestViolation({ ...inner, path: error.path + inner.path })
}

/** One readable message for the first schema violation, naming the field. */
export function describeViolation(violation: Violation): string {
  const error = deepestViolation(violation)
  const field = fieldName(error.path)
  if (!field) return 'Request body must be a JSON object.'
  const schema = error.schema as Record<string, unknown> | undefined
  let expectation = error.message
  if (schema) {
    if (schema.anyOf || error.message === 'Expected union value') expectation = describeUnion(schema)
    else if (typeof schema.minLength === 'number' && typeof error.value === 'string' && error.value.length < schema.minLength) {
      expectation = schema.minLength === 1 ? 'must not be empty' : `must be at least ${schema.minLength} characters`
    } else if (typeof schema.maxLength === 'number' && typeof error.value === 'string') expectation = `must be at most ${schema.maxLength} characters`
    else if (schema.type === 'integer' && (typeof schema.minimum === 'number' || typeof schema.maximum === 'number') && Number.isInteger(error.value)) {
      expectation = `must be an integer from ${schema.minimum ?? '-∞'} to ${schema.maximum ?? '∞'}`
    } else if (typeof schema.maxItems === 'number' && Array.isArray(error.value)) expectation = `must have at most ${schema.maxItems} entries`
    else if (Array.isArray(schema.enum)) expectation = `must be one of ${schema.enum.join(', ')}`
  }
  return `Invalid ${field}: ${expectation.replace(/^Expected /, 'expected ')}.`
}

function describeUnion(schema: Record<string, unknown>): string {
  const variants = (schema.anyOf as Record<string, unknown>[] | undefined) ?? []
  const names = variants.map((variant) => {
    if ('const' in variant) return JSON.stringify(variant.const)
    if (variant.type === 'null') return 'null'
    if (variant.type === 'integer') {
      return typeof variant.minimum === 'number' ? `an integer from ${variant.minimum} to ${variant.maximum}` : 'an integer'
    }
    if (variant.type === 'string') return typeof variant.maxLength === 'number' ? `a string of at most ${variant.maxLength} characters` : 'a string'
    if (variant.type === 'array') return 'an array'
    if (variant.type === 'object') return 'an object'
    if (variant.type === 'boolean') return 'a boolean'
    if (variant.type === 'number') return 'a number'
    return String(variant.type ?? 'a value')
  })
  return `must be ${names.join(' or ')}`
}

/** Checks `value` against `schema`; throws a 400 ManagementError naming the first bad field. */
export function assertValid<T extends TSchema>(schema: T, value: unknown): asserts value is Static<T> {
  let checker = compiled.get(schema)
  if (!checker) {
    checker = TypeCompiler.Compile(schema)
    compiled.set(schema, checker)
  }
  if (checker.Check(value)) return
  const first = checker.Errors(value).First()
  throw badRequest(first ? describeViolation(first) : 'Request body is invalid.')
}
