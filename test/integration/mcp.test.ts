/**
 * The management MCP endpoint at {root_url}/mcp (SPEC "{root_url}/mcp", "Authentication" 3,
 * "Versioning" 3, STYLE convention 11): the official MCP client end to end, and raw JSON-RPC.
 */
import { describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LATEST_PROTOCOL_VERSION, McpError, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js'
import { startTestServer, type TestServer } from '../harness/server'
import { createManagementKey } from '../../src/management/workspaces'
import { acceptedProtocolVersions } from '../../src/api/mcp'
import { readCallResult } from '../harness/api'

const protocolVersion = '2025-03-26'

async function connect(server: TestServer, key: string): Promise<Client & AsyncDisposable> {
  const client = new Client({ name: 'router-tests', version: '0.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  })
  await client.connect(transport)
  return Object.assign(client, { [Symbol.asyncDispose]: () => client.close() })
}

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }

/** A successful tool result carries its JSON in the first text content. */
function toolJson<T = any>(result: unknown): T {
  const typed = result as ToolResult
  expect(typed.isError).not.toBe(true)
  expect(Array.isArray(typed.content)).toBe(true)
  const text = typed.content.find((part) => part.type === 'text')
  expect(text).toBeDefined()
  return JSON.parse(text!.text) as T
}

function expectToolError(result: unknown) {
  const typed = result as ToolResult
  expect(typed.isError).toBe(true)
  expect(Array.isArray(typed.content)).toBe(true)
  expect(typed.content.length).toBeGreaterThan(0)
  const text = typed.content.find((part) => part.type === 'text')
  expect(typeof text?.text).toBe('string')
  expect(text!.text.length).toBeGreaterThan(0)
  return text!.text
}

async function rpc(server: TestServer, body: unknown, options: { key?: string | null; raw?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...options.headers }
  const key = options.key === undefined ? server.managementKey : options.key
  if (key !== null) headers.authorization = `Bearer ${key}`
  return readCallResult(await fetch(`${server.rootUrl}/mcp`, { method: 'POST', headers, body: options.raw ?? JSON.stringify(body) }))
}

async function createInferenceKey(server: TestServer): Promise<{ id: string; key: string }> {
  const created = await server.call('POST', '/api/v1/keys', { name: 'inference' })
  expect(created.status).toBe(201)
  return created.body.data
}

describe('MCP through the official client', () => {
  test('connect, list tools, and run provider/key/routing/usage/account tools', async () => {
    await using server = await startTestServer()
    await using client = await connect(server, server.managementKey)

    const { tools } = await client.listTools()
    const names = tools.map((tool) => tool.name)
    expect(names).toContain('get_routing')
    expect(names).toContain('set_routing')
    for (const tool of tools) expect(tool.inputSchema.type).toBe('object')

    // Provider key: stored, secret never returned.
    const providerTool = names.find((name) => name === 'create_provider_key')
    expect(providerTool).toBeDefined()
    const provider = toolJson(await client.callTool({ name: 'create_provider_key', arguments: { gateway: 'openai', key: 'sk-test-secret-9876', label: 'primary' } }))
    expect(provider.id).toMatch(/^[0-9a-f-]{36}$/)
    expect(provider.gateway).toBe('openai')
    expect(provider.key_last4).toBe('9876')
    expect(JSON.stringify(provider)).not.toContain('sk-test-secret-9876')
    const second = toolJson(await client.callTool({ name: 'create_provider_key', arguments: { gateway: 'groq', key: 'gsk-second-1111' } }))

    // Inference key, routed at the provider key.
    const key = toolJson(
      await client.callTool({
        name: 'create_api_key',
        arguments: { name: 'from mcp', routing: { strategy: 'priority', targets: [{ provider_key_id: provider.id }] } },
      }),
    )
    expect(key.key).toMatch(/^rt_live_/)
    expect(key.routing.targets).toEqual([expect.objectContaining({ provider_key_id: provider.id, gateway: 'openai' })])

    // The REST API sees what MCP wrote.
    const rest = await server.call('GET', `/api/v1/keys/${key.id}`)
    expect(rest.status).toBe(200)
    expect(rest.body.data.routing.targets[0].provider_key_id).toBe(provider.id)

    // set_routing replaces the whole rule; get_routing reads it back with gateways filled in.
    const stored = toolJson(
      await client.callTool({
        name: 'set_routing',
        arguments: {
          key_id: key.id,
          strategy: 'split',
          targets: [
            { provider_key_id: second.id, weight: 3 },
            { provider_key_id: provider.id, weight: 1 },
          ],
        },
      }),
    )
    expect(stored.strategy).toBe('split')
    expect(stored.targets.map((target: any) => [target.provider_key_id, target.gateway, target.weight])).toEqual([
      [second.id, 'groq', 3],
      [provider.id, 'openai', 1],
    ])
    const read = toolJson(await client.callTool({ name: 'get_routing', arguments: { key_id: key.id } }))
    expect(read).toEqual(stored)
    const restRouting = await server.call('GET', `/api/v1/keys/${key.id}/routing`)
    expect(restRouting.body.data).toEqual(stored)

    // Usage summary: {requests, errors, errorRate, avgLatency, avgOverhead, models}, all numbers.
    const summaryTool = names.find((name) => name.includes('usage') && name.includes('summary'))
    expect(summaryTool).toBeDefined()
    const summary = toolJson(await client.callTool({ name: summaryTool!, arguments: { range: '24h' } }))
    for (const field of ['requests', 'errors', 'errorRate', 'avgLatency', 'avgOverhead', 'models']) expect(typeof summary[field]).toBe('number')
    expect(summary.requests).toBe(0)

    // Account snapshot.
    const accountTool = names.find((name) => name.includes('account'))
    expect(accountTool).toBeDefined()
    const account = toolJson(await client.callTool({ name: accountTool!, arguments: {} }))
    expect(account.workspace.id).toBe(server.workspaceId)
    expect(account.workspace.name).toBe('default')
    expect(account.inference_keys).toEqual({ total: 1, live: 1, revoked: 0 })
    expect(account.provider_keys.map((row: any) => row.id).sort()).toEqual([provider.id, second.id].sort())
    expect(account.management_keys.total).toBeGreaterThanOrEqual(1)
    expect(typeof account.members.total).toBe('number')
  })

  test('the client negotiates 2025-03-26 from its latest version and sends it on every later request', async () => {
    await using server = await startTestServer()
    const sent: { method: string; version: string | null; status: number }[] = []
    const client = new Client({ name: 'router-tests', version: '0.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${server.managementKey}` } },
      // Records what the client sends, to see the negotiated version on the wire.
      fetch: async (url, init) => {
        const response = await fetch(url, init)
        const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }) : {}
        sent.push({ method: body.method ?? init?.method ?? 'GET', version: new Headers(init?.headers).get('mcp-protocol-version'), status: response.status })
        return response
      },
    })
    await client.connect(transport)
    try {
      expect(transport.protocolVersion).toBe(protocolVersion)
      expect(client.getServerVersion()?.name).toBe('router-management')
      expect((await client.listTools()).tools.length).toBeGreaterThan(0)
      await client.ping()
    } finally {
      await client.close()
    }
    // initialize goes without the header; everything after it carries the negotiated version.
    expect(sent[0]).toEqual({ method: 'initialize', version: null, status: 200 })
    const later = sent.slice(1).filter((entry) => entry.method !== 'GET')
    expect(later.map((entry) => entry.method)).toEqual(expect.arrayContaining(['notifications/initialized', 'tools/list', 'ping']))
    for (const entry of later) expect(entry).toEqual({ method: entry.method, version: protocolVersion, status: entry.method.startsWith('notifications/') ? 202 : 200 })
  })

  test('a wrong key makes the client fail to connect', async () => {
    await using server = await startTestServer()
    const client = new Client({ name: 'router-tests', version: '0.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), {
      requestInit: { headers: { Authorization: 'Bearer rt_mgmt_notARealKeyAtAll000000000000000000' } },
    })
    let caught: unknown
    try {
      await client.connect(transport)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(Error)
    await client.close()
  })

  test('tool failures come back as isError results, not JSON-RPC errors', async () => {
    await using server = await startTestServer()
    await using client = await connect(server, server.managementKey)

    expectToolError(await client.callTool({ name: 'create_provider_key', arguments: { gateway: 'no-such-gateway', key: 'sk-x' } }))
    expect(expectToolError(await client.callTool({ name: 'get_api_key', arguments: { id: crypto.randomUUID() } }))).toContain('API key not found.')

    const key = await createInferenceKey(server)
    // An empty targets list is refused (SPEC "PUT routing rules"), and nothing is saved.
    expectToolError(await client.callTool({ name: 'set_routing', arguments: { key_id: key.id, strategy: 'priority', targets: [] } }))
    // A gateway slug in place of a provider key UUID.
    expect(
      expectToolError(await client.callTool({ name: 'set_routing', arguments: { key_id: key.id, targets: [{ provider_key_id: 'openai' }] } })),
    ).toContain('provider_key_id must be the UUID returned by GET /api/v1/providers.')
    const routing = toolJson(await client.callTool({ name: 'get_routing', arguments: { key_id: key.id } }))
    expect(routing.targets).toEqual([])
  })

  test('unknown tool is JSON-RPC error -32602 through the client', async () => {
    await using server = await startTestServer()
    await using client = await connect(server, server.managementKey)
    let caught: unknown
    try {
      await client.callTool({ name: 'no_such_tool', arguments: {} })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(McpError)
    expect((caught as McpError).code).toBe(-32602)
  })

  test('a read-only management key can read but every write tool fails and writes nothing', async () => {
    await using server = await startTestServer()
    const provider = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-ro-test-0000' })
    expect(provider.status).toBe(201)
    const key = await createInferenceKey(server)
    const before = (await server.call('GET', '/api/v1/account')).body.data
    const routingBefore = (await server.call('GET', `/api/v1/keys/${key.id}/routing`)).body.data

    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    expect(readOnly.read_only).toBe(true)
    await using client = await connect(server, readOnly.key)

    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toContain('set_routing')

    // Reads work.
    const routing = toolJson(await client.callTool({ name: 'get_routing', arguments: { key_id: key.id } }))
    expect(routing).toEqual(routingBefore)
    const accountTool = tools.map((tool) => tool.name).find((name) => name.includes('account'))!
    expect(toolJson(await client.callTool({ name: accountTool, arguments: {} })).workspace.id).toBe(server.workspaceId)
    const summaryTool = tools.map((tool) => tool.name).find((name) => name.includes('usage') && name.includes('summary'))!
    expect(typeof toolJson(await client.callTool({ name: summaryTool, arguments: {} })).requests).toBe('number')

    // Writes fail as tool errors.
    expectToolError(await client.callTool({ name: 'create_provider_key', arguments: { gateway: 'groq', key: 'gsk-should-not-store' } }))
    expectToolError(await client.callTool({ name: 'create_api_key', arguments: { name: 'should not exist' } }))
    expectToolError(
      await client.callTool({ name: 'set_routing', arguments: { key_id: key.id, strategy: 'priority', targets: [{ provider_key_id: provider.body.data.id }] } }),
    )

    // ...and nothing was written.
    const after = (await server.call('GET', '/api/v1/account')).body.data
    expect(after.inference_keys).toEqual(before.inference_keys)
    expect(after.provider_keys).toEqual(before.provider_keys)
    expect((await server.call('GET', `/api/v1/keys/${key.id}/routing`)).body.data).toEqual(routingBefore)
  })
})

describe('MCP over raw HTTP', () => {
  test('GET /mcp answers 405', async () => {
    await using server = await startTestServer()
    expect((await fetch(`${server.rootUrl}/mcp`)).status).toBe(405)
    const withKey = await fetch(`${server.rootUrl}/mcp`, { headers: { authorization: `Bearer ${server.managementKey}`, accept: 'text/event-stream' } })
    expect(withKey.status).toBe(405)
  })

  test('missing key, bad key and inference key answer 401 with JSON-RPC error -32001', async () => {
    await using server = await startTestServer()
    const inference = await createInferenceKey(server)
    expect(inference.key).toMatch(/^rt_live_/)
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list' }
    for (const key of [null, 'rt_mgmt_notARealKeyAtAll000000000000000000', 'garbage', inference.key]) {
      const response = await rpc(server, body, { key })
      expect(response.status).toBe(401)
      expect(response.json?.jsonrpc).toBe('2.0')
      expect(response.json?.error?.code).toBe(-32001)
      expect(typeof response.json?.error?.message).toBe('string')
    }
  })

  test('a 401 carries a WWW-Authenticate Bearer challenge; error="invalid_token" only when a token was sent (RFC 6750 §3)', async () => {
    await using server = await startTestServer()
    const inference = await createInferenceKey(server)
    const body = { jsonrpc: '2.0', id: 1, method: 'ping' }
    const challenge = async (options: Parameters<typeof rpc>[2]) => {
      const response = await rpc(server, body, options)
      expect(response.status).toBe(401)
      return response.headers.get('www-authenticate')
    }
    // No credentials, or credentials of another scheme: the challenge without an error code.
    expect(await challenge({ key: null })).toBe('Bearer realm="mcp"')
    expect(await challenge({ key: null, headers: { authorization: 'Basic dXNlcjpwYXNz' } })).toBe('Bearer realm="mcp"')
    // A bearer token that is not a live management key.
    for (const key of ['rt_mgmt_notARealKeyAtAll000000000000000000', 'garbage', inference.key]) {
      const header = await challenge({ key })
      expect(header).toStartWith('Bearer realm="mcp", error="invalid_token"')
      expect(header).toMatch(/error_description="[^"]+"/)
    }
    // Answers that are not 401 carry no challenge.
    expect((await rpc(server, body)).headers.get('www-authenticate')).toBeNull()
  })

  test('MCP-Protocol-Version: the versions the official SDK supports and an absent header are accepted; any other value is 400', async () => {
    await using server = await startTestServer()
    // The accepted list is the SDK's, so a client of any version it speaks is served.
    expect([...acceptedProtocolVersions]).toEqual([...SUPPORTED_PROTOCOL_VERSIONS])
    expect(acceptedProtocolVersions).toContain(LATEST_PROTOCOL_VERSION)
    expect(acceptedProtocolVersions).toContain(protocolVersion)
    for (const version of SUPPORTED_PROTOCOL_VERSIONS) {
      const response = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { 'mcp-protocol-version': version } })
      expect(response.status).toBe(200)
      expect(Array.isArray(response.json.result.tools)).toBe(true)
      // The response header is the server's version (SPEC "Versioning" 3), whatever the client's.
      expect(response.headers.get('mcp-protocol-version')).toBe(protocolVersion)
    }
    expect((await rpc(server, { jsonrpc: '2.0', id: 2, method: 'ping' })).status).toBe(200)

    for (const version of ['2099-01-01', '2025-3-26', 'garbage', '2025-03-26, 2025-06-18']) {
      const response = await rpc(
        server,
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'create_api_key', arguments: { name: 'must not exist' } } },
        { headers: { 'mcp-protocol-version': version } },
      )
      expect(response.status).toBe(400)
      expect(response.headers.get('content-type')).toContain('application/json')
      expect(response.headers.get('mcp-protocol-version')).toBe(protocolVersion)
      expect(response.json.jsonrpc).toBe('2.0')
      expect(response.json.id).toBeNull()
      expect(response.json.error.code).toBe(-32000)
      expect(response.json.error.message).toContain('Unsupported protocol version')
      expect(response.json.error.message).toContain(protocolVersion)
    }
    // Nothing ran.
    expect((await server.call('GET', '/api/v1/account')).body.data.inference_keys.total).toBe(0)
    // Authentication still comes first.
    expect((await rpc(server, { jsonrpc: '2.0', id: 4, method: 'ping' }, { key: null, headers: { 'mcp-protocol-version': 'garbage' } })).status).toBe(401)
  })

  test('invalid JSON answers 400', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, undefined, { raw: '{"jsonrpc": "2.0", "id": 1, "method": ' })
    expect(response.status).toBe(400)
    expect(response.json?.error?.code).toBe(-32700)
  })

  test('a JSON value that is not a JSON-RPC request answers 400', async () => {
    await using server = await startTestServer()
    for (const body of [{ hello: 'world' }, { jsonrpc: '1.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 1 }, { jsonrpc: '2.0', id: 1, method: 42 }, 'ping']) {
      const response = await rpc(server, body)
      expect(response.status).toBe(400)
      expect(response.json?.jsonrpc).toBe('2.0')
      expect(typeof response.json?.error?.code).toBe('number')
    }
  })

  test('unknown method is JSON-RPC error -32601 on HTTP 200', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, { jsonrpc: '2.0', id: 'abc', method: 'resources/list' })
    expect(response.status).toBe(200)
    expect(response.json.jsonrpc).toBe('2.0')
    expect(response.json.id).toBe('abc')
    expect(response.json.error.code).toBe(-32601)
    expect(response.json.result).toBeUndefined()
  })

  test('unknown tool is JSON-RPC error -32602', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'definitely_not_a_tool', arguments: {} } })
    expect(response.status).toBe(200)
    expect(response.json.id).toBe(7)
    expect(response.json.error.code).toBe(-32602)
  })

  test('responses carry MCP-Protocol-Version 2025-03-26', async () => {
    await using server = await startTestServer()
    const ok = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'mcp-protocol-version': protocolVersion } })
    expect(ok.status).toBe(200)
    expect(ok.headers.get('mcp-protocol-version')).toBe(protocolVersion)
    const withoutHeader = await rpc(server, { jsonrpc: '2.0', id: 2, method: 'tools/list' })
    expect(withoutHeader.headers.get('mcp-protocol-version')).toBe(protocolVersion)
    const unauthorized = await rpc(server, { jsonrpc: '2.0', id: 3, method: 'ping' }, { key: null })
    expect(unauthorized.headers.get('mcp-protocol-version')).toBe(protocolVersion)
  })

  test('initialize answers protocol version 2025-03-26 with tools capability and server info', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    })
    expect(response.status).toBe(200)
    expect(response.json.jsonrpc).toBe('2.0')
    expect(response.json.id).toBe(1)
    expect(response.json.result.protocolVersion).toBe(protocolVersion)
    expect(response.json.result.capabilities.tools).toBeDefined()
    // A client proposing a newer version is answered with the server's (the MCP lifecycle allows it).
    const newer = await rpc(server, {
      jsonrpc: '2.0',
      id: 2,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    })
    expect(newer.json.result.protocolVersion).toBe(protocolVersion)
    expect(typeof response.json.result.serverInfo.name).toBe('string')
    expect(typeof response.json.result.serverInfo.version).toBe('string')
  })

  test('ping answers {}', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, { jsonrpc: '2.0', id: 99, method: 'ping' })
    expect(response.status).toBe(200)
    expect(response.json).toEqual({ jsonrpc: '2.0', id: 99, result: {} })
  })

  test('tools/list: every tool has an object inputSchema; get_routing and set_routing are there', async () => {
    await using server = await startTestServer()
    const response = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' })
    expect(response.status).toBe(200)
    const tools = response.json.result.tools as { name: string; inputSchema: { type: string } }[]
    expect(Array.isArray(tools)).toBe(true)
    expect(tools.length).toBeGreaterThan(0)
    expect(new Set(tools.map((tool) => tool.name)).size).toBe(tools.length)
    for (const tool of tools) {
      expect(typeof tool.name).toBe('string')
      expect(tool.inputSchema.type).toBe('object')
    }
    const names = tools.map((tool) => tool.name)
    expect(names).toContain('get_routing')
    expect(names).toContain('set_routing')
  })

  test('tools/call over raw HTTP: result content, and a write by a read-only key is an isError result', async () => {
    await using server = await startTestServer()
    const ok = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_routing', arguments: { key_id: crypto.randomUUID() } } })
    expect(ok.status).toBe(200)
    expect(ok.json.result.isError).toBe(true)
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const write = await rpc(
      server,
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_api_key', arguments: { name: 'x' } } },
      { key: readOnly.key },
    )
    expect(write.status).toBe(200)
    expect(write.json.result.isError).toBe(true)
    expect((await server.call('GET', '/api/v1/account')).body.data.inference_keys.total).toBe(0)
  })
})
