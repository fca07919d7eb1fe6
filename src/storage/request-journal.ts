/**
 * The request-log journal: every finished request's row is written to a local file before the
 * request is done, so a crash of the process (kill -9, an out-of-memory kill) loses no billing row.
 * The journal is also the log queue's store: the queue (pipeline/log/log-request.ts) reads the rows of
 * ended segments back and commits them to SQLite in batches; a segment is given up only once its rows
 * are committed there (on a LiteFS replica, later: once the primary has acknowledged them, CONTRACT
 * §10), and segments a process left behind are replayed at the next start.
 *
 * Layout: `$RT_DATA_DIR/request-journal/` (0700) holds segment files (0600) named
 * `<pid>-<instance>-<sequence>.journal`; pid and instance say which journal writes a segment, so a
 * starting process replays only segments whose writer is gone, never those of another process that
 * still serves from the same data directory (a second role; the CLI never writes one).
 *
 * Writing: a segment is a file of fixed size, its blocks written once as zeros when it is made (so a
 * full disk fails there, never as a fault on a mapped page later), and mapped shared into memory.
 * A row's record is written field by field straight into the mapping (RecordWriter): no system call
 * and no string or object made on the request's path, and the bytes are in the OS page cache the
 * moment the writes end, which outlives a crash of the process. Nothing is synced to the disk per
 * request (that would cost milliseconds each), so a power loss of the machine can still take the
 * last rows, as it can take SQLite's last commits under `synchronous = NORMAL`. A committed segment
 * is zeroed and reused, so a busy process cycles through two or three files. A record too large for
 * a segment (a captured request body) gets a file of its own.
 *
 * Records follow each other from the start of a segment; a zero length where a record should begin
 * ends them (the unused rest of the segment, a record whose writing had not finished, or a prefix
 * zeroed after a commit). A record that does not decode is skipped and counted, never fatal.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { RequestLogRow } from './repositories/request-logs'
import { usdToNano } from './money'

/** The journal's folder in the data directory (outside a LiteFS mount, which holds only the database). */
export function requestJournalDirectory(dataDir: string): string {
  return join(dataDir, 'request-journal')
}

const segmentName = /^(\d+)-([0-9a-f]+)-(\d+)\.journal$/

/** Instances of the journals open in this process: their segments are never taken for a dead writer's. */
const openInstances = new Set<string>()

// ---------------------------------------------------------------------------------------------
// Records

/**
 * Record format, version 5, little-endian: `u32 length` (of the whole record, written last), `u8
 * version`, `u32` null flags (bit i: field i is null), then each field that is not null in the
 * request_logs column order (`fields`): a text as `u32 byte length` + UTF-8, a number as `f64`, the
 * stream flag as `u8`. Until the length is written the record reads as the end of the segment.
 */
const recordVersion = 5
/**
 * Records of earlier versions are still read (a journal left by a previous build): version 4 has the
 * same fields but its last, the cost, in USD (turned into nano-dollars as it is read); version 3 ends
 * before the cost column, version 2 before the enrichment column too. Their missing fields are null.
 */
const fieldsOfVersion = (version: number) => (version === recordVersion || version === 4 ? fields : version === 3 ? fields.slice(0, -1) : version === 2 ? fields.slice(0, -2) : undefined)
const headerBytes = 9
/** Texts up to this length are copied by the ASCII loop when they are ASCII. */
const shortText = 128

const enum Field {
  Text,
  OptionalText,
  Number,
  OptionalNumber,
  Flag,
  /** The stage timings: four optional numbers (auth, body, plan, upstream), one null flag each. */
  Stages,
}

/** The stages a row times, in order (SPEC "What the service does" 7: stage timings). */
const stageNames = ['auth', 'body', 'plan', 'upstream'] as const

/**
 * A row's stage timings text: each reached stage's milliseconds (already rounded) since the one before,
 * as a JSON object in stage order (`{"auth":0.012,"body":0.004,…}`); undefined for a stage not reached.
 */
export function stageTimingsText(auth: number | undefined, body: number | undefined, plan: number | undefined, upstream: number | undefined): string {
  let text = '{'
  if (auth !== undefined) text += `"auth":${auth}`
  if (body !== undefined) text += `${text.length > 1 ? ',' : ''}"body":${body}`
  if (plan !== undefined) text += `${text.length > 1 ? ',' : ''}"plan":${plan}`
  if (upstream !== undefined) text += `${text.length > 1 ? ',' : ''}"upstream":${upstream}`
  return text + '}'
}

