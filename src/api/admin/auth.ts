/** Management-key authentication for /api/v1: 401 without a valid key, 403 for writes by read-only keys. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../deps'
import type { Actor } from '../../management/context'
import { ManagementError, messages } from '../../management/errors'
import { authenticateManagementKey, bearerToken } from '../../management/workspaces'

export function managementAuth(deps: AppDeps) {
  return new Elysia({ name: 'management-auth' }).derive({ as: 'scoped' }, ({ request }): { actor: Actor } => {
    const actor = authenticateManagementKey(deps, bearerToken(request.headers.get('authorization')))
    if (!actor) throw new ManagementError(401, messages.unauthorized)
    // Every non-GET management route is a write (SPEC "Management key"): refuse before parsing input.
    if (actor.readOnly && request.method !== 'GET' && request.method !== 'HEAD') throw new ManagementError(403, messages.readOnly)
    return { actor }
  })
}
