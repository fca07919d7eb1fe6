/** Management API errors (the class lives on the floor: errors/management-error.ts) and the messages several rules share. */
export { badRequest, ManagementError, notFound } from '../errors/management-error'

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
