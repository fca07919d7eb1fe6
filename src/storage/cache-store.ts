/**
 * The response cache's node-local store (CONTRACT §15 "Storage"): its own SQLite file, never the
 * main database and never in LiteFS's mount, because every node keeps its own cache. Reads are
 * synchronous on the serving thread (a hit is one read by primary key); writes (new entries, the
 * LRU stamps of hits, the size bound, the minute's prune) go to a writer thread (cache-worker.ts)
 * that batches them in transactions, so the serving thread never waits for a write lock or an fsync.
 * The file holds prompts' answers, so it is owner-only (0600) from its first byte, like the database.
 */
import type { Database, Statement } from 'bun:sqlite'
import { workerEntry } from '../worker-entry'
import { cacheBusyTimeoutMs, countEntries, deleteInChunks, openCacheDatabase } from './cache-file'
import { packWrite, type CacheWrite, type CacheWriterCommand, type CacheWriterReply, type RawValue } from './cache-protocol'

export * from './cache-file'
export * from './cache-protocol'

export interface CachedEntry {
  /** The stored answer as the cache stage wrote it (JSON); undefined for an entry put raw and not yet written. */
  value: string | undefined
  /** An entry put raw and not yet written by the writer thread. */
  raw?: RawValue
  /** Unix ms. */
  createdAt: number
  /** The gateway that served the stored answer. */
  gateway: string
  /** What the original answer cost, nano-USD; null when it was unpriced. */
  costNanoUsd: number | null
}

export interface SemanticCandidate {
  key: string
  embedding: Float32Array
  createdAt: number
}

export interface CacheStats {
  entries: number
  /** The sum of the entries' `bytes`: what the bound counts. */
  bytes: number
  /** Entries deleted to keep under the bound since this store was opened. */
  evictions: number
}

/** What the store logs (storage/ sits below observability/: any Logger fits). */
export interface CacheStoreLogger {
  warn(event: string, fields?: Record<string, unknown>): void
}

export interface CacheStoreOptions {
  /** The bound on the entries' bytes and on the file's used pages (RT_CACHE_MAX_MB × 1 MiB). */
  maxBytes: number
  now?: () => number
  logger?: CacheStoreLogger
  /** Told how many entries the writer deleted to keep under the bound, after each batch that did. */
  onEvict?: (count: number) => void
  /**
   * The writer thread's entry module: the storage's own (cache-worker.ts: values as they are given),
   * or one that runs runCacheWriter with a `prepare` for raw values (the cache stage's).
   */
  writer?: { beside: URL; underSrc: string }
  /**
   * How often the store prunes expired entries by itself, on its writer thread; default a minute,
   * 0 never (a thread that serves no requests: the scheduler's, whose `cache-prune` job prunes).
   */
  pruneEveryMs?: number
}

/** A writer that holds this many characters of answers not yet committed takes no more (a cache may drop). */
const maxQueuedChars = 64 * 1024 * 1024
const defaultPruneEveryMs = 60_000
/** How often hits are stamped used (scheduleTouch). */
const touchEveryMs = 1000
/** The bounds of the entries read lately (CacheStore.recent). */
const recentMaxEntries = 1024
const recentMaxChars = 16 * 1024 * 1024
/** After the writer failed, how long puts are dropped before a new writer thread is started. */
const restartAfterMs = 30_000

/** Bun's Worker, which also has ref() and unref() (the DOM type the global is typed with has not). */
type WriterThread = Worker & { ref(): void; unref(): void }

