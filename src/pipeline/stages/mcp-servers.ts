/**
 * The MCP servers attached to keys, seen from the inference side (CONTRACT §7): one official-SDK
 * client per server over streamable HTTP, its tool list cached up to five minutes and refreshed
 * behind the requests that use it, and tool calls bounded in time. A server that is down, slow or
 * answers errors never throws out of here: its tools are not offered, or a call's result is an
 * error text for the model.
 *
 * Every connection goes to the address the server's URL was checked to resolve to
 * (net/outbound-target.ts, as for webhooks): a name that resolves to a private address is
 * refused at connection time as at save time.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { Logger } from '../../observability/logger'
import type { McpServerEntry } from '../read-model/entries'
import { fetchOutboundTarget, OutboundTargetRefused, resolveOutboundTarget } from '../../net/outbound-target'
import { timeLimit } from './time-limit'

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
/** JSON-RPC error code of a request the SDK gave up waiting for. */
const requestTimeoutCode = -32001
/** A tool result handed to the model is cut to this many characters. */
const maxResultChars = 100_000

class ServerState {
  tools: McpTool[] | undefined
  listedAt = 0
  failedAt = 0
  usedAt = Date.now()
  listing: Promise<McpTool[] | undefined> | undefined
  client: Promise<Client> | undefined
  constructor(readonly url: string) {}
}

/** A server's state is let go (its client closed) when no request used it for this long: a detached server's, say. */
const idleStateMs = 10 * 60_000

function errorText(error: unknown): string {
  // A refused address says which address: that stays in the operator's log, not in the model's input.
  if (error instanceof OutboundTargetRefused) return "the server's address is not allowed"
  const message = error instanceof Error ? error.message : String(error)
  return message.replace(/\s+/g, ' ').slice(0, 500)
}

/** The numeric `code` of an SDK error: negative for a JSON-RPC error, an HTTP status for a transport one. */
function errorCode(error: unknown): number | undefined {
  const code = error instanceof Error && 'code' in error ? (error as { code: unknown }).code : undefined
  return typeof code === 'number' ? code : undefined
}

export class McpServers {
  private readonly states = new Map<string, ServerState>()
  private sweptAt = Date.now()

  constructor(private readonly options: { allowPrivate: boolean; logger: Logger; version: string }) {}

  private state(server: McpServerEntry): ServerState {
    const now = Date.now()
    if (now - this.sweptAt > 60_000) this.sweep(now)
    let state = this.states.get(server.id)
    // A stale entry must never talk to an old address.
    if (!state || state.url !== server.url) {
      if (state) this.drop(state)
      state = new ServerState(server.url)
      this.states.set(server.id, state)
    }
    state.usedAt = now
    return state
  }

  /** Lets go of servers no request used for ten minutes (detached servers, deleted keys). */
  private sweep(now: number) {
    this.sweptAt = now
    for (const [id, state] of this.states) {
      if (now - state.usedAt < idleStateMs || state.listing) continue
      this.drop(state)
      this.states.delete(id)
    }
  }

  private connect(state: ServerState): Promise<Client> {
    if (state.client) return state.client
    const allowPrivate = this.options.allowPrivate
    const connecting = loadSdk().then(async ([{ Client }, { StreamableHTTPClientTransport }]) => {
      const transport = new StreamableHTTPClientTransport(new URL(state.url), {
        // Each HTTP request goes to the checked address, never to a fresh DNS answer.
        fetch: async (input, init) => fetchOutboundTarget(await resolveOutboundTarget(String(input instanceof Request ? input.url : input), allowPrivate, 'MCP server'), init as BunFetchRequestInit),
      })
      const client = new Client({ name: 'router', version: this.options.version })
      const limit = timeLimit(firstListingMs)
      try {
        await client.connect(transport, { signal: limit.signal, timeout: firstListingMs })
      } catch (error) {
        client.close().catch(() => {})
        throw error
      } finally {
        limit.release()
      }
      return client
    })
    state.client = connecting
    connecting.catch(() => {
      if (state.client === connecting) state.client = undefined
    })
    return connecting
  }

  /** Drops a server's client (closing its connections): the next use connects afresh. */
  private drop(state: ServerState) {
    const client = state.client
    state.client = undefined
    client?.then((value) => value.close()).catch(() => {})
  }

  /** The server is down: its tools are not offered until a listing behind the requests finds it back. */
  private down(server: McpServerEntry, state: ServerState, event: string, error: unknown) {
    this.drop(state)
    state.tools = undefined
    state.failedAt = Date.now()
    this.options.logger.warn(event, { server_id: server.id, error: error instanceof Error ? error.message.slice(0, 500) : String(error).slice(0, 500) })
  }

  private list(server: McpServerEntry, state: ServerState): Promise<McpTool[] | undefined> {
    if (state.listing) return state.listing
    const listing = (async () => {
      const limit = timeLimit(firstListingMs)
      try {
        const client = await this.connect(state)
        const tools: McpTool[] = []
        let cursor: string | undefined
        for (let page = 0; page < maxListPages; page++) {
          const answer = await client.listTools(cursor ? { cursor } : undefined, { signal: limit.signal, timeout: firstListingMs })
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
        this.down(server, state, 'mcp_list_failed', error)
        return undefined
      } finally {
        limit.release()
        state.listing = undefined
      }
    })()
    state.listing = listing
    return listing
  }

  /**
   * The server's tools for a request: a fresh list at once; a list older than five minutes at once
   * while it is refreshed behind; never listed: listed now, within `waitMs` (3 s at most). Undefined
   * while the server is down (a listing or a call could not reach it: tried again behind the
   * requests after 30 s).
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

  /**
   * Calls one tool; never throws. `timeoutMs` is already cut to the request's time left; `hangUp`
   * fires when the client goes away. A server that lost its session (HTTP 404) is reconnected and
   * the call sent once more: it never reached the tool.
   */
  async call(server: McpServerEntry, tool: string, args: Record<string, unknown>, timeoutMs: number, hangUp: AbortSignal): Promise<ToolOutcome> {
    const started = performance.now()
    const state = this.state(server)
    const done = (text: string, ok: boolean): ToolOutcome => ({ text: text.length > maxResultChars ? text.slice(0, maxResultChars) : text, ok, ms: Math.round((performance.now() - started) * 1000) / 1000 })
    if (timeoutMs <= 0) return done('Error: the request had no time left to run this tool.', false)
    const limit = timeLimit(timeoutMs, hangUp)
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const client = await this.connect(state)
          // The SDK's own timer is set past ours: ours decides, and is the one released.
          const result = await client.callTool({ name: tool, arguments: args }, undefined, { signal: limit.signal, timeout: timeoutMs + 1000 })
          const text = resultText(result)
          return result.isError === true ? done(`Error: ${text || 'the tool reported an error.'}`, false) : done(text, true)
        } catch (error) {
          const code = errorCode(error)
          if (limit.timedOut() || code === requestTimeoutCode) return done(`Error: the tool did not answer within ${timeoutMs} ms.`, false)
          if (hangUp.aborted) return done('Error: the request was cancelled.', false)
          // A JSON-RPC error (negative code) is the tool's answer.
          if (code !== undefined && code < 0) return done(`Error: ${errorText(error)}`, false)
          if (code === 404 && attempt === 0) {
            this.drop(state)
            continue
          }
          // The server or the way to it.
          this.down(server, state, 'mcp_call_failed', error)
          return done(`Error: the MCP server could not be reached (${errorText(error)}).`, false)
        }
      }
    } finally {
      limit.release()
    }
  }

  /** Closes every client (shutdown). */
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
