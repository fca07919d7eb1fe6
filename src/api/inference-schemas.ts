/**
 * TypeBox schemas of the inference API's bodies, answers and error envelopes, for the OpenAPI
 * document (inference-document.ts). They say what the validators of each dialect accept (the
 * validators themselves are hand-written checks with their own messages): what a validator refuses is
 * refused here, a field it does not look at is documented from SPEC, and unknown fields pass through.
 * Written in the OpenAPI 3.0 subset: no `const`, no `null` type (see Enum and Nullable).
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { contentErrorStatus, messagesErrorType } from '../errors/render'
import { maxModelIdLength } from '../pipeline/request/prepare-chat'
import { maxOptions, maxQuestions } from '../pipeline/endpoints/decisions'
import { batchEndpoints } from '../batch/submit'
import { batchStatuses } from '../storage/repositories/batches'

/** A string enum; TypeBox's literal unions would be `anyOf` of `const`, which OpenAPI 3.0 lacks. */
const Enum = <const T extends readonly string[]>(values: T, options: { description?: string } = {}) => Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })

/** OpenAPI 3.0 has no `null` type: a nullable schema says so (it needs a `type`). */
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true })

/** A JSON object with any members (the shape is someone else's: the client's, a gateway's). */
const AnyObject = (description?: string) => Type.Object({}, { additionalProperties: true, ...(description ? { description } : {}) })

/** Any JSON value. */
const AnyValue = (description: string) => Type.Unknown({ description })

const Open = { additionalProperties: true } as const

/** `model` as every routed dialect checks it (requireModel): a non-empty string, bounded. */
const ModelId = Type.String({ minLength: 1, maxLength: maxModelIdLength, description: 'The model id, canonical form `provider/model`. A `:batch` id is refused here (batch_only_model): use the Batch API.' })

/** Companion ads and keyterm links (SPEC "Companion ads", "Monetizable keyterms"): siblings never sent upstream. */
const enrichmentRequestFields = {
  ad_request: Type.Optional(AnyObject('Companion ads (keys with companion_ads on): stripped before the gateway call; ads come back as `ads` or `ads_error`.')),
  link_request: Type.Optional(
    Type.Object(
      { max_keyterms: Type.Optional(Type.Integer({ minimum: 1, description: 'How many keyterms at most.' })) },
      { ...Open, description: 'Monetizable keyterms (keys with keyterms on): stripped before the gateway call.' },
    ),
  ),
}

const PluginError = Type.Object({ code: Type.String(), message: Type.String() }, { description: 'Why the plug-in service gave nothing; it never fails the answer.' })

/** What the enrichment stages attach beside a successful answer (CONTRACT §7), on keys that ask for it. */
const enrichmentAnswerFields = {
  ads: Type.Optional(Type.Array(AnyObject(), { description: 'Companion ads; `[]` is a no-fill.' })),
  ads_error: Type.Optional(PluginError),
  keyterms: Type.Optional(
    Type.Array(Type.Object({ term: Type.String(), score: Type.Number(), url: Type.String() }, Open), { description: 'Scored entities of the reply, each with a destination url.' }),
  ),
  keyterms_error: Type.Optional(PluginError),
}

// ---------------------------------------------------------------------------------------------
// Error envelopes (SPEC "Error envelopes (by key shape)"; errors/render.ts)

const allStatuses = Array.from({ length: 200 }, (_, index) => 400 + index)
const distinct = (values: string[]) => [...new Set(values)]

export const ChatError = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.Optional(Type.String({ description: 'e.g. invalid_request_error, authentication_error, permission_error, rate_limit_error, api_error.' })),
      code: Type.Optional(AnyValue('The error code, a string such as `invalid_api_key` or `no_route`. A gateway\'s refusal that is relayed keeps the gateway\'s own code, which may be a number or null.')),
      param: Type.Optional(AnyValue('Sent by some gateways on relayed errors.')),
    }),
  },
  { description: 'The envelope of `chat` and `chat_router` keys (and of `decisions` keys): `{error: {message, type, code}}`.' },
)

export const MessagesError = Type.Object(
  {
    type: Enum(['error']),
    error: Type.Object({
      type: Enum(distinct(allStatuses.map(messagesErrorType))),
      message: Type.String({ description: 'The router\'s own errors read `<code>: <message>` (`no_route: …`); a gateway\'s refusal keeps its message.' }),
    }),
  },
  { description: 'The envelope of `messages` keys: `{type: "error", error: {type, message}}`, the type by HTTP status.' },
)