export class CacheStore {
  private readonly database: Database
  private readonly hit: Statement<Omit<CachedEntry, 'raw'> & { expiresAt: number }, [string, number, number]>
  private readonly semantic: Statement<{ key: string; embedding: Uint8Array; createdAt: number }, [string, number, number]>
  private readonly now: () => number
  private readonly maxBytes: number
  private readonly writer: { beside: URL; underSrc: string }
  private readonly logger?: CacheStoreLogger
  private readonly onEvict?: (count: number) => void
  private worker: WriterThread | undefined
  private workerFailedAt = -Infinity
  private puts: CacheWrite[] = []
  /**
   * The entries put and not yet committed by the writer, by key (the latest of each), and the ones
   * sent to it in the order it takes them: a read finds an answer the moment it is stored (a
   * Responses answer fetched by its id right after it was given).
   */
  private readonly pending = new Map<string, CacheWrite>()
  private sent: CacheWrite[] = []
  private sentTaken = 0
  private used = new Set<string>()
  private queuedChars = 0
  /** Characters of values posted to the writer and not yet committed. */
  private inFlightChars = 0
  private sendScheduled = false
  private touchTimer: ReturnType<typeof setTimeout> | undefined = undefined
  private nextFlushId = 1
  private readonly flushes = new Map<number, { resolve(): void; reject(error: Error): void }>()
  private onClosed: (() => void) | undefined
  private readonly timer: ReturnType<typeof setInterval> | undefined
  private counts: { entries: number; bytes: number }
  /**
   * The entries this store knows of, counted by a 52-bit fingerprint of their key (cache stage keys are hex
   * SHA-256): a miss is answered from memory, without a read (a read costs microseconds, the miss of
   * a cached key's every new question pays it otherwise). Loaded when the store opens, kept up to date
   * with this store's puts and the deletes its writer reports; deletes by another process (the
   * scheduler's prune) leave a fingerprint behind, which costs a read that finds nothing, never a
   * wrong answer.
   */
  private readonly present = new Map<number, number>()
  /**
   * Entries read lately, by key, with their expiry, the least recently read first (bounded by
   * `recentMaxEntries` and `recentMaxChars`): a hit on an entry read lately reads nothing from the
   * file, since a read costs each hit more than the rest of its lookup. An entry is dropped from it
   * when this store puts, purges or deletes its key; one another process deleted is still whole
   * and unexpired, and a purge elsewhere is a time every lookup checks (`notBefore`).
   */
  private readonly recent = new Map<string, { entry: CachedEntry; expiresAt: number }>()
  private recentChars = 0
  private evictions = 0
  private dropped = 0
  private closing: Promise<void> | undefined

  constructor(
    private readonly path: string,
    options: CacheStoreOptions,
  ) {
    if (path === ':memory:' || path === '') throw new Error('the response cache needs a file path (RT_CACHE_PATH): its writer thread opens the same file')
    this.maxBytes = options.maxBytes
    this.writer = options.writer ?? { beside: new URL('./cache-worker.ts', import.meta.url), underSrc: './storage/cache-worker.ts' }
    this.now = options.now ?? Date.now
    this.logger = options.logger
    this.onEvict = options.onEvict
    this.database = openCacheDatabase(path, true)
    this.hit = this.database.query(
      'SELECT value, created_at AS createdAt, expires_at AS expiresAt, gateway, cost_nano_usd AS costNanoUsd FROM cache_entries WHERE key = ? AND expires_at > ? AND created_at >= ?',
    )
    this.semantic = this.database.query(
      'SELECT key, embedding, created_at AS createdAt FROM cache_entries WHERE semantic_key = ? AND expires_at > ? AND embedding IS NOT NULL ORDER BY created_at DESC LIMIT ?',
    )
    this.counts = countEntries(this.database)
    for (const row of this.database.query<{ key: string }, []>('SELECT key FROM cache_entries').all()) this.remember(row.key)
    const everyMs = options.pruneEveryMs ?? defaultPruneEveryMs
    if (everyMs > 0) {
      this.timer = setInterval(() => this.post({ type: 'prune', now: this.now() }), everyMs)
      this.timer.unref?.()
    }
  }

  /**
   * The entry under `key` if it has not expired (and is at most `maxAgeMs` old, and made at or after
   * `notBefore`, Unix ms: the last purge); a hit is stamped used.
   */
  get(key: string, maxAgeMs?: number, notBefore?: number): CachedEntry | undefined {
    if (this.closing) return undefined
    const print = fingerprint(key)
    if (print !== undefined && !this.present.has(print)) return undefined
    const now = this.now()
    const since = Math.max(maxAgeMs === undefined ? Number.MIN_SAFE_INTEGER : now - maxAgeMs, notBefore ?? Number.MIN_SAFE_INTEGER)
    const queued = this.pending.get(key)
    if (queued && queued.expiresAt > now && queued.createdAt >= since) {
      return { value: queued.value, raw: queued.raw, createdAt: queued.createdAt, gateway: queued.gateway, costNanoUsd: queued.costNanoUsd }
    }
    const recent = this.recent.get(key)
    if (recent !== undefined) {
      if (recent.expiresAt > now && recent.entry.createdAt >= since) {
        // Read again: the most recently read now.
        this.recent.delete(key)
        this.recent.set(key, recent)
        this.used.add(key)
        this.scheduleTouch()
        return recent.entry
      }
      if (recent.expiresAt <= now) this.dropRecent(key)
    }
    const row = this.hit.get(key, now, since)
    if (!row) return undefined
    const entry: CachedEntry = { value: row.value, createdAt: row.createdAt, gateway: row.gateway, costNanoUsd: row.costNanoUsd }
    this.keepRecent(key, entry, row.expiresAt)
    this.used.add(key)
    this.scheduleTouch()
    return entry
  }