/** The four stage numbers of a stage timings text (a row that exists as an object). */
function stageNumbers(text: string | null | undefined): (number | undefined)[] {
  let parsed: Record<string, unknown> = {}
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {}
  } catch {}
  return stageNames.map((name) => (typeof parsed[name] === 'number' ? (parsed[name] as number) : undefined))
}

/** The columns of a row in record order, with their kind. */
const fields: readonly (readonly [keyof RequestLogRow, Field])[] = [
  ['id', Field.Text],
  ['workspaceId', Field.Text],
  ['keyId', Field.OptionalText],
  ['createdAt', Field.Number],
  ['endpoint', Field.Text],
  ['gateway', Field.OptionalText],
  ['providerKeyId', Field.OptionalText],
  ['model', Field.OptionalText],
  ['upstreamModel', Field.OptionalText],
  ['status', Field.Number],
  ['errorCode', Field.OptionalText],
  ['stream', Field.Flag],
  ['latencyMs', Field.Number],
  ['overheadMs', Field.OptionalNumber],
  ['ttfbMs', Field.OptionalNumber],
  ['attempts', Field.Number],
  ['attemptPath', Field.OptionalText],
  ['stageTimings', Field.Stages],
  ['inputTokens', Field.OptionalNumber],
  ['outputTokens', Field.OptionalNumber],
  ['clientIp', Field.OptionalText],
  ['requestBody', Field.OptionalText],
  ['enrichment', Field.OptionalText],
  /** Whole nano-dollars (storage/money.ts); a version 4 record holds USD here. */
  ['costNanoUsd', Field.OptionalNumber],
]

/**
 * A row as JSON from a build before costs were whole nano-dollars (a replica's spool, a batch such a
 * replica ships): its `costUsd` (USD) becomes `costNanoUsd` to the nearest nano-dollar, as that
 * build's journal records are read (decodeRecord), unless the row carries a `costNanoUsd`
 * already. Any other row is returned as it is.
 */
export function withNanoCost<Row extends Record<string, unknown>>(row: Row): Row {
  if (!('costUsd' in row)) return row
  const { costUsd, ...rest } = row as Record<string, unknown>
  if (rest.costNanoUsd === undefined || rest.costNanoUsd === null) rest.costNanoUsd = typeof costUsd === 'number' ? usdToNano(costUsd) : null
  return rest as Row
}

/** Bytes a record takes at most, for texts of `textUnits` UTF-16 units in all (three bytes each at most). */
export function recordBound(textUnits: number): number {
  return headerBytes + (fields.length + stageNames.length) * 8 + textUnits * 3
}

/**
 * Writes one record, field by field in the order of `fields` (the caller calls text/number/flag once
 * per column, in that order): no string or object is made. One writer is reused for every record.
 */
export class RecordWriter {
  private target!: Buffer
  private start = 0
  private at = 0
  private index = 0
  private nulls = 0

  begin(target: Buffer, offset: number) {
    this.target = target
    this.start = offset
    this.at = offset + headerBytes
    this.index = 0
    this.nulls = 0
  }

  text(value: string | null | undefined) {
    if (value === null || value === undefined) return this.skip()
    const written = this.copy(value, this.at + 4)
    this.target.writeUInt32LE(written, this.at)
    this.at += 4 + written
    this.index++
  }

  /** A text given as parts joined by `separator` (the attempt path), written without joining them first. */
  joined(parts: readonly string[] | undefined, separator: string) {
    if (!parts || parts.length === 0) return this.skip()
    const lengthAt = this.at
    let at = lengthAt + 4
    for (let part = 0; part < parts.length; part++) {
      if (part > 0) at += this.copy(separator, at)
      at += this.copy(parts[part]!, at)
    }
    this.target.writeUInt32LE(at - lengthAt - 4, lengthAt)
    this.at = at
    this.index++
  }

  /** Writes a text's UTF-8 at `at`; returns its byte length. Short ASCII (ids, names, codes) is copied in a loop, without a native call. */
  private copy(value: string, at: number): number {
    const target = this.target
    if (value.length <= shortText) {
      let index = 0
      for (; index < value.length; index++) {
        const code = value.charCodeAt(index)
        if (code > 0x7f) break
        target[at + index] = code
      }
      if (index === value.length) return index
    }
    return target.write(value, at, 'utf8')
  }

  number(value: number | null | undefined) {
    if (value === null || value === undefined) return this.skip()
    this.target.writeDoubleLE(value, this.at)
    this.at += 8
    this.index++
  }

