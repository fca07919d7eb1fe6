/**
 * The inference API (/v1) in the OpenAPI document: every route of the route table
 * (api/inference/routes.ts), with the key schemes it takes, its body, its answers and the error
 * envelopes they come in. The routes are served by the pipeline, not by Elysia, so they are written
 * out here; each operation names a sample path that the route table must resolve to its endpoint, and
 * the envelopes of its errors follow from the shapes that route serves.
 */
import type { OpenAPIV3 } from 'openapi-types'
import { errorCodes, wireCode, type ErrorCode } from '../errors/codes'
import type { Envelope } from '../errors/render'
import { apiShapes } from '../management/schemas'
import { batchStatuses } from '../storage/repositories/batches'
import { envelopeForShape, type InferenceEndpoint } from '../pipeline'
import { resolveInferenceRoute } from './inference/routes'
import * as schemas from './inference-schemas'

type SchemaName = keyof typeof schemas
type Method = 'get' | 'post' | 'delete'

/** One tag per API shape, in the order the docs page lists them. */
export const inferenceTags = [
  { name: 'Inference: OpenAI chat', description: 'Chat completions on keys of shape `chat` (the default) or `chat_router`.' },
  { name: 'Inference: OpenAI Responses', description: 'The Responses API on `chat` and `chat_router` keys: native on most gateways, translated to chat on one; turns chained with `resp_rt_…` ids.' },
  { name: 'Inference: OpenAI embeddings', description: 'Embeddings on `chat` and `chat_router` keys.' },
  { name: 'Inference: Anthropic messages', description: 'The messages dialect on keys of shape `messages`, translated to chat and back.' },
  { name: 'Inference: Gemini generateContent', description: 'The generateContent dialect on keys of shape `content`, translated to chat and back; no streaming. Paths under `/v1beta/` are not served: 404 in this envelope.' },
  { name: 'Inference: models', description: 'The merged model catalogs of the key\'s targets, on keys of every shape.' },
  { name: 'Inference: batches', description: 'The asynchronous Batch API on `chat` and `chat_router` keys: about half the per-token price, results within 24 hours.' },
  { name: 'Inference: decisions', description: 'Typed questions answered with calibrated probabilities, on keys of shape `decisions`.' },
] as const satisfies OpenAPIV3.TagObject[]

type Tag = (typeof inferenceTags)[number]['name']

// ---------------------------------------------------------------------------------------------
// Key schemes (SPEC "Authentication" 1): every /v1 path takes the key from any of the headers; the
// query parameter only on :generateContent (and :streamGenerateContent, which is refused).

export const inferenceSecuritySchemes = {
  inferenceKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'An inference key, rt_live_…, as `Authorization: Bearer <key>`. Checked first when present.',
  },
  apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'An inference key in the messages-dialect SDKs\' header.' },
  googApiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-goog-api-key', description: 'An inference key in the generateContent-dialect SDKs\' header.' },
  contentApiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-content-api-key', description: 'An inference key in the vendor-neutral name of the generateContent-dialect header.' },
  keyQuery: { type: 'apiKey', in: 'query', name: 'key', description: 'An inference key as `?key=`, on :generateContent only.' },
} as const satisfies Record<string, OpenAPIV3.SecuritySchemeObject>

type SchemeName = keyof typeof inferenceSecuritySchemes

/** The schemes an operation takes, the dialect's own first (any one of them will do). */
function securityFor(envelope: Envelope, endpoint: InferenceEndpoint): OpenAPIV3.SecurityRequirementObject[] {
  const headers: SchemeName[] =
    envelope === 'messages'
      ? ['apiKeyHeader', 'inferenceKey', 'googApiKeyHeader', 'contentApiKeyHeader']
      : envelope === 'content'
        ? ['googApiKeyHeader', 'contentApiKeyHeader', 'inferenceKey', 'apiKeyHeader']
        : ['inferenceKey', 'apiKeyHeader', 'googApiKeyHeader', 'contentApiKeyHeader']
  // The one place the query parameter counts (pipeline/index.ts, handleInference).
  const query: SchemeName[] = endpoint === 'generate_content' || endpoint === 'stream_generate_content' ? ['keyQuery'] : []
  return [...headers, ...query].map((name) => ({ [name]: [] }))
}

