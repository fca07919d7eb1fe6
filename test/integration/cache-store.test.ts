/**
 * The response cache's node-local store (CONTRACT §15 "Storage", src/storage/cache-store.ts): hits
 * and expiry, max age, the size bound over 10,000 writes (least recently used first), purge, prune,
 * the file owner-only from its first byte, the semantic candidates, two processes on one file, the
 * `cache-prune` job and the metrics lines.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CacheStore, cacheRowOverheadBytes, type CacheStoreOptions, type CacheWrite } from '../../src/storage/cache-store'
import { pruneCache } from '../../src/scheduler/jobs/cache-prune'
import { Metrics } from '../../src/observability/metrics'
import { parseExposition } from '../harness/prometheus'
import { until } from '../harness/until'

const directories: string[] = []
const stores: CacheStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true })
})

function cachePath(): string {
  const directory = mkdtempSync(join(tmpdir(), 'router-cache-'))
  directories.push(directory)
  return join(directory, 'data', 'cache.db')
}

function openStore(path: string, options: Partial<CacheStoreOptions> = {}): CacheStore {
  const store = new CacheStore(path, { maxBytes: 8 * 1024 * 1024, pruneEveryMs: 0, ...options })
  stores.push(store)
  return store
}

const hex = (index: number) => index.toString(16).padStart(64, '0')

function entry(index: number, fields: Partial<CacheWrite> = {}): CacheWrite {
  const now = Date.now()
  return {
    key: hex(index),
    workspaceId: 'ws_1',
    keyId: 'key_1',
    model: 'openai/gpt-4o-mini',
    createdAt: now,
    expiresAt: now + 3_600_000,
    gateway: 'openai',
    costNanoUsd: 1234,
    value: JSON.stringify({ answer: `answer ${index}` }),
    ...fields,
  }
}

const mode = (path: string) => statSync(path).mode & 0o777

describe('CacheStore reads', () => {
  test('a hit is found with its fields; an expired entry and a missing key never are; max age', async () => {
    const path = cachePath()
    let now = 1_000_000_000_000
    const store = openStore(path, { now: () => now })
    store.put(entry(1, { createdAt: now - 10_000, expiresAt: now + 60_000, costNanoUsd: null, gateway: 'groq' }))
    store.put(entry(2, { createdAt: now - 10_000, expiresAt: now }))
    store.put(entry(3, { createdAt: now - 10_000, expiresAt: now - 1 }))
    // Queued, not yet written: a read before the writer commits misses (it is only a cache).
    await store.flush()
    expect(store.get(hex(1))).toEqual({ value: '{"answer":"answer 1"}', createdAt: now - 10_000, gateway: 'groq', costNanoUsd: null })
    // expires_at <= now is expired.
    expect(store.get(hex(2))).toBeUndefined()
    expect(store.get(hex(3))).toBeUndefined()
    expect(store.get(hex(99))).toBeUndefined()
    // Max age: 10 s old is served at max age 10 s, not at 9.999 s.
    expect(store.get(hex(1), 10_000)?.createdAt).toBe(now - 10_000)
    expect(store.get(hex(1), 9_999)).toBeUndefined()
    // Time passes: once expired, never served.
    now += 60_000
    expect(store.get(hex(1))).toBeUndefined()
    expect(store.stats()).toMatchObject({ entries: 3 })
  })

  test('a put replaces the entry of the same key', async () => {
    const store = openStore(cachePath())
    store.put(entry(1, { value: '"first"' }))
    store.put(entry(1, { value: '"second"', gateway: 'groq' }))
    await store.flush()
    expect(store.get(hex(1))).toMatchObject({ value: '"second"', gateway: 'groq' })
    expect(store.stats()).toMatchObject({ entries: 1, bytes: '"second"'.length + cacheRowOverheadBytes })
  })

  test('an entry read lately answers from memory, with its expiry, max age and purge time still applied; a put, a purge and a prune drop it', async () => {
    const path = cachePath()
    let now = 1_000_000_000_000
    const store = openStore(path, { now: () => now })
    store.put(entry(1, { createdAt: now - 1000, expiresAt: now + 60_000, value: '"first"' }))
    store.put(entry(2, { createdAt: now - 1000, expiresAt: now + 10_000 }))
    await store.flush()
    expect(store.get(hex(1))?.value).toBe('"first"')
    expect(store.get(hex(2))).toBeDefined()
    // Deleted behind the store's back (another process): what it read lately is still whole and unexpired.
    const other = new Database(path)
    other.exec('PRAGMA busy_timeout = 5000')
    other.query('DELETE FROM cache_entries WHERE key = ?').run(hex(1))
    other.close()
    expect(store.get(hex(1))?.value).toBe('"first"')
    // Max age and a purge time apply to it as to a read.
    expect(store.get(hex(1), 999)).toBeUndefined()
    expect(store.get(hex(1), undefined, now - 999)).toBeUndefined()
    // A put replaces it.
    store.put(entry(1, { createdAt: now, expiresAt: now + 60_000, value: '"second"' }))
    await store.flush()
    expect(store.get(hex(1))?.value).toBe('"second"')
    // Expired: never served, from memory or the file.
    now += 10_000
    expect(store.get(hex(2))).toBeUndefined()
    expect(store.prune()).toBe(1)
    // A purge drops what was read lately.
    expect(store.get(hex(1))?.value).toBe('"second"')
    expect(store.purge({ workspaceId: 'ws_1', keyId: 'key_1' })).toBe(1)
    expect(store.get(hex(1))).toBeUndefined()
  })

  test('candidates: the newest unexpired entries of the partition with an embedding, newest first, at most the limit', async () => {
    const now = Date.now()
    const store = openStore(cachePath(), { now: () => now })
    const embedding = (seed: number) => new Float32Array([seed, seed / 2, -seed, 0.25])
    for (let index = 0; index < 8; index++) store.put(entry(index, { semanticKey: 'aa', embedding: embedding(index), createdAt: now - 1000 + index }))
    store.put(entry(20, { semanticKey: 'aa', embedding: embedding(20), createdAt: now, expiresAt: now }))
    store.put(entry(21, { semanticKey: 'aa', createdAt: now }))
    store.put(entry(22, { semanticKey: 'bb', embedding: embedding(22), createdAt: now }))
    await store.flush()
    const found = store.candidates('aa', 5)
    expect(found.map((candidate) => candidate.key)).toEqual([hex(7), hex(6), hex(5), hex(4), hex(3)])
    expect(found[0]!.embedding).toBeInstanceOf(Float32Array)
    expect([...found[0]!.embedding]).toEqual([...embedding(7)])
    expect(found[0]!.createdAt).toBe(now - 993)
    expect(store.candidates('aa').map((candidate) => candidate.key)).toHaveLength(8)
    expect(store.candidates('bb').map((candidate) => candidate.key)).toEqual([hex(22)])
    expect(store.candidates('cc')).toEqual([])
    // The embedding counts toward the entry's bytes.
    expect(store.stats().bytes).toBe(11 * cacheRowOverheadBytes + 10 * 16 + [...Array(8).keys(), 20, 21, 22].reduce((sum, index) => sum + entry(index).value!.length, 0))
  })
})

describe('CacheStore deletes', () => {
  test('purge by key deletes that key\'s entries; purge by workspace deletes the workspace-scoped ones only', async () => {
    const store = openStore(cachePath())
    store.put(entry(1, { keyId: 'key_1' }))
    store.put(entry(2, { keyId: 'key_1' }))
    store.put(entry(3, { keyId: 'key_2' }))
    store.put(entry(4, { keyId: undefined }))
    store.put(entry(5, { keyId: undefined }))
    store.put(entry(6, { keyId: undefined, workspaceId: 'ws_2' }))
    await store.flush()
    expect(store.purge({ workspaceId: 'ws_1', keyId: 'key_1' })).toBe(2)
    expect(store.get(hex(1))).toBeUndefined()
    expect(store.get(hex(3))).toBeDefined()
    expect(store.stats().entries).toBe(4)
    expect(store.purge({ workspaceId: 'ws_1', keyId: undefined })).toBe(2)
    expect([3, 4, 5, 6].map((index) => store.get(hex(index)) !== undefined)).toEqual([true, false, false, true])
    expect(store.purge({ workspaceId: 'ws_1', keyId: undefined })).toBe(0)
    expect(store.stats().entries).toBe(2)
  })

  test('an entry queued before a purge does not survive it, whether or not the writer has it yet', async () => {
    const store = openStore(cachePath())
    // Queued on this thread, not yet sent to the writer.
    store.put(entry(1))
    store.put(entry(2, { keyId: 'key_2' }))
    expect(store.purge({ workspaceId: 'ws_1', keyId: 'key_1' })).toBe(0)
    await store.flush()
    expect(store.get(hex(1))).toBeUndefined()
    expect(store.get(hex(2))).toBeDefined()
    // Sent to the writer (its thread running), not yet committed: deleted again after it is written.
    store.put(entry(3))
    await new Promise((resolve) => setImmediate(resolve))
    expect(store.purge({ workspaceId: 'ws_1', keyId: 'key_1' })).toBe(0)
    await store.flush()
    expect(store.get(hex(3))).toBeUndefined()
    expect(store.stats().entries).toBe(1)
  })

  test('prune deletes the expired entries and answers how many; the cache-prune job calls it', async () => {
    let now = Date.now()
    const store = openStore(cachePath(), { now: () => now })
    for (let index = 0; index < 30; index++) store.put(entry(index, { expiresAt: now + (index < 20 ? 1000 : 100_000) }))
    await store.flush()
    expect(store.prune()).toBe(0)
    now += 1000
    expect(store.prune()).toBe(20)
    expect(store.stats()).toMatchObject({ entries: 10 })
    now += 100_000
    const progress: number[] = []
    expect(await pruneCache({ cache: store }, (done) => progress.push(done))).toEqual({ deleted: 10, entries: 0, bytes: 0 })
    expect(progress).toEqual([10])
    expect(await pruneCache({}, () => {})).toEqual({ deleted: 0, skipped: 'this process has no response cache' })
  })

  test('the store prunes by itself on its writer thread', async () => {
    let now = Date.now()
    const path = cachePath()
    const store = openStore(path, { now: () => now, pruneEveryMs: 20 })
    store.put(entry(1, { expiresAt: now + 10 }))
    store.put(entry(2))
    await store.flush()
    now += 10
    const reader = new Database(path, { readonly: true })
    try {
      await until('the expired entry pruned', () => ((reader.query('SELECT count(*) AS n FROM cache_entries').get() as { n: number }).n === 1 ? true : undefined))
      expect(reader.query('SELECT key FROM cache_entries').all()).toEqual([{ key: hex(2) }])
    } finally {
      reader.close()
    }
    // The writer's count follows once its reply is in.
    await until('the count after the prune', () => (store.stats().entries === 1 ? true : undefined))
  })
})

describe('CacheStore file', () => {
  test('owner-only (0600) from its first byte, its WAL and shared memory too; WAL, incremental vacuum, versioned', async () => {
    const path = cachePath()
    const store = openStore(path)
    expect(mode(path)).toBe(0o600)
    expect(mode(join(path, '..'))).toBe(0o700)
    for (let index = 0; index < 200; index++) store.put(entry(index, { value: 'x'.repeat(2000) }))
    await store.flush()
    for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) expect({ file, mode: mode(file) }).toEqual({ file, mode: 0o600 })
    expect(existsSync(`${path}-wal`)).toBe(true)
    const reader = new Database(path, { readonly: true })
    try {
      expect(reader.query('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' })
      expect(reader.query('PRAGMA auto_vacuum').get()).toEqual({ auto_vacuum: 2 })
      expect(reader.query('PRAGMA user_version').get()).toEqual({ user_version: 1 })
      const indexes = (reader.query("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").all() as { sql: string }[]).map((row) => row.sql.replace(/^.*\((.*)\)$/, '$1'))
      expect(indexes.sort()).toEqual(['expires_at', 'last_used_at, bytes', 'semantic_key, created_at', 'workspace_id, key_id'])
      // A hit is one read by the primary key.
      const plan = reader.query('EXPLAIN QUERY PLAN SELECT value FROM cache_entries WHERE key = ? AND expires_at > ? AND created_at >= ?').all('a', 0, 0) as { detail: string }[]
      expect(plan.map((row) => row.detail)).toEqual([expect.stringMatching(/USING INDEX sqlite_autoindex_cache_entries_1 \(key=\?\)/)])
    } finally {
      reader.close()
    }
  })

  test('an existing file made readable by others is made owner-only; a file of another version is emptied; a database that is not a cache is refused', async () => {
    const path = cachePath()
    const first = openStore(path)
    first.put(entry(1))
    await first.close()
    chmodSync(path, 0o644)
    const old = new Database(path)
    old.exec('PRAGMA user_version = 7')
    old.close()
    const second = openStore(path)
    expect(mode(path)).toBe(0o600)
    expect(second.get(hex(1))).toBeUndefined()
    expect(second.stats().entries).toBe(0)
    second.put(entry(2))
    await second.flush()
    expect(second.get(hex(2))).toBeDefined()

    const other = join(path, '..', 'router.db')
    const database = new Database(other)
    database.exec('CREATE TABLE workspaces (id TEXT PRIMARY KEY)')
    database.close()
    expect(() => new CacheStore(other, { maxBytes: 1024 * 1024, pruneEveryMs: 0 })).toThrow('not a response cache file')
    expect(() => new CacheStore(':memory:', { maxBytes: 1024 * 1024 })).toThrow('needs a file path')
  })

  test('the bound holds over 10,000 distinct entries: bytes and file stay under it, least recently used first, an entry read recently survives', async () => {
    const path = cachePath()
    const maxBytes = 2 * 1024 * 1024
    let evicted = 0
    const store = openStore(path, { maxBytes, onEvict: (count) => (evicted += count) })
    const value = (index: number) => JSON.stringify({ index, text: 'lorem ipsum '.repeat(60 + (index % 40)) })
    // The two first entries: one read between every batch, one never read again.
    store.put(entry(0, { value: value(0) }))
    store.put(entry(1, { value: value(1) }))
    await store.flush()
    let largestFile = 0
    for (let batch = 0; batch < 20; batch++) {
      expect(store.get(hex(0))).toBeDefined()
      for (let index = 2 + batch * 500; index < 2 + (batch + 1) * 500; index++) store.put(entry(index, { value: value(index), semanticKey: 'ab', embedding: new Float32Array(64).fill(index) }))
      await store.flush()
      largestFile = Math.max(largestFile, statSync(path).size)
      expect(store.stats().bytes).toBeLessThanOrEqual(maxBytes)
    }
    expect(store.get(hex(0))).toBeDefined()
    expect(store.get(hex(1))).toBeUndefined()
    // The newest survive, the oldest went.
    expect(store.get(hex(10_001))).toBeDefined()
    expect(store.get(hex(2))).toBeUndefined()
    const stats = store.stats()
    expect(stats.evictions).toBe(evicted)
    expect(evicted).toBeGreaterThan(8000)
    const reader = new Database(path, { readonly: true })
    try {
      const counted = reader.query('SELECT count(*) AS entries, sum(bytes) AS bytes FROM cache_entries').get() as { entries: number; bytes: number }
      expect(counted).toEqual({ entries: stats.entries, bytes: stats.bytes })
      expect(counted.bytes).toBeLessThanOrEqual(maxBytes)
      expect(counted.entries + stats.evictions).toBe(10_002)
      const pages = reader.query('PRAGMA page_count').get() as { page_count: number }
      expect(pages.page_count * 4096).toBeLessThanOrEqual(maxBytes * 1.1)
    } finally {
      reader.close()
    }
    // The file on disk stayed near the bound the whole time (its WAL is bounded apart).
    expect(largestFile).toBeLessThanOrEqual(maxBytes * 1.1)
    expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(8 * 1024 * 1024)
  })

  test('after a large purge the freed pages are given back: the file shrinks', async () => {
    const path = cachePath()
    const store = openStore(path, { pruneEveryMs: 0 })
    for (let index = 0; index < 2000; index++) store.put(entry(index, { value: 'y'.repeat(1500), keyId: index < 1800 ? 'key_1' : 'key_2' }))
    await store.flush()
    const pagesOf = () => {
      const reader = new Database(path, { readonly: true })
      try {
        return (reader.query('PRAGMA page_count').get() as { page_count: number }).page_count
      } finally {
        reader.close()
      }
    }
    const before = pagesOf()
    expect(store.purge({ workspaceId: 'ws_1', keyId: 'key_1' })).toBe(1800)
    // The writer deletes again after its queue, and gives back what is free beyond a little slack.
    await store.flush()
    expect(pagesOf()).toBeLessThan(before / 3)
  })
})

describe('CacheStore across processes', () => {
  test("a second process on the same file sees the writer's entries, and its purge is seen by the writer; its own entries are found by a store opened after them (a store's misses are answered from memory)", async () => {
    const path = cachePath()
    const writer = openStore(path)
    writer.put(entry(1, { value: '"shared"' }))
    writer.put(entry(2, { keyId: 'key_2' }))
    await writer.flush()
    const script = `
      import { CacheStore } from ${JSON.stringify(join(import.meta.dir, '../../src/storage/cache-store.ts'))}
      const store = new CacheStore(${JSON.stringify(path)}, { maxBytes: 8 * 1024 * 1024, pruneEveryMs: 0 })
      const seen = store.get(${JSON.stringify(hex(1))})
      const purged = store.purge({ workspaceId: 'ws_1', keyId: 'key_2' })
      store.put({ key: ${JSON.stringify(hex(3))}, workspaceId: 'ws_1', keyId: 'key_1', model: 'm', createdAt: Date.now(), expiresAt: Date.now() + 60000, gateway: 'groq', costNanoUsd: 5, value: '"from the other process"' })
      await store.close()
      console.log(JSON.stringify({ seen, purged }))
    `
    const child = Bun.spawnSync([process.execPath, '-e', script], { stderr: 'pipe' })
    expect(child.stderr.toString()).toBe('')
    const answer = JSON.parse(child.stdout.toString())
    expect(answer).toMatchObject({ seen: { value: '"shared"', gateway: 'openai', costNanoUsd: 1234 }, purged: 1 })
    expect(writer.get(hex(2))).toBeUndefined()
    // The serving store knows its file's keys from when it opened and from its own writes: an entry
    // another process added is a miss to it (a cache may miss; the answer is fetched and stored
    // again), and found by any store opened since. In service only the serving process adds entries.
    expect(writer.get(hex(3))).toBeUndefined()
    await writer.close()
    const reopened = openStore(path)
    expect(reopened.get(hex(3))).toMatchObject({ value: '"from the other process"', gateway: 'groq' })
    expect(reopened.get(hex(1))).toMatchObject({ value: '"shared"' })
  })

  test('a store reopened on the file finds what was written before it closed', async () => {
    const path = cachePath()
    const first = openStore(path)
    for (let index = 0; index < 50; index++) first.put(entry(index))
    // close() commits what is queued.
    await first.close()
    const second = openStore(path)
    expect(second.get(hex(49))).toBeDefined()
    expect(second.stats().entries).toBe(50)
    expect(first.get(hex(1))).toBeUndefined()
  })
})

describe('cache metrics', () => {
  test('router_cache_requests_total by result, router_cache_entries, router_cache_bytes and router_cache_evictions_total render', () => {
    const metrics = new Metrics()
    const empty = parseExposition(metrics.render())
    expect(empty.problems).toEqual([])
    expect(empty.families.get('router_cache_requests_total')).toMatchObject({ type: 'counter', samples: [] })
    expect(empty.families.get('router_cache_entries')?.samples.map((sample) => sample.value)).toEqual([0])
    metrics.cacheStats = () => ({ entries: 12, bytes: 34_567, evictions: 8 })
    metrics.countCacheRequest('hit')
    metrics.countCacheRequest('hit')
    metrics.countCacheRequest('miss')
    const text = metrics.render()
    const { families, problems } = parseExposition(text)
    expect(problems).toEqual([])
    expect(text).toContain('router_cache_requests_total{result="hit"} 2\n')
    expect(text).toContain('router_cache_requests_total{result="miss"} 1\n')
    expect(families.get('router_cache_entries')).toMatchObject({ type: 'gauge' })
    expect(families.get('router_cache_bytes')).toMatchObject({ type: 'gauge' })
    expect(families.get('router_cache_evictions_total')).toMatchObject({ type: 'counter' })
    expect(text).toContain('router_cache_entries 12\n')
    expect(text).toContain('router_cache_bytes 34567\n')
    expect(text).toContain('router_cache_evictions_total 8\n')
  })
})

// A file written by hand where the cache file should be is not silently taken over.
test('a non-SQLite file at the path is refused', () => {
  const path = cachePath()
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, 'not a database at all, just text that is long enough to fill a header ......................................')
  expect(() => new CacheStore(path, { maxBytes: 1024 * 1024, pruneEveryMs: 0 })).toThrow()
})
