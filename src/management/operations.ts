/**
 * The management operations, each once: its name, whether it reads or writes, its rule function,
 * what the audit log records of it, and how each transport reaches it (the REST route with its
 * OpenAPI description, the MCP tool with its input schema). The entries live by area in
 * operations/ (their shape: operations/operation.ts); this file joins them into the one table, in
 * the order the REST routes, the MCP tool list and the OpenAPI document follow. The REST API
 * (api/admin), the MCP tools (api/mcp), a replica's write-or-replay decision (app.ts) and the audit
 * log are made from this table; `perform` (perform.ts) is the one way an operation runs.
 * Framework-free: TypeBox schemas and data.
 */
import { accountGet } from './operations/account'
import { auditList } from './operations/audit'
import { cachePurge } from './operations/cache'
import { gatewaysDescribe, gatewaysList, gatewaysSet } from './operations/gateways'
import { keysExtras, keysMcpServersAdd, keysMcpServersList, keysMcpServersRemove, keysNotifyEmail, keysWebhookClear, keysWebhookRotate, keysWebhookSet } from './operations/key-settings'
import { keysCreate, keysGet, keysList, keysRevoke, keysRotate, keysSetCache, keysSetContinuation, keysSetGuardrails, keysSetLimits, keysUpdate } from './operations/keys'
import type { Operation } from './operations/operation'
import { providersCreate, providersDelete, providersGet, providersList, providersNotesGet, providersNotesSet, providersUpdate } from './operations/providers'
import { requestsRecent } from './operations/requests'
import { routingGet, routingSet } from './operations/routing'
import { usageBreakdown, usageSeries, usageSummary } from './operations/usage'
import { managementKeysCreate, managementKeysSet, membersAdd, workspaceGet, workspaceSet, workspacesCreate } from './operations/workspaces'

/** The operations of the API (REST and MCP), in the order of its routes, tools and document. */
export const operations = {
  gatewaysList,
  providersList,
  providersCreate,
  providersGet,
  providersUpdate,
  providersDelete,
  keysList,
  keysCreate,
  keysGet,
  keysUpdate,
  keysSetLimits,
  keysSetCache,
  keysSetContinuation,
  keysSetGuardrails,
  keysRevoke,
  cachePurge,
  routingGet,
  routingSet,
  usageSummary,
  usageSeries,
  usageBreakdown,
  accountGet,
  auditList,
}

/** Operations of the dashboard and the operator CLI (SPEC leaves them out of the API). */
export const operatorOperations = {
  workspacesCreate,
  workspaceGet,
  workspaceSet,
  membersAdd,
  managementKeysCreate,
  managementKeysSet,
  keysRotate,
  keysExtras,
  keysWebhookSet,
  keysWebhookRotate,
  keysWebhookClear,
  keysNotifyEmail,
  keysMcpServersList,
  keysMcpServersAdd,
  keysMcpServersRemove,
  providersNotesGet,
  providersNotesSet,
  requestsRecent,
  gatewaysSet,
  gatewaysDescribe,
}

/** Every operation: the API's and the operator's. */
export const operationList: readonly Operation[] = [...Object.values(operations), ...Object.values(operatorOperations)]

/** An operation by its name (the CLI's commands name theirs). */
export function operationNamed(name: string): Operation | undefined {
  return operationList.find((operation) => operation.name === name)
}

/** The operations that have a REST route, with their paths as patterns (for the replica's decision before routing). */
const restPatterns = operationList
  .filter((operation) => operation.rest)
  .map((operation) => ({ operation, method: operation.rest!.method, pattern: new RegExp(`^${operation.rest!.path.replace(/:[a-z_]+/g, '[^/]+')}/?$`) }))

/** The operation a REST request reaches (`path` under /api/v1), or undefined for no route. */
export function restOperation(method: string, path: string): Operation | undefined {
  for (const route of restPatterns) if (route.method === method && route.pattern.test(path)) return route.operation
  return undefined
}

/** The operation an MCP tool runs. */
export function toolOperation(name: string): Operation | undefined {
  return operationList.find((operation) => operation.mcp?.tool === name)
}

