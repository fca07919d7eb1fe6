/**
 * One test server with a mock gateway per role, each role's gateway kind picked by its capabilities
 * from `GET /api/v1/gateways` (so the tests follow the catalog, not a list of names), a provider key
 * per role, and the mocks reset before every test. For the files that drive the router with real
 * clients of every shape (sdk-dialects, client-libraries, agent-clients).
 */
import { afterAll, beforeAll, beforeEach, expect } from 'bun:test'
import { startMockGateway, type MockGateway } from './mock-gateway'
import { startTestServer, type TestServer } from './server'

export interface GatewayEntry {
  id: string
  routable: boolean
  auth_header: string
  config_fields?: { name: string; required: boolean }[]
  capabilities: { chat: boolean; responses: string; chain: boolean; retrieve: boolean; [name: string]: unknown }
}

export interface GatewayRoles<R extends string> {
  gatewayOf: Record<R, string>
  mocks: Record<R, MockGateway>
  providers: Record<R, string>
  /** The whole catalog as listed. */
  list: GatewayEntry[]
  server: TestServer
}

/** The variable that points a gateway kind at a mock (CONTRACT §6). */
export const overrideName = (gateway: string) => `RT_GATEWAY_URL_${gateway.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`

/** Registers the hooks; the returned object is filled in by the first `beforeAll`. `pick` gets the chat kinds a mock can stand in for (bearer auth, no required settings). */
export function gatewayRoles<R extends string>(roles: readonly R[], pick: (usable: GatewayEntry[]) => Partial<Record<R, string | undefined>>): GatewayRoles<R> {
  const env = { gatewayOf: {}, mocks: {}, providers: {}, list: [] } as unknown as GatewayRoles<R>
  beforeAll(async () => {
    await using discovery = await startTestServer()
    const listed = await discovery.call('GET', '/api/v1/gateways')
    expect(listed.status).toBe(200)
    env.list = listed.body.data as GatewayEntry[]
    const usable = env.list.filter((gateway) => gateway.routable && gateway.capabilities.chat && gateway.auth_header === 'authorization' && !gateway.config_fields?.some((field) => field.required))
    const picked = pick(usable)
    for (const role of roles) {
      expect([role, picked[role]]).toEqual([role, expect.any(String)])
      env.gatewayOf[role] = picked[role]!
    }
    for (const role of roles) env.mocks[role] = await startMockGateway()
    env.server = await startTestServer(Object.fromEntries(roles.map((role) => [overrideName(env.gatewayOf[role]), env.mocks[role].url])))
    for (const role of roles) {
      const created = await env.server.call('POST', '/api/v1/providers', { gateway: env.gatewayOf[role], key: `sk-${role}-upstream` })
      expect(created.status).toBe(201)
      env.providers[role] = created.body.data.id
    }
  })
  afterAll(async () => {
    await env.server?.[Symbol.asyncDispose]()
    for (const role of roles) await env.mocks[role]?.close()
  })
  beforeEach(() => {
    for (const role of roles) {
      env.mocks[role].handle(() => undefined)
      env.mocks[role].requests.length = 0
    }
  })
  return env
}