  private keepRecent(key: string, entry: CachedEntry, expiresAt: number) {
    const chars = entry.value?.length ?? 0
    if (chars > recentMaxChars / 16) return
    this.dropRecent(key)
    this.recent.set(key, { entry, expiresAt })
    this.recentChars += chars
    while (this.recent.size > recentMaxEntries || this.recentChars > recentMaxChars) {
      const oldest = this.recent.keys().next().value
      if (oldest === undefined) break
      this.dropRecent(oldest)
    }
  }

  private dropRecent(key: string) {
    const recent = this.recent.get(key)
    if (recent === undefined) return
    this.recent.delete(key)
    this.recentChars -= recent.entry.value?.length ?? 0
  }

  /** Queues the entry for the writer; it replaces an entry of the same key. */
  put(entry: CacheWrite): void {
    if (this.closing) return
    const chars = entry.value?.length ?? entry.raw?.bytes.byteLength ?? 0
    if (this.inFlightChars + this.queuedChars + chars > maxQueuedChars) {
      this.drop('the writer is behind')
      return
    }
    this.puts.push(entry)
    this.pending.set(entry.key, entry)
    this.dropRecent(entry.key)
    this.remember(entry.key)
    this.queuedChars += chars
    this.scheduleSend()
  }

  /** The newest unexpired entries of a semantic partition that carry an embedding, newest first. */
  candidates(semanticKey: string, limit = 1000): SemanticCandidate[] {
    if (this.closing) return []
    return this.semantic.all(semanticKey, this.now(), limit).map((row) => ({ key: row.key, createdAt: row.createdAt, embedding: floats(row.embedding) }))
  }

  /**
   * Deletes a key's entries (`keyId` given) or its workspace's workspace-scoped ones (`keyId`
   * undefined), now, on this connection; returns how many. The writer deletes them again after the
   * writes queued before this call, so an answer being stored as the purge runs does not survive it.
   */
  purge(target: { workspaceId: string; keyId: string | undefined }): number {
    const keyId = target.keyId ?? null
    const keys: string[] = []
    const deleted =
      keyId === null
        ? deleteInChunks(this.database, 'workspace_id = ? AND key_id IS NULL', [target.workspaceId], keys)
        : deleteInChunks(this.database, 'workspace_id = ? AND key_id = ?', [target.workspaceId, keyId], keys)
    this.forget(keys)
    this.subtract(deleted)
    this.recent.clear()
    this.recentChars = 0
    // Not yet sent: dropped here. Sent, not yet committed: deleted again by the writer after them.
    const purged = (entry: CacheWrite) => entry.workspaceId === target.workspaceId && (entry.keyId ?? null) === keyId
    this.puts = this.puts.filter((entry) => !purged(entry))
    for (const [key, entry] of this.pending) if (purged(entry)) this.pending.delete(key)
    if (this.worker) this.post({ type: 'purge', workspaceId: target.workspaceId, keyId })
    return deleted.entries
  }

  /** Deletes the expired entries now, on this connection (the `cache-prune` job); returns how many. */
  prune(): number {
    const keys: string[] = []
    const deleted = deleteInChunks(this.database, 'expires_at <= ?', [this.now()], keys)
    this.forget(keys)
    this.subtract(deleted)
    return deleted.entries
  }

  stats(): CacheStats {
    return { entries: this.counts.entries, bytes: this.counts.bytes, evictions: this.evictions }
  }

