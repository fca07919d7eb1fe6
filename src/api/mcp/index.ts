/**
 * The management MCP endpoint at /mcp (SPEC "{root_url}/mcp"): JSON-RPC 2.0 over streamable HTTP,
 * POST only, JSON responses. The spec fixes a narrow, POST-only, JSON-only profile (405 on GET,
 * 401/-32001 before anything else, 400 for an unsupported MCP-Protocol-Version or invalid JSON-RPC),
 * so this is a small dispatcher rather than the SDK's server transport, whose Accept negotiation and
 * SSE defaults answer differently.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../deps'
import { ManagementError, messages } from '../../management/errors'
import { authenticateManagementKey } from '../../management/workspaces'
import { bearerToken } from '../../http/bearer-token'
import type { Actor } from '../../management/context'
import { listTools, toolOperation } from './tools'
import { perform } from '../../management/perform'
import { managementCaller } from '../admin'
import { readBodyWithin } from '../../http/read-body'
import { ReplicaWriteError } from '../../cluster/writer'

/**
 * The server's protocol version (SPEC "Versioning" 3): in the MCP-Protocol-Version header of every
 * response and in the `initialize` result, whatever the client proposes. The MCP lifecycle lets a
 * server answer `initialize` with another version it supports; clients then use this one (the
 * official SDK client does), so the header and the negotiated version always agree.
 */
export const mcpProtocolVersion = '2025-03-26'
/** Management requests are small JSON-RPC documents. */
const mcpBodyLimit = 1_000_000

/**
 * Client versions accepted in the MCP-Protocol-Version request header: the revisions the official
 * MCP TypeScript SDK lists as supported (its SUPPORTED_PROTOCOL_VERSIONS; a test keeps the two
 * equal). What this endpoint serves (ping, tools/list, tools/call with text results, JSON over POST)
 * reads the same in each, so a client already speaking one of them is served. Any other value is
 * 400: the streamable-HTTP transport says a server MUST answer an invalid or unsupported version so.
 * An absent header is accepted (the transport then assumes 2025-03-26).
 */
export const acceptedProtocolVersions: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07']

/** RFC 6750 §3: the challenge of a 401; an error code only when a bearer token was sent. */
const challengeWithoutToken = 'Bearer realm="mcp"'
const challengeInvalidToken = 'Bearer realm="mcp", error="invalid_token", error_description="The management key is invalid or revoked."'

const serverInfo = { name: 'router-management', version: '1.0.0' }

type JsonRpcId = string | number | null

interface JsonRpcRequest {
  jsonrpc: '2.0'
  id?: string | number
  method: string
  params?: unknown
}

const jsonHeaders = { 'content-type': 'application/json', 'mcp-protocol-version': mcpProtocolVersion }

function reply(status: number, body: unknown): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), { status, headers: body === undefined ? { 'mcp-protocol-version': mcpProtocolVersion } : jsonHeaders })
}

const rpcError = (id: JsonRpcId, code: number, message: string) => ({ jsonrpc: '2.0' as const, id, error: { code, message } })

function isRequest(value: unknown): value is JsonRpcRequest {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const candidate = value as Record<string, unknown>
  if (candidate.jsonrpc !== '2.0' || typeof candidate.method !== 'string') return false
  if ('id' in candidate && typeof candidate.id !== 'string' && (typeof candidate.id !== 'number' || !Number.isFinite(candidate.id))) return false
  if ('params' in candidate && (typeof candidate.params !== 'object' || candidate.params === null)) return false
  return true
}

async function callTool(deps: AppDeps, actor: Actor, request: JsonRpcRequest, httpRequest: Request) {
  const id = request.id ?? null
  const params = (request.params ?? {}) as Record<string, unknown>
  const name = params.name
  if (typeof name !== 'string') return rpcError(id, -32602, 'Invalid params: tools/call needs a tool name.')
  const operation = toolOperation(name)
  if (!operation?.mcp) return rpcError(id, -32602, `Unknown tool: ${name.slice(0, 100)}`)
  const input = params.arguments ?? {}
  const failure = (text: string) => ({ jsonrpc: '2.0' as const, id, result: { content: [{ type: 'text', text }], isError: true } })
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return failure('Invalid arguments: expected an object.')
  if (operation.access === 'write' && actor.readOnly) return failure(messages.readOnly)
  try {
    // Usage tools answer from the read thread: awaited, so their errors land here too.
    const result = await perform(deps, managementCaller(deps, actor, 'mcp', httpRequest), operation, operation.mcp.from(input as Record<string, unknown>))
    return { jsonrpc: '2.0' as const, id, result: { content: [{ type: 'text', text: JSON.stringify(result) }] } }
  } catch (error) {
    if (error instanceof ManagementError) return failure(error.message)
    if (error instanceof ReplicaWriteError) return failure(error.message)
    // A read-only database, or LiteFS refusing a write on a node demoted a moment ago.
    const primary = deps.writer.refusedTo(error)
    if (primary !== undefined) return failure(new ReplicaWriteError(primary).message)
    deps.logger.error('mcp_tool_failed', { tool: name, error: error instanceof Error ? error.message : String(error) })
    return failure('Internal error while running the tool.')
  }
}

