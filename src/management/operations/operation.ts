/**
 * The shape of one management operation (an entry of the table, management/operations.ts): its
 * name, read or write, its rule, its audit event, and its doors (REST, MCP, dashboard). Plain types,
 * below the table, the entries and `perform` alike.
 */
import type { TSchema } from '@sinclair/typebox'
import type { Actor, ManagementDeps } from '../context'

/** What an audit event names as the write's object. */
export interface AuditTarget {
  type: 'provider_key' | 'inference_key' | 'workspace' | 'management_key' | 'member' | 'gateway' | 'mcp_server'
  id: string
}

/** A REST request as an operation's input is read from it. */
export interface RestRequest {
  params: Record<string, string>
  body: unknown
  query: URLSearchParams
}

export interface RestBinding<I> {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  /** Under /api/v1, with `:name` path parameters. */
  path: string
  /** The success status (200 unless said). */
  status?: number
  /** The JSON body's schema (validated before the rule runs). */
  body?: TSchema
  /** The query's schema (validated before the rule runs). */
  query?: TSchema
  tags: string[]
  summary: string
  /** Query parameters documented without a schema that would validate them (the rule checks them). */
  parameters?: Record<string, unknown>[]
  /** The `data` of a success, and what it is. */
  output: { schema: TSchema; description: string }
  /** Error statuses the route answers, with what each means (documentation: only thrown errors answer them). */
  errors: Record<number, string>
  /** The output is the whole body, not wrapped in `{data}` (a page with its own `data`). */
  bare?: boolean
  input(request: RestRequest): I
}

export interface McpBinding<I> {
  tool: string
  description: string
  input: TSchema
  from(args: Record<string, unknown>): I
}

/** A dashboard call (under /dashboard/api; hidden from the OpenAPI document). */
export interface DashboardBinding<I> {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  path: string
  body?: TSchema
  input(request: RestRequest): I
  /** The part of the operation's answer the page uses (default: all of it). */
  output?(result: any): unknown
}

export interface Operation<I = any> {
  /** `area.verb`, e.g. `keys.create`: the audit log's `action`. */
  name: string
  access: 'read' | 'write'
  /**
   * Checks that need the outside (a webhook's host resolved), before the write: the write itself is
   * synchronous, so its audit event is in its transaction. Answers the input the write runs with.
   */
  prepare?(deps: ManagementDeps, actor: Actor, input: I): Promise<I>
  /** A write that removes or replaces what was there (MCP `destructiveHint`). */
  destructive?: boolean
  /** Repeating it with the same input changes nothing more (MCP `idempotentHint`). */
  idempotent?: boolean
  run(deps: ManagementDeps, actor: Actor, input: I): unknown
  /**
   * A write's audit event: its target and the fields it set (secrets are redacted afterwards), its
   * workspace when the actor is not bound to one (the operator CLI), and the action when the write is
   * what a narrower operation names (a key PATCH of only its cache: `keys.set_cache`).
   */
  audit?(input: I, output: any, deps: ManagementDeps): { target: AuditTarget; changes: unknown; workspaceId?: string; action?: string }
  rest?: RestBinding<I>
  mcp?: McpBinding<I>
  dashboard?: DashboardBinding<I>
}

/** Who calls, through which door (the audit log's actor, via, caller_ip and request_id). */
export interface Caller {
  actor: Actor
  via: 'rest' | 'mcp' | 'cli' | 'dashboard'
  ip: string | undefined
  requestId: string | undefined
}
