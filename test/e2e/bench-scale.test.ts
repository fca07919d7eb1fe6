/**
 * The scale curves (`bun run bench --scale`, bench/scale.ts) keep running as the storage changes:
 * here capped at 10⁴ rows and 300 ms load windows so the suite stays quick; the table in docs/PERFORMANCE.md comes
 * from the full run.
 */
import { expect, test } from 'bun:test'
import { benchTableRows } from '../harness/bench-table'

test('bun run bench --scale prints the snapshot rebuild, usage query and inference-under-change lines, then the retention curve', () => {
  const all = benchTableRows(['--scale', '--scale-rows', '10000', '--scale-window-ms', '300', '--scale-rows-per-day', '400'], 'what')
  const rows = all.filter((row) => row.length === 3)
  expect(rows.map(([what, size]) => `${what} @ ${size}`.replace(/\(\d+ (writes|times)\)/, '(N $1)'))).toEqual([
    ...['10 keys', '1,000 keys', '10,000 keys'].flatMap((size) => [
      `snapshot rebuild (1,000 provider keys), write to swap @ ${size}`,
      `event-loop stall during the rebuild @ ${size}`,
      `one key's write by this process: row read again + swap @ ${size}`,
    ]),
    'GET /usage/summary 30d @ 10,000 rows',
    'GET /usage/series 30d @ 10,000 rows',
    'GET /usage/breakdown 30d by model @ 10,000 rows',
    'event-loop stall while the three run @ 10,000 rows',
    'inference p99 at c=16, nothing else running @ 10,000 keys, 10,000 rows',
    'inference p99 at c=16, a key written through the API every 250 ms (N writes) @ 10,000 keys, 10,000 rows',
    'inference p99 at c=16, the three usage queries every 250 ms (N times) @ 10,000 keys, 10,000 rows',
  ])
  // Times are positive; a stall of the serving thread may round to 0.00.
  for (const [what, size, ms] of rows) expect([what, size, (what!.includes('stall') ? Number(ms) >= 0 : Number(ms) > 0) && Number.isFinite(Number(ms))]).toEqual([what, size, true])
  // The retention curve: 120 simulated days, a line every 10, the rows kept level at 90 days' worth once the prune has work.
  const retention = all.filter((row) => row.length === 5 && row[0] !== 'simulated day')
  expect(retention.map((row) => Number(row[0]))).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120])
  const kept = retention.map((row) => Number(row[1]!.replace(/,/g, '')))
  // Each count holds the days' rows and those the serving thread flushed during that day's prune (taken off the next day's).
  for (const [index, rowsKept] of kept.entries()) {
    const days = Math.min(90, (index + 1) * 10)
    expect(rowsKept).toBeGreaterThanOrEqual(days * 400)
    expect(rowsKept).toBeLessThan(days * 400 + 400)
  }
  const sizes = retention.map((row) => Number(row[2]))
  expect(sizes[11]!).toBeLessThan(sizes[9]! * 1.02)
}, 180_000)