  /**
   * The stage timings: each stage's milliseconds, undefined when not reached (formatted only when the
   * row is built). Null (no timings at all): one flag for the field, then none for its four numbers.
   */
  stages(auth: number | undefined, body: number | undefined, plan: number | undefined, upstream: number | undefined, present = true) {
    if (!present) {
      this.skip()
      this.index += stageNames.length
      return
    }
    this.index++
    this.number(auth)
    this.number(body)
    this.number(plan)
    this.number(upstream)
  }

  flag(value: boolean) {
    this.target[this.at++] = value ? 1 : 0
    this.index++
  }

  /** Ends the record: the flags, then its length last. Returns its length. */
  end(): number {
    const target = this.target
    target[this.start + 4] = recordVersion
    target.writeUInt32LE(this.nulls >>> 0, this.start + 5)
    const length = this.at - this.start
    target.writeUInt32LE(length, this.start)
    return length
  }

  private skip() {
    this.nulls |= 1 << this.index
    this.index++
  }
}

/** What the journal writes: a finished request that can write its own record (RequestContext). */
export interface JournalEntry {
  /** The row itself, for the batch that writes it to SQLite (built then, off the request's path). */
  logRow(): RequestLogRow
  /** UTF-16 units of the record's texts in all (for recordBound). */
  recordTextUnits(): number
  /** Writes the record's fields, in record order, with the writer. */
  writeRecord(writer: RecordWriter): void
}

/** Writes a row's fields in record order. */
export function writeRowFields(writer: RecordWriter, row: RequestLogRow) {
  for (const [name, kind] of fields) {
    const value = row[name]
    if (kind === Field.Flag) writer.flag(value === true)
    else if (kind === Field.Stages) {
      const [auth, body, plan, upstream] = stageNumbers(value as string | null)
      writer.stages(auth, body, plan, upstream, value !== null && value !== undefined)
    } else if (kind === Field.Number || kind === Field.OptionalNumber) writer.number(value as number | null)
    else writer.text(value as string | null)
  }
}

function rowTextUnits(row: RequestLogRow): number {
  let units = 0
  for (const [name, kind] of fields) if (kind === Field.Text || kind === Field.OptionalText) units += (row[name] as string | null)?.length ?? 0
  return units
}

/** A journal entry for a row that exists as an object (tests, tools, a replayed record). */
export function rowEntry(row: RequestLogRow): JournalEntry {
  return { logRow: () => row, recordTextUnits: () => rowTextUnits(row), writeRecord: (writer) => writeRowFields(writer, row) }
}

const scratchWriter = new RecordWriter()

/** An entry's whole record in a buffer of its own. */
export function encodeRecord(entry: JournalEntry | RequestLogRow): Buffer {
  const journalEntry = 'writeRecord' in entry && typeof entry.writeRecord === 'function' ? (entry as JournalEntry) : rowEntry(entry as RequestLogRow)
  const buffer = Buffer.alloc(recordBound(journalEntry.recordTextUnits()))
  scratchWriter.begin(buffer, 0)
  journalEntry.writeRecord(scratchWriter)
  return buffer.subarray(0, scratchWriter.end())
}

/** A record back into a row; undefined unless it is one whole record of this version, to its last byte. */
export function decodeRecord(record: Uint8Array): RequestLogRow | undefined {
  const bytes = Buffer.isBuffer(record) ? record : Buffer.from(record.buffer, record.byteOffset, record.byteLength)
  if (bytes.length < headerBytes || bytes.readUInt32LE(0) !== bytes.length) return undefined
  const readFields = fieldsOfVersion(bytes[4]!)
  if (readFields === undefined) return undefined
  const nulls = bytes.readUInt32LE(5)
  const row: Record<string, unknown> = {}
  let at = headerBytes
  // The null flag of each written value, in order: a field is one value, the stage timings four.
  let bit = 0
  const isNull = () => (nulls & (1 << bit++)) !== 0
  const readNumber = (): number | undefined => {
    if (at + 8 > bytes.length) throw new RangeError('cut short')
    const value = bytes.readDoubleLE(at)
    at += 8
    return value
  }
  try {
    for (const [name, kind] of readFields) {
      if (kind === Field.Stages) {
        if (isNull()) {
          bit += stageNames.length
          row[name] = null
          continue
        }
        const [auth, body, plan, upstream] = stageNames.map(() => (isNull() ? undefined : readNumber()))
        row[name] = stageTimingsText(auth, body, plan, upstream)
        continue
      }
      if (isNull()) {
        if (kind !== Field.OptionalText && kind !== Field.OptionalNumber) return undefined
        row[name] = null
        continue
      }
      if (kind === Field.Text || kind === Field.OptionalText) {
        if (at + 4 > bytes.length) return undefined
        const length = bytes.readUInt32LE(at)
        if (at + 4 + length > bytes.length) return undefined
        row[name] = bytes.toString('utf8', at + 4, at + 4 + length)
        at += 4 + length
      } else if (kind === Field.Flag) {
        if (at + 1 > bytes.length) return undefined
        row[name] = bytes[at++] === 1
      } else row[name] = readNumber()
    }
  } catch {
    return undefined
  }
  if (at !== bytes.length) return undefined
  for (const [name] of fields.slice(readFields.length)) row[name] = null
  if (bytes[4] === 4 && typeof row.costNanoUsd === 'number') row.costNanoUsd = usdToNano(row.costNanoUsd)
  return row as unknown as RequestLogRow
}

