/** One renderer per error envelope (SPEC "Error envelopes (by key shape)"). */
import { errorCodes, wireCode } from './codes'
import type { RouterError } from './router-error'

export type Envelope = 'chat' | 'messages' | 'content'

/** Messages-dialect error types by status (SPEC "POST /messages"). */
export function messagesErrorType(status: number): string {
  if (status === 400) return 'invalid_request_error'
  if (status === 401) return 'authentication_error'
  if (status === 403) return 'permission_error'
  if (status === 404) return 'not_found_error'
  if (status === 413) return 'request_too_large'
  if (status === 429) return 'rate_limit_error'
  if (status === 503 || status === 529) return 'overloaded_error'
  if (status >= 500) return 'api_error'
  return 'invalid_request_error'
}

/** generateContent-dialect status names (google.rpc.Code) by HTTP status. */
export function contentErrorStatus(status: number): string {
  switch (status) {
    case 400:
    case 413:
      return 'INVALID_ARGUMENT'
    case 401:
      return 'UNAUTHENTICATED'
    case 402:
    case 403:
      return 'PERMISSION_DENIED'
    case 404:
      return 'NOT_FOUND'
    case 409:
      return 'ABORTED'
    case 429:
      return 'RESOURCE_EXHAUSTED'
    case 501:
      return 'UNIMPLEMENTED'
    case 503:
      return 'UNAVAILABLE'
    case 504:
      return 'DEADLINE_EXCEEDED'
    default:
      return status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION'
  }
}

export function errorBody(envelope: Envelope, error: RouterError): unknown {
  const code = wireCode(error.code)
  switch (envelope) {
    case 'chat':
      return { error: { message: error.message, type: errorCodes[error.code].type, code } }
    case 'messages':
      return { type: 'error', error: { type: messagesErrorType(error.status), message: `${code}: ${error.message}` } }
    case 'content':
      return { error: { code: error.status, message: `${code}: ${error.message}`, status: contentErrorStatus(error.status) } }
    default: {
      const exhaustive: never = envelope
      return exhaustive
    }
  }
}

/** The error in its envelope; `headers` (lower-case names) gains the content type and the error's own headers. */
export function errorResponse(envelope: Envelope, error: RouterError, headers: Record<string, string>): Response {
  headers['content-type'] = 'application/json'
  if (error.extraHeaders) for (const name in error.extraHeaders) headers[name.toLowerCase()] = error.extraHeaders[name]!
  return new Response(JSON.stringify(errorBody(envelope, error)), { status: error.status, headers })
}

/** An upstream error relayed in a translated dialect: the gateway's status and message, this envelope. */
export function upstreamErrorBody(envelope: Envelope, status: number, message: string): unknown {
  switch (envelope) {
    case 'chat':
      return { error: { message, type: status >= 500 ? 'api_error' : 'invalid_request_error', code: `upstream_${status}` } }
    case 'messages':
      return { type: 'error', error: { type: messagesErrorType(status), message } }
    case 'content':
      return { error: { code: status, message, status: contentErrorStatus(status) } }
    default: {
      const exhaustive: never = envelope
      return exhaustive
    }
  }
}