// ---------------------------------------------------------------------------------------------
// Response headers (SPEC "Common response headers (inference)")

export const inferenceHeaders = {
  'X-Router-Request-Id': { description: 'An opaque id of the request; on every answer, errors included.', schema: { type: 'string' } },
  'X-Router-Attempts': { description: 'Upstream tries; 0 when nothing left the service. Skipped targets are not counted. On GET /v1/models, catalogs pulled.', schema: { type: 'integer', minimum: 0 } },
  'X-Router-Provider': { description: 'The gateway that served the answer; omitted when none did. On GET /v1/models, only when a single provider supplied the list.', schema: { type: 'string' } },
  'X-Router-Failover': { description: 'Only after a failover: comma-separated `gateway:reason` per losing attempt.', schema: { type: 'string' } },
  'X-Router-Key-Grace-Until': {
    description: 'The request used a rotated key\'s previous secret, which stops working at this time. Also on the errors that come after the key was accepted.',
    schema: { type: 'string', format: 'date-time' },
  },
  'X-Router-Decisioner': {
    description: 'Keys with a decisioner: `;`-separated `key:value` pairs, a pick (`pick:<gateway>;…;obj:<objective>`) or a skip (`skipped:<reason>;obj:<objective>`).',
    schema: { type: 'string', maxLength: 500 },
  },
  'X-Router-Cache': {
    description: 'Keys with a response cache (CONTRACT §15): where the answer came from. `hit` and `semantic-hit` (the cache), `coalesced` (an identical request in flight), `miss` (looked, not found: a gateway answered and the answer is stored), `bypass` (not looked up: a request the cache never serves, or `Cache-Control: no-cache` / `no-store`).',
    schema: { type: 'string', enum: ['hit', 'semantic-hit', 'coalesced', 'miss', 'bypass'] },
  },
  Age: { description: 'A cached answer: its age in seconds.', schema: { type: 'integer', minimum: 0 } },
  'X-Router-Cache-Provider': { description: 'A cached answer: the gateway that served the stored answer (no gateway was called now, so there is no X-Router-Provider).', schema: { type: 'string' } },
  'X-Router-Cache-Similarity': { description: 'A semantic hit: the cosine similarity of the last user turn to the stored one\'s.', schema: { type: 'number', minimum: 0, maximum: 1 } },
  'X-Router-Responses-Mode': { description: 'How the serving gateway answered POST /v1/responses.', schema: { type: 'string', enum: ['native', 'translated'] } },
  'X-Router-Count-Tokens': { description: 'The count is the router\'s own estimate.', schema: { type: 'string', enum: ['estimate'] } },
  'request-id': { description: 'The messages dialect\'s name for X-Router-Request-Id (same value).', schema: { type: 'string' } },
  'Retry-After': { description: 'On 429: the last gateway\'s Retry-After, when it sent one.', schema: { type: 'string' } },
} as const satisfies Record<string, OpenAPIV3.HeaderObject>

type HeaderName = keyof typeof inferenceHeaders

/** Headers of a routed answer: the gateway's own rate-limit headers (X-RateLimit-*) pass through as well. */
const routedHeaders: HeaderName[] = [
  'X-Router-Request-Id',
  'X-Router-Attempts',
  'X-Router-Provider',
  'X-Router-Failover',
  'X-Router-Key-Grace-Until',
  'X-Router-Cache',
  'Age',
  'X-Router-Cache-Provider',
  'X-Router-Cache-Similarity',
]
/** Answers that nothing routed (errors before any call, count_tokens). */
const ownHeaders: HeaderName[] = ['X-Router-Request-Id', 'X-Router-Attempts', 'X-Router-Key-Grace-Until']

// ---------------------------------------------------------------------------------------------
// The error codes each route can answer (SPEC "Errors"), by stage

