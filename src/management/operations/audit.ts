/** The audit-log operation: the workspace's events, newest first (the log itself: management/audit.ts). */
import { Type } from '@sinclair/typebox'
import { listAuditEvents, type AuditQueryInput } from '../audit'
import { AuditListOutput, AuditQuery } from '../schemas'
import { unauthorized } from './error-statuses'
import type { Operation } from './operation'

export const auditList = {
  name: 'audit.list',
  access: 'read',
  run: (deps, actor, input: AuditQueryInput) => listAuditEvents(deps, actor, input),
  rest: {
    method: 'GET',
    path: '/audit',
    query: AuditQuery,
    tags: ['audit'],
    summary: 'Audit events of the workspace, newest first',
    output: { schema: AuditListOutput, description: 'A page of events; `last_id` is the `after` of the next page.' },
    bare: true,
    errors: { 400: 'A `limit` outside 1 to 100, or an `after` that is not an event of this workspace.', ...unauthorized },
    input: ({ query }) => ({ limit: query.get('limit') ?? undefined, after: query.get('after') ?? undefined, action: query.get('action') ?? undefined, target_id: query.get('target_id') ?? undefined }),
  },
  mcp: {
    tool: 'list_audit_events',
    description: 'Audit events of the workspace, newest first: every management write, who made it, through which door, what it changed (secrets redacted).',
    input: Type.Object({
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Default 50.' })),
      after: Type.Optional(Type.String({ description: 'An event id: the events older than it (the next page).' })),
      action: Type.Optional(Type.String({ description: 'Only this operation, e.g. keys.create.' })),
      target_id: Type.Optional(Type.String({ description: 'Only events about this object.' })),
    }),
    from: (args) => ({ limit: args.limit as number | undefined, after: args.after as string | undefined, action: args.action as string | undefined, target_id: args.target_id as string | undefined }),
  },
  dashboard: {
    method: 'GET',
    path: '/audit',
    input: ({ query }) => ({ limit: query.get('limit') ?? undefined, after: query.get('after') ?? undefined, action: query.get('action') ?? undefined, target_id: query.get('target_id') ?? undefined }),
  },
} satisfies Operation<AuditQueryInput>
