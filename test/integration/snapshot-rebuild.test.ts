/**
 * The configuration snapshot follows writes without a request rebuilding it (storage/snapshot.ts):
 * this process's write of one row reads that row again at once; anything else is rebuilt from rows
 * read on the read thread, which sends only what changed since the rows the serving thread holds
 * (storage/snapshot-rows.ts). Either way a request right after a write sees it (CONTRACT §3).
 */
import { Database } from 'bun:sqlite'
import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startTestServer } from '../harness/server'
import { createInferenceKey } from '../harness/api'
import { openStorage } from '../../src/storage/client'
import { createRuntime } from '../../src/runtime'
import { loadConfig } from '../../src/config/env'
import { silentLogger } from '../../src/observability/logger'
import { SnapshotRowReader, SnapshotRowStore } from '../../src/storage/snapshot-rows'

const originalRead = SnapshotRowReader.prototype.read
const originalPatch = SnapshotRowStore.prototype.patch
afterEach(() => {
  SnapshotRowReader.prototype.read = originalRead
  SnapshotRowStore.prototype.patch = originalPatch
})

test('a write is seen by the very next request: its own row read again at once, another process\'s change on the read thread', async () => {
  await using server = await startTestServer()
  let readsHere = 0
  let patches = 0
  SnapshotRowReader.prototype.read = function (this: SnapshotRowReader, ...args: Parameters<SnapshotRowReader['read']>) {
    readsHere++
    return originalRead.apply(this, args)
  }
  SnapshotRowStore.prototype.patch = function (this: SnapshotRowStore, ...args: Parameters<SnapshotRowStore['patch']>) {
    patches++
    return originalPatch.apply(this, args)
  }
  const chat = (secret: string) =>
    fetch(`${server.rootUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    })
  const first = await createInferenceKey(server)
  // The first request builds the first snapshot here (start-up); it knows the key.
  expect((await chat(first.key)).status).not.toBe(401)
  expect(readsHere).toBe(1)
  const waits = server.runtime.snapshots.requestWaits()

  // This process's writes, each followed at once by a request: the key's row is read again in the
  // write, so the request neither waits nor sees the old state.
  for (let round = 0; round < 5; round++) {
    const key = await createInferenceKey(server)
    expect((await chat(key.key)).status).not.toBe(401)
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { revoked: true })).status).toBe(200)
    const revoked = await chat(key.key)
    expect(revoked.status).toBe(401)
    expect(((await revoked.json()) as any).error.code).toBe('revoked_api_key')
  }
  expect(patches).toBe(10)
  expect(server.runtime.snapshots.requestWaits()).toBe(waits)
  expect(readsHere).toBe(1)

  // Another process revokes a key: the next request waits for the rebuild, read on the read thread.
  const other = createRuntime(loadConfig(server.env), { logger: silentLogger })
  try {
    other.repositories.inferenceKeys.update(server.workspaceId, first.id, [{ revokedAt: new Date().toISOString() }])
  } finally {
    other.storage.close()
  }
  const revoked = await chat(first.key)
  expect(revoked.status).toBe(401)
  expect(((await revoked.json()) as any).error.code).toBe('revoked_api_key')
  expect(readsHere).toBe(1)
  expect(server.runtime.snapshots.builds()).toBeGreaterThan(patches + 1)
})

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

test('the reader sends only the rows that changed since the state the store holds', () => {
  const dir = mkdtempSync(join(tmpdir(), 'snapshot-rows-'))
  dirs.push(dir)
  const storage = openStorage(join(dir, 'router.db'))
  const sqlite = storage.sqlite
  const now = new Date().toISOString()
  sqlite.run("insert into workspaces (id, name, created_at) values ('w1', 'one', ?)", [now])
  sqlite.run("insert into provider_keys (id, workspace_id, gateway, secret_ciphertext, key_last4, created_at) values ('p1', 'w1', 'openai', 'x', 'abcd', ?)", [now])
  for (let index = 0; index < 50; index++) {
    sqlite.run('insert into inference_keys (id, workspace_id, key_prefix, secret_hash, created_at) values (?, ?, ?, ?, ?)', [`k${index}`, 'w1', `rt_live_${index}`, `hash${index}`, now])
    sqlite.run("insert into routing_targets (key_id, position, provider_key_id) values (?, 0, 'p1')", [`k${index}`])
  }
  const reader = new SnapshotRowReader()
  const store = new SnapshotRowStore()
  // The thread's own read-only connection, as on the read thread.
  const readonly = new Database(join(dir, 'router.db'), { readonly: true })
  const read = () => reader.read(readonly, store.request({}))

  const full = read()
  expect(full.base).toBeNull()
  expect(full.keys.upsert).toHaveLength(50)
  expect(full.keys.upsert[0]!.targets).toEqual([{ providerKeyId: 'p1', weight: null, ttfbMs: null }])
  expect(store.apply(full)).toBe(true)

  // Nothing changed: nothing sent.
  const none = read()
  expect(none.base).toBe(full.token)
  expect([none.keys.upsert.length, none.keys.remove.length, none.providers.upsert.length, none.workspaces.upsert.length]).toEqual([0, 0, 0, 0])
  expect(store.apply(none)).toBe(true)

  // One key revoked, one key's rule given a second target, one key deleted, a provider disabled.
  sqlite.run("update inference_keys set revoked_at = ? where id = 'k3'", [now])
  sqlite.run("insert into routing_targets (key_id, position, provider_key_id, weight) values ('k7', 1, 'p1', 5)")
  sqlite.run("delete from inference_keys where id = 'k9'")
  sqlite.run("update provider_keys set disabled_at = ? where id = 'p1'", [now])
  const changed = read()
  expect(changed.keys.upsert.map((key) => key.id).sort()).toEqual(['k3', 'k7'])
  expect(changed.keys.remove).toEqual(['k9'])
  expect(changed.providers.upsert.map((provider) => provider.disabled)).toEqual([1])
  expect(store.apply(changed)).toBe(true)
  expect(store.keys.size).toBe(49)
  expect(store.keys.get('k3')!.revoked).toBe(1)
  expect(store.keys.get('k7')!.targets).toHaveLength(2)

  // Changes read for another state are refused, and the next read sends everything.
  const stale = { ...read(), base: 12345 }
  expect(store.apply(stale)).toBe(false)
  const again = read()
  expect(again.base).toBeNull()
  expect(again.keys.upsert).toHaveLength(49)
  expect(store.apply(again)).toBe(true)
  // A new reader (a restarted thread) does not hold the store's state: everything again.
  expect(new SnapshotRowReader().read(sqlite, store.request({})).base).toBeNull()
  // A write of this process: its one row read again in place, a deleted one dropped.
  sqlite.run("update inference_keys set steering_message = 'be brief' where id = 'k4'")
  store.patch(sqlite, { table: 'keys', id: 'k4' })
  expect(store.keys.get('k4')!.steeringMessage).toBe('be brief')
  expect(store.keys.get('k4')!.targets).toHaveLength(1)
  sqlite.run("delete from inference_keys where id = 'k5'")
  store.patch(sqlite, { table: 'keys', id: 'k5' })
  expect(store.keys.has('k5')).toBe(false)
  sqlite.run("update provider_keys set disabled_at = null where id = 'p1'")
  store.patch(sqlite, { table: 'providers', id: 'p1' })
  expect(store.providers.get('p1')!.disabled).toBe(0)
  // The reader's next changes still apply on top, and carry those rows again.
  const after = read()
  expect(store.apply(after)).toBe(true)
  expect(after.keys.upsert.map((key) => key.id)).toEqual(['k4'])
  expect(after.keys.remove).toEqual(['k5'])
  expect(store.keys.get('k4')!.steeringMessage).toBe('be brief')

  // A row this process added and patched in, then deleted without a patch (a delete that cascades
  // is rebuilt, not patched): the reader never sent it, and still reports it gone.
  sqlite.run("insert into provider_keys (id, workspace_id, gateway, secret_ciphertext, key_last4, created_at) values ('p2', 'w1', 'groq', 'y', 'wxyz', ?)", [now])
  store.patch(sqlite, { table: 'providers', id: 'p2' })
  expect(store.providers.has('p2')).toBe(true)
  sqlite.run("delete from provider_keys where id = 'p2'")
  const gone = read()
  expect(store.apply(gone)).toBe(true)
  expect(gone.providers.remove).toEqual(['p2'])
  expect(store.providers.has('p2')).toBe(false)

  // A value patched in, then set back by another connection to what the reader last sent: sent again.
  sqlite.run("update workspaces set suspended = 1 where id = 'w1'")
  store.patch(sqlite, { table: 'workspaces', id: 'w1' })
  expect(store.workspaces.get('w1')!.suspended).toBe(1)
  sqlite.run("update workspaces set suspended = 0 where id = 'w1'")
  const reverted = read()
  expect(store.apply(reverted)).toBe(true)
  expect(reverted.workspaces.upsert.map((workspace) => [workspace.id, workspace.suspended])).toEqual([['w1', 0]])
  expect(store.workspaces.get('w1')!.suspended).toBe(0)
  readonly.close()
  storage.close()
})
