/**
 * The scale curves (`bun run bench --scale`, bench/scale.ts) keep running as the storage changes:
 * here capped at 10⁴ rows and 300 ms load windows so the suite stays quick; the table in docs/PERFORMANCE.md comes
 * from the full run.
 */
import { expect, test } from 'bun:test'
import { benchTableRows } from '../harness/bench-table'

test('bun run bench --scale prints the snapshot rebuild, usage query and inference-under-change lines', () => {
  const rows = benchTableRows(['--scale', '--scale-rows', '10000', '--scale-window-ms', '300'], 'what')
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
}, 120_000)
