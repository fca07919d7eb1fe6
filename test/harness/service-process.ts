/**
 * The real service as a child process, for end-to-end tests: started with a temp data dir on a free
 * port, its stdout/stderr read as they arrive (no fixed sleeps), killed after each test.
 */
import { expect } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

export const repoRoot = resolve(import.meta.dir, '../..')
const startupLimitMs = 15_000

/** The process environment without any RT_* setting of the outer shell (no RT_MASTER_KEY). */
export function baseEnvironment(): Record<string, string> {
  const environment: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('RT_')) environment[name] = value
  return environment
}

export class ServiceProcess {
  stdout = ''
  stderr = ''
  private waiters: (() => void)[] = []
  readonly child: ReturnType<typeof Bun.spawn<any, 'pipe', 'pipe'>>
  readonly pumped: Promise<void>

  /** `command` defaults to the service entry point; `['scripts/start']` runs it as operators do. */
  constructor(dataDir: string, extraEnvironment: Record<string, string>, command: string[] = ['bun', 'run', 'src/main.ts']) {
    this.child = Bun.spawn(command, {
      cwd: repoRoot,
      env: { ...baseEnvironment(), HOST: '127.0.0.1', PORT: '0', RT_DATA_DIR: dataDir, ...extraEnvironment },
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    })
    this.pumped = Promise.all([this.pump(this.child.stdout, 'stdout'), this.pump(this.child.stderr, 'stderr')]).then(() => {})
  }

  private async pump(stream: ReadableStream<Uint8Array>, into: 'stdout' | 'stderr') {
    const decoder = new TextDecoder()
    for await (const chunk of stream) {
      this[into] += decoder.decode(chunk, { stream: true })
      for (const wake of this.waiters.splice(0)) wake()
    }
    this[into] += decoder.decode()
    for (const wake of this.waiters.splice(0)) wake()
  }

  stdoutLines(): string[] {
    return this.stdout.split('\n').filter((line) => line !== '')
  }

  stderrLines(): string[] {
    return this.stderr.split('\n').filter((line) => line !== '')
  }

  /** Resolves with the first complete line of stdout (or stderr) matching, as soon as it arrives. */
  async waitForLine(predicate: (line: string) => boolean, from: 'stdout' | 'stderr' = 'stdout'): Promise<string> {
    let exited = false
    let timedOut = false
    const wakeAll = () => {
      for (const wake of this.waiters.splice(0)) wake()
    }
    void this.child.exited.then(() => {
      exited = true
      wakeAll()
    })
    // Only a limit for a process that never gets ready; the line itself is awaited as it arrives.
    const limit = setTimeout(() => {
      timedOut = true
      wakeAll()
    }, startupLimitMs)
    try {
      for (;;) {
        const complete = this[from].slice(0, this[from].lastIndexOf('\n') + 1)
        const found = complete.split('\n').find((line) => line !== '' && predicate(line))
        if (found !== undefined) return found
        if (exited) throw new Error(`process exited before the expected line.\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
        if (timedOut) throw new Error(`no expected line within ${startupLimitMs} ms.\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
        await new Promise<void>((wake) => this.waiters.push(wake))
      }
    } finally {
      clearTimeout(limit)
    }
  }

  /** Waits for the JSON `listening` log line (its message says `listening on …`) and returns the root URL it names. */
  async listening(): Promise<{ line: string; rootUrl: string }> {
    const line = await this.waitForLine((text) => text.includes('listening on'))
    const entry = JSON.parse(line) as { event: string; message: string }
    expect(entry.event).toBe('listening')
    const match = /^listening on (https?):\/\/([^\s:/]+|\[[^\]]+\]):(\d+) \(role \w+\)$/.exec(entry.message)
    expect(match).not.toBeNull()
    const port = Number(match![3])
    expect(port).toBeGreaterThan(0)
    return { line, rootUrl: `http://127.0.0.1:${port}` }
  }

  /** The one-time `management key: …` line of a first start, from stderr. */
  async managementKey(): Promise<string> {
    return managementKeyFrom(await this.waitForLine(managementKeyLine, 'stderr'))
  }

  /** Waits for the process to end on its own; its exit code. */
  async exited(): Promise<number> {
    const code = await this.child.exited
    await this.pumped
    return code
  }

  async stop(): Promise<number> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM')
    const code = await this.child.exited
    await this.pumped
    return code
  }
}

const started: ServiceProcess[] = []
const tempDirs: string[] = []

export function startService(dataDir: string, extraEnvironment: Record<string, string> = {}, command?: string[]) {
  const service = new ServiceProcess(dataDir, extraEnvironment, command)
  started.push(service)
  return service
}

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'router-e2e-'))
  tempDirs.push(dir)
  return dir
}

/**
 * Kills the services started since the last call and removes the temporary directories. Run after
 * every test of every file by test/harness/preload.ts: a hook registered here would run for the
 * first test file that imports this module only, and leak the later files' processes.
 */
export async function cleanUpServices() {
  for (const service of started.splice(0)) {
    if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL')
    await service.child.exited
  }
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

export const managementKeyLine = (line: string) => line.startsWith('management key:')

export function managementKeyFrom(line: string): string {
  const match = /^management key:\s*(rt_mgmt_\S+)\s*$/.exec(line)
  expect(match).not.toBeNull()
  return match![1]!
}

