/**
 * What a gateway kind is, as data (CONTRACT §6): the shape of each entry of the catalog
 * (gateways/catalog.ts) and of the gateway a read-model provider entry names.
 */

export type ResponsesSupport = 'native' | 'translated' | 'only'

/** How a gateway takes an assistant prefill (see `capabilities.prefill`). */
export type Prefill = false | 'trailing' | 'prefix'

export interface GatewayConfigField {
  name: string
  required: boolean
  default?: string
}

export interface GatewayDefinition {
  id: string
  name: string
  /** The real API base; `{account_id}`-style placeholders are filled from the provider key's config. */
  baseUrl: string
  /** Header carrying the stored provider secret; `authorization` means `Bearer <secret>`. */
  authHeader: string
  routable: boolean
  decisions: boolean
  capabilities: {
    chat: boolean
    embeddings: boolean
    /** Serves `/moderations` (what a key's guardrail rule `moderation` calls, CONTRACT §17). */
    moderations: boolean
    responses: ResponsesSupport
    /** Stores responses, so it can anchor a `previous_response_id` chain. */
    chain: boolean
    /** Serves GET /responses/{id}. */
    retrieve: boolean
    /** Keeps batch results (the Batch API of SPEC.md). */
    batch: boolean
    /** Can host a key's decisioner. */
    decisioner: boolean
    /** Request parameters this gateway rejects; removed before the call. */
    omitParams: readonly string[]
    /**
     * Whether a chat call may end with a partial assistant turn for the model to go on from (an
     * assistant prefill, what a continued stream sends, CONTRACT §16): `trailing`, a last assistant
     * message is continued; `prefix`, when that message carries `prefix: true` (Mistral's form);
     * false, not accepted (the continuation is asked for in a form that needs no prefill).
     */
    prefill: Prefill
  }
  configFields?: readonly GatewayConfigField[]
}
