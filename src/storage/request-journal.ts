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
 * A record's format (its fields, the writer, the decoding) is request-journal-record.ts; its names
 * that callers use are exported here too, so the journal stays the one module they import.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { readRecords, recordBound, RecordWriter, type JournalEntry, type SegmentContents } from './request-journal-record'

export { decodeRecord, encodeRecord, recordBound, RecordWriter, rowEntry, stageTimingsText, withNanoCost, writeRowFields, type JournalEntry, type SegmentContents } from './request-journal-record'

/** The journal's folder in the data directory (outside a LiteFS mount, which holds only the database). */
export function requestJournalDirectory(dataDir: string): string {
  return join(dataDir, 'request-journal')
}

const segmentName = /^(\d+)-([0-9a-f]+)-(\d+)\.journal$/

/** Instances of the journals open in this process: their segments are never taken for a dead writer's. */
const openInstances = new Set<string>()

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