/** Refused while the key is checked, so in the envelope of the path's dialect (pipeline/request/authenticate.ts). */
const beforeKeyCodes: ErrorCode[] = ['invalid_api_key', 'revoked_api_key', 'ip_not_allowed', 'workspace_suspended']
const authCodes: ErrorCode[] = [...beforeKeyCodes, 'internal']
const bodyCodes: ErrorCode[] = ['invalid_request', 'invalid_json', 'request_too_large']
const routingCodes: ErrorCode[] = [
  // A key's own limits (CONTRACT §11), before any upstream call; 429s carry Retry-After.
  'key_rate_limited',
  'key_budget_exhausted',
  'key_budget_unpriced_model',
  'batch_only_model',
  'no_route',
  'all_targets_failed_402',
  'model_not_available',
  'model_not_found',
  'rate_limited',
  'gateway_not_supported',
  'all_targets_failed',
  'provider_auth_failed',
  'upstream_unreadable',
  'no_healthy_target',
  'gateway_disabled',
  'deadline_exceeded',
  // Cache-Control: only-if-cached on a key with a response cache (CONTRACT §15).
  'cache_miss',
  // A key's guardrails (CONTRACT §17): an input rule that blocks; a moderation check that could not be made (not on decisions, which are not guarded).
  'guardrail_blocked',
  'guardrail_unavailable',
]
/** Refusals that may come after gateways were called: their answers name the gateway and the failovers. */
const afterCallCodes: ErrorCode[] = [
  'all_targets_failed_402',
  'model_not_found',
  'rate_limited',
  'all_targets_failed',
  'provider_auth_failed',
  'upstream_unreadable',
  'deadline_exceeded',
  'response_not_found',
  'upstream_timeout',
  'batch_check_unavailable',
]
const catalogCodes: ErrorCode[] = ['no_route', 'gateway_not_supported', 'all_targets_failed', 'no_healthy_target', 'gateway_disabled']
const chainCodes: ErrorCode[] = ['invalid_previous_response_id', 'response_chain_wrong_key', 'response_chain_expired', 'response_chain_target_unavailable']
const batchReadCodes: ErrorCode[] = ['invalid_batch_id', 'batch_not_found', 'batch_expired', 'batch_target_unavailable', 'all_targets_failed', 'upstream_unreadable']

// ---------------------------------------------------------------------------------------------
// The operations

interface Success {
  status: '200' | '202'
  description: string
  schema: SchemaName
  /** What an event stream carries, for operations that stream when the body asks (`stream: true`). */
  stream?: string
  headers?: HeaderName[]
}

interface OperationSpec {
  endpoint: InferenceEndpoint
  method: Method
  /** The OpenAPI path template. */
  path: string
  /** A concrete path the route table resolves to `endpoint`. */
  sample: string
  tag: Tag
  summary: string
  description: string
  parameters?: OpenAPIV3.ParameterObject[]
  body?: { schema: SchemaName; example: unknown }
  /** None where SPEC refuses every call (:streamGenerateContent). */
  success?: Success
  /** Codes beyond authentication and the shape check. */
  errors: ErrorCode[]
  /** A gateway's refusal is relayed with its own status (the `default` answer). */
  relays?: string
}

const modelParameter = (description: string): OpenAPIV3.ParameterObject => ({
  name: 'model',
  in: 'path',
  required: true,
  description: `${description} It may contain slashes, sent as they are or percent-encoded.`,
  schema: { type: 'string' },
  example: 'openai/gpt-4o-mini',
})

const chatStream =
  'With `stream: true`: `data:` records of `chat.completion.chunk` objects, ending `data: [DONE]`. On keys with companion ads or keyterms, their fields ride on the last chunk. A stream that breaks after it began ends with one `data: {"error": {"code": "stream_aborted", …}}` record and no `[DONE]`; on a key with continuation it goes on at another target instead, with one `: router-continued <hop> <from> <to>` comment line at the seam (CONTRACT §16). An output guardrail that blocks ends the stream with a `guardrail_blocked` error record (a buffered answer: 502) (CONTRACT §17).'
const relayedOnChat = 'A gateway\'s refusal that is not a failover trigger (a malformed body, say) relayed with its status and body.'
const relayedTranslated = 'A gateway\'s refusal that is not a failover trigger, relayed with its status and message in this envelope.'

const sampleChat = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello!' }] }
const sampleMessages = { model: 'anthropic/claude-sonnet-4', max_tokens: 1024, messages: [{ role: 'user', content: 'Hello!' }] }

/**
 * Every route, by endpoint: a new endpoint of the pipeline does not type-check until it is
 * documented here (and a new path of an existing one fails test/integration/openapi-docs.test.ts).
 */
