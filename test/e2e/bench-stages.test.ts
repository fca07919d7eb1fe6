/**
 * The per-stage micro-benchmarks (`bun run bench --stages`, bench/stages.ts) keep running against
 * the pipeline as it changes: every stage of the hot path measured, with a time and a heap figure.
 */
import { expect, test } from 'bun:test'
import { repoRoot } from '../harness/service-process'

test('bun run bench --stages prints every stage of the hot path in ns/op and bytes/op', () => {
  const run = Bun.spawnSync([process.execPath, 'run', 'scripts/bench.ts', '--stages'], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  expect(run.exitCode).toBe(0)
  const rows = run.stdout
    .toString()
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| stage'))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()))
  expect(rows.map(([stage]) => stage)).toEqual([
    'authenticate (token cache warm)',
    'request context',
    'body read + parse (~1 KB)',
    'body parse only (bytes in hand)',
    'plan (uncached)',
    'upstream request build',
    'reply check (scan, no parse)',
    'usage read (body tail)',
    'response + headers',
    'log enqueue (journal record) + metrics',
  ])
  for (const [stage, ns, bytes] of rows) {
    expect([stage, Number(ns) > 0]).toEqual([stage, true])
    expect([stage, Number.isFinite(Number(bytes))]).toEqual([stage, true])
  }
}, 120_000)
