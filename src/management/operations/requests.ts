/** The dashboard's recent requests. */
import { recentRequests } from '../requests'
import type { Operation } from './operation'

export const requestsRecent = {
  name: 'requests.recent',
  access: 'read',
  run: (deps, actor, input: { range?: string; api_key_id?: string; status?: string; model?: string }) => recentRequests(deps, actor, input),
  dashboard: {
    method: 'GET',
    path: '/requests',
    input: ({ query }) => ({ range: query.get('range') ?? undefined, api_key_id: query.get('api_key_id') ?? undefined, status: query.get('status') ?? undefined, model: query.get('model') ?? undefined }),
  },
} satisfies Operation<{ range?: string; api_key_id?: string; status?: string; model?: string }>