export interface SegmentContents {
  rows: RequestLogRow[]
  /** Records skipped: a torn last record, or one that does not decode. */
  damaged: number
}

/** The rows of the records from the start of `bytes` up to the first zero length. */
function readRecords(bytes: Buffer): SegmentContents {
  const end = bytes.length
  const rows: RequestLogRow[] = []
  let damaged = 0
  let at = 0
  while (at + 4 <= end) {
    const length = bytes.readUInt32LE(at)
    // Zero: the end of the records (the rest of the segment, or a write that had not finished).
    if (length === 0) break
    // A length that runs past the end cannot be followed: what remains is skipped as one.
    if (length < headerBytes || at + length > end) {
      damaged++
      break
    }
    const row = decodeRecord(bytes.subarray(at, at + length))
    if (row) rows.push(row)
    else damaged++
    at += length
  }
  return { rows, damaged }
}

// ---------------------------------------------------------------------------------------------
// Segments

/** A segment that takes no more appends; given back with `release` once its rows are committed. */
export interface JournalSegment {
  readonly path: string
  readonly records: number
}

export interface RequestJournal {
  readonly directory: string
  /** Writes one entry's record (see the module comment). Throws when a new segment cannot be made (disk full). */
  append(entry: JournalEntry): void
  /** Records written and not yet ended (the segment being written). */
  pending(): number
  /**
   * Ends the segment being written (when it holds records) and opens the next one here, so a request
   * only ever writes. Returns every segment ended since the last call.
   */
  seal(): JournalSegment[]
  /** Lets go of ended segments without zeroing them: their files stay, to be read back from disk (readSegment). */
  abandon(segments: readonly JournalSegment[]): void
  /**
   * Gives back segments of this journal whose rows are committed: each is zeroed and kept for reuse
   * (a record's own oversized file is deleted).
   */
  release(segments: readonly JournalSegment[]): void
  /** Closes the journal, deleting the segments that hold no record (a clean stop leaves nothing). */
  close(): void
}

export interface JournalOptions {
  /** The writer's process id in segment names (tests name a process that is gone). */
  pid?: number
  /** The size of a segment file, default 1 MiB: many flush windows of rows at full load. */
  segmentBytes?: number
}

const defaultSegmentBytes = 1 << 20

