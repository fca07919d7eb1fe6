/**
 * `./scripts/cli backup --to PATH` (CONTRACT §14) while the service serves under load. The copy
 * passes `PRAGMA integrity_check`. A second service started on it, in a new data directory with
 * the same master key, serves a key made before the backup. The restore is the one docs/OPERATING.md
 * gives: the copy put at RT_DB_PATH (here the default `$RT_DATA_DIR/router.db`), then a start.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { baseEnvironment, repoRoot, startService, tempDir } from '../harness/service-process'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'

const masterKey = Buffer.alloc(32, 7).toString('base64')
const mocks: MockGateway[] = []

afterEach(async () => {
  for (const mock of mocks.splice(0)) await mock.close()
})

async function cli(dataDir: string, ...argv: string[]): Promise<{ code: number; json: any }> {
  const child = Bun.spawn([`${repoRoot}/scripts/cli`, ...argv], {
    cwd: repoRoot,
    env: { ...baseEnvironment(), RT_SKIP_INSTALL: '1', RT_DATA_DIR: dataDir, RT_MASTER_KEY: masterKey },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, json: JSON.parse((code === 0 ? stdout : stderr).trim().split('\n')[0]!) }
}

async function manage(rootUrl: string, managementKey: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${rootUrl}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${managementKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: response.status, json: (await response.json()) as any }
}

const chat = (rootUrl: string, secret: string) =>
  fetch(`${rootUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  })

describe('backup', () => {
  test('a copy taken under load passes its integrity check, and a service started on it serves a key made before', async () => {
    const mock = await startMockGateway({ models: ['gpt-4o-mini'] })
    mocks.push(mock)
    const dataDir = tempDir()
    const first = startService(dataDir, { RT_SKIP_INSTALL: '1', RT_LOG_LEVEL: 'warn', RT_MASTER_KEY: masterKey, RT_GATEWAY_URL_OPENAI: mock.url }, ['scripts/start'])
    const { rootUrl } = await first.listening()
    const managementKey = await first.managementKey()
    const provider = await manage(rootUrl, managementKey, 'POST', '/providers', { gateway: 'openai', key: 'sk-backup-secret-0123456789' })
    expect(provider.status).toBe(201)
    const made = await manage(rootUrl, managementKey, 'POST', '/keys', { name: 'before the backup', routing: { targets: [{ provider_key_id: provider.json.data.id }] } })
    expect(made.status).toBe(201)
    const key = made.json.data as { id: string; key: string }

    // Load: 8 clients in a loop, and a management write every 20 ms, for as long as the backup runs.
    let loading = true
    let answered = 0
    let failed = 0
    const clients = Array.from({ length: 8 }, async () => {
      while (loading) {
        const response = await chat(rootUrl, key.key)
        await response.arrayBuffer()
        if (response.status === 200) answered++
        else failed++
      }
    })
    const writes = (async () => {
      for (let index = 0; loading; index++) {
        await manage(rootUrl, managementKey, 'PATCH', `/keys/${key.id}`, { name: `renamed ${index}` })
        await Bun.sleep(20)
      }
    })()
    await Bun.sleep(300)
    const backups = join(tempDir(), 'backups')
    mkdirSync(backups)
    const target = join(backups, 'router-copy.db')
    const answeredBefore = answered
    const backup = await cli(dataDir, 'backup', '--to', target)
    const answeredDuringBackup = answered - answeredBefore
    await Bun.sleep(100)
    loading = false
    await Promise.all([...clients, writes])
    expect(backup).toEqual({ code: 0, json: { path: target, bytes: statSync(target).size } })
    expect(failed).toBe(0)
    // The service kept serving while the copy was made.
    expect(answeredDuringBackup).toBeGreaterThan(0)
    // Only the copy is left in the directory: no partial file, and it is the owner's alone.
    expect(readdirSync(backups)).toEqual(['router-copy.db'])
    expect(statSync(target).mode & 0o777).toBe(0o600)
    const copy = new Database(target, { readonly: true })
    expect(copy.query('PRAGMA integrity_check').all()).toEqual([{ integrity_check: 'ok' }])
    copy.close()

    // A second backup to the same path is refused: a backup never overwrites.
    const again = await cli(dataDir, 'backup', '--to', target)
    expect(again.code).toBe(1)
    expect(again.json.error).toContain('already exists')
    expect(first.stdout + first.stderr).not.toContain('sk-backup-secret')
    expect(await first.stop()).toBe(0)

    // Restore: the copy at RT_DB_PATH of a new data directory, the same master key, a start.
    const restoredDir = tempDir()
    copyFileSync(target, join(restoredDir, 'router.db'))
    const second = startService(restoredDir, { RT_SKIP_INSTALL: '1', RT_LOG_LEVEL: 'warn', RT_MASTER_KEY: masterKey, RT_GATEWAY_URL_OPENAI: mock.url }, ['scripts/start'])
    const restored = await second.listening()
    // Not a first start: no new workspace, no new management key.
    expect(second.stderr).not.toContain('management key:')
    const before = mock.calls('/chat/completions').length
    const response = await chat(restored.rootUrl, key.key)
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).choices[0].message.content).toBe('Hello from the mock.')
    // The provider secret was decrypted with the same master key and reached the gateway.
    const call = mock.calls('/chat/completions')[before]!
    expect(call.headers.authorization).toBe('Bearer sk-backup-secret-0123456789')
    const listed = await manage(restored.rootUrl, managementKey, 'GET', `/keys/${key.id}`)
    expect(listed.status).toBe(200)
    expect(listed.json.data.label).toMatch(/^renamed \d+$/)
    expect(await second.stop()).toBe(0)
  }, 60_000)

  test('a target in a directory that does not exist is refused, and nothing is written', async () => {
    const dataDir = tempDir()
    const missing = join(tempDir(), 'no-such-directory', 'copy.db')
    const result = await cli(dataDir, 'backup', '--to', missing)
    expect(result.code).toBe(1)
    expect(result.json.error).toContain('is not a directory')
    expect(existsSync(missing)).toBe(false)
  })
})
