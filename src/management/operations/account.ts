/** The account operation: the workspace snapshot. */
import { Type } from '@sinclair/typebox'
import { accountSnapshot } from '../account'
import { AccountOutput } from '../schemas'
import { unauthorized } from './error-statuses'
import type { Operation } from './operation'

export const accountGet = {
  name: 'account.get',
  access: 'read',
  run: (deps, actor) => accountSnapshot(deps, actor),
  rest: { method: 'GET', path: '/account', tags: ['account'], summary: 'Workspace snapshot', output: { schema: AccountOutput, description: 'The workspace snapshot.' }, errors: unauthorized, input: () => ({}) },
  mcp: {
    tool: 'get_account',
    description: 'Workspace snapshot: workspace, key counts, provider keys, management keys, members.',
    input: Type.Object({}),
    from: () => ({}),
  },
} satisfies Operation<Record<string, never>>
