/**
 * What the response cache's store (cache-store.ts) and its writer thread (cache-writer.ts) say to
 * each other: the entries put, the commands and replies, and the packed form a batch of writes
 * crosses to the thread in.
 */

/**
 * An answer put as the caller has it, for the writer thread to make the stored value of (off the
 * serving thread: runCacheWriter's `prepare`). Until it is written, a read gives it back raw.
 */
export interface RawValue {
  /** What `bytes` are, for `prepare`. */
  form: string
  /** The answer as it came (UTF-8): copied to the writer thread as bytes, never parsed on the serving thread. */
  bytes: Uint8Array
  /** Where it came from, carried into the stored value. */
  origin: string
}

/** Makes the stored value of a raw one; undefined when it is not one to keep. */
export type PrepareValue = (raw: RawValue) => string | undefined

export interface CacheWrite {
  /** Hex SHA-256 of the canonical request (the cache stage computes it). */
  key: string
  workspaceId: string
  /** The key's id for a key-scoped entry; undefined for a workspace-scoped one. */
  keyId: string | undefined
  model: string
  createdAt: number
  expiresAt: number
  gateway: string
  costNanoUsd: number | null
  /** The stored value; or `raw`, which the writer thread makes it of (one of the two). */
  value?: string
  raw?: RawValue
  /** The semantic tier's partition: the entry's key without the last user turn's text (hex). */
  semanticKey?: string
  /** The last user turn's embedding. */
  embedding?: Float32Array
}

/** The writer thread's commands (cache-writer.ts) and its replies. */
export type CacheWriterCommand =
  | { type: 'open'; path: string; maxBytes: number; now: number }
  /** New entries and the keys of hits since the last batch (stamped used at `now`). */
  | { type: 'write'; puts: CacheWrite[]; used: string[]; now: number }
  /**
   * The same, packed (packWrite): its fields as one JSON text, the answers' bytes and the embeddings
   * in one buffer handed over to the thread. A string and a transferred buffer cross for a fraction
   * of what the objects' structured clone costs the serving thread.
   */
  | { type: 'write-packed'; json: string; bytes: ArrayBuffer }
  | { type: 'purge'; workspaceId: string; keyId: string | null }
  | { type: 'prune'; now: number }
  | { type: 'flush'; id: number }
  | { type: 'close' }

export type CacheWriterReply =
  /**
   * `puts`: the entries the transaction took (the oldest sent and not yet answered for, in order);
   * `deleted`: the keys the writer deleted since its last reply (evicted, expired, purged).
   */
  | { type: 'committed'; entries: number; bytes: number; evicted: number; chars: number; puts: number; deleted: string[] }
  /** A batch that could not be written (its entries are lost: only a cache); `fatal`: the writer cannot run. */
  | { type: 'failed'; error: string; chars: number; puts: number; fatal?: boolean }
  | { type: 'flushed'; id: number }
  | { type: 'closed' }

/** A put as packed: its fields, with its raw answer's and embedding's byte lengths in place of them. */
type PackedPut = Omit<CacheWrite, 'raw' | 'embedding'> & { form?: string; origin?: string; rawLength?: number; embeddingLength?: number }

/** A write batch packed for the writer thread: one JSON text and one buffer (see CacheWriterCommand). */
export function packWrite(write: Extract<CacheWriterCommand, { type: 'write' }>): Extract<CacheWriterCommand, { type: 'write-packed' }> {
  let size = 0
  for (const entry of write.puts) size += (entry.raw?.bytes.byteLength ?? 0) + (entry.embedding?.byteLength ?? 0)
  const bytes = new Uint8Array(size)
  let at = 0
  const puts: PackedPut[] = []
  for (const { raw, embedding, ...fields } of write.puts) {
    const put: PackedPut = fields
    if (raw) {
      bytes.set(raw.bytes, at)
      at += raw.bytes.byteLength
      put.form = raw.form
      put.origin = raw.origin
      put.rawLength = raw.bytes.byteLength
    }
    if (embedding) {
      bytes.set(new Uint8Array(embedding.buffer, embedding.byteOffset, embedding.byteLength), at)
      at += embedding.byteLength
      put.embeddingLength = embedding.byteLength
    }
    puts.push(put)
  }
  return { type: 'write-packed', json: JSON.stringify({ puts, used: write.used, now: write.now }), bytes: bytes.buffer }
}

/** The write batch a packed one holds (on the writer thread). */
export function unpackWrite(packed: Extract<CacheWriterCommand, { type: 'write-packed' }>): Extract<CacheWriterCommand, { type: 'write' }> {
  const { puts, used, now } = JSON.parse(packed.json) as { puts: PackedPut[]; used: string[]; now: number }
  let at = 0
  return {
    type: 'write',
    used,
    now,
    puts: puts.map(({ form, origin, rawLength, embeddingLength, ...fields }) => {
      const entry: CacheWrite = fields
      if (rawLength !== undefined) {
        entry.raw = { form: form!, origin: origin!, bytes: new Uint8Array(packed.bytes, at, rawLength) }
        at += rawLength
      }
      if (embeddingLength !== undefined) {
        // Copied out: a Float32Array needs its own 4-byte alignment.
        entry.embedding = new Float32Array(packed.bytes.slice(at, at + embeddingLength))
        at += embeddingLength
      }
      return entry
    }),
  }
}
