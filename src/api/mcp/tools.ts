/**
 * The MCP tools: the operations of the management table (management/operations.ts) that have a
 * tool, each with its JSON input schema and the MCP tool annotations the table implies. A call runs
 * through `perform`, as a REST request does: the same rule, the same read-only refusal, the same
 * audit event.
 */
import { operationList, toolOperation } from '../../management/operations'
import type { Operation } from '../../management/operations/operation'

export { toolOperation }

/** The tools/list view: plain JSON schemas (TypeBox symbols dropped) and the annotations. */
export function listTools() {
  return operationList
    .filter((operation): operation is Operation & { mcp: NonNullable<Operation['mcp']> } => operation.mcp !== undefined)
    .map((operation) => ({
      name: operation.mcp.tool,
      description: operation.mcp.description,
      inputSchema: { type: 'object', ...JSON.parse(JSON.stringify(operation.mcp.input)) },
      annotations: {
        readOnlyHint: operation.access === 'read',
        destructiveHint: operation.access === 'write' && operation.destructive === true,
        idempotentHint: operation.access === 'read' || operation.idempotent === true,
        openWorldHint: false,
      },
    }))
}
