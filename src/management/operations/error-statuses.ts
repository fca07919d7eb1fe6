/** The error statuses several REST routes document (the OpenAPI `responses`), with what each means. */

export const unauthorized = { 401: 'Missing or invalid management key.' }
export const readOnly = { 403: 'A read-only management key cannot write.' }
export const invalidInput = { 400: 'Invalid input; the message names the first bad field.' }
export const keyNotFound = { 404: 'No inference key with this id in the workspace.' }
export const keyRevoked = { 409: 'The key is revoked (`code: key_revoked`); send `revoked: false` to restore it first.' }
