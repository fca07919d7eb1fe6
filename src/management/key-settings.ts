/**
 * Per-key settings the operator CLI manages (CONTRACT §5): rotation lives in keys.ts; here are the
 * batch webhook and MCP servers (both under the target rule of outbound-target.ts, SPEC "Batch
 * notifications") and e-mail notifications. Delivery of webhooks and use of MCP servers belong to
 * their own features.
 */
import { randomUUID } from 'node:crypto'
import { generateSecret } from '../storage/crypto'
import type { ManagementDeps } from './context'
import { badRequest, notFound } from './errors'
import { requireKeyRow as requireKey, type KeyRef } from './keys'
import { checkOutboundUrl } from '../net/outbound-target'

/**
 * A webhook URL checked against the target rule (net/outbound-target.ts), the key first: the check
 * resolves the host, so it runs before the write, which is synchronous (the audit event goes in its
 * transaction).
 */
export async function checkWebhookUrl(deps: ManagementDeps, keyId: KeyRef, rawUrl: string): Promise<string> {
  requireKey(deps, keyId)
  return (await checkOutboundUrl(rawUrl, deps.config.webhookAllowPrivate, 'Webhook')).toString()
}

/** Sets (`url`, checked by checkWebhookUrl), re-keys or clears the key's webhook; the signing secret is in this answer only. */
export function setWebhook(deps: ManagementDeps, keyId: KeyRef, action: { url?: string; rotateSecret?: boolean; clear?: boolean }) {
  const key = requireKey(deps, keyId)
  if (action.clear) {
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ webhookUrl: null, webhookSecretCiphertext: null }])
    return { url: null, signing_secret: null }
  }
  if (action.url !== undefined) {
    const secret = generateSecret('whsec_', 32)
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ webhookUrl: action.url, webhookSecretCiphertext: deps.secretBox.encrypt(secret) }])
    return { url: action.url, signing_secret: secret }
  }
  if (action.rotateSecret) {
    if (!key.webhookUrl) throw badRequest('This key has no webhook URL; set one first.')
    const secret = generateSecret('whsec_', 32)
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ webhookSecretCiphertext: deps.secretBox.encrypt(secret) }])
    return { url: key.webhookUrl, signing_secret: secret }
  }
  throw badRequest('Give a webhook URL, or ask to rotate its secret or to clear it.')
}

/** The key's notification settings as the dashboard shows them (the signing secret never). */
export function keyNotifications(deps: ManagementDeps, keyId: KeyRef) {
  const key = requireKey(deps, keyId)
  return { webhook_url: key.webhookUrl, notify_email: key.notifyEmail }
}

export function setNotifyEmail(deps: ManagementDeps, keyId: KeyRef, on: boolean) {
  const key = requireKey(deps, keyId)
  deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ notifyEmail: on }])
  return { id: key.id, notify_email: on }
}

function presentMcpServers(deps: ManagementDeps, keyId: string) {
  return {
    key_id: keyId,
    servers: deps.repositories.inferenceKeys.listMcpServers(keyId).map((row) => ({ id: row.id, name: row.name, url: row.url, created_at: row.createdAt })),
  }
}

/**
 * An MCP server is called on the key's behalf like a webhook, so it follows the webhook's target
 * rule (net/outbound-target.ts), here at save time (checked before the synchronous write) and in the MCP
 * client at every connection.
 */
export async function checkMcpServerUrl(deps: ManagementDeps, keyId: KeyRef, rawUrl: string): Promise<string> {
  requireKey(deps, keyId)
  return (await checkOutboundUrl(rawUrl, deps.config.webhookAllowPrivate, 'MCP server')).toString()
}

/** Attaches a server (`url` checked by checkMcpServerUrl). */
export function addMcpServer(deps: ManagementDeps, keyId: KeyRef, url: string, name?: string) {
  const key = requireKey(deps, keyId)
  deps.repositories.inferenceKeys.addMcpServer({ id: randomUUID(), keyId: key.id, name: name ?? null, url, createdAt: deps.now().toISOString() })
  return presentMcpServers(deps, key.id)
}

export function listMcpServers(deps: ManagementDeps, keyId: KeyRef) {
  return presentMcpServers(deps, requireKey(deps, keyId).id)
}

export function removeMcpServer(deps: ManagementDeps, keyId: KeyRef, serverId: string) {
  const key = requireKey(deps, keyId)
  if (!deps.repositories.inferenceKeys.removeMcpServer(key.id, serverId)) throw notFound(`MCP server ${serverId} is not attached to this key.`)
  return presentMcpServers(deps, key.id)
}