const operationsByEndpoint: Record<InferenceEndpoint, Omit<OperationSpec, 'endpoint'>[]> = {
  chat: [
    {
      method: 'post',
      path: '/v1/chat/completions',
      sample: '/v1/chat/completions',
      tag: 'Inference: OpenAI chat',
      summary: 'Create a chat completion',
      description:
        'Routed by the key\'s rule (remaps, decisioner, priority or split, failover). The body goes upstream as sent, except that a remap may rewrite `model`, the steering message is put in front of the system prompt, and `ad_request` and `link_request` are removed.',
      body: { schema: 'ChatCompletionRequest', example: sampleChat },
      success: { status: '200', description: 'The chat completion, or an event stream.', schema: 'ChatCompletion', stream: chatStream, headers: [...routedHeaders, 'X-Router-Decisioner'] },
      errors: [...bodyCodes, 'missing_model', 'missing_messages', ...routingCodes],
      relays: relayedOnChat,
    },
  ],
  responses: [
    {
      method: 'post',
      path: '/v1/responses',
      sample: '/v1/responses',
      tag: 'Inference: OpenAI Responses',
      summary: 'Create a response',
      description:
        'Routed like chat. A `previous_response_id` pins the turn to the provider that holds the state (no failover, no remaps, no decisioner). The answer\'s ids are `resp_rt_…`; `X-Router-Responses-Mode` says whether the gateway answered natively or by translation.',
      body: { schema: 'ResponsesRequest', example: { model: 'openai/gpt-4o-mini', input: 'Hello!' } },
      success: {
        status: '200',
        description: 'The Response object, or an event stream.',
        schema: 'ResponseObject',
        stream:
          'With `stream: true`: typed events (`event:` and `data:`) with continuous `sequence_number`: one `response.created`, then `response.output_item.*`, `response.output_text.delta` and the like, and one terminal `response.completed` (or `response.incomplete`). Companion ads and keyterms are merged into the terminal event\'s `response`. A mid-stream failure is an `error` event followed by `response.failed` (on a key with continuation, the stream goes on at another target instead, with one `: router-continued` comment line at the seam; an output guardrail that blocks fails it with code `guardrail_blocked`).',
        headers: [...routedHeaders, 'X-Router-Decisioner', 'X-Router-Responses-Mode'],
      },
      errors: [...bodyCodes, 'missing_model', 'stateful_responses_unsupported', ...chainCodes, 'response_chain_unsupported_target', 'response_not_found', ...routingCodes],
      relays: relayedOnChat,
    },
  ],
  responses_get: [
    {
      method: 'get',
      path: '/v1/responses/{response_id}',
      sample: '/v1/responses/resp_rt_sample',
      tag: 'Inference: OpenAI Responses',
      summary: 'Retrieve a stored response',
      description: 'One call to the provider that holds the response, with no failover; served by two gateway kinds only. The stored Response comes back with its ids rewritten.',
      parameters: [{ name: 'response_id', in: 'path', required: true, description: 'A `resp_rt_…` id this key was given.', schema: { type: 'string' } }],
      success: { status: '200', description: 'The stored Response.', schema: 'ResponseObject', headers: routedHeaders },
      errors: [...chainCodes, 'responses_retrieve_unsupported', 'response_not_found', 'all_targets_failed', 'upstream_unreadable', 'deadline_exceeded'],
      relays: 'The gateway\'s answer to the retrieval (a 404 for a response it does not have, say), relayed with its status and body.',
    },
  ],
  embeddings: [
    {
      method: 'post',
      path: '/v1/embeddings',
      sample: '/v1/embeddings',
      tag: 'Inference: OpenAI embeddings',
      summary: 'Create embeddings',
      description:
        'Routed like chat (remaps, failover); a target whose gateway has no embeddings route is skipped without a call (`gateway:no-embeddings`). The body is forwarded as sent. No streaming, steering, decisioner, companion ads, keyterms or MCP tools.',
      body: { schema: 'EmbeddingsRequest', example: { model: 'openai/text-embedding-3-small', input: 'Hello!' } },
      success: { status: '200', description: 'The gateway\'s list of embedding objects.', schema: 'EmbeddingsList', headers: routedHeaders },
      errors: [...bodyCodes, 'missing_model', 'embeddings_unsupported', ...routingCodes.filter((code) => code !== 'model_not_available')],
      relays: relayedOnChat,
    },
  ],
  messages: [
    {
      method: 'post',
      path: '/v1/messages',
      sample: '/v1/messages',
      tag: 'Inference: Anthropic messages',
      summary: 'Create a message',
      description:
        'Translated to chat for the gateway and back, streams included: `thinking.budget_tokens` goes upstream as `reasoning.max_tokens` and reasoning returns as `thinking` blocks; document blocks become chat file parts; `tool_choice.disable_parallel_tool_use` becomes `parallel_tool_calls: false`.',
      body: { schema: 'MessagesRequest', example: sampleMessages },
      success: {
        status: '200',
        description: 'The message, or an event stream.',
        schema: 'MessageObject',
        stream:
          'With `stream: true`: `message_start`, `content_block_start` / `content_block_delta` (`text_delta`, `thinking_delta`, `input_json_delta`) / `content_block_stop`, `message_delta` with `stop_reason` and real `input_tokens` and `output_tokens` in its usage (and companion ads or keyterms as extra fields), `message_stop`. `ping` after 10 s of silence; `event: error` on a mid-stream failure (on a key with continuation, the stream goes on at another target instead, with one `: router-continued` comment line at the seam; an output guardrail that blocks ends it with `event: error`).',
        headers: [...routedHeaders, 'X-Router-Decisioner'],
      },
      errors: [...bodyCodes, 'missing_model', 'missing_messages', ...routingCodes],
      relays: relayedTranslated,
    },
  ],
  count_tokens: [
    {
      method: 'post',
      path: '/v1/messages/count_tokens',
      sample: '/v1/messages/count_tokens',
      tag: 'Inference: Anthropic messages',
      summary: 'Count the tokens of a message request',
      description:
        'Estimated by the router: nothing goes upstream and nothing is spent. The key\'s steering message is counted. Text at about 4 characters per token plus a small per-message overhead; images by their size when readable, else 1,600; PDF documents 1,600 each; tool definitions by their JSON length.',
      body: { schema: 'MessagesRequest', example: sampleMessages },
      success: { status: '200', description: 'The estimate.', schema: 'TokenCount', headers: [...ownHeaders, 'X-Router-Count-Tokens'] },
      errors: [...bodyCodes, 'missing_model', 'missing_messages'],
    },
  ],
  generate_content: [
    {
      method: 'post',
      path: '/v1/models/{model}:generateContent',
      sample: '/v1/models/openai/gpt-4o-mini:generateContent',
      tag: 'Inference: Gemini generateContent',
      summary: 'Generate content',
      description: 'Translated to chat for the gateway and back: contents, systemInstruction, generationConfig, function declarations and the function-calling mode.',
      parameters: [modelParameter('The model id, `provider/model`.')],
      body: { schema: 'GenerateContentRequest', example: { contents: [{ role: 'user', parts: [{ text: 'Hello!' }] }] } },
      success: { status: '200', description: 'The generated content.', schema: 'GenerateContentResponse', headers: [...routedHeaders, 'X-Router-Decisioner'] },
      errors: [...bodyCodes, 'missing_model', 'missing_messages', ...routingCodes],
      relays: relayedTranslated,
    },
  ],
  stream_generate_content: [
    {
      method: 'post',
      path: '/v1/models/{model}:streamGenerateContent',
      sample: '/v1/models/openai/gpt-4o-mini:streamGenerateContent',
      tag: 'Inference: Gemini generateContent',
      summary: 'Stream generated content (refused)',
      description: 'The `content` shape has no streaming: a `content` key gets 400 `stream_unsupported` before anything is read or sent. Use :generateContent.',
      parameters: [modelParameter('The model id.')],
      body: { schema: 'GenerateContentRequest', example: { contents: [{ role: 'user', parts: [{ text: 'Hello!' }] }] } },
      errors: ['stream_unsupported'],
    },
  ],
  models: [
    {
      method: 'get',
      path: '/v1/models',
      sample: '/v1/models',
      tag: 'Inference: models',
      summary: 'List the models of the key\'s targets',
      description:
        'On every key shape. Fans out in parallel to every routable target of the key (weight-0 ones included) and merges the catalogs, the first-seen object kept per id. Unreachable or failing providers are skipped; if all fail, 502. Remaps are not applied.',
      success: { status: '200', description: 'The model list.', schema: 'ModelList', headers: ownHeaders.concat('X-Router-Provider') },
      errors: catalogCodes,
    },
  ],
  model: [
    {
      method: 'get',
      path: '/v1/models/{model}',
      sample: '/v1/models/openai/gpt-4o-mini',
      tag: 'Inference: models',
      summary: 'Retrieve a model',
      description: 'A model object from the merged catalog, found as routing would find it (exact id, then each gateway\'s spelling). An id no provider lists, or a `:batch` id, answers 404 model_not_found.',
      parameters: [modelParameter('The model id.')],
      success: { status: '200', description: 'The model object.', schema: 'ModelObject', headers: ownHeaders.concat('X-Router-Provider') },
      errors: ['model_not_found', ...catalogCodes],
    },
  ],
  decisions: [
    {
      method: 'post',
      path: '/v1/decisions',
      sample: '/v1/decisions',
      tag: 'Inference: decisions',
      summary: 'Answer typed questions with calibrated probabilities',
      description:
        'Routed with failover over the key\'s decision-capable targets like chat; each gateway\'s answer is checked (one answer per question, in order; choice probabilities summing to 1 ± 0.01) and relayed as it came, an unusable one failing over. A bad body is 400 invalid_decision_request naming the field, and nothing is sent.',
      body: {
        schema: 'DecisionRequest',
        example: { model: 'openai/gpt-4o-mini', state: { ticket: 'Refund for a late order' }, questions: [{ id: 'route', type: 'choice', prompt: 'Which team handles this?', options: ['billing', 'shipping'] }] },
      },
      success: { status: '200', description: 'The decision.', schema: 'Decision', headers: routedHeaders },
      errors: ['invalid_json', 'request_too_large', 'invalid_request', 'invalid_decision_request', ...routingCodes.filter((code) => code !== 'guardrail_blocked' && code !== 'guardrail_unavailable')],
      relays: relayedOnChat,
    },
  ],
  batches: [
    {
      method: 'post',
      path: '/v1/batches',
      sample: '/v1/batches',
      tag: 'Inference: batches',
      summary: 'Submit a batch',
      description:
        'The key needs an own provider key of the gateway kind that keeps batch results, as a target or remap destination. The first eligible target takes the whole batch (no failover after the upload starts); remaps apply, rolled once per batch; steering applies to every request except embeddings. The submit is streamed upstream as it arrives.',
      body: {
        schema: 'BatchSubmit',
        example: { endpoint: '/v1/chat/completions', model: 'openai/gpt-4o-mini', requests: [{ custom_id: 'request-1', body: sampleChat }] },
      },
      success: { status: '202', description: 'Accepted and queued, not finished: the batch in `validating`.', schema: 'Batch', headers: routedHeaders },
      errors: [
        'invalid_json',
        'invalid_request',
        'invalid_batch_body',
        'invalid_endpoint',
        'empty_requests',
        'batch_not_supported',
        'batch_model_not_available',
        'batch_upload_timeout',
        'request_too_large',
        'value_too_large',
        'all_targets_failed',
        'batch_check_unavailable',
        'batch_ids_unavailable',
        'upstream_timeout',
      ],
      relays: 'Another refusal of the gateway, relayed with its own status, message and numeric code: a duplicate custom_id (422), a mismatched body.model (400), insufficient credit (402).',
    },
    {
      method: 'get',
      path: '/v1/batches',
      sample: '/v1/batches',
      tag: 'Inference: batches',
      summary: 'List this key\'s batches',
      description: 'Newest first, from the router\'s own records.',
      parameters: [
        { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        { name: 'after', in: 'query', required: false, description: 'The previous page\'s `last_id`.', schema: { type: 'string' } },
        {
          name: 'status',
          in: 'query',
          required: false,
          description: 'Repeatable (or comma-separated): only batches in these states.',
          schema: { type: 'array', items: { type: 'string', enum: [...batchStatuses] } },
          style: 'form',
          explode: true,
        },
        { name: 'created_after', in: 'query', required: false, description: 'Unix seconds or an ISO 8601 time.', schema: { type: 'string' } },
        { name: 'created_before', in: 'query', required: false, description: 'Unix seconds or an ISO 8601 time.', schema: { type: 'string' } },
      ],
      success: { status: '200', description: 'The list.', schema: 'BatchList', headers: ownHeaders },
      errors: ['invalid_request', 'invalid_batch_id', 'batch_not_found'],
    },
    {
      method: 'get',
      path: '/v1/batches/{batch_id}',
      sample: '/v1/batches/batch_rt_sample',
      tag: 'Inference: batches',
      summary: 'Retrieve a batch',
      description: 'Read from the gateway that holds it. Right after submission, while the gateway cannot see it yet, it answers `validating`. Poll until a terminal state; `results` come inline once `completed`.',
      parameters: [{ name: 'batch_id', in: 'path', required: true, description: 'A `batch_rt_…` id this key created.', schema: { type: 'string' } }],
      success: { status: '200', description: 'The batch.', schema: 'Batch', headers: routedHeaders },
      errors: batchReadCodes,
      relays: 'The gateway\'s refusal of the read, relayed with its status.',
    },
    {
      method: 'delete',
      path: '/v1/batches/{batch_id}',
      sample: '/v1/batches/batch_rt_sample',
      tag: 'Inference: batches',
      summary: 'Delete a finished batch',
      description: 'Only a completed, failed, expired or cancelled batch (there is no cancel operation); its inputs and results are purged.',
      parameters: [{ name: 'batch_id', in: 'path', required: true, description: 'A `batch_rt_…` id this key created.', schema: { type: 'string' } }],
      success: { status: '200', description: 'Deleted.', schema: 'BatchDeleted', headers: routedHeaders },
      errors: [...batchReadCodes, 'batch_not_terminal'],
      relays: 'The gateway\'s refusal of the delete, relayed with its status.',
    },
  ],
}

export const inferenceOperations: readonly OperationSpec[] = Object.entries(operationsByEndpoint).flatMap(([endpoint, operations]) =>
  operations.map((operation) => ({ ...operation, endpoint: endpoint as InferenceEndpoint })),
)

// ---------------------------------------------------------------------------------------------
// Building the document

const envelopeSchema: Record<Envelope, SchemaName> = { chat: 'ChatError', messages: 'MessagesError', content: 'ContentError' }

const schemaRef = (name: SchemaName): OpenAPIV3.ReferenceObject => ({ $ref: `#/components/schemas/${name}` })

function envelopesSchema(envelopes: ReadonlySet<Envelope>): OpenAPIV3.ReferenceObject | OpenAPIV3.SchemaObject {
  const refs = [...envelopes].map((envelope) => schemaRef(envelopeSchema[envelope]))
  return refs.length === 1 ? refs[0]! : { anyOf: refs }
}

/** Where a route's answers take their envelope and headers from (pipeline/index.ts, handleInference). */
interface RouteFacts {
  shapes: readonly string[]
  /** The path's dialect: the envelope until the key is known (401, and the 403s of suspension and allowlists). */
  beforeKey: Envelope
  /** The envelopes of the shapes the route serves: every answer after the key is known. */
  ofKey: Set<Envelope>
  /** wrong_api_shape comes in the envelope of the calling key's shape, one the route does not serve. */
  ofOtherShapes: Set<Envelope>
  /** Headers every answer carries: on messages-dialect paths the request id is also `request-id`. */
  alwaysHeaders: HeaderName[]
}

function routeFacts(operation: OperationSpec): RouteFacts {
  const route = resolveInferenceRoute(operation.method.toUpperCase(), operation.sample)
  if (!route || route.endpoint !== operation.endpoint) {
    throw new Error(`inference-document: ${operation.method.toUpperCase()} ${operation.sample} is not the ${operation.endpoint} route of api/inference/routes.ts`)
  }
  return {
    shapes: route.shapes,
    beforeKey: route.envelope,
    ofKey: new Set(route.shapes.map(envelopeForShape)),
    ofOtherShapes: new Set(apiShapes.filter((shape) => !route.shapes.includes(shape)).map(envelopeForShape)),
    alwaysHeaders: route.envelope === 'messages' ? ['request-id'] : [],
  }
}

const headersOf = (names: readonly HeaderName[]): Record<string, OpenAPIV3.ReferenceObject> =>
  Object.fromEntries([...new Set(names)].map((name) => [name, { $ref: `#/components/headers/${name}` }]))

/** The error answers, by status: each code of the table with its message, in the envelopes it can come in. */
function errorResponses(operation: OperationSpec, facts: RouteFacts): OpenAPIV3.ResponsesObject {
  const codes = new Set([...authCodes, ...(facts.ofOtherShapes.size ? (['wrong_api_shape'] as const) : []), ...operation.errors])
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of codes) {
    const status = errorCodes[code].status
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const errorHeaders: HeaderName[] = ['X-Router-Request-Id', 'X-Router-Attempts', ...facts.alwaysHeaders]
  const responses: OpenAPIV3.ResponsesObject = {}
  for (const status of [...byStatus.keys()].sort((left, right) => left - right)) {
    const statusCodes = byStatus.get(status)!
    const envelopes = new Set<Envelope>()
    for (const code of statusCodes) {
      if (code === 'wrong_api_shape') for (const envelope of facts.ofOtherShapes) envelopes.add(envelope)
      else if (beforeKeyCodes.includes(code)) envelopes.add(facts.beforeKey)
      else {
        // An internal failure may come before the key is known as well as after.
        if (code === 'internal') envelopes.add(facts.beforeKey)
        for (const envelope of facts.ofKey) envelopes.add(envelope)
      }
    }
    const lines = statusCodes.map((code) => `- \`${wireCode(code)}\`: ${errorCodes[code].message}`)
    if (status === 400 && operation.relays) lines.push("- or a gateway's 400, relayed.")
    const called = statusCodes.some((code) => afterCallCodes.includes(code))
    responses[String(status)] = {
      description: lines.join('\n'),
      headers: headersOf([...errorHeaders, ...(called ? (['X-Router-Provider', 'X-Router-Failover'] as const) : []), ...(status === 429 ? (['Retry-After'] as const) : [])]),
      content: { 'application/json': { schema: envelopesSchema(envelopes) } },
    }
  }
  if (operation.relays) {
    responses.default = {
      description: operation.relays,
      headers: headersOf([...routedHeaders, ...facts.alwaysHeaders]),
      content: { 'application/json': { schema: envelopesSchema(facts.ofKey) } },
    }
  }
  return responses
}

/** e.g. `postV1ChatCompletions`, `postV1ModelsModelGenerateContent`. */
const operationId = (operation: OperationSpec) => operation.method + operation.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, next: string | undefined) => (next ?? '').toUpperCase())