export const ContentError = Type.Object(
  {
    error: Type.Object({
      code: Type.Integer({ description: 'The HTTP status.' }),
      message: Type.String({ description: 'The router\'s own errors read `<code>: <message>` (`no_route: …`); a gateway\'s refusal keeps its message.' }),
      status: Enum(distinct(allStatuses.map(contentErrorStatus)), { description: 'The status name for the HTTP status.' }),
    }),
  },
  { description: 'The envelope of `content` keys: `{error: {code, message, status}}`.' },
)

// ---------------------------------------------------------------------------------------------
// POST /v1/chat/completions (SPEC "POST /chat/completions"; validateChatBody)

const ChatMessage = Type.Object(
  {
    role: Type.String({ description: 'system, developer, user, assistant or tool.' }),
    content: Type.Optional(AnyValue('A string, an array of content parts, or null (an assistant turn with tool calls).')),
  },
  Open,
)

export const ChatCompletionRequest = Type.Object(
  {
    model: ModelId,
    messages: Type.Array(ChatMessage, { minItems: 1 }),
    stream: Type.Optional(Type.Boolean({ description: 'true: an event stream of chat.completion.chunk records ending `data: [DONE]`.' })),
    temperature: Type.Optional(Type.Number()),
    max_tokens: Type.Optional(Type.Integer()),
    tools: Type.Optional(Type.Array(AnyObject(), { description: 'Passed through unchanged.' })),
    models: Type.Optional(Type.Array(Type.String(), { description: '`chat_router` keys: forwarded verbatim, never used for routing.' })),
    provider: Type.Optional(AnyObject('`chat_router` keys: forwarded verbatim, never used for routing.')),
    ...enrichmentRequestFields,
  },
  { ...Open, description: 'Every other field is forwarded as sent.' },
)

const ChatUsage = Type.Object(
  {
    prompt_tokens: Type.Integer(),
    completion_tokens: Type.Integer(),
    total_tokens: Type.Optional(Type.Integer()),
    prompt_tokens_details: Type.Optional(Nullable(Type.Object({ cached_tokens: Type.Optional(Type.Integer()) }, Open))),
    completion_tokens_details: Type.Optional(Nullable(Type.Object({ reasoning_tokens: Type.Optional(Type.Integer()) }, Open))),
  },
  Open,
)

const ToolCall = Type.Object(
  { id: Type.String(), type: Type.String({ description: 'function' }), function: Type.Object({ name: Type.String(), arguments: Type.String({ description: 'JSON text.' }) }, Open) },
  Open,
)

export const ChatCompletion = Type.Object(
  {
    id: Type.Optional(Type.String()),
    object: Type.Optional(Enum(['chat.completion'])),
    created: Type.Optional(Type.Integer()),
    model: Type.Optional(Type.String()),
    choices: Type.Array(
      Type.Object(
        {
          index: Type.Optional(Type.Integer()),
          message: Type.Object(
            {
              role: Type.String({ description: 'assistant' }),
              content: Type.Optional(Nullable(Type.String())),
              reasoning_content: Type.Optional(Type.String()),
              tool_calls: Type.Optional(Type.Array(ToolCall)),
            },
            Open,
          ),
          finish_reason: Type.Optional(Nullable(Type.String({ description: 'stop, length, tool_calls, content_filter.' }))),
        },
        Open,
      ),
    ),
    usage: Type.Optional(Nullable(ChatUsage)),
    ...enrichmentAnswerFields,
  },
  { ...Open, description: 'The gateway\'s chat completion, relayed as it came (translated when the gateway speaks only Responses).' },
)

// ---------------------------------------------------------------------------------------------
// POST /v1/embeddings (SPEC "POST /embeddings"; embeddingsDialect.parse)

export const EmbeddingsRequest = Type.Object(
  {
    model: ModelId,
    input: Type.Union([Type.String(), Type.Array(Type.Unknown())], { description: 'A string, an array of strings, or token arrays.' }),
    encoding_format: Type.Optional(Type.String({ description: 'float or base64.' })),
    dimensions: Type.Optional(Type.Integer()),
    user: Type.Optional(Type.String()),
  },
  { ...Open, description: 'Forwarded as sent.' },
)

