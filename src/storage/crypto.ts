/** AES-256-GCM for provider secrets under RT_MASTER_KEY; SHA-256 hashes for our own key secrets. */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

export class MasterKeyError extends Error {}

/** Parses a 32-byte key written as 64 hex digits or base64. */
export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim()
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64')
  if (key.length !== 32) throw new MasterKeyError('RT_MASTER_KEY must be 32 bytes, written as 64 hex digits or base64')
  return key
}

/** What loadMasterKey needs to know about the database (storage/client.ts MasterKeyRecord). */
export interface MasterKeyDatabase {
  checkValue(): string | undefined
  saveCheckValue(value: string): string
  encryptedSample(): string | undefined
}

/**
 * The key check value stored beside the data: an HMAC of a fixed label under the master key. A
 * different key gives a different value; the value tells nothing about the key.
 */
export function masterKeyCheckValue(key: Buffer): string {
  return createHmac('sha256', key).update('router-master-key-check-v1').digest('hex')
}

/**
 * The master key from RT_MASTER_KEY, else from $RT_DATA_DIR/master.key, proved against the
 * database's key check value. A new key file is written (mode 0600, `created` tells the caller to
 * warn, CONTRACT §3) only for a database that holds no secrets under another key. A key that does
 * not match the database is refused: the service would fail to read every stored secret, and the
 * CLI would write new ones no server could read.
 */
export function loadMasterKey(options: { fromEnvironment: string | undefined; keyFilePath: string; databasePath: string; database: MasterKeyDatabase }): {
  key: Buffer
  created: boolean
} {
  const { fromEnvironment, keyFilePath, databasePath, database } = options
  let key: Buffer
  let source: string
  let created = false
  if (fromEnvironment) {
    key = parseMasterKey(fromEnvironment)
    source = 'RT_MASTER_KEY'
  } else if (existsSync(keyFilePath)) {
    key = parseMasterKey(readFileSync(keyFilePath, 'utf8'))
    source = keyFilePath
  } else {
    if (database.checkValue() !== undefined || database.encryptedSample() !== undefined) {
      throw new MasterKeyError(
        `no master key: RT_MASTER_KEY is unset and ${keyFilePath} does not exist, but the database ${databasePath} holds secrets encrypted under a master key. ` +
          'Set RT_MASTER_KEY to that key, or restore its master.key file (is RT_DATA_DIR the directory it was created in?). A new key would not read them, so none is created.',
      )
    }
    mkdirSync(dirname(keyFilePath), { recursive: true, mode: 0o700 })
    key = randomBytes(32)
    writeFileSync(keyFilePath, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
    chmodSync(keyFilePath, 0o600)
    source = keyFilePath
    created = true
  }

  const expected = masterKeyCheckValue(key)
  const mismatch = () =>
    new MasterKeyError(
      `the master key from ${source} is not the key of the database ${databasePath} (its key check value differs): refusing to start. ` +
        'Set RT_MASTER_KEY to the key this database was created with, or restore its master.key file.',
    )
  let stored = database.checkValue()
  if (stored === undefined) {
    // A database from before the check value: a stored secret must decrypt under this key.
    const sample = database.encryptedSample()
    if (sample !== undefined) {
      try {
        createSecretBox(key).decrypt(sample)
      } catch {
        throw mismatch()
      }
    }
    stored = database.saveCheckValue(expected)
  }
  if (!hashesEqual(stored, expected)) throw mismatch()
  return { key, created }
}

export interface SecretBox {
  encrypt(plaintext: string): string
  decrypt(ciphertext: string): string
}

/** Ciphertext format: `v1.<iv b64>.<tag b64>.<data b64>`. */
export function createSecretBox(key: Buffer): SecretBox {
  return {
    encrypt(plaintext) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
      return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), data.toString('base64')].join('.')
    },
    decrypt(ciphertext) {
      const [version, iv, tag, data] = ciphertext.split('.')
      if (version !== 'v1' || !iv || !tag || data === undefined) throw new MasterKeyError('unreadable secret ciphertext')
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'))
      decipher.setAuthTag(Buffer.from(tag, 'base64'))
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64')), decipher.final()]).toString('utf8')
    },
  }
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** Constant-time comparison of two hex hashes of equal length. */
export function hashesEqual(left: string, right: string): boolean {
  if (left.length !== right.length) return false
  return timingSafeEqual(Buffer.from(left, 'hex'), Buffer.from(right, 'hex'))
}

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** A random secret with a recognizable prefix, e.g. `rt_live_…` (40 random base62 characters). */
export function generateSecret(prefix: string, length = 40): string {
  const bytes = randomBytes(length * 2)
  let out = ''
  for (let i = 0; i < bytes.length && out.length < length; i++) {
    // 248 = 4 * 62: rejection sampling keeps the alphabet uniform.
    if (bytes[i]! < 248) out += alphabet[bytes[i]! % 62]
  }
  while (out.length < length) out += alphabet[randomBytes(1)[0]! % 62]
  return prefix + out
}

/** The displayed prefix of a secret: its type prefix plus 8 characters. */
export function displayPrefix(secret: string, typePrefix: string): string {
  return secret.slice(0, typePrefix.length + 8)
}

/**
 * Signs ids the service issues (response and batch ids) so altered or truncated ids are refused:
 * a 128-bit HMAC-SHA256 tag, base64url, under a key derived from the master key.
 */
export function createIdSigner(masterKey: Buffer): (text: string) => string {
  const key = createHmac('sha256', masterKey).update('router-id-signing-v1').digest()
  return (text) => createHmac('sha256', key).update(text).digest('base64url').slice(0, 22)
}
