/**
 * The response cache's writer thread (see cache-store.ts), started by an entry module
 * (cache-worker.ts, or one that also prepares raw values: runCacheWriter): its own connection writes the entries,
 * the LRU stamps of hits and the purges' second pass, batched in transactions; keeps the entries'
 * bytes and the file's used pages under the bound by deleting expired entries, then the least
 * recently used; prunes expired entries when told (about once a minute) and gives freed pages back.
 */
import type { Database } from 'bun:sqlite'
import { cacheRowOverheadBytes, countEntries, deleteInChunks, openCacheDatabase, shrinkFile, usedFileBytes } from './cache-file'
import { unpackWrite, type CacheWrite, type CacheWriterCommand, type CacheWriterReply, type PrepareValue } from './cache-protocol'

declare const self: Worker

/** At most this many puts, stamps and purges in one transaction: another writer waits one at most. */
const operationsPerTransaction = 256
/** Rows looked at per step of an eviction. */
const evictionStep = 256

type Operation = { kind: 'put'; entry: CacheWrite; at: number } | { kind: 'used'; key: string; at: number } | { kind: 'purge'; workspaceId: string; keyId: string | null }

let database: Database | undefined
let statements: ReturnType<typeof prepare> | undefined
let maxBytes = 0
let total = { entries: 0, bytes: 0 }
/**
 * The LRU stamp (Unix ms): never goes back, and moves on by a fraction of a millisecond at each
 * batch, so a batch's rows sort after an earlier batch's even within the same millisecond.
 */
let clock = 0
let queue: CacheWriterCommand[] = []
let scheduled = false
/** The keys deleted since the last reply (evicted, expired, purged): the serving thread's filter forgets them. */
let deleted: string[] = []
/** Makes the stored value of an entry given raw (runCacheWriter's). */
let prepareValue: PrepareValue | undefined

const reply = (message: CacheWriterReply) => self.postMessage(message)
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))
const stamp = (now: number) => (clock = Math.max(now, clock + 1 / 1024))

