/**
 * The MCP servers attached to keys, seen from the inference side (CONTRACT §7): one official-SDK
 * client per server over streamable HTTP, its tool list cached up to five minutes and refreshed
 * behind the requests that use it, and tool calls bounded in time. A server that is down, slow or
 * answers errors never throws out of here: its tools are not offered, or a call's result is an
 * error text for the model.
 *
 * Every connection goes to the address the server's URL was checked to resolve to
 * (management/outbound-target.ts, as for webhooks): a name that resolves to a private address is
 * refused at connection time as at save time.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { Logger } from '../../observability/logger'
import type { McpServerEntry } from '../../storage/snapshot'
import { fetchOutboundTarget, resolveOutboundTarget } from '../../management/outbound-target'

/** The SDK's client, loaded on the first connection: a process whose keys have no MCP server never loads it. */
let sdk: Promise<[typeof import('@modelcontextprotocol/sdk/client/index.js'), typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js')]> | undefined
const loadSdk = () => (sdk ??= Promise.all([import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/streamableHttp.js')]))

/** A tool as its server describes it. */
export interface McpTool {
  name: string
  description: string | undefined
  inputSchema: Record<string, unknown>
}

/** One tool call's outcome: the text handed to the model, and what the log keeps. */
export interface ToolOutcome {
  text: string
  ok: boolean
  ms: number
}

/** How long a listed tool set is served before it is refreshed (CONTRACT §7: cached up to 5 minutes). */
export const toolListLifetimeMs = 5 * 60_000
/** After a failed listing, the server is left out this long before it is tried again. */
const downRetryMs = 30_000
/** A first listing (nothing cached) holds the request at most this long. */
const firstListingMs = 3_000
/** Pages of tools read from one server at most (a server that pages forever is cut off). */
const maxListPages = 10
/** A tool result handed to the model is cut to this many characters. */
const maxResultChars = 100_000

class ServerState {
  tools: McpTool[] | undefined
  listedAt = 0
  failedAt = 0
  listing: Promise<McpTool[] | undefined> | undefined
  client: Promise<Client> | undefined
  constructor(readonly url: string) {}
}

function errorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  return message.replace(/\s+/g, ' ').slice(0, 500)
}

export class McpServers {
  private readonly states = new Map<string, ServerState>()

  constructor(
    private readonly options: { allowPrivate: boolean; logger: Logger; version: string },
  ) {}

  private state(server: McpServerEntry): ServerState {
    let state = this.states.get(server.id)
    // A server whose URL changed (removed and attached again under the same id cannot happen, but
    // a stale entry must never talk to an old address).
    if (!state || state.url !== server.url) {
      state?.client?.then((client) => client.close()).catch(() => {})
      state = new ServerState(server.url)
      this.states.set(server.id, state)
    }
    return state
  }

  private connect(state: ServerState, signal: AbortSignal): Promise<Client> {
    if (state.client) return state.client
    const allowPrivate = this.options.allowPrivate
    const connecting = loadSdk().then(async ([{ Client }, { StreamableHTTPClientTransport }]) => {
      const transport = new StreamableHTTPClientTransport(new URL(state.url), {
        // Each HTTP request goes to the checked address, never to a fresh DNS answer.
        fetch: async (input, init) => fetchOutboundTarget(await resolveOutboundTarget(String(input instanceof Request ? input.url : input), allowPrivate, 'MCP server'), init as BunFetchRequestInit),
      })
      const client = new Client({ name: 'router', version: this.options.version })
      await client.connect(transport, { signal })
      return client
    })
    state.client = connecting
    connecting.catch(() => {
      if (state.client === connecting) state.client = undefined
    })
    return connecting
  }

  /** Drops a server's client after a transport failure: the next use connects afresh. */
  private drop(state: ServerState) {
    const client = state.client
    state.client = undefined
    client?.then((value) => value.close()).catch(() => {})
  }

  private list(server: McpServerEntry, state: ServerState): Promise<McpTool[] | undefined> {
    if (state.listing) return state.listing
    const listing = (async () => {
      const signal = AbortSignal.timeout(firstListingMs)
      try {
        const client = await this.connect(state, signal)
        const tools: McpTool[] = []
        let cursor: string | undefined
        for (let page = 0; page < maxListPages; page++) {
          const answer = await client.listTools(cursor ? { cursor } : undefined, { signal, timeout: firstListingMs })
          for (const tool of answer.tools) {
            tools.push({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema as Record<string, unknown> })
          }
          cursor = answer.nextCursor
          if (!cursor) break
        }
        state.tools = tools
        state.listedAt = Date.now()
        state.failedAt = 0
        return tools
      } catch (error) {
        this.drop(state)
        state.tools = undefined
        state.failedAt = Date.now()
        this.options.logger.warn('mcp_list_failed', { server_id: server.id, error: errorText(error) })
        return undefined
      } finally {
        state.listing = undefined
      }
    })()
    state.listing = listing
    return listing
  }

  /**
   * The server's tools for a request: a fresh list at once; a list older than five minutes at once
   * while it is refreshed behind; never listed: listed now, within `waitMs` (3 s at most). Undefined
   * while the server is down (a listing failed: tried again behind the requests after 30 s).
   */
  async tools(server: McpServerEntry, waitMs: number): Promise<McpTool[] | undefined> {
    const state = this.state(server)
    const now = Date.now()
    if (state.tools) {
      if (now - state.listedAt >= toolListLifetimeMs) void this.list(server, state)
      return state.tools
    }
    // A server that was down is tried again behind the requests (never on one's path), every 30 s.
    if (state.failedAt !== 0) {
      if (now - state.failedAt >= downRetryMs) void this.list(server, state)
      return undefined
    }
    if (waitMs <= 0) return undefined
    const listing = this.list(server, state)
    let timer: ReturnType<typeof setTimeout> | undefined
    const gaveUp = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, Math.min(waitMs, firstListingMs), undefined)))
    try {
      return await Promise.race([listing, gaveUp])
    } finally {
      clearTimeout(timer)
    }
  }

  /** Calls one tool; never throws. `timeoutMs` already cut to the request's time left. */
  async call(server: McpServerEntry, tool: string, args: Record<string, unknown>, timeoutMs: number, signal: AbortSignal): Promise<ToolOutcome> {
    const started = performance.now()
    const state = this.state(server)
    const done = (text: string, ok: boolean): ToolOutcome => ({ text: text.length > maxResultChars ? text.slice(0, maxResultChars) : text, ok, ms: Math.round((performance.now() - started) * 1000) / 1000 })
    if (timeoutMs <= 0) return done('Error: the request had no time left to run this tool.', false)
    const limit = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)])
    try {
      const client = await this.connect(state, limit)
      const result = await client.callTool({ name: tool, arguments: args }, undefined, { signal: limit, timeout: timeoutMs })
      const text = resultText(result)
      return result.isError === true ? done(`Error: ${text || 'the tool reported an error.'}`, false) : done(text, true)
    } catch (error) {
      if (limit.aborted && !signal.aborted) return done(`Error: the tool did not answer within ${timeoutMs} ms.`, false)
      // A JSON-RPC error is the tool's answer; anything else may be a broken connection: reconnect next time.
      if (!(error instanceof Error && 'code' in error && typeof (error as { code: unknown }).code === 'number')) this.drop(state)
      return done(`Error: ${errorText(error)}`, false)
    }
  }

  close() {
    for (const state of this.states.values()) this.drop(state)
    this.states.clear()
  }
}

/** The text of a CallToolResult: its text blocks joined by newlines; other blocks as JSON (structured content when there is no text). */
function resultText(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : []
  const parts: string[] = []
  for (const block of content) {
    if (block?.type === 'text' && typeof block.text === 'string') parts.push(block.text)
    else if (block?.type === 'resource' && typeof (block.resource as { text?: unknown } | undefined)?.text === 'string') parts.push((block.resource as { text: string }).text)
    else if (block && typeof block === 'object') parts.push(JSON.stringify(block))
  }
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent)
  if (parts.length === 0 && 'toolResult' in result) return JSON.stringify(result.toolResult)
  return parts.join('\n')
}
