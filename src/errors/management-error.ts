/**
 * Management API errors as values: status, message and the optional `code` (SPEC "Error envelopes").
 * On the floor because the shared rules below management throw them too (an IP allowlist or an
 * outbound URL refused on save: net/); management/errors.ts re-exports them with its messages.
 */
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