export const EmbeddingsList = Type.Object(
  {
    object: Type.Optional(Enum(['list'])),
    data: Type.Array(
      Type.Object({ object: Type.Optional(Type.String()), index: Type.Optional(Type.Integer()), embedding: AnyValue('An array of numbers, or a base64 string.') }, Open),
    ),
    model: Type.Optional(Type.String()),
    usage: Type.Optional(AnyObject()),
  },
  { ...Open, description: 'The gateway\'s list of embedding objects, relayed as it came.' },
)

// ---------------------------------------------------------------------------------------------
// POST /v1/responses, GET /v1/responses/{response_id} (SPEC "POST /responses"; responsesDialect.parse)

export const ResponsesRequest = Type.Object(
  {
    model: ModelId,
    input: Type.Union([Type.String(), Type.Array(AnyObject())], { description: 'A string, or an array of input items.' }),
    stream: Type.Optional(Type.Boolean()),
    max_output_tokens: Type.Optional(Type.Integer()),
    previous_response_id: Type.Optional(
      Nullable(Type.String({ description: 'A `resp_rt_…` id this key was given: the turn is pinned to the provider that holds the state (no failover, remaps or decisioner).' })),
    ),
    store: Type.Optional(Type.Boolean()),
    instructions: Type.Optional(Type.String({ description: 'The steering message is appended here.' })),
    tools: Type.Optional(Type.Array(AnyObject())),
    text: Type.Optional(AnyObject()),
    reasoning: Type.Optional(AnyObject()),
    metadata: Type.Optional(AnyObject()),
    temperature: Type.Optional(Type.Number()),
    ...enrichmentRequestFields,
  },
  { ...Open, description: '`conversation` is refused (400 stateful_responses_unsupported). Other fields go upstream as sent on native gateways.' },
)

export const ResponseObject = Type.Object(
  {
    id: Type.String({ description: 'A `resp_rt_…` id; a translated response\'s id cannot be chained or retrieved.' }),
    object: Type.Optional(Enum(['response'])),
    created_at: Type.Optional(Type.Integer()),
    status: Type.Optional(Type.String({ description: 'completed, incomplete (with incomplete_details.reason), failed, in_progress.' })),
    model: Type.Optional(Type.String()),
    output: Type.Array(AnyObject(), { description: 'Output items: message, reasoning, function_call, …' }),
    previous_response_id: Type.Optional(Nullable(Type.String())),
    incomplete_details: Type.Optional(Nullable(Type.Object({ reason: Type.Optional(Type.String()) }, Open))),
    usage: Type.Optional(
      Nullable(
        Type.Object(
          {
            input_tokens: Type.Integer(),
            output_tokens: Type.Integer(),
            total_tokens: Type.Optional(Type.Integer()),
            output_tokens_details: Type.Optional(Type.Object({ reasoning_tokens: Type.Optional(Type.Integer()) }, Open)),
          },
          Open,
        ),
      ),
    ),
    ...enrichmentAnswerFields,
  },
  { ...Open, description: 'A Response object with every id in the router\'s form.' },
)

// ---------------------------------------------------------------------------------------------
// POST /v1/messages, POST /v1/messages/count_tokens (SPEC "POST /messages"; validateMessagesBody)

const MessagesMessage = Type.Object(
  {
    role: Enum(['user', 'assistant', 'system'], { description: "'system': kept in place as a system message (what Claude Code sends to models that are not Claude)." }),
    content: Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String() }, Open), { description: 'Content blocks: text, image, document, tool_use, tool_result, thinking, …' })]),
  },
  Open,
)

export const MessagesRequest = Type.Object(
  {
    model: ModelId,
    messages: Type.Array(MessagesMessage, { minItems: 1 }),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    stream: Type.Optional(Type.Boolean()),
    system: Type.Optional(Type.Union([Type.String(), Type.Array(AnyObject())], { description: 'A string, or an array of text blocks.' })),
    tools: Type.Optional(Type.Array(AnyObject(), { description: 'Function tools, and server tools passed as sent.' })),
    tool_choice: Type.Optional(AnyObject('`disable_parallel_tool_use` becomes `parallel_tool_calls: false`.')),
    stop_sequences: Type.Optional(Type.Array(Type.String())),
    temperature: Type.Optional(Type.Number()),
    thinking: Type.Optional(
      Nullable(
        Type.Object(
          {
            type: Type.Optional(Type.String({ description: 'enabled or disabled.' })),
            budget_tokens: Type.Optional(Type.Integer({ minimum: 1, description: 'Required when type is enabled; goes upstream as reasoning.max_tokens.' })),
          },
          Open,
        ),
      ),
    ),
    ...enrichmentRequestFields,
  },
  { ...Open, description: 'Translated to chat upstream. `top_k`, `metadata`, `service_tier` and `cache_control` are dropped.' },
)