  /** Resolves once every write queued before the call is committed (or rejects if the writer failed). */
  flush(): Promise<void> {
    this.send()
    if (!this.worker) return Promise.resolve()
    const id = this.nextFlushId++
    const done = new Promise<void>((resolve, reject) => this.flushes.set(id, { resolve, reject }))
    // Held open until it answers: a CLI or a shutdown awaiting it must not exit first.
    this.worker.ref()
    this.worker.postMessage({ type: 'flush', id } satisfies CacheWriterCommand)
    return done
  }

  /** Commits what is queued, ends the writer thread and closes the file. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.timer) clearInterval(this.timer)
      this.send()
      const worker = this.worker
      if (worker) {
        worker.ref()
        let timeout: ReturnType<typeof setTimeout> | undefined
        await Promise.race([
          new Promise<void>((resolve) => {
            this.onClosed = resolve
            worker.postMessage({ type: 'close' } satisfies CacheWriterCommand)
          }),
          // A writer stuck on a lock held elsewhere is ended all the same: the entries are only a cache.
          new Promise<void>((resolve) => (timeout = setTimeout(resolve, cacheBusyTimeoutMs + 2000))),
        ])
        clearTimeout(timeout)
        this.stopWorker(new Error('the response cache was closed'))
      }
      this.database.close()
    })()
    return this.closing
  }

  /** The writer took the oldest `count` entries sent (committed, or lost): they are read from the file from now on. */
  private taken(count: number) {
    if (count === 0) return
    const end = Math.min(this.sent.length, this.sentTaken + count)
    this.settle(this.sent.slice(this.sentTaken, end))
    this.sentTaken = end
    // The list is cut down now and then, not at every reply.
    if (this.sentTaken > 1024 && this.sentTaken * 2 > this.sent.length) {
      this.sent = this.sent.slice(this.sentTaken)
      this.sentTaken = 0
    }
  }

  private settle(entries: readonly CacheWrite[]) {
    for (const entry of entries) if (this.pending.get(entry.key) === entry) this.pending.delete(entry.key)
  }

  /** Counts a key in (a key stored again is counted twice: a fingerprint left over costs a read, never a wrong answer). */
  private remember(key: string) {
    const print = fingerprint(key)
    if (print !== undefined) this.present.set(print, (this.present.get(print) ?? 0) + 1)
  }

  /** Counts deleted keys out (a fingerprint two keys share stays while the other is there). */
  private forget(keys: readonly string[]) {
    const present = this.present
    for (const key of keys) {
      this.dropRecent(key)
      const print = fingerprint(key)
      if (print === undefined) continue
      const count = present.get(print)
      if (count === undefined) continue
      if (count <= 1) present.delete(print)
      else present.set(print, count - 1)
    }
  }

  private subtract(deleted: { entries: number; bytes: number }) {
    this.counts = { entries: Math.max(0, this.counts.entries - deleted.entries), bytes: Math.max(0, this.counts.bytes - deleted.bytes) }
  }

  private drop(reason: string) {
    // Logged on the first drop and every thousandth after: a stuck writer must not flood the log.
    if (this.dropped++ % 1000 === 0) this.logger?.warn('cache_write_dropped', { reason, dropped: this.dropped, path: this.path })
  }

  /** Sends what requests queued once the current turn of the event loop is done: one message per turn. */
  private scheduleSend() {
    if (this.sendScheduled) return
    this.sendScheduled = true
    setImmediate(() => this.send())
  }

  /**
   * Hits are stamped used once a second (or with the next puts), not per turn: every commit of the
   * writer makes each reader's next read start from a cleared page cache, which would cost every hit
   * more than its lookup. The least-recently-used order is kept to the second.
   */
  private scheduleTouch() {
    if (this.touchTimer !== undefined || this.sendScheduled) return
    this.touchTimer = setTimeout(() => {
      this.touchTimer = undefined
      this.send()
    }, touchEveryMs)
    this.touchTimer.unref?.()
  }

