/**
 * Management-key authentication for /api/v1 and the dashboard's calls: 401 without a valid key, 403
 * for a read-only key's write, refused before its input is parsed. Whether a /api/v1 route writes is
 * the operation table's word (management/operations.ts); the dashboard's calls write unless they GET.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../deps'
import type { Actor } from '../../management/context'
import { ManagementError, messages } from '../../management/errors'
import { restOperation } from '../../management/operations'
import { authenticateManagementKey } from '../../management/workspaces'
import { bearerToken } from '../../http/bearer-token'

const apiPrefix = '/api/v1'

/** Whether a management request writes: its operation's access, or (outside the table) any method but GET and HEAD. */
export function writesByRoute(method: string, pathname: string): boolean {
  const operation = pathname.startsWith(apiPrefix) ? restOperation(method, pathname.slice(apiPrefix.length)) : undefined
  return operation ? operation.access === 'write' : method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS'
}

export function managementAuth(deps: AppDeps) {
  return new Elysia({ name: 'management-auth' }).derive({ as: 'scoped' }, ({ request }): { actor: Actor } => {
    const actor = authenticateManagementKey(deps, bearerToken(request.headers.get('authorization')))
    if (!actor) throw new ManagementError(401, messages.unauthorized)
    if (actor.readOnly && writesByRoute(request.method, new URL(request.url).pathname)) throw new ManagementError(403, messages.readOnly)
    return { actor }
  })
}
