/** Runs `scripts/bench.ts` with `args` (it must exit 0) and returns the rows of its Markdown table, cells trimmed, the header row left out. */
import { expect } from 'bun:test'
import { repoRoot } from './service-process'

export function benchTableRows(args: string[], headerStart: string): string[][] {
  const run = Bun.spawnSync([process.execPath, 'run', 'scripts/bench.ts', ...args], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  expect(run.exitCode).toBe(0)
  return run.stdout
    .toString()
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith(`| ${headerStart}`))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()))
}
