/**
 * What a new user meets in the first hour, on a copy of the working tree: every script's --help
 * (no install, no server), Bun only in .tools/, the default data directory shared by the server
 * and the CLI run from anywhere, the production install, and a README that stands on its own.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'

const repoRoot = resolve(import.meta.dir, '../..')
const installLimitMs = 120_000
const tempDirs: string[] = []
const children: ReturnType<typeof Bun.spawn>[] = []

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await child.exited
  }
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'router-first-touch-'))
  tempDirs.push(dir)
  return dir
}

/** The process environment without RT_* settings, and a PATH with no `bun` on it. */
function environmentWithoutBun(extra: Record<string, string> = {}): Record<string, string> {
  const environment: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('RT_')) environment[name] = value
  const path = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'].filter((dir) => !existsSync(join(dir, 'bun'))).join(':')
  return { ...environment, PATH: path, ...extra }
}

/**
 * A copy of the working tree (tracked and new files, not node_modules/, .tools/ or data/), with
 * this test run's Bun placed in .tools/ the way scripts/lib/setup.sh installs it.
 */
function copyRepository(options: { linkNodeModules: boolean }): string {
  const root = join(tempDir(), 'router')
  const listed = Bun.spawnSync(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: repoRoot })
  expect(listed.exitCode).toBe(0)
  for (const file of listed.stdout.toString().split('\0')) {
    if (file === '' || /^(node_modules|\.tools|data)(\/|$)/.test(file) || !existsSync(join(repoRoot, file))) continue
    mkdirSync(dirname(join(root, file)), { recursive: true })
    cpSync(join(repoRoot, file), join(root, file))
    chmodSync(join(root, file), statSync(join(repoRoot, file)).mode & 0o777)
  }
  mkdirSync(join(root, '.tools/node_modules/.bin'), { recursive: true })
  symlinkSync(process.execPath, join(root, '.tools/node_modules/.bin/bun'))
  if (options.linkNodeModules) symlinkSync(join(repoRoot, 'node_modules'), join(root, 'node_modules'))
  return root
}

