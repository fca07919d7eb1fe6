/**
 * The scale curves (`bun run bench --scale`, bench/scale.ts) keep running as the storage changes:
 * here capped at 10⁴ rows so the suite stays quick; the README's table comes from the full run.
 */
import { expect, test } from 'bun:test'
import { repoRoot } from '../harness/service-process'

test('bun run bench --scale prints the snapshot rebuild and usage query times', () => {
  const run = Bun.spawnSync([process.execPath, 'run', 'scripts/bench.ts', '--scale', '--scale-rows', '10000'], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  expect(run.exitCode).toBe(0)
  const rows = run.stdout
    .toString()
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| what'))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()))
  expect(rows.map(([what, size]) => `${what} @ ${size}`)).toEqual([
    'snapshot rebuild (1,000 provider keys) @ 10 keys',
    'snapshot rebuild (1,000 provider keys) @ 1,000 keys',
    'snapshot rebuild (1,000 provider keys) @ 10,000 keys',
    'GET /usage/summary 30d @ 10,000 rows',
    'GET /usage/series 30d @ 10,000 rows',
    'GET /usage/breakdown 30d by model @ 10,000 rows',
    'event-loop stall while the three run @ 10,000 rows',
  ])
  for (const [what, size, ms] of rows) expect([what, size, Number(ms) > 0 && Number.isFinite(Number(ms))]).toEqual([what, size, true])
}, 120_000)