export const MessageObject = Type.Object(
  {
    id: Type.String(),
    type: Enum(['message']),
    role: Enum(['assistant']),
    model: Type.String(),
    content: Type.Array(Type.Object({ type: Type.String({ description: 'text, thinking or tool_use.' }) }, Open)),
    stop_reason: Enum(['end_turn', 'max_tokens', 'tool_use', 'refusal', 'stop_sequence']),
    stop_sequence: Nullable(Type.String()),
    usage: Type.Object(
      { input_tokens: Type.Integer(), output_tokens: Type.Integer(), cache_creation_input_tokens: Type.Optional(Type.Integer()), cache_read_input_tokens: Type.Optional(Type.Integer()) },
      Open,
    ),
    ...enrichmentAnswerFields,
  },
  { description: 'The message, translated from the gateway\'s chat completion.' },
)

export const TokenCount = Type.Object({ input_tokens: Type.Integer({ minimum: 0 }) }, { description: 'An estimate made by the router: nothing goes upstream.' })

// ---------------------------------------------------------------------------------------------
// POST /v1/models/{model}:generateContent (SPEC "POST /models/{modelPath}:generateContent"; validateContentBody)

const Part = Type.Object({}, { ...Open, description: 'A Part: text, inlineData, fileData, functionCall, functionResponse, …' })

export const GenerateContentRequest = Type.Object(
  {
    contents: Type.Array(
      Type.Object({ role: Type.Optional(Enum(['user', 'model', 'function'])), parts: Type.Array(Part, { minItems: 1 }) }, Open),
      { minItems: 1 },
    ),
    systemInstruction: Type.Optional(
      Type.Union([Type.String(), Type.Object({ parts: Type.Optional(Type.Array(Part)) }, Open)], { description: 'A Content object (or a string).' }),
    ),
    generationConfig: Type.Optional(AnyObject()),
    tools: Type.Optional(
      Type.Array(
        Type.Object({ functionDeclarations: Type.Optional(Type.Array(Type.Object({ name: Type.String({ minLength: 1 }) }, Open))) }, Open),
      ),
    ),
    toolConfig: Type.Optional(AnyObject('The function-calling mode.')),
    ...enrichmentRequestFields,
  },
  { ...Open, description: 'Translated to chat upstream. Safety settings and cached content have no chat equivalent and are dropped.' },
)

export const GenerateContentResponse = Type.Object(
  {
    candidates: Type.Array(
      Type.Object(
        {
          content: Type.Object({ role: Enum(['model']), parts: Type.Array(Part) }),
          finishReason: Enum(['STOP', 'MAX_TOKENS', 'SAFETY']),
          index: Type.Integer(),
        },
        Open,
      ),
    ),
    usageMetadata: Type.Object(
      { promptTokenCount: Type.Integer(), candidatesTokenCount: Type.Integer(), totalTokenCount: Type.Integer(), thoughtsTokenCount: Type.Optional(Type.Integer()) },
      Open,
    ),
    modelVersion: Type.String(),
    responseId: Type.String(),
    ...enrichmentAnswerFields,
  },
  { description: 'Translated from the gateway\'s chat completion.' },
)

// ---------------------------------------------------------------------------------------------
// GET /v1/models, GET /v1/models/{model} (SPEC "Model objects")

export const ModelList = Type.Object(
  {
    object: Enum(['list']),
    data: Type.Array(Type.Object({ id: Type.String(), object: Enum(['model']) }, { ...Open, description: 'The gateway\'s model object, with its own fields.' })),
  },
  { description: 'The merged catalogs of the key\'s routable targets; `:batch` ids are left out.' },
)

export const ModelObject = Type.Object(
  { id: Type.String(), object: Enum(['model']), created: Type.Integer(), owned_by: Type.String({ description: 'The gateway\'s value, else the vendor prefix of a slashed id.' }) },
  { ...Open, description: 'The model object, plus the gateway\'s own fields.' },
)

// ---------------------------------------------------------------------------------------------
// POST /v1/decisions (CONTRACT §9; validateDecisionRequest)

