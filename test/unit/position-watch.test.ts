/**
 * A replica's wait for its copy to reach a position (CONTRACT §10 read-your-writes) cannot be used to
 * tie it up: one timer reads LiteFS's position file for every waiter (so a thousand waiters cost the
 * event loop what one does), at most `maxWaiters` wait (the next is told `full`, and replayed on the
 * primary at once), and a waiter leaves at its time limit.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PositionWatch, isWellFormedKey, readTxid } from '../../src/cluster/position'

function positionFile() {
  const dir = mkdtempSync(join(tmpdir(), 'router-position-'))
  const dbPath = join(dir, 'router.db')
  const at = (txid: number) => writeFileSync(`${dbPath}-pos`, `${txid.toString(16).padStart(16, '0')}/0123456789abcdef\n`)
  return { dbPath, at, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) }
}

describe('waiting for the copy to reach a position', () => {
  test('many waiters share one timer: the file is read once per tick, not once per waiter; all leave when the copy reaches them', async () => {
    using file = positionFile()
    file.at(0x10)
    let reads = 0
    const watch = new PositionWatch(file.dbPath, {
      pollMs: 20,
      maxWaiters: 5000,
      read: (path) => {
        reads++
        return readTxid(path)
      },
    })
    const waiting = Array.from({ length: 2000 }, (_, index) => watch.reach(BigInt(0x11 + (index % 3))) as Promise<boolean>)
    expect(watch.waiting).toBe(2000)
    // Each arrival looked once (it might have been reached already); from here on only the ticks read.
    reads = 0
    await Bun.sleep(110)
    expect(reads).toBeGreaterThan(0)
    expect(reads).toBeLessThanOrEqual(8)
    file.at(0x13)
    expect(await Promise.all(waiting)).toEqual(new Array(2000).fill(true))
    expect(watch.waiting).toBe(0)
  })

  test('beyond the bound a request is told at once to go elsewhere; one already reached never waits', async () => {
    using file = positionFile()
    file.at(0x10)
    const watch = new PositionWatch(file.dbPath, { pollMs: 10, maxWaiters: 3, limitMs: 100 })
    const three = [watch.reach(0x20n), watch.reach(0x20n), watch.reach(0x20n)]
    expect(watch.reach(0x20n)).toBe('full')
    expect(watch.reach(0x10n)).toBe(true)
    const started = performance.now()
    // Never reached: each leaves at its limit, false.
    expect(await Promise.all(three)).toEqual([false, false, false])
    expect(performance.now() - started).toBeLessThan(1000)
    expect(watch.waiting).toBe(0)
    watch.stop()
  })

  test('a key in the form the service issues is told from anything else', () => {
    expect(isWellFormedKey(`rt_live_${'a1B2'.repeat(10)}`)).toBe(true)
    expect(isWellFormedKey(`rt_mgmt_${'Z'.repeat(40)}`)).toBe(true)
    for (const token of [undefined, '', 'rt_live_short', `rt_live_${'a'.repeat(41)}`, `rt_live_${'-'.repeat(40)}`, `sk-${'a'.repeat(40)}`, `rt_test_${'a'.repeat(40)}`]) {
      expect(isWellFormedKey(token)).toBe(false)
    }
  })
})
