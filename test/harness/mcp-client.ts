/** The official MCP client connected to a test server's /mcp with a management key, for a test's calls. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { TestServer } from './server'

/** What a tool call answers: its text content, and whether it is an error. */
export type ToolResult = { isError?: boolean; content: { text: string }[] }

/** Runs `run` with a client connected as `key` (the server's management key unless given), closed afterwards. */
export async function withMcp<T>(server: TestServer, run: (client: Client) => Promise<T>, key = server.managementKey): Promise<T> {
  const client = new Client({ name: 'router-tests', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.rootUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }))
  try {
    return await run(client)
  } finally {
    await client.close()
  }
}
