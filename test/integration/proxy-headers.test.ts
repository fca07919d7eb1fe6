/**
 * A direct private-network peer cannot spoof the caller's address (issue: proxy headers). The service
 * listens on `::` with RT_TRUST_PROXY=1, as fly.toml runs it; a key allows one address. Through a
 * loopback peer (a proxy beside the service) `Fly-Client-IP` is the caller; from the machine's own
 * non-loopback IPv6 address (as a machine of fly's IPv6 private network connects) the same header is
 * ignored and the peer's address is refused by the allowlist. Skipped, saying so, on a machine with
 * no non-loopback IPv6 address.
 */
import { expect, test } from 'bun:test'
import { networkInterfaces } from 'node:os'
import { startGateways } from '../harness/gateways'
import { createInferenceKey } from '../harness/api'

const ipv6 = Object.values(networkInterfaces())
  .flat()
  .find((entry) => entry && entry.family === 'IPv6' && !entry.internal && !entry.address.startsWith('fe80'))?.address

test.skipIf(!ipv6)(`a peer on a private IPv6 network (${ipv6 ?? 'none on this machine'}) that sets Fly-Client-IP is taken at its own address`, async () => {
  await using env = await startGateways(['openai'], { HOST: '::', RT_TRUST_PROXY: '1' })
  const { server } = env
  const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: env.providers.openai }] }, allowed_ips: ['198.51.100.7'] })
  const port = new URL(server.rootUrl).port
  const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
  const headers = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', 'fly-client-ip': '198.51.100.7' }
  // Through a proxy on loopback: the header names the caller, who is allowed.
  const proxied = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers, body })
  expect(proxied.status).toBe(200)
  // Directly from the private network with the same header: the peer's own address, refused.
  const direct = await fetch(`http://[${ipv6}]:${port}/v1/chat/completions`, { method: 'POST', headers, body })
  expect(direct.status).toBe(403)
  const error = ((await direct.json()) as { error: { code: string; message: string } }).error
  expect(error.code).toBe('ip_not_allowed')
  expect(error.message).toContain(ipv6!)
  expect(error.message).not.toContain('198.51.100.7')
})
