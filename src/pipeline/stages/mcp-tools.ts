/**
 * The MCP tools stage (SPEC "MCP tools", CONTRACT §7): the tools of the MCP servers attached to the
 * key are offered to the model beside the client's own, under names that cannot collide with them
 * (`mcp__<server>__<tool>`, made unique), and the calls the model makes to them are run here. A
 * server that is down offers nothing; a call that fails is an error text for the model.
 */
import type { McpServerEntry } from '../read-model/entries'
import { clientToolNames } from '../../dialects/tool-rounds'
import type { OfferedTool, Stage, StageRequest, StageRun, ToolCallRequest } from './stage'

/** Function names the upstream APIs accept: letters, digits, `_` and `-`, at most 64. */
const maxNameLength = 64
const unsafe = /[^A-Za-z0-9_-]/g

function offeredName(server: McpServerEntry, position: number, tool: string, used: Set<string>): string {
  const label = (server.name || `s${position + 1}`).replace(unsafe, '_').slice(0, 20)
  const base = `mcp__${label}__${tool.replace(unsafe, '_')}`.slice(0, maxNameLength)
  let name = base
  for (let counter = 2; used.has(name); counter++) name = `${base.slice(0, maxNameLength - String(counter).length - 1)}_${counter}`
  used.add(name)
  return name
}

interface CallRecord {
  name: string
  server: string
  ms: number
  ok: boolean
}

export const mcpToolsStage: Stage = {
  name: 'mcp',
  appliesTo: (key) => key.mcpServers.length > 0,
  async open({ context, deps, parsed, dialect, deadlineAt, answered }: StageRequest): Promise<StageRun | undefined> {
    // An answered request (the response cache's) has no model round to offer tools to.
    if (!dialect.enriched || answered) return undefined
    const servers = context.key.mcpServers
    const started = performance.now()
    const lists = await Promise.all(servers.map((server) => deps.mcpServers.tools(server, deadlineAt - performance.now())))
    // Waiting on tool servers is waiting on the outside, like an upstream: not the router's overhead.
    context.upstreamWaitMs += performance.now() - started
    const used = new Set(clientToolNames(parsed.upstreamBody))
    const tools: OfferedTool[] = []
    const routes = new Map<string, { server: McpServerEntry; tool: string }>()
    servers.forEach((server, position) => {
      for (const tool of lists[position] ?? []) {
        const name = offeredName(server, position, tool.name, used)
        routes.set(name, { server, tool: tool.name })
        tools.push({ name, description: tool.description, parameters: tool.inputSchema })
      }
    })
    if (tools.length === 0) return undefined
    const calls: CallRecord[] = []
    return {
      name: 'mcp',
      tools,
      async runTool(call: ToolCallRequest, callDeadlineAt: number, signal: AbortSignal): Promise<string> {
        const route = routes.get(call.name)!
        let args: unknown = {}
        if (call.arguments.trim() !== '') {
          try {
            args = JSON.parse(call.arguments)
          } catch {
            args = undefined
          }
        }
        if (typeof args !== 'object' || args === null || Array.isArray(args)) {
          calls.push({ name: route.tool, server: route.server.id, ms: 0, ok: false })
          return 'Error: the arguments are not a JSON object.'
        }
        const timeoutMs = Math.floor(Math.min(deps.config.mcpToolTimeoutMs, callDeadlineAt - performance.now()))
        const run = () => deps.mcpServers.call(route.server, route.tool, args as Record<string, unknown>, timeoutMs, signal)
        // Traced: an INTERNAL span per tool call (CONTRACT §13); the arguments and the result stay out of it.
        const parent = context.span
        const outcome = deps.tracing && parent
          ? await deps.tracing.internal(parent, `execute_tool ${route.tool}`, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': route.tool, 'router.mcp_server_id': route.server.id }, run, (result) => (result.ok ? undefined : 'tool_error'))
          : await run()
        calls.push({ name: route.tool, server: route.server.id, ms: outcome.ms, ok: outcome.ok })
        return outcome.text
      },
      logRecord: (rounds: number) => ({ rounds, calls }),
    }
  },
}
