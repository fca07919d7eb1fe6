/**
 * Claude Code as a client (`claude -p`, its print mode) through the router to a model that is not
 * Claude: `ANTHROPIC_BASE_URL` at the router, a messages-shape key as `ANTHROPIC_API_KEY`, a chat
 * gateway behind it (a mock on 127.0.0.1). With tools off it answers; with its Read tool on, the
 * model's tool call is run by Claude Code, its result goes back through the router as a chat tool
 * message, and the second answer is printed. What Claude Code sends to such a model (a system entry
 * inside `messages`, adaptive thinking with an effort, `context_management`, its betas) must not be
 * refused on the way.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { startGateways, type GatewaysEnv } from '../harness/gateways'
import { chatChunks } from '../harness/mock-gateway'
import { createInferenceKey } from '../harness/api'

// The native binary of this platform, from the package's optional dependency (its postinstall,
// which would copy it over the wrapper's placeholder, is not run by `bun install`).
const claude = resolve(import.meta.dir, `../../node_modules/@anthropic-ai/claude-code-${process.platform}-${process.arch}/claude`)
const present = existsSync(claude)
if (!present) console.log(`note: ${claude} is absent (install the dev dependencies): the Claude Code tests are skipped.`)

let env: GatewaysEnv
let secret: string
let home: string

beforeAll(async () => {
  if (!present) return
  env = await startGateways(['openai'])
  secret = (await createInferenceKey(env.server, { api_shape: 'messages', routing: { targets: [{ provider_key_id: env.providers.openai }] } })).key
  home = mkdtempSync(join(tmpdir(), 'router-claude-code-'))
})

afterAll(async () => {
  await env?.[Symbol.asyncDispose]()
  if (home) rmSync(home, { recursive: true, force: true })
})

async function runClaude(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn([claude, '-p', ...args, '--model', 'openai/gpt-4o-mini'], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      ANTHROPIC_BASE_URL: env.server.rootUrl,
      ANTHROPIC_API_KEY: secret,
      // No traffic but to the router: no telemetry, update checks or error reports.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const timer = setTimeout(() => child.kill(), 60_000)
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  clearTimeout(timer)
  return { code, stdout, stderr }
}

test.skipIf(!present)('claude -p with tools off: the answer of a chat gateway, asked as Claude Code asks', async () => {
  env.mocks.openai!.handle((request) => ({ sse: chatChunks(String((request.body as any).model), ['Hello ', 'from ', 'a chat model.']) }))
  const workdir = mkdtempSync(join(home, 'plain-'))
  const result = await runClaude(['Say hello', '--tools', ''], workdir)
  expect(result.code).toBe(0)
  expect(result.stdout.trim()).toBe('Hello from a chat model.')
  const sent = env.mocks.openai!.requests.filter((request) => request.path.endsWith('/chat/completions')).at(-1)!.body as any
  expect(sent.model).toBe('openai/gpt-4o-mini')
  expect(sent.stream).toBe(true)
  // The prompt as a user message; Claude Code's own context as system messages, where it put them.
  expect(sent.messages.some((message: any) => message.role === 'user' && JSON.stringify(message.content).includes('Say hello'))).toBe(true)
  expect(sent.messages[0].role).toBe('system')
}, 90_000)

test.skipIf(!present)("claude -p with its Read tool: the model's tool call is run by Claude Code and its result comes back as a chat tool message", async () => {
  const workdir = mkdtempSync(join(home, 'tools-'))
  mkdirSync(join(workdir, 'notes'))
  const file = join(workdir, 'notes', 'otters.txt')
  writeFileSync(file, 'Otters hold hands while they sleep.\n')
  env.mocks.openai!.handle((request) => {
    const body = request.body as any
    const toolResult = (body.messages as any[]).find((message) => message.role === 'tool')
    const model = String(body.model)
    if (!toolResult) {
      const read = (body.tools as any[]).find((tool) => tool.function?.name === 'Read')
      expect(read).toBeDefined()
      const base = { id: 'chatcmpl-tool', object: 'chat.completion.chunk', created: 1_700_000_000, model }
      return {
        sse: [
          { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_read_1', type: 'function', function: { name: 'Read', arguments: '' } }] }, finish_reason: null }] },
          { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: JSON.stringify({ file_path: file }) } }] }, finish_reason: null }] },
          { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
          { ...base, choices: [], usage: { prompt_tokens: 900, completion_tokens: 20, total_tokens: 920 } },
          '[DONE]',
        ],
      }
    }
    const said = String(toolResult.content).includes('Otters hold hands') ? 'The note says otters hold hands while they sleep.' : 'I could not read the note.'
    return { sse: chatChunks(model, [said]) }
  })
  const result = await runClaude(['What does notes/otters.txt say? Use the Read tool.', '--tools', 'Read', '--allowedTools', 'Read'], workdir)
  expect(result.code).toBe(0)
  expect(result.stdout.trim()).toBe('The note says otters hold hands while they sleep.')
  const calls = env.mocks.openai!.requests.filter((request) => request.path.endsWith('/chat/completions')).slice(-2)
  const second = calls[1]!.body as any
  expect(second.messages.find((message: any) => message.role === 'assistant' && message.tool_calls)?.tool_calls[0]).toMatchObject({ id: 'call_read_1', function: { name: 'Read' } })
  expect(second.messages.find((message: any) => message.role === 'tool')).toMatchObject({ tool_call_id: 'call_read_1' })
}, 90_000)
