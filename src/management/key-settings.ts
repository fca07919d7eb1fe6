/**
 * Per-key settings the operator CLI manages (CONTRACT §5): rotation lives in keys.ts; here are the
 * batch webhook (URL rules of SPEC "Batch notifications"), e-mail notifications and MCP servers.
 * Delivery of webhooks and use of MCP servers belong to their own features.
 */
import { randomUUID } from 'node:crypto'
import { lookup } from 'node:dns/promises'
import ipaddr from 'ipaddr.js'
import { generateSecret } from '../storage/crypto'
import type { InferenceKeyRow } from '../storage/repositories/inference-keys'
import { uuidPattern, type ManagementDeps } from './context'
import { badRequest, messages, notFound } from './errors'

function requireKey(deps: ManagementDeps, keyId: string): InferenceKeyRow {
  const key = uuidPattern.test(keyId) ? deps.repositories.inferenceKeys.getById(keyId) : undefined
  if (!key) throw notFound(messages.keyNotFound)
  return key
}

/** True for loopback, private, link-local and other non-public ranges. */
export function isNonPublicAddress(text: string): boolean {
  try {
    let address = ipaddr.parse(text)
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) address = (address as ipaddr.IPv6).toIPv4Address()
    return address.range() !== 'unicast'
  } catch {
    return true
  }
}

/**
 * A webhook target must be `https`, carry no credentials, and resolve only to public addresses,
 * unless RT_WEBHOOK_ALLOW_PRIVATE=1 (tests and closed networks). Checked at save and on delivery.
 */
export async function assertWebhookTarget(rawUrl: string, allowPrivate: boolean, resolve = lookup): Promise<URL> {
  let url: URL
  try {
    url = new URL(rawUrl)
  } catch {
    throw badRequest(`Invalid webhook URL: '${rawUrl.slice(0, 200)}'.`)
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) throw badRequest('Webhook URL must use https.')
  if (url.username || url.password) throw badRequest('Webhook URL must not carry credentials.')
  if (allowPrivate) return url
  const host = url.hostname.replace(/^\[|\]$/g, '')
  const addresses = ipaddr.isValid(host)
    ? [host]
    : await resolve(host, { all: true }).then(
        (entries) => entries.map((entry) => entry.address),
        () => {
          throw badRequest(`Webhook host '${host}' could not be resolved.`)
        },
      )
  if (addresses.length === 0 || addresses.some(isNonPublicAddress)) {
    throw badRequest(`Webhook URL resolves to a private, loopback or link-local address; refused.`)
  }
  return url
}

export async function setWebhook(deps: ManagementDeps, keyId: string, action: { url?: string; rotateSecret?: boolean; clear?: boolean }) {
  const key = requireKey(deps, keyId)
  if (action.clear) {
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ webhookUrl: null, webhookSecretCiphertext: null }])
    return { url: null, signing_secret: null }
  }
  if (action.url !== undefined) {
    const url = await assertWebhookTarget(action.url, deps.config.webhookAllowPrivate)
    const secret = generateSecret('whsec_', 32)
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [
      { webhookUrl: url.toString(), webhookSecretCiphertext: deps.secretBox.encrypt(secret) },
    ])
    return { url: url.toString(), signing_secret: secret }
  }
  if (action.rotateSecret) {
    if (!key.webhookUrl) throw badRequest('This key has no webhook URL; set one with --url first.')
    const secret = generateSecret('whsec_', 32)
    deps.repositories.inferenceKeys.update(key.workspaceId, key.id, [{ webhookSecretCiphertext: deps.secretBox.encrypt(secret) }])
    return { url: key.webhookUrl, signing_secret: secret }
  }
  throw badRequest('Give one of --url URL, --rotate-secret or --clear.')
}

export function setNotifyEmail(deps: ManagementDeps, keyId: string, on: boolean) {
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

export function addMcpServer(deps: ManagementDeps, keyId: string, rawUrl: string, name?: string) {
  const key = requireKey(deps, keyId)
  let url: URL
  try {
    url = new URL(rawUrl)
  } catch {
    throw badRequest(`Invalid MCP server URL: '${rawUrl.slice(0, 200)}'.`)
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw badRequest('MCP server URL must use http or https.')
  deps.repositories.inferenceKeys.addMcpServer({
    id: randomUUID(),
    keyId: key.id,
    name: name ?? null,
    url: url.toString(),
    createdAt: deps.now().toISOString(),
  })
  return presentMcpServers(deps, key.id)
}

export function listMcpServers(deps: ManagementDeps, keyId: string) {
  return presentMcpServers(deps, requireKey(deps, keyId).id)
}

export function removeMcpServer(deps: ManagementDeps, keyId: string, serverId: string) {
  const key = requireKey(deps, keyId)
  if (!deps.repositories.inferenceKeys.removeMcpServer(key.id, serverId)) throw notFound(`MCP server ${serverId} is not attached to this key.`)
  return presentMcpServers(deps, key.id)
}