async function run(command: string[], options: { cwd: string; env?: Record<string, string> }) {
  const child = Bun.spawn(command, { cwd: options.cwd, env: environmentWithoutBun(options.env), stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  children.push(child)
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { stdout, stderr, exitCode }
}

/** Starts a long-running script and resolves once a stdout line matches; SIGTERM ends it. */
async function startService(command: string[], options: { cwd: string; env?: Record<string, string> }) {
  const child = Bun.spawn(command, { cwd: options.cwd, env: environmentWithoutBun(options.env), stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  children.push(child)
  let stdout = ''
  let stderr = ''
  const stderrDone = (async () => {
    for await (const chunk of child.stderr) stderr += new TextDecoder().decode(chunk)
  })()
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  const deadline = Date.now() + installLimitMs
  let listening: { url: string } | undefined
  while (!listening && Date.now() < deadline) {
    const { value, done } = await reader.read()
    if (done) break
    stdout += decoder.decode(value, { stream: true })
    for (const line of stdout.split('\n').slice(0, -1)) {
      const url = /listening on (https?:\/\/\S+)/.exec(line)?.[1]
      if (url) listening = { url }
    }
  }
  if (!listening) {
    await Promise.race([child.exited, Bun.sleep(1000)])
    throw new Error(`no listening line.\nstdout:\n${stdout}\nstderr:\n${stderr}`)
  }
  void (async () => {
    while (!(await reader.read()).done) {}
  })()
  return {
    url: listening.url.replace('://localhost', '://127.0.0.1'),
    stderr: () => stderr,
    async stop() {
      child.kill('SIGTERM')
      const code = await child.exited
      await stderrDone
      return code
    },
  }
}

describe('--help, with Bun only in .tools/ and no dependencies installed', () => {
  test('every script prints human help on stdout and exits 0: no install, no server, no data directory', async () => {
    const root = copyRepository({ linkNodeModules: false })
    const cases: [string[], string[]][] = [
      [
        ['./scripts/start', '--help'],
        ['usage: ./scripts/start', 'HOST', 'PORT', 'RT_ROLE', 'RT_TLS_CERT', 'RT_TLS_KEY', 'RT_DATA_DIR', 'RT_DB_PATH', 'RT_MASTER_KEY', 'RT_GATEWAY_URL_<SLUG>', 'RT_TRUST_PROXY', 'RT_DEADLINE_MS', 'RT_KEYTERMS_ENABLED', 'RT_DECISIONER_ENABLED', 'RT_ADS_URL', 'RT_KEYTERMS_URL', 'RT_SMTP_URL', 'RT_WEBHOOK_ALLOW_PRIVATE', 'RT_LOG_LEVEL'],
      ],
      [['./scripts/start', '-h'], ['usage: ./scripts/start']],
      [['./scripts/mock-gateway', '--help'], ['usage: ./scripts/mock-gateway', '--port N', '--fail STATUS']],
      [['./scripts/test', '--help'], ['usage: ./scripts/test', 'bun test']],
      [['./scripts/cli', '--help'], ['usage: ./scripts/cli <command>', 'workspace create --name N']],
      [['./scripts/cli', 'key', 'mcp', '-h'], ['key mcp add', 'key mcp remove']],
      [['./scripts/benchmark', '--help'], ['usage: ./scripts/benchmark', '--check']],
    ]
    for (const [command, expected] of cases) {
      const result = await run(command, { cwd: root })
      expect({ command, exitCode: result.exitCode }).toEqual({ command, exitCode: 0 })
      expect(result.stdout.startsWith('usage: ')).toBe(true)
      expect(result.stdout).not.toContain('"event":"listening"')
      for (const text of expected) expect(result.stdout).toContain(text)
    }
    expect(existsSync(join(root, 'node_modules'))).toBe(false)
    expect(existsSync(join(root, 'data'))).toBe(false)
  })

  test('scripts/start with an argument other than --help refuses to start (exit 1)', async () => {
    const root = copyRepository({ linkNodeModules: true })
    const result = await run(['./scripts/start', '--port', '9'], { cwd: root, env: { RT_SKIP_INSTALL: '1' } })
    expect(result.exitCode).toBe(1)
    expect(result.stdout).not.toContain('listening on')
    expect(JSON.parse(result.stderr.trim().split('\n').at(-1)!)).toMatchObject({ level: 'error', event: 'startup_failed', message: expect.stringContaining('--help') })
  })
})

describe('the default data directory', () => {
  test("RT_DATA_DIR unset: the CLI run from another directory and the server share the repository's data/", async () => {
    const root = copyRepository({ linkNodeModules: true })
    const elsewhere = tempDir()
    const created = await run([join(root, 'scripts/cli'), 'workspace', 'create', '--name', 'acme'], { cwd: elsewhere })
    expect({ exitCode: created.exitCode, stderr: created.stderr }).toEqual({ exitCode: 0, stderr: '' })
    const { management_key: managementKey } = JSON.parse(created.stdout) as { management_key: string }
    expect(existsSync(join(root, 'data/router.db'))).toBe(true)
    expect(existsSync(join(root, 'data/master.key'))).toBe(true)
    expect(existsSync(join(elsewhere, 'data'))).toBe(false)

    // The server, started from yet another directory, reads the same database and master key.
    const service = await startService([join(root, 'scripts/start')], { cwd: tempDir(), env: { PORT: '0', RT_SKIP_INSTALL: '1' } })
    const account = await fetch(`${service.url}/api/v1/account`, { headers: { authorization: `Bearer ${managementKey}` } })
    expect(account.status).toBe(200)
    expect(((await account.json()) as { data: { workspace: { name: string } } }).data.workspace.name).toBe('acme')
    // Not an empty database: no `default` workspace, no key printed.
    expect(service.stderr()).not.toContain('management key:')
    expect(await service.stop()).toBe(0)
  })
})

describe('installs', () => {
  test(
    'scripts/start installs the production dependencies only; after a full install (scripts/test) it keeps the dev packages',
    async () => {
      const root = copyRepository({ linkNodeModules: false })
      const env = { PORT: '0', RT_DATA_DIR: join(tempDir(), 'data') }
      const first = await startService(['./scripts/start'], { cwd: root, env })
      expect(existsSync(join(root, 'node_modules/elysia/package.json'))).toBe(true)
      // drizzle-kit and the SDKs are dev dependencies only (typescript is not: Elysia peers on it).
      expect(existsSync(join(root, 'node_modules/drizzle-kit'))).toBe(false)
      expect(existsSync(join(root, 'node_modules/openai'))).toBe(false)
      // The benchmarks' library is not the service's.
      expect(existsSync(join(root, 'node_modules/mitata'))).toBe(false)
      expect(await first.stop()).toBe(0)

      // The set-up of scripts/test: everything, dev packages too.
      const full = await run(['bash', '-c', 'install_mode=full; source scripts/lib/setup.sh'], { cwd: root })
      expect({ exitCode: full.exitCode, stderr: full.exitCode === 0 ? '' : full.stderr }).toEqual({ exitCode: 0, stderr: '' })
      expect(existsSync(join(root, 'node_modules/drizzle-kit/package.json'))).toBe(true)

      const second = await startService(['./scripts/start'], { cwd: root, env })
      expect(await second.stop()).toBe(0)
      expect(existsSync(join(root, 'node_modules/drizzle-kit/package.json'))).toBe(true)
      expect(existsSync(join(root, 'node_modules/openai/package.json'))).toBe(true)
    },
    installLimitMs * 2,
  )
})

describe('README', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')

  test('stands on its own: no links outside the repository', () => {
    // Compact failures: the README is long.
    expect(readme.match(/\.\.\/shared[^\s)`]*|\]\(\.\.\/[^)]*\)/g)).toBeNull()
  })

  test('the walkthrough needs no bun on PATH: ./scripts/cli and ./scripts/benchmark, and the PATH line for the installed Bun', () => {
    expect(readme.includes('export PATH="$PWD/.tools/node_modules/.bin:$PATH"')).toBe(true)
    expect(readme.match(/^\s*bun run (cli|bench)\b.*$/gm)).toBeNull()
    expect(readme.includes('./scripts/cli workspace create')).toBe(true)
    expect(readme.includes('./scripts/benchmark')).toBe(true)
  })

  test('every ./scripts/<name> it names exists and is executable', () => {
    const named = new Set([...readme.matchAll(/\.\/scripts\/([a-z-]+)(?![\w./-])/g)].map((match) => match[1]!))
    expect(named.size).toBeGreaterThanOrEqual(5)
    for (const name of named) {
      const path = join(repoRoot, 'scripts', name)
      expect({ name, executable: existsSync(path) && statSync(path).isFile() && (statSync(path).mode & 0o111) !== 0 }).toEqual({ name, executable: true })
    }
  })
})
