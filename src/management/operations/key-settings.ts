/**
 * A key's settings, operations of the dashboard and the operator CLI: its notifications (webhook,
 * signing secret, e-mail) and its MCP servers.
 */
import { Type } from '@sinclair/typebox'
import { addMcpServer, checkMcpServerUrl, checkWebhookUrl, keyNotifications, listMcpServers, removeMcpServer, setNotifyEmail, setWebhook } from '../key-settings'
import type { Operation } from './operation'
import { inferenceKey, keyRef, keyWorkspace } from './targets'

interface KeyIdInput {
  id: string
}
interface WebhookInput {
  id: string
  url?: string
  rotateSecret?: boolean
  clear?: boolean
}
interface McpServerAddInput {
  id: string
  url: string
  name?: string
}

export const keysExtras = {
  name: 'keys.extras',
  access: 'read',
  run: (deps, actor, input: KeyIdInput) => ({ ...keyNotifications(deps, keyRef(actor, input.id)), mcp_servers: listMcpServers(deps, keyRef(actor, input.id)).servers }),
  dashboard: { method: 'GET', path: '/keys/:id/extras', input: ({ params }) => ({ id: params.id! }) },
} satisfies Operation<KeyIdInput>

export const keysWebhookSet = {
  name: 'keys.webhook.set',
  access: 'write',
  prepare: async (deps, actor, input: WebhookInput) => (input.url !== undefined && !input.clear ? { ...input, url: await checkWebhookUrl(deps, keyRef(actor, input.id), input.url) } : input),
  run: (deps, actor, input: WebhookInput) => setWebhook(deps, keyRef(actor, input.id), input),
  audit: (input, _output, deps) => ({
    target: inferenceKey(input.id),
    changes: input.clear ? { webhook_url: null } : input.url !== undefined ? { webhook_url: input.url, signing_secret_rotated: true } : { signing_secret_rotated: true },
    workspaceId: keyWorkspace(deps, input.id),
  }),
  dashboard: { method: 'PUT', path: '/keys/:id/webhook', body: Type.Object({ url: Type.String() }), input: ({ params, body }) => ({ id: params.id!, url: (body as { url: string }).url }) },
} satisfies Operation<WebhookInput>

export const keysWebhookRotate = {
  name: 'keys.webhook.rotate',
  access: 'write',
  run: (deps, actor, input: KeyIdInput) => setWebhook(deps, keyRef(actor, input.id), { rotateSecret: true }),
  audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { signing_secret_rotated: true }, workspaceId: keyWorkspace(deps, input.id) }),
  dashboard: { method: 'POST', path: '/keys/:id/webhook/rotate', input: ({ params }) => ({ id: params.id! }) },
} satisfies Operation<KeyIdInput>

export const keysWebhookClear = {
  name: 'keys.webhook.clear',
  access: 'write',
  destructive: true,
  idempotent: true,
  run: (deps, actor, input: KeyIdInput) => setWebhook(deps, keyRef(actor, input.id), { clear: true }),
  audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { webhook_url: null }, workspaceId: keyWorkspace(deps, input.id) }),
  dashboard: { method: 'DELETE', path: '/keys/:id/webhook', input: ({ params }) => ({ id: params.id! }) },
} satisfies Operation<KeyIdInput>

export const keysNotifyEmail = {
  name: 'keys.notify_email.set',
  access: 'write',
  idempotent: true,
  run: (deps, actor, input: { id: string; on: boolean }) => setNotifyEmail(deps, keyRef(actor, input.id), input.on),
  audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { notify_email: input.on }, workspaceId: keyWorkspace(deps, input.id) }),
  dashboard: { method: 'PUT', path: '/keys/:id/notify-email', body: Type.Object({ on: Type.Boolean() }), input: ({ params, body }) => ({ id: params.id!, on: (body as { on: boolean }).on }) },
} satisfies Operation<{ id: string; on: boolean }>

export const keysMcpServersList = {
  name: 'keys.mcp_servers.list',
  access: 'read',
  run: (deps, actor, input: KeyIdInput) => listMcpServers(deps, keyRef(actor, input.id)),
} satisfies Operation<KeyIdInput>

export const keysMcpServersAdd = {
  name: 'keys.mcp_servers.add',
  access: 'write',
  prepare: async (deps, actor, input: McpServerAddInput) => ({ ...input, url: await checkMcpServerUrl(deps, keyRef(actor, input.id), input.url) }),
  run: (deps, actor, input: McpServerAddInput) => addMcpServer(deps, keyRef(actor, input.id), input.url, input.name),
  audit: (input, _output, deps) => ({ target: inferenceKey(input.id), changes: { mcp_server_url: input.url, ...(input.name !== undefined ? { name: input.name } : {}) }, workspaceId: keyWorkspace(deps, input.id) }),
  dashboard: {
    method: 'POST',
    path: '/keys/:id/mcp-servers',
    body: Type.Object({ url: Type.String(), name: Type.Optional(Type.String()) }),
    input: ({ params, body }) => ({ id: params.id!, url: (body as { url: string }).url, name: (body as { name?: string }).name }),
    output: (result: { servers: unknown[] }) => result.servers,
  },
} satisfies Operation<McpServerAddInput>

export const keysMcpServersRemove = {
  name: 'keys.mcp_servers.remove',
  access: 'write',
  destructive: true,
  run: (deps, actor, input: { id: string; server: string }) => removeMcpServer(deps, keyRef(actor, input.id), input.server),
  audit: (input, _output, deps) => ({ target: { type: 'mcp_server', id: input.server }, changes: { removed: true, key_id: input.id }, workspaceId: keyWorkspace(deps, input.id) }),
  dashboard: { method: 'DELETE', path: '/keys/:id/mcp-servers/:server', input: ({ params }) => ({ id: params.id!, server: params.server! }), output: (result: { servers: unknown[] }) => result.servers },
} satisfies Operation<{ id: string; server: string }>
