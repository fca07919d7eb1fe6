/**
 * The master key against the database (CONTRACT §3): a key check value is stored on first use and
 * checked at every start; a wrong key is refused, and no new key is minted beside stored secrets.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { existsSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { defaultDataDir, loadConfig } from '../../src/config/env'
import { createRuntime, type Runtime } from '../../src/runtime'
import { silentLogger } from '../../src/observability/logger'
import { encryptedColumns } from '../../src/storage/client'
import { MasterKeyError, masterKeyCheckValue } from '../../src/storage/crypto'
import { authenticateManagementKey, createWorkspace } from '../../src/management/workspaces'
import { createProvider } from '../../src/management/providers'

const repoRoot = resolve(import.meta.dir, '../..')
const keyA = Buffer.alloc(32, 21).toString('base64')
const keyB = Buffer.alloc(32, 22).toString('hex')
const tempDirs: string[] = []

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'router-master-key-'))
  tempDirs.push(dir)
  return dir
}

afterEach(() => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function open(dataDir: string, masterKey?: string): Runtime {
  return createRuntime(loadConfig({ RT_DATA_DIR: dataDir, ...(masterKey ? { RT_MASTER_KEY: masterKey } : {}) }), { logger: silentLogger })
}

/** A workspace with one stored provider secret (an encrypted row). */
function storeProviderSecret(runtime: Runtime): void {
  const created = createWorkspace(runtime, 'w')
  const actor = authenticateManagementKey(runtime, created.management_key)!
  createProvider(runtime, actor, { gateway: 'openai', key: 'sk-upstream-secret-1234' })
}

function storedCheckValue(runtime: Runtime): string | undefined {
  return runtime.storage.sqlite.query<{ check_value: string }, []>('select check_value from master_key_check').get()?.check_value
}

describe('master key check value', () => {
  test('the first start stores the key check value; the same key opens the database again', () => {
    const dataDir = tempDir()
    const first = open(dataDir, keyA)
    expect(storedCheckValue(first)).toBe(masterKeyCheckValue(Buffer.from(keyA, 'base64')))
    first.storage.close()
    open(dataDir, keyA).storage.close()
  })

  test('a well-formed but different RT_MASTER_KEY is refused, even on a database with no secrets yet', () => {
    const dataDir = tempDir()
    open(dataDir, keyA).storage.close()
    expect(() => open(dataDir, keyB)).toThrow(MasterKeyError)
    expect(() => open(dataDir, keyB)).toThrow(/not the key of the database/)
  })

  test('a master.key file that is not the database key is refused', async () => {
    const dataDir = tempDir()
    open(dataDir, keyA).storage.close()
    await Bun.write(join(dataDir, 'master.key'), keyB + '\n')
    expect(() => open(dataDir)).toThrow(/master\.key is not the key of the database/)
  })

  test('no new master key beside a database that holds secrets: refused, and no master.key is written', () => {
    const dataDir = tempDir()
    const first = open(dataDir)
    expect(first.masterKeyCreated).toBe(true)
    storeProviderSecret(first)
    first.storage.close()
    unlinkSync(join(dataDir, 'master.key'))

    expect(() => open(dataDir)).toThrow(/no master key/)
    expect(existsSync(join(dataDir, 'master.key'))).toBe(false)
    // The encrypted rows alone are enough to refuse (a database from before the check value).
    const database = new Database(join(dataDir, 'router.db'))
    database.exec('delete from master_key_check')
    database.close()
    expect(() => open(dataDir)).toThrow(/holds secrets encrypted under a master key/)
    expect(existsSync(join(dataDir, 'master.key'))).toBe(false)
  })

  test('a database from before the check value: a key that cannot decrypt its secrets is refused; the right one stores the check value', () => {
    const dataDir = tempDir()
    const first = open(dataDir, keyA)
    storeProviderSecret(first)
    first.storage.sqlite.exec('delete from master_key_check')
    first.storage.close()

    expect(() => open(dataDir, keyB)).toThrow(/not the key of the database/)
    const again = open(dataDir, keyA)
    expect(storedCheckValue(again)).toBe(masterKeyCheckValue(Buffer.from(keyA, 'base64')))
    again.storage.close()
  })

  test('a database with no secrets and no check value gets a new key file (the first start)', () => {
    const dataDir = tempDir()
    const first = open(dataDir)
    expect(first.masterKeyCreated).toBe(true)
    expect(existsSync(join(dataDir, 'master.key'))).toBe(true)
    first.storage.close()
    const second = open(dataDir)
    expect(second.masterKeyCreated).toBe(false)
    second.storage.close()
  })

  test('every encrypted column of the schema is checked (the `…_ciphertext` naming rule)', () => {
    expect(encryptedColumns).toContainEqual({ table: 'provider_keys', column: 'secret_ciphertext' })
    expect(encryptedColumns).toContainEqual({ table: 'inference_keys', column: 'webhook_secret_ciphertext' })
  })
})

describe('the default data directory', () => {
  test("RT_DATA_DIR unset: the repository's data/, whatever the current directory; a given relative path resolves from the current directory", () => {
    expect(defaultDataDir).toBe(join(repoRoot, 'data'))
    expect(loadConfig({}).dataDir).toBe(join(repoRoot, 'data'))
    expect(loadConfig({}).dbPath).toBe(join(repoRoot, 'data', 'router.db'))
    expect(loadConfig({ RT_DATA_DIR: 'somewhere' }).dataDir).toBe(resolve(process.cwd(), 'somewhere'))
    expect(loadConfig({ RT_DB_PATH: 'x/router.db' }).dbPath).toBe(resolve(process.cwd(), 'x/router.db'))
    expect(loadConfig({ RT_DB_PATH: ':memory:' }).dbPath).toBe(':memory:')
  })
})