const Question = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 64, description: 'Unique within the request.' }),
    type: Enum(['choice', 'boolean', 'number']),
    prompt: Type.String({ minLength: 1 }),
    options: Type.Optional(Type.Array(Type.String(), { minItems: 2, maxItems: maxOptions, uniqueItems: true, description: `choice only, required: 2 to ${maxOptions} unique options.` })),
    min: Type.Optional(Type.Number({ description: 'number only, optional.' })),
    max: Type.Optional(Type.Number({ description: 'number only, optional; not below min.' })),
  },
  Open,
)

export const DecisionRequest = Type.Object(
  {
    model: ModelId,
    state: AnyValue('Required: any JSON value, what the questions are about.'),
    questions: Type.Array(Question, { minItems: 1, maxItems: maxQuestions }),
  },
  Open,
)

const Answer = Type.Object(
  {
    id: Type.String(),
    type: Enum(['choice', 'boolean', 'number']),
    answer: AnyValue('choice: one of the options; boolean: true or false; number: a number.'),
    probabilities: Type.Optional(Type.Object({}, { additionalProperties: Type.Number({ minimum: 0, maximum: 1 }), description: 'choice: each option\'s probability; they sum to 1 ± 0.01.' })),
    probability: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'boolean: P(true).' })),
    interval: Type.Optional(Type.Array(Type.Number(), { minItems: 2, maxItems: 2, description: 'number: [low, high].' })),
  },
  Open,
)

export const Decision = Type.Object(
  {
    id: Type.String(),
    object: Enum(['decision']),
    model: Type.String(),
    created: Type.Integer(),
    answers: Type.Array(Answer, { description: 'One answer per question, in order.' }),
    usage: Type.Optional(AnyObject()),
  },
  { ...Open, description: 'The gateway\'s decision, relayed as it came once checked.' },
)

// ---------------------------------------------------------------------------------------------
// The Batch API (SPEC "Batch API", "Batch object"; batch/submit.ts, batch/body-reader.ts, batch/present.ts)

export const BatchSubmit = Type.Object(
  {
    endpoint: Enum(batchEndpoints),
    model: Type.String({ minLength: 1, maxLength: 200, description: 'The plain model id or its `:batch` spelling; a `body.model` must name the same model.' }),
    provider: Type.Optional(
      Type.Object(
        { only: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1 }) },
        { additionalProperties: false, description: 'Pins upstream providers.' },
      ),
    ),
    completion_window: Type.Optional(Enum(['24h'])),
    requests: Type.Array(
      Type.Object(
        {
          custom_id: Type.String({ minLength: 1, description: 'Unique within the batch (a duplicate is refused by the gateway, 422).' }),
          body: AnyObject('What would be sent to `endpoint` directly (at most 16 MB).'),
        },
        Open,
      ),
      { minItems: 1 },
    ),
  },
  {
    additionalProperties: false,
    description:
      'Field order matters: `endpoint`, `model`, `provider` and `completion_window` come before `requests`, and nothing follows `requests` (else 400 invalid_batch_body). Keep a submit under 100 MB; there is no file upload.',
  },
)

const BatchResult = Type.Object(
  {
    custom_id: Type.String(),
    response: Nullable(Type.Object({ status_code: Type.Integer(), request_id: Type.Optional(Type.String()), body: AnyValue('The endpoint\'s answer.') }, Open)),
    error: Nullable(AnyObject()),
  },
  { description: 'Exactly one of `response` and `error` is non-null.' },
)

export const Batch = Type.Object(
  {
    id: Type.String({ description: 'A `batch_rt_…` id, bound to the creating key.' }),
    object: Enum(['batch']),
    endpoint: Type.String(),
    model: Type.String(),
    completion_window: Enum(['24h']),
    status: Enum(batchStatuses),
    created_at: Type.Integer({ description: 'Unix seconds.' }),
    request_counts: Type.Object({ total: Type.Integer(), completed: Type.Integer(), failed: Type.Integer() }),
    usage: Nullable(Type.Object({ cost: Type.Number() }, { description: 'Set once complete.' })),
    results: Nullable(Type.Array(BatchResult, { description: 'Only when completed: the full inline array, not in submission order.' })),
    error: Nullable(AnyObject()),
  },
  { description: 'A batch.' },
)

export const BatchList = Type.Object(
  {
    object: Enum(['list']),
    data: Type.Array(Batch, { description: 'Newest first; items carry `results: null`.' }),
    first_id: Nullable(Type.String()),
    last_id: Nullable(Type.String()),
    has_more: Type.Boolean(),
  },
  { description: 'This key\'s batches.' },
)

export const BatchDeleted = Type.Object({ id: Type.String(), object: Enum(['batch']), deleted: Type.Boolean() })
