/**
 * WAL checkpoints run on a worker thread with its own connection (storage/client.ts): the serving
 * connection stops checkpointing on commit, the worker copies the log into the database file, and
 * stop() hands checkpointing back.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStorage, type Storage } from '../../src/storage/client'
import { createRepositories } from '../../src/storage/repositories'
import type { RequestLogRow } from '../../src/storage/repositories/request-logs'

const directories: string[] = []
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true })
})

function freshStorage(): { storage: Storage; path: string } {
  const directory = mkdtempSync(join(tmpdir(), 'router-checkpoint-'))
  directories.push(directory)
  const path = join(directory, 'router.db')
  return { storage: openStorage(path), path }
}

const row = (index: number): RequestLogRow => ({
  id: `req-${index}`,
  workspaceId: 'ws_checkpoint',
  keyId: 'key_checkpoint',
  createdAt: 1_700_000_000_000 + index,
  endpoint: 'chat',
  gateway: 'openai',
  providerKeyId: 'pk_checkpoint',
  model: 'openai/gpt-4o-mini',
  upstreamModel: 'gpt-4o-mini',
  status: 200,
  errorCode: null,
  stream: false,
  latencyMs: 1.5,
  overheadMs: 0.05,
  ttfbMs: 1.2,
  attempts: 1,
  attemptPath: 'openai:ok',
  stageTimings: '{"auth":0.01}',
  inputTokens: 12,
  outputTokens: 180,
  clientIp: null,
  requestBody: null,
})

describe('background WAL checkpoints', () => {
  test('the worker copies committed pages into the database file; the serving connection does not checkpoint meanwhile', async () => {
    const { storage, path } = freshStorage()
    const repositories = createRepositories(storage, () => {})
    const copied: number[] = []
    const checkpoints = await storage.startBackgroundCheckpoints({ intervalMs: 10, onCheckpoint: (pages) => copied.push(pages) })
    expect((storage.sqlite.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint).toBe(0)

    // Well past the default 1000-page threshold: with checkpointing off here, only the worker copies.
    for (let batch = 0; batch < 40; batch++) repositories.requestLogs.insertMany(Array.from({ length: 250 }, (_, index) => row(batch * 250 + index)))
    for (let wait = 0; wait < 200 && copied.length === 0; wait++) await Bun.sleep(10)
    expect(copied.length).toBeGreaterThan(0)
    expect(copied.every((pages) => pages > 0)).toBe(true)

    await checkpoints.stop()
    expect((storage.sqlite.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint).toBe(1000)
    // Everything committed is readable from another connection, in insertion order.
    const reader = new Database(path, { readonly: true })
    const rows = reader.query('select id from request_logs order by seq').all() as { id: string }[]
    reader.close()
    expect(rows.length).toBe(10_000)
    expect(rows[0]!.id).toBe('req-0')
    expect(rows[9_999]!.id).toBe('req-9999')
    storage.close()
  })

  test('an in-memory database has nothing to checkpoint and stops at once', async () => {
    const storage = openStorage(':memory:')
    const checkpoints = await storage.startBackgroundCheckpoints({})
    await checkpoints.stop()
    storage.close()
  })
})
