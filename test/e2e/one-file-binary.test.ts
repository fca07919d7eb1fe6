/**
 * The one-file program (`bun run build`): built from this checkout, started on a fresh directory
 * with nothing beside it (no repository, no node_modules), it serves the README walkthrough —
 * migrations, the first-start workspace, the CLI, a provider and an inference key, a routed call —
 * and its docs page with the viewer's files it carries, and the dashboard with its bundled assets.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { baseEnvironment, repoRoot } from '../harness/service-process'

const buildDir = mkdtempSync(join(tmpdir(), 'router-binary-'))
const binary = join(buildDir, 'router')

beforeAll(async () => {
  const scripts = (await Bun.file(join(repoRoot, 'package.json')).json()).scripts as Record<string, string>
  // The build as package.json's `build` script runs it, with the output here.
  const command = scripts.build!.replace(/^bun /, '').replace('--outfile router', `--outfile ${binary}`).split(' ')
  const build = Bun.spawnSync([process.execPath, ...command], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  if (build.exitCode !== 0) throw new Error(`bun build --compile failed:\n${build.stderr.toString()}`)
}, 60_000)

afterAll(() => rmSync(buildDir, { recursive: true, force: true }))

/** Runs the program in `cwd` with only the given settings (no RT_* of the outer shell, no Bun on PATH needed). */
function run(cwd: string, args: string[], environment: Record<string, string> = {}) {
  return Bun.spawn([binary, ...args], { cwd, env: { ...baseEnvironment(), PATH: '/usr/bin:/bin', ...environment }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
}

async function waitForListening(child: ReturnType<typeof run>): Promise<{ url: string; stderr: () => string }> {
  const decoder = new TextDecoder()
  let stdout = ''
  let stderr = ''
  void (async () => {
    for await (const chunk of child.stderr as ReadableStream<Uint8Array>) stderr += decoder.decode(chunk)
  })()
  const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
  const deadline = Date.now() + 15_000
  while (Date.now() < deadline) {
    const { value, done } = await reader.read()
    if (done) break
    stdout += decoder.decode(value, { stream: true })
    const line = stdout.split('\n').find((candidate) => candidate.includes('"event":"listening"'))
    if (line) {
      reader.releaseLock()
      return { url: JSON.parse(line).url as string, stderr: () => stderr }
    }
  }
  throw new Error(`no listening line:\n${stdout}\n${stderr}`)
}

describe('the one-file program', () => {
  let mock: MockGateway
  beforeAll(async () => {
    mock = await startMockGateway()
  })
  afterAll(() => mock.close())

  test('router --help and a wrong command', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'router-fresh-'))
    try {
      const help = Bun.spawnSync([binary, '--help'], { cwd })
      expect(help.exitCode).toBe(0)
      expect(help.stdout.toString()).toContain('router serve')
      // The program's own start, not ./scripts/start's (Bun from npm, the install): test/unit/start-help.test.ts.
      const serveHelp = Bun.spawnSync([binary, 'serve', '--help'], { cwd })
      expect(serveHelp.exitCode).toBe(0)
      expect(serveHelp.stdout.toString().startsWith('usage: router serve [--help]\n\nServes the router in one process from this one file')).toBe(true)
      expect(serveHelp.stdout.toString()).not.toContain('RT_SKIP_INSTALL')
      const wrong = Bun.spawnSync([binary, 'nonsense'], { cwd })
      expect(wrong.exitCode).toBe(1)
      expect(wrong.stderr.toString()).toContain("unknown command 'nonsense'")
    } finally {
      rmSync(cwd, { recursive: true, force: true })
    }
  })

  test('serves the README walkthrough from a fresh directory: ./data made, migrations applied, CLI, provider, key, a routed call, the docs page', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'router-fresh-'))
    const server = run(cwd, ['serve'], { HOST: '127.0.0.1', PORT: '0', RT_GATEWAY_URL_OPENAI: mock.url })
    try {
      const { url, stderr } = await waitForListening(server)
      // The first start's management key, on stderr; the data directory is ./data of where it runs.
      await Bun.sleep(10)
      expect(stderr()).toMatch(/management key: rt_mgmt_/)
      expect(existsSync(join(cwd, 'data', 'router.db'))).toBe(true)
      expect(existsSync(join(cwd, 'data', 'master.key'))).toBe(true)

      // The CLI of the same program on the same database.
      const created = run(cwd, ['cli', 'workspace', 'create', '--name', 'acme'])
      expect(await created.exited).toBe(0)
      const management = JSON.parse(await new Response(created.stdout as ReadableStream).text()).management_key as string
      expect(management).toStartWith('rt_mgmt_')

      const api = (path: string, body: unknown) =>
        fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${management}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((response) => response.json() as Promise<any>)
      const provider = await api('/api/v1/providers', { gateway: 'openai', key: 'sk-your-upstream-key', label: 'main' })
      const key = await api('/api/v1/keys', { name: 'my app', routing: { strategy: 'priority', targets: [{ provider_key_id: provider.data.id }] } })
      const answer = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.data.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }),
      })
      expect(answer.status).toBe(200)
      expect(((await answer.json()) as any).choices[0].message.content).toBe('Hello from the mock.')
      expect(answer.headers.get('x-router-provider')).toBe('openai')
      expect(mock.calls('/chat/completions').at(-1)!.headers.authorization).toBe('Bearer sk-your-upstream-key')

      // The docs page and the viewer's files come from inside the program.
      expect((await fetch(`${url}/api/v1/docs`)).status).toBe(200)
      const document = (await (await fetch(`${url}/api/v1/openapi.json`)).json()) as any
      expect(document.paths['/v1/decisions']).toBeDefined()
      const html = await (await fetch(`${url}/api/v1/docs`)).text()
      for (const asset of html.match(/\/api\/v1\/docs\/assets\/[^"]+/g) ?? []) expect([asset, (await fetch(`${url}${asset}`)).status]).toEqual([asset, 200])
      // The dashboard and its bundled script and stylesheet, also from inside the program.
      const dashboard = await (await fetch(`${url}/`)).text()
      const bundled = [...dashboard.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((match) => match[1]!)
      expect(bundled.length).toBeGreaterThanOrEqual(2)
      for (const asset of bundled) expect([asset, (await fetch(`${url}${asset}`)).status]).toEqual([asset, 200])
    } finally {
      server.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      rmSync(cwd, { recursive: true, force: true })
    }
  })
})