  private send() {
    this.sendScheduled = false
    if (this.touchTimer !== undefined) {
      clearTimeout(this.touchTimer)
      this.touchTimer = undefined
    }
    if (this.puts.length === 0 && this.used.size === 0) return
    const write = { type: 'write' as const, puts: this.puts, used: [...this.used], now: this.now() }
    this.puts = []
    this.used = new Set()
    const chars = this.queuedChars
    this.queuedChars = 0
    const command = packWrite(write)
    if (this.post(command, [command.bytes])) {
      this.inFlightChars += chars
      for (const entry of write.puts) this.sent.push(entry)
    } else if (write.puts.length > 0) {
      this.settle(write.puts)
      this.drop('the writer is not running')
    }
  }

  /** Posts to the writer, started on first use; false when it cannot run now (it failed lately). */
  private post(command: CacheWriterCommand, transfer?: Transferable[]): boolean {
    if (this.closing && command.type !== 'write-packed') return false
    const worker = this.worker ?? this.startWorker()
    if (!worker) return false
    if (transfer) worker.postMessage(command, transfer)
    else worker.postMessage(command)
    return true
  }

  private startWorker(): WriterThread | undefined {
    if (this.now() - this.workerFailedAt < restartAfterMs) return undefined
    // ref false: the listener keeps the server alive; the cache's writer alone must not.
    const worker = new Worker(workerEntry(this.writer.beside, this.writer.underSrc), { ref: false }) as WriterThread
    this.worker = worker
    worker.onmessage = (event: MessageEvent<CacheWriterReply>) => this.onReply(event.data)
    worker.onerror = (event) => {
      this.logger?.warn('cache_writer_failed', { error: event.message, path: this.path })
      this.workerFailedAt = this.now()
      this.stopWorker(new Error(`the response cache's writer failed: ${event.message}`))
    }
    // The writer prunes on opening: entries a previous run left to expire go first.
    worker.postMessage({ type: 'open', path: this.path, maxBytes: this.maxBytes, now: this.now() } satisfies CacheWriterCommand)
    return worker
  }

  private onReply(reply: CacheWriterReply) {
    if (reply.type === 'committed') {
      this.counts = { entries: reply.entries, bytes: reply.bytes }
      this.taken(reply.puts)
      this.forget(reply.deleted)
      this.inFlightChars = Math.max(0, this.inFlightChars - reply.chars)
      if (reply.evicted > 0) {
        this.evictions += reply.evicted
        this.onEvict?.(reply.evicted)
      }
    } else if (reply.type === 'failed') {
      this.taken(reply.puts)
      this.logger?.warn('cache_write_failed', { error: reply.error, path: this.path })
      this.inFlightChars = Math.max(0, this.inFlightChars - reply.chars)
      if (reply.fatal) {
        this.workerFailedAt = this.now()
        this.stopWorker(new Error(`the response cache's writer failed: ${reply.error}`))
      }
    } else if (reply.type === 'flushed') {
      this.flushes.get(reply.id)?.resolve()
      this.flushes.delete(reply.id)
      if (this.flushes.size === 0 && !this.closing) this.worker?.unref()
    } else if (reply.type === 'closed') {
      this.onClosed?.()
    }
  }

  private stopWorker(error: Error) {
    this.worker?.terminate()
    this.worker = undefined
    this.inFlightChars = 0
    // What was sent and not answered for is lost with the writer.
    this.settle(this.sent.slice(this.sentTaken))
    this.sent = []
    this.sentTaken = 0
    for (const waiting of this.flushes.values()) waiting.reject(error)
    this.flushes.clear()
    this.onClosed?.()
  }
}

/** A key's fingerprint: the last 52 bits of a hex SHA-256 digest (64 lower-case hex digits); undefined for any other key (always looked up). */
function fingerprint(key: string): number | undefined {
  if (key.length !== 64) return undefined
  let print = 0
  for (let index = 0; index < 64; index++) {
    const code = key.charCodeAt(index)
    const digit = code >= 48 && code <= 57 ? code - 48 : code >= 97 && code <= 102 ? code - 87 : -1
    if (digit < 0) return undefined
    // 13 digits: 52 bits, exact in a double.
    if (index >= 51) print = print * 16 + digit
  }
  return print
}

/** An embedding's bytes as floats: in place when aligned, else copied. */
function floats(bytes: Uint8Array): Float32Array {
  if (bytes.byteOffset % 4 === 0) return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 2)
  return new Float32Array(bytes.slice().buffer, 0, bytes.byteLength >> 2)
}
