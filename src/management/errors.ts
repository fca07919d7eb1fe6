/** Management API errors as values: status, message and the optional `code` (SPEC "Error envelopes"). */
export class ManagementError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 500,
    message: string,
    readonly code?: string,
  ) {
    super(message)
  }

  toBody(): { error: string; code?: string } {
    return this.code ? { error: this.message, code: this.code } : { error: this.message }
  }
}

export const badRequest = (message: string) => new ManagementError(400, message)
export const notFound = (message: string) => new ManagementError(404, message)

export const messages = {
  providerNotFound: 'Provider key not found.',
  keyNotFound: 'API key not found.',
  unsupportedShape: 'Unsupported API shape.',
  providerIdNotUuid: 'provider_key_id must be the UUID returned by GET /api/v1/providers.',
  readOnly: 'This management key is read-only: writes are refused.',
  unauthorized: 'Missing or invalid management key. Send it as Authorization: Bearer rt_mgmt_…',
  keyRevoked: 'This API key is revoked. Send revoked: false to restore it before changing other fields.',
  emptyBody: 'Request body must contain at least one field.',
} as const
