/**
 * The `--help` of the two starts (src/start-help.ts, issue 37 item 13): `router serve` says how the
 * one-file program starts (no Bun from npm, no dependency install: the database, migrations applied
 * at start, the first start's management key), `./scripts/start` how the script does; both list
 * every environment variable from the one table (config/env.ts). `router serve --help` is run
 * through src/bin.ts, the program's entry, which prints the same text as the compiled binary (the
 * binary itself: test/e2e/one-file-binary.test.ts).
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { environmentVariables } from '../../src/config/env'
import { environmentHelp, startHelp } from '../../src/start-help'
import { baseEnvironment, repoRoot } from '../harness/service-process'

const variableNames = environmentVariables.flatMap(([names]) => names.split(', '))

describe('router serve --help', () => {
  const help = startHelp('binary', true)
  /** The text with its line breaks as spaces, for phrases a wrap may split. */
  const flat = (text: string) => text.replace(/\s+/g, ' ')

  test('says how the one file starts: its database, the migrations at start, the first management key', () => {
    expect(help.startsWith('usage: router serve [--help]\n')).toBe(true)
    for (const text of ['from this one file', 'nothing is downloaded or installed', 'RT_DB_PATH', 'router.db in RT_DATA_DIR (./data of the current directory', 'applies the migrations', 'management key: rt_mgmt_', 'router cli --help', 'BUN_CONFIG_MAX_HTTP_REQUESTS=65535']) {
      expect(flat(help)).toContain(text)
    }
  })

  test("not the script's set-up: no Bun from npm, no dependency install", () => {
    for (const text of ['usage: ./scripts/start', 'npm registry', 'bun install', '.tools/', 'RT_SKIP_INSTALL', 'Set-up']) expect(flat(help)).not.toContain(text)
  })

  test('every environment variable, from the one table both starts print', () => {
    for (const name of variableNames) expect(help).toContain(name)
    expect(help).toContain(`Environment:\n${environmentHelp()}\n`)
    expect(startHelp('script')).toContain(`Environment:\n${environmentHelp()}\n`)
  })

  test('run by Bun as the package bin, it names the data directory that run uses', () => {
    const packaged = startHelp('binary', false)
    expect(packaged.startsWith('usage: router serve [--help]\n')).toBe(true)
    expect(flat(packaged)).toContain("the package's `router` bin")
    expect(flat(packaged)).not.toContain('./data of the current directory')
    expect(packaged).not.toContain('RT_SKIP_INSTALL')
  })

  test('every line fits in 100 columns', () => {
    for (const program of ['binary', 'script'] as const) {
      for (const standalone of [true, false]) {
        for (const line of startHelp(program, standalone).split('\n')) expect(line.length).toBeLessThanOrEqual(100)
      }
    }
  })
})

describe('./scripts/start --help', () => {
  test('still the script: Bun from npm, the install, RT_SKIP_INSTALL, every variable', () => {
    const help = startHelp('script')
    expect(help.startsWith('usage: ./scripts/start [--help]\n')).toBe(true)
    for (const text of ['Gets Bun when it is not on PATH', 'bun install --frozen-lockfile --production', 'management key: rt_mgmt_', 'RT_SKIP_INSTALL=1']) expect(help.replace(/\s+/g, ' ')).toContain(text)
    for (const name of variableNames) expect(help).toContain(name)
  })
})

describe('the program entry (src/bin.ts)', () => {
  const run = (...args: string[]) => Bun.spawnSync([process.execPath, join(repoRoot, 'src/bin.ts'), ...args], { cwd: repoRoot, env: baseEnvironment(), stdout: 'pipe', stderr: 'pipe' })

  test('`router serve --help` prints the one-file help and exits 0 without starting', () => {
    const result = run('serve', '--help')
    expect(result.exitCode).toBe(0)
    expect(result.stdout.toString()).toBe(startHelp('binary', false))
    expect(result.stdout.toString()).not.toContain('"event":"listening"')
  })

  test('`router serve` with another argument refuses, pointing at `router serve --help`', () => {
    const result = run('serve', '--port', '9')
    expect(result.exitCode).toBe(1)
    const failure = JSON.parse(result.stderr.toString().trim().split('\n').at(-1)!)
    expect(failure).toMatchObject({ level: 'error', event: 'startup_failed' })
    expect(failure.message).toContain('(router serve --help)')
  })
})
