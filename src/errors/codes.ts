/** The inference error table of SPEC "Errors": code → status, message and chat envelope type. */

export const errorCodes = {
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is invalid.' },
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  missing_model: { status: 400, type: 'invalid_request_error', message: 'The request body has no `model`.' },
  missing_messages: { status: 400, type: 'invalid_request_error', message: 'The request body needs a non-empty `messages` array.' },
  batch_only_model: { status: 400, type: 'invalid_request_error', message: 'This model id is a :batch variant, served only through the Batch API.' },
  stream_unsupported: { status: 400, type: 'invalid_request_error', message: 'Streaming is not supported on this endpoint.' },
  invalid_previous_response_id: { status: 400, type: 'invalid_request_error', message: 'previous_response_id is not a response id this service issued.' },
  response_chain_unsupported_target: { status: 400, type: 'invalid_request_error', message: 'The gateway that served this response does not store responses, so it cannot be chained.' },
  response_chain_wrong_key: { status: 400, type: 'invalid_request_error', message: 'This response id belongs to another key.' },
  response_chain_expired: { status: 400, type: 'invalid_request_error', message: 'This response id is older than 30 days.' },
  stateful_responses_unsupported: { status: 400, type: 'invalid_request_error', message: '`conversation` is not supported: chain turns with previous_response_id.' },
  response_not_found: { status: 400, type: 'invalid_request_error', message: 'The gateway does not know this response.' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Missing or invalid API key.' },
  revoked_api_key: { status: 401, type: 'authentication_error', message: 'This API key has been revoked.' },
  no_route: { status: 402, type: 'invalid_request_error', message: 'This key has no routing targets. Attach provider keys to its routing rule.' },
  all_targets_failed_402: { status: 402, type: 'payment_required', message: 'Every target refused the request for billing reasons.' },
  ip_not_allowed: { status: 403, type: 'permission_error', message: 'This address is not allowed to use this key.' },
  workspace_suspended: { status: 403, type: 'permission_error', message: 'This workspace is suspended.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'This path is not served.' },
  wrong_api_shape: { status: 404, type: 'invalid_request_error', message: 'This endpoint belongs to another API shape than this key.' },
  model_not_available: { status: 404, type: 'invalid_request_error', message: 'No target of this key lists the model.' },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model was not found.' },
  response_chain_target_unavailable: { status: 409, type: 'invalid_request_error', message: 'The provider that holds this response is no longer a target of this key.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The JSON body is larger than 10 MB.' },
  rate_limited: { status: 429, type: 'rate_limit_error', message: 'Every eligible target is rate limited.' },
  internal: { status: 500, type: 'api_error', message: 'Internal error.' },
  gateway_not_supported: { status: 501, type: 'invalid_request_error', message: 'No target of this key has a live adapter for this request.' },
  embeddings_unsupported: { status: 501, type: 'invalid_request_error', message: 'No target of this key serves embeddings.' },
  responses_retrieve_unsupported: { status: 501, type: 'invalid_request_error', message: 'This gateway does not serve response retrieval.' },
  all_targets_failed: { status: 502, type: 'api_error', message: 'Every target failed.' },
  provider_auth_failed: { status: 502, type: 'api_error', message: 'The gateway rejected the stored provider key.' },
  upstream_unreadable: { status: 502, type: 'api_error', message: 'The gateway response broke off before it could be read.' },
  no_healthy_target: { status: 502, type: 'api_error', message: 'Every provider key on this routing rule is disabled or missing.' },
  stream_aborted: { status: 502, type: 'api_error', message: 'The upstream stream broke off.' },
  gateway_disabled: { status: 503, type: 'api_error', message: "Every target's gateway is switched off." },
  deadline_exceeded: { status: 504, type: 'api_error', message: 'The request deadline ran out before a gateway answered.' },
} as const satisfies Record<string, { status: number; type: string; message: string }>

export type ErrorCode = keyof typeof errorCodes

/** The code as it appears on the wire (the 402 variant of all_targets_failed shares the name). */
export function wireCode(code: ErrorCode): string {
  return code === 'all_targets_failed_402' ? 'all_targets_failed' : code
}