function operationObject(operation: OperationSpec): OpenAPIV3.OperationObject {
  const facts = routeFacts(operation)
  const shapes = facts.shapes.map((shape) => `\`${shape}\``).join(', ')
  const responses: OpenAPIV3.ResponsesObject = {}
  const { success } = operation
  if (success) {
    const content: Record<string, OpenAPIV3.MediaTypeObject> = { 'application/json': { schema: schemaRef(success.schema) } }
    if (success.stream) content['text/event-stream'] = { schema: { type: 'string', description: success.stream } }
    responses[success.status] = { description: success.description, headers: headersOf([...(success.headers ?? []), ...facts.alwaysHeaders]), content }
  }
  Object.assign(responses, errorResponses(operation, facts))
  return {
    tags: [operation.tag],
    summary: operation.summary,
    description: `${operation.description}\n\n${facts.ofOtherShapes.size ? `Keys of shape ${shapes}; a key of another shape gets 404 wrong_api_shape in its own envelope.` : 'Keys of every shape.'}`,
    operationId: operationId(operation),
    security: securityFor(facts.beforeKey, operation.endpoint),
    ...(operation.parameters ? { parameters: operation.parameters } : {}),
    ...(operation.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: schemaRef(operation.body.schema), example: operation.body.example } } } }
      : {}),
    responses,
  }
}

/** The schemas the operations name, as plain OpenAPI schema objects (a JSON round trip leaves TypeBox's symbol-keyed bookkeeping behind). */
function componentSchemas(): Record<string, OpenAPIV3.SchemaObject> {
  return JSON.parse(JSON.stringify(schemas)) as Record<string, OpenAPIV3.SchemaObject>
}

/** The inference half of the OpenAPI document: its paths, tags and components. */
export function inferenceDocument() {
  const paths: OpenAPIV3.PathsObject = {}
  for (const operation of inferenceOperations) paths[operation.path] = { ...paths[operation.path], [operation.method]: operationObject(operation) }
  return {
    tags: [...inferenceTags],
    paths,
    components: { securitySchemes: inferenceSecuritySchemes, headers: inferenceHeaders, schemas: componentSchemas() },
  }
}
