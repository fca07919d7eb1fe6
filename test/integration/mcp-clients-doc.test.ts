/**
 * docs/MCP-CLIENTS.md: every client snippet on that page connects. Each snippet is read the way its
 * client reads it (Claude Code's `claude mcp add` line and its `.mcp.json`, Claude Desktop's
 * `mcp-remote` arguments with their environment, Cursor's and VS Code's JSON), the address and the
 * placeholder key are replaced with a real router's, and the official MCP SDK client connects with
 * exactly that address and those headers, lists the tools and calls one.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startTestServer } from '../harness/server'

const page = readFileSync(join(import.meta.dir, '../../docs/MCP-CLIENTS.md'), 'utf8')
const documentedRoot = 'http://127.0.0.1:8080'
const placeholderKey = 'rt_mgmt_YOUR_KEY'

/** The fenced blocks of each `## ` section, by section title. */
function sections(markdown: string): Map<string, { language: string; text: string }[]> {
  const found = new Map<string, { language: string; text: string }[]>()
  let current: { language: string; text: string }[] | undefined
  for (const part of markdown.split(/^## /m).slice(1)) {
    const title = part.slice(0, part.indexOf('\n')).trim()
    current = []
    for (const block of part.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)) current.push({ language: block[1]!, text: block[2]! })
    found.set(title, current)
  }
  return found
}

interface Connection {
  url: string
  headers: Record<string, string>
}

/** Shell words, with double-quoted strings kept whole (what the documented command line needs). */
function shellWords(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((match) => match[1] ?? match[2]!)
}

/** `claude mcp add --transport http [--scope S] NAME URL --header "Name: value" …` */
function claudeCodeCommand(text: string): Connection {
  const words = shellWords(text.trim())
  expect(words.slice(0, 3)).toEqual(['claude', 'mcp', 'add'])
  const positional: string[] = []
  const headers: Record<string, string> = {}
  let transport: string | undefined
  for (let index = 3; index < words.length; index++) {
    const word = words[index]!
    if (word === '--transport' || word === '-t') transport = words[++index]
    else if (word === '--scope' || word === '-s') index++
    else if (word === '--header' || word === '-H') {
      // Variadic: every following word that is not an option is another header.
      while (index + 1 < words.length && !words[index + 1]!.startsWith('-')) {
        const header = words[++index]!
        const colon = header.indexOf(':')
        headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim()
      }
    } else positional.push(word)
  }
  expect(transport).toBe('http')
  expect(positional).toHaveLength(2)
  return { url: positional[1]!, headers }
}

/** One server entry of a JSON file, checked for the keys its client requires. */
function jsonServer(text: string, listKey: 'mcpServers' | 'servers', requireType: boolean): Connection {
  const entries = Object.values(JSON.parse(text)[listKey] as Record<string, { type?: string; url: string; headers: Record<string, string> }>)
  expect(entries).toHaveLength(1)
  const server = entries[0]!
  if (requireType) expect(server.type).toBe('http')
  else expect(server.type).toBeUndefined()
  return { url: server.url, headers: server.headers }
}

/** Claude Desktop's `npx -y mcp-remote URL --header Name:${VAR}` with VAR from the entry's env, as mcp-remote expands and splits it. */
function claudeDesktop(text: string): Connection {
  const server = Object.values(JSON.parse(text).mcpServers as Record<string, { command: string; args: string[]; env: Record<string, string> }>)[0]!
  expect(server.command).toBe('npx')
  const at = server.args.indexOf('mcp-remote')
  expect(at).toBeGreaterThan(-1)
  const url = server.args[at + 1]!
  const headers: Record<string, string> = {}
  for (let index = at + 2; index < server.args.length; index++) {
    if (server.args[index] !== '--header') continue
    const expanded = server.args[++index]!.replace(/\$\{([A-Za-z0-9_]+)\}/g, (_whole, name: string) => server.env[name] ?? '')
    const match = /^([A-Za-z0-9_-]+):\s*(.*)$/.exec(expanded)
    expect(match).not.toBeNull()
    headers[match![1]!] = match![2]!
  }
  return { url, headers }
}

describe('docs/MCP-CLIENTS.md', () => {
  const blocks = sections(page)
  const connections: [string, Connection][] = [
    ['Claude Code (claude mcp add)', claudeCodeCommand(blocks.get('Claude Code')!.find((block) => block.language === 'sh')!.text)],
    ['Claude Code (.mcp.json)', jsonServer(blocks.get('Claude Code')!.find((block) => block.language === 'json')!.text, 'mcpServers', true)],
    ['Claude Desktop', claudeDesktop(blocks.get('Claude Desktop')!.find((block) => block.language === 'json')!.text)],
    ['Cursor', jsonServer(blocks.get('Cursor')!.find((block) => block.language === 'json')!.text, 'mcpServers', false)],
    ['VS Code', jsonServer(blocks.get('VS Code')!.find((block) => block.language === 'json')!.text, 'servers', true)],
  ]

  test('every client has its snippet, each naming the router at the documented address with the management key as a Bearer token', () => {
    expect([...blocks.keys()]).toEqual(['Claude Code', 'Claude Desktop', 'Cursor', 'VS Code'])
    for (const [client, connection] of connections) {
      expect([client, connection.url]).toEqual([client, `${documentedRoot}/mcp`])
      expect([client, connection.headers]).toEqual([client, { Authorization: `Bearer ${placeholderKey}` }])
    }
  })

  test.each(connections)('%s: the MCP SDK connects with what the snippet says, lists the tools and calls one', async (_client, connection) => {
    await using server = await startTestServer()
    const url = connection.url.replace(documentedRoot, server.rootUrl)
    const headers = Object.fromEntries(Object.entries(connection.headers).map(([name, value]) => [name, value.replace(placeholderKey, server.managementKey)]))
    const client = new Client({ name: 'docs-snippet', version: '0.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
    try {
      const { tools } = await client.listTools()
      expect(tools.map((tool) => tool.name)).toContain('list_api_keys')
      const account = (await client.callTool({ name: 'get_account', arguments: {} })) as { content: { type: string; text: string }[]; isError?: boolean }
      expect(account.isError).not.toBe(true)
      expect(JSON.parse(account.content[0]!.text).workspace.id).toBe(server.workspaceId)
    } finally {
      await client.close()
    }
  })
})