/** A `tools/call` of a tool that writes. */
function writesOnCall(message: JsonRpcRequest): boolean {
  if (message.method !== 'tools/call') return false
  const name = (message.params as { name?: unknown } | undefined)?.name
  return typeof name === 'string' && toolOperation(name)?.access === 'write'
}

function dispatch(deps: AppDeps, actor: Actor, request: JsonRpcRequest, httpRequest: Request) {
  const id = request.id ?? null
  switch (request.method) {
    case 'initialize':
      return {
        jsonrpc: '2.0' as const,
        id,
        result: {
          protocolVersion: mcpProtocolVersion,
          capabilities: { tools: { listChanged: false } },
          serverInfo,
          instructions: 'Manage provider keys, inference keys, routing rules, usage and the account of this workspace.',
        },
      }
    case 'ping':
      return { jsonrpc: '2.0' as const, id, result: {} }
    case 'tools/list':
      return { jsonrpc: '2.0' as const, id, result: { tools: listTools() } }
    case 'tools/call':
      return callTool(deps, actor, request, httpRequest)
    default:
      return rpcError(id, -32601, `Method not found: ${request.method.slice(0, 100)}`)
  }
}

export async function handleMcp(deps: AppDeps, request: Request): Promise<Response> {
  if (request.method !== 'POST') {
    const response = reply(405, rpcError(null, -32000, 'Method not allowed: this endpoint accepts POST only.'))
    response.headers.set('allow', 'POST')
    return response
  }
  const token = bearerToken(request.headers.get('authorization'))
  const actor = authenticateManagementKey(deps, token)
  if (!actor) {
    const response = reply(401, rpcError(null, -32001, messages.unauthorized))
    response.headers.set('www-authenticate', token === undefined ? challengeWithoutToken : challengeInvalidToken)
    return response
  }
  const clientVersion = request.headers.get('mcp-protocol-version')
  if (clientVersion !== null && !acceptedProtocolVersions.includes(clientVersion)) {
    return reply(
      400,
      rpcError(null, -32000, `Bad Request: Unsupported protocol version: ${clientVersion.slice(0, 100)} (supported versions: ${acceptedProtocolVersions.join(', ')})`),
    )
  }

  // Counted as it arrives: a chunked body is cut off at the limit, not read whole first.
  const bytes = await readBodyWithin(request, mcpBodyLimit)
  if (bytes === undefined) return reply(400, rpcError(null, -32600, 'Invalid Request: body too large.'))
  const text = new TextDecoder().decode(bytes)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return reply(400, rpcError(null, -32700, 'Parse error: the body is not valid JSON.'))
  }
  const batch = Array.isArray(parsed)
  const messagesIn = batch ? (parsed as unknown[]) : [parsed]
  if (messagesIn.length === 0 || !messagesIn.every(isRequest)) {
    const first = messagesIn.find((message) => !isRequest(message)) as Record<string, unknown> | undefined
    const id = first && (typeof first.id === 'string' || typeof first.id === 'number') ? first.id : null
    return reply(400, rpcError(id, -32600, 'Invalid Request: expected a JSON-RPC 2.0 request {jsonrpc: "2.0", id, method, params?}.'))
  }
  // A LiteFS replica replays a POST that calls a write tool on the primary, whole (CONTRACT §10).
  if (deps.writer.replica && (messagesIn as JsonRpcRequest[]).some((message) => writesOnCall(message))) return deps.writer.replay()!
  // Notifications (no id) get no response object; a POST of only notifications answers 202.
  const responses = await Promise.all((messagesIn as JsonRpcRequest[]).filter((message) => message.id !== undefined).map((message) => dispatch(deps, actor, message, request)))
  if (responses.length === 0) return reply(202, undefined)
  return reply(200, batch ? responses : responses[0])
}

export function mcpRoutes(deps: AppDeps) {
  return new Elysia({ name: 'mcp' }).all('/mcp', ({ request }) => handleMcp(deps, request), { parse: 'none', detail: { hide: true } })
}