function removeFile(path: string) {
  try {
    unlinkSync(path)
  } catch (error) {
    // Already gone: another process starting at the same time replayed and deleted it.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
}

/** Writes all of `bytes` to a new file (0600: rows name keys, workspaces and, when captured, request bodies). */
function writeNewFile(path: string, bytes: Uint8Array) {
  const descriptor = openSync(path, 'wx', 0o600)
  try {
    for (let written = 0; written < bytes.length; ) written += writeSync(descriptor, bytes, written, bytes.length - written)
  } finally {
    closeSync(descriptor)
  }
}

interface Segment {
  path: string
  /** The mapped file; for an oversized record, the record's own bytes. */
  bytes: Buffer
  /** Bytes of records written since it was last zeroed. */
  used: number
  records: number
  /** An oversized record's own file: deleted, not reused. */
  single: boolean
}

/** Creates the journal folder (0700) and a writer; the first segment is made by the first append. */
export function openRequestJournal(directory: string, options: JournalOptions = {}): RequestJournal {
  mkdirSync(directory, { recursive: true, mode: 0o700 })
  const pid = options.pid ?? process.pid
  const segmentBytes = options.segmentBytes ?? defaultSegmentBytes
  const instance = randomBytes(4).toString('hex')
  openInstances.add(instance)
  const writer = new RecordWriter()
  let sequence = 0
  let current: Segment | undefined
  /** Ended segments by path, until released. */
  const ended = new Map<string, Segment>()
  let endedSinceSeal: JournalSegment[] = []
  /** Zeroed segments ready for reuse. */
  const free: Segment[] = []

  const nextPath = () => join(directory, `${pid}-${instance}-${String(++sequence).padStart(8, '0')}.journal`)
  const openSegment = (): Segment => {
    const reused = free.pop()
    if (reused) return reused
    const path = nextPath()
    // The blocks are allocated here, as zeros: a full disk is an error now, not a fault later.
    writeNewFile(path, new Uint8Array(segmentBytes))
    const mapped = Bun.mmap(path, { shared: true })
    return { path, bytes: Buffer.from(mapped.buffer, mapped.byteOffset, mapped.byteLength), used: 0, records: 0, single: false }
  }
  const endSegment = (segment: Segment) => {
    ended.set(segment.path, segment)
    endedSinceSeal.push({ path: segment.path, records: segment.records })
  }
  /** A record too large for a segment: a file of its own, written with one call and ended at once. */
  const appendOversized = (entry: JournalEntry, bound: number) => {
    const bytes = Buffer.alloc(bound)
    writer.begin(bytes, 0)
    entry.writeRecord(writer)
    const record = bytes.subarray(0, writer.end())
    const path = nextPath()
    writeNewFile(path, record)
    endSegment({ path, bytes: record, used: record.length, records: 1, single: true })
  }

  return {
    directory,
    append(entry) {
      const bound = recordBound(entry.recordTextUnits())
      if (bound > segmentBytes) return appendOversized(entry, bound)
      if (!current || current.used + bound > segmentBytes) {
        if (current && current.records > 0) endSegment(current)
        else if (current) free.push(current)
        current = undefined
        current = openSegment()
      }
      writer.begin(current.bytes, current.used)
      entry.writeRecord(writer)
      current.used += writer.end()
      current.records++
    },
    pending: () => current?.records ?? 0,
    seal() {
      if (current && current.records > 0) {
        endSegment(current)
        current = undefined
        try {
          current = openSegment()
        } catch {
          // No new segment now (disk full): the next append tries again, and reports the failure
          // if it persists.
        }
      }
      const segments = endedSinceSeal
      endedSinceSeal = []
      return segments
    },
    abandon(segments) {
      for (const { path } of segments) ended.delete(path)
    },
    release(segments) {
      for (const { path } of segments) {
        const segment = ended.get(path)
        if (!segment) continue
        ended.delete(path)
        if (segment.single) {
          removeFile(path)
          continue
        }
        // Zeroed only now, with its rows committed: a crash before this line replays them (the
        // replay skips rows already there), one during it leaves a prefix of zeros, read as none.
        segment.bytes.fill(0, 0, segment.used)
        segment.used = 0
        segment.records = 0
        free.push(segment)
      }
    },
    close() {
      if (current) {
        if (current.records > 0) endSegment(current)
        else free.push(current)
        current = undefined
      }
      for (const segment of free.splice(0)) removeFile(segment.path)
      openInstances.delete(instance)
    },
  }
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it runs, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Segments whose writer is gone, oldest first: written by a process that no longer runs, or by an
 * earlier process that had this one's pid (a container's pid 1 after a restart), and not by a
 * journal open in this process.
 */
export function orphanSegments(directory: string): string[] {
  let names: string[]
  try {
    names = readdirSync(directory)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
  const orphans: { name: string; sequence: number }[] = []
  for (const name of names) {
    const match = segmentName.exec(name)
    if (!match) continue
    const pid = Number(match[1])
    const gone = pid === process.pid ? !openInstances.has(match[2]!) : !processRuns(pid)
    if (gone) orphans.push({ name, sequence: Number(match[3]) })
  }
  return orphans.sort((first, second) => first.sequence - second.sequence || (first.name < second.name ? -1 : 1)).map(({ name }) => join(directory, name))
}

/** Reads a segment file's rows; a torn or damaged record is counted and skipped. A missing file has none. */
export function readSegment(path: string): SegmentContents {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { rows: [], damaged: 0 }
    throw error
  }
  return readRecords(bytes)
}

/** Deletes a segment file of a writer that is gone, once its rows are committed. */
export function removeSegment(path: string) {
  removeFile(path)
}
