/**
 * A real MCP server on 127.0.0.1 for the MCP-tools feature (CONTRACT §7): the official SDK's
 * `McpServer` behind its Web-standard streamable HTTP transport, served by `Bun.serve` at `/mcp`.
 * Stateless: every POST gets a fresh server and transport (JSON responses, no sessions, no GET
 * stream), which is what the SDK's stateless examples do and keeps each call independent.
 *
 * Tools:
 * - `add` {a, b: number} → the sum as text;
 * - `fails` → a result with `isError: true` and text `boom`;
 * - `throws` → a JSON-RPC error (code -32603, message `kaboom`). The SDK's McpServer would turn an
 *   exception in a tool into an `isError` result, so this one is answered at the HTTP layer with a
 *   real JSON-RPC error response, as a server whose handler blew up would send it;
 * - `hang` → never answers (until the caller disconnects or the server is closed; 60 s at most).
 *
 * Every tool call is recorded (name, arguments, start time) and `tools/list` requests are counted.
 * `await using mcp = await startMcpServer()` closes it at scope end.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'

export interface McpToolCall {
  name: string
  args: Record<string, unknown>
  /** performance.now() when the call reached the server. */
  startedAt: number
}

/** A tool as `tools/list` describes it. */
export interface ListedTool {
  name: string
  description?: string
  inputSchema: Record<string, unknown>
}

export interface McpTestServer extends AsyncDisposable {
  /** e.g. http://127.0.0.1:PORT/mcp */
  url: string
  /** Every tool call that reached the server, in arrival order. */
  calls: McpToolCall[]
  /** Calls of one tool (or all). */
  callCount(name?: string): number
  /** How many `tools/list` requests reached the server. */
  readonly listCount: number
  /** JSON-RPC methods of every POST, in arrival order (initialize, notifications/initialized, tools/list, tools/call…). */
  methods: string[]
  /** The tool list as an MCP client sees it (through the SDK client; counted in listCount). */
  listTools(): Promise<ListedTool[]>
  close(): Promise<void>
}

export const mcpToolNames = ['add', 'fails', 'throws', 'hang'] as const

const hangLimitMs = 60_000

export async function startMcpServer(options: { name?: string } = {}): Promise<McpTestServer> {
  const calls: McpToolCall[] = []
  const methods: string[] = []
  /** Aborted by close(): releases every hanging call. */
  const closing = new AbortController()

  const record = (name: string, args: unknown) => {
    calls.push({ name, args: (args && typeof args === 'object' ? args : {}) as Record<string, unknown>, startedAt: performance.now() })
  }

  /** A fresh McpServer for one HTTP request; `requestSignal` is that request's (aborted when its caller goes away). */
  function buildServer(requestSignal: AbortSignal): McpServer {
    const server = new McpServer({ name: options.name ?? 'router-test-tools', version: '1.0.0' })
    server.registerTool(
      'add',
      { description: 'Adds two numbers and returns the sum.', inputSchema: { a: z.number().describe('first addend'), b: z.number().describe('second addend') } },
      async ({ a, b }) => {
        record('add', { a, b })
        return { content: [{ type: 'text', text: String(a + b) }] }
      },
    )
    server.registerTool('fails', { description: 'Always reports a failure.', inputSchema: {} }, async (args) => {
      record('fails', args)
      return { isError: true, content: [{ type: 'text', text: 'boom' }] }
    })
    // Listed like any tool; its calls are answered with a JSON-RPC error before they get here (see fetch).
    server.registerTool('throws', { description: 'Always throws.', inputSchema: {} }, async () => {
      throw new Error('kaboom')
    })
    server.registerTool('hang', { description: 'Never answers.', inputSchema: {} }, async (args) => {
      record('hang', args)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, hangLimitMs)
        const release = () => {
          clearTimeout(timer)
          resolve()
        }
        if (closing.signal.aborted || requestSignal.aborted) return release()
        closing.signal.addEventListener('abort', release, { once: true })
        requestSignal.addEventListener('abort', release, { once: true })
      })
      return { content: [{ type: 'text', text: 'finally' }] }
    })
    return server
  }

  const jsonRpcError = (id: unknown, code: number, message: string, status = 200) =>
    new Response(JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code, message } }), { status, headers: { 'content-type': 'application/json' } })

  const http = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    development: false,
    async fetch(request) {
      const url = new URL(request.url)
      if (url.pathname !== '/mcp') return new Response('not found', { status: 404 })
      // Stateless: no standalone SSE stream (GET) and no session to delete (DELETE).
      if (request.method !== 'POST') return new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: ErrorCode.ConnectionClosed, message: 'Method not allowed.' } }), { status: 405, headers: { allow: 'POST', 'content-type': 'application/json' } })
      const text = await request.text()
      let parsed: any
      try {
        parsed = JSON.parse(text)
      } catch {
        return jsonRpcError(null, ErrorCode.ParseError, 'Parse error', 400)
      }
      const messages: any[] = Array.isArray(parsed) ? parsed : [parsed]
      for (const message of messages) if (typeof message?.method === 'string') methods.push(message.method)
      const single = messages.length === 1 ? messages[0] : undefined
      if (single?.method === 'tools/call' && single.params?.name === 'throws') {
        record('throws', single.params.arguments)
        return jsonRpcError(single.id, ErrorCode.InternalError, 'kaboom')
      }
      const server = buildServer(request.signal)
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
      await server.connect(transport)
      try {
        return await transport.handleRequest(request, { parsedBody: parsed })
      } finally {
        void transport.close().catch(() => {})
        void server.close().catch(() => {})
      }
    },
  })

  const url = `http://127.0.0.1:${http.port}/mcp`
  let closed: Promise<void> | undefined
  const close = () => {
    closed ??= (async () => {
      closing.abort()
      await http.stop(true)
    })()
    return closed
  }

  return {
    url,
    calls,
    methods,
    callCount: (name) => (name === undefined ? calls.length : calls.filter((call) => call.name === name).length),
    get listCount() {
      return methods.filter((method) => method === 'tools/list').length
    },
    async listTools() {
      const client = new Client({ name: 'harness', version: '0.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(url)))
      try {
        const { tools } = await client.listTools()
        return tools.map((tool) => ({ name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), inputSchema: tool.inputSchema as Record<string, unknown> }))
      } finally {
        await client.close()
      }
    },
    close,
    [Symbol.asyncDispose]: close,
  }
}

/** An MCP URL with nothing listening: a loopback port opened, then closed. */
export async function deadMcpUrl(): Promise<string> {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('') })
  const port = probe.port!
  await probe.stop(true)
  return `http://127.0.0.1:${port}/mcp`
}