function prepare(database: Database) {
  return {
    insert: database.query(
      `INSERT INTO cache_entries (key, workspace_id, key_id, model, created_at, expires_at, last_used_at, gateway, cost_nano_usd, bytes, semantic_key, value, embedding)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    replaced: database.query<{ bytes: number }, [string]>('DELETE FROM cache_entries WHERE key = ? RETURNING bytes'),
    used: database.query('UPDATE cache_entries SET last_used_at = ?1 WHERE key = ?2 AND last_used_at < ?1'),
    leastUsed: database.query<{ id: number; bytes: number }, [number]>('SELECT rowid AS id, bytes FROM cache_entries INDEXED BY cache_entries_lru ORDER BY last_used_at LIMIT ?'),
    evict: database.query<{ key: string }, [number]>('DELETE FROM cache_entries WHERE rowid = ? RETURNING key'),
  }
}

/** The size counted against the bound: the value's UTF-8 bytes, the embedding's, and a row's overhead. */
function sizeOf(entry: CacheWrite, value: string): number {
  return Buffer.byteLength(value, 'utf8') + (entry.embedding?.byteLength ?? 0) + cacheRowOverheadBytes
}

/** The value to store: as given, or made from the raw answer here; undefined when it is not one to keep. */
function valueOf(entry: CacheWrite): string | undefined {
  if (entry.value !== undefined) return entry.value
  if (!entry.raw || !prepareValue) return undefined
  try {
    return prepareValue(entry.raw)
  } catch {
    return undefined
  }
}

/** Deletes the least recently used entries until `enough(freedBytes)`; returns how many went. */
function evictLeastUsed(enough: (freed: number) => boolean): number {
  let evicted = 0
  let freed = 0
  while (!enough(freed)) {
    const rows = statements!.leastUsed.all(evictionStep)
    if (rows.length === 0) break
    for (const row of rows) {
      for (const gone of statements!.evict.all(row.id)) deleted.push(gone.key)
      evicted++
      freed += row.bytes
      total = { entries: total.entries - 1, bytes: total.bytes - row.bytes }
      if (enough(freed)) break
    }
  }
  return evicted
}

/**
 * Makes room for `incoming` bytes: expired entries first, then the least recently used. It frees a
 * little more than needed (1/32 of the bound) so that a run of writes evicts once in a while, not at
 * every one.
 */
function makeRoom(incoming: number, now: number): number {
  if (total.bytes + incoming <= maxBytes) return 0
  const target = Math.max(0, maxBytes - incoming - Math.floor(maxBytes / 32))
  const expired = deleteInChunks(database!, 'expires_at <= ?', [now], deleted)
  total = { entries: total.entries - expired.entries, bytes: total.bytes - expired.bytes }
  return evictLeastUsed(() => total.bytes <= target)
}

/** One transaction: the operations in order, then the file's used pages brought under the bound. */
function applyOperations(operations: Operation[]): { evicted: number; purged: boolean } {
  let evicted = 0
  let purged = false
  database!.transaction(() => {
    for (const operation of operations) {
      if (operation.kind === 'used') statements!.used.run(operation.at, operation.key)
      else if (operation.kind === 'purge') {
        if (operation.keyId === null) deleteInChunks(database!, 'workspace_id = ? AND key_id IS NULL', [operation.workspaceId], deleted)
        else deleteInChunks(database!, 'workspace_id = ? AND key_id = ?', [operation.workspaceId, operation.keyId], deleted)
        purged = true
      } else {
        const { entry, at } = operation
        const value = valueOf(entry)
        if (value === undefined) continue
        const bytes = sizeOf(entry, value)
        // An answer of over a quarter of the bound would push out most of the cache: not stored.
        if (bytes > maxBytes / 4) continue
        for (const old of statements!.replaced.all(entry.key)) total = { entries: total.entries - 1, bytes: total.bytes - old.bytes }
        evicted += makeRoom(bytes, at)
        const embedding = entry.embedding ? new Uint8Array(entry.embedding.buffer, entry.embedding.byteOffset, entry.embedding.byteLength) : null
        statements!.insert.run(
          entry.key,
          entry.workspaceId,
          entry.keyId ?? null,
          entry.model,
          entry.createdAt,
          entry.expiresAt,
          at,
          entry.gateway,
          entry.costNanoUsd,
          bytes,
          entry.semanticKey ?? null,
          value,
          embedding,
        )
        total = { entries: total.entries + 1, bytes: total.bytes + bytes }
      }
    }
    // The bytes counted and the pages used differ (pages part filled, index pages): the file's own
    // use is held under the bound too, and what is over it given back.
    const over = () => usedFileBytes(database!) - maxBytes
    for (let excess = over(); excess > 0; excess = over()) {
      const gone = evictLeastUsed((freed) => freed >= excess + Math.floor(maxBytes / 32))
      if (gone === 0) break
      evicted += gone
    }
    shrinkFile(database!, maxBytes)
  })()
  return { evicted, purged }
}

function write(commands: Extract<CacheWriterCommand, { type: 'write' | 'purge' }>[]) {
  const operations: Operation[] = []
  for (const command of commands) {
    if (command.type === 'purge') {
      operations.push({ kind: 'purge', workspaceId: command.workspaceId, keyId: command.keyId })
      continue
    }
    const at = stamp(command.now)
    for (const entry of command.puts) operations.push({ kind: 'put', entry, at })
    for (const key of command.used) operations.push({ kind: 'used', key, at })
  }
  for (let start = 0; start < operations.length; start += operationsPerTransaction) {
    const chunk = operations.slice(start, start + operationsPerTransaction)
    let chars = 0
    let puts = 0
    for (const operation of chunk) {
      if (operation.kind !== 'put') continue
      chars += operation.entry.value?.length ?? operation.entry.raw?.bytes.byteLength ?? 0
      puts++
    }
    try {
      const { evicted, purged } = applyOperations(chunk)
      // A purge on the serving thread's connection deleted rows this count still holds.
      if (purged) total = countEntries(database!)
      reply({ type: 'committed', ...total, evicted, chars, puts, deleted: takeDeleted() })
    } catch (error) {
      resync()
      reply({ type: 'failed', error: messageOf(error), chars, puts })
    }
  }
}

/** The keys deleted since the last reply, handed over. */
function takeDeleted(): string[] {
  const keys = deleted
  deleted = []
  return keys
}

function prune(now: number) {
  try {
    deleteInChunks(database!, 'expires_at <= ?', [now], deleted)
    shrinkFile(database!, maxBytes)
  } catch (error) {
    reply({ type: 'failed', error: messageOf(error), chars: 0, puts: 0 })
  }
  // Other processes (the CLI's purge, the scheduler's prune) delete too: the count is read again.
  resync()
  reply({ type: 'committed', ...total, evicted: 0, chars: 0, puts: 0, deleted: takeDeleted() })
}

function resync() {
  try {
    total = countEntries(database!)
  } catch {}
}

function drain() {
  scheduled = false
  const commands = queue
  queue = []
  for (let index = 0; index < commands.length; ) {
    const command = commands[index]!
    if (!database && command.type !== 'open') {
      // The writer could not open the file (it said so): nothing to do but answer.
      if (command.type === 'flush') reply({ type: 'flushed', id: command.id })
      if (command.type === 'close') reply({ type: 'closed' })
      index++
      continue
    }
    if (command.type === 'write' || command.type === 'purge') {
      // Consecutive writes and purges go in as few transactions as their size allows.
      let end = index
      while (end < commands.length && (commands[end]!.type === 'write' || commands[end]!.type === 'purge')) end++
      write(commands.slice(index, end) as Extract<CacheWriterCommand, { type: 'write' | 'purge' }>[])
      index = end
      continue
    }
    index++
    if (command.type === 'open') {
      try {
        database = openCacheDatabase(command.path, false)
        statements = prepare(database)
        maxBytes = command.maxBytes
        total = countEntries(database)
      } catch (error) {
        database?.close()
        database = undefined
        reply({ type: 'failed', error: messageOf(error), chars: 0, puts: 0, fatal: true })
        continue
      }
      prune(command.now)
    } else if (command.type === 'prune') prune(command.now)
    else if (command.type === 'flush') reply({ type: 'flushed', id: command.id })
    else {
      database!.close()
      database = undefined
      reply({ type: 'closed' })
    }
  }
}

/**
 * Runs this thread as the cache's writer. `prepare`: makes the stored value of an entry put raw (the
 * cache stage decodes answers here, off the serving thread); an entry it gives no value is not kept.
 */
export function runCacheWriter(prepare?: PrepareValue) {
  prepareValue = prepare
  self.onmessage = (event: MessageEvent<CacheWriterCommand>) => {
    const command = event.data
    queue.push(command.type === 'write-packed' ? unpackWrite(command) : command)
    // Commands that arrive together are written together.
    if (!scheduled) {
      scheduled = true
      setTimeout(drain, 0)
    }
  }
}
