/**
 * The request-log journal: every finished request's row is appended to a local file before the
 * request is done, so a crash of the process (kill -9, an out-of-memory kill) loses no billing row.
 * Rows go on to SQLite in batches (pipeline/log-request.ts); a segment is deleted only once its rows
 * are committed there (on a LiteFS replica, later: once the primary has acknowledged them, CONTRACT
 * §10), and segments a process left behind are replayed at the next start.
 *
 * Layout: `$RT_DATA_DIR/request-journal/` (0700) holds segment files (0600) named
 * `<pid>-<instance>-<sequence>.jsonl`; pid and instance say which journal writes a segment, so a
 * starting process replays only segments whose writer is gone, never those of another process that
 * still serves from the same data directory (a second role, the CLI never writes one).
 *
 * Record format: one line per row, `[1, id, workspace_id, …, request_body]\n`, a JSON array in the
 * request_logs column order, led by the format version. JSON escapes line breaks inside strings, so
 * a line is a record. A last line without its `\n` (the process died inside the write) or a line
 * that does not parse is skipped when read, and counted, never fatal.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { RequestLogRow } from './repositories/request-logs'

/** The journal's folder in the data directory (outside a LiteFS mount, which holds only the database). */
export function requestJournalDirectory(dataDir: string): string {
  return join(dataDir, 'request-journal')
}

const recordVersion = 1
const recordLength = 23
const segmentName = /^(\d+)-([0-9a-f]+)-(\d+)\.jsonl$/

/** Instances of the journals open in this process: their segments are never taken for a dead writer's. */
const openInstances = new Set<string>()

/** One row as a journal line (the column order of request_logs; the version first, so a later format can be told apart). */
export function encodeRecord(row: RequestLogRow): string {
  return (
    JSON.stringify([
      recordVersion,
      row.id,
      row.workspaceId,
      row.keyId ?? null,
      row.createdAt,
      row.endpoint,
      row.gateway ?? null,
      row.providerKeyId ?? null,
      row.model ?? null,
      row.upstreamModel ?? null,
      row.status,
      row.errorCode ?? null,
      row.stream ? 1 : 0,
      row.latencyMs,
      row.overheadMs ?? null,
      row.ttfbMs ?? null,
      row.attempts ?? 0,
      row.attemptPath ?? null,
      row.stageTimings ?? null,
      row.inputTokens ?? null,
      row.outputTokens ?? null,
      row.clientIp ?? null,
      row.requestBody ?? null,
    ]) + '\n'
  )
}

const isText = (value: unknown): value is string => typeof value === 'string'
const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value)
const textOrNull = (value: unknown): string | null => (isText(value) ? value : null)
const numberOrNull = (value: unknown): number | null => (isNumber(value) ? value : null)

/** A journal line back into a row; undefined when it is not a whole record of a known version. */
export function decodeRecord(line: string): RequestLogRow | undefined {
  let fields: unknown
  try {
    fields = JSON.parse(line)
  } catch {
    return undefined
  }
  if (!Array.isArray(fields) || fields.length !== recordLength || fields[0] !== recordVersion) return undefined
  const [, id, workspaceId, keyId, createdAt, endpoint, gateway, providerKeyId, model, upstreamModel, status, errorCode, stream, latencyMs, overheadMs, ttfbMs, attempts, attemptPath, stageTimings, inputTokens, outputTokens, clientIp, requestBody] = fields
  if (!isText(id) || !isText(workspaceId) || !isNumber(createdAt) || !isText(endpoint) || !isNumber(status) || !isNumber(latencyMs)) return undefined
  return {
    id,
    workspaceId,
    keyId: textOrNull(keyId),
    createdAt,
    endpoint,
    gateway: textOrNull(gateway),
    providerKeyId: textOrNull(providerKeyId),
    model: textOrNull(model),
    upstreamModel: textOrNull(upstreamModel),
    status,
    errorCode: textOrNull(errorCode),
    stream: stream === 1,
    latencyMs,
    overheadMs: numberOrNull(overheadMs),
    ttfbMs: numberOrNull(ttfbMs),
    attempts: isNumber(attempts) ? attempts : 0,
    attemptPath: textOrNull(attemptPath),
    stageTimings: textOrNull(stageTimings),
    inputTokens: numberOrNull(inputTokens),
    outputTokens: numberOrNull(outputTokens),
    clientIp: textOrNull(clientIp),
    requestBody: textOrNull(requestBody),
  }
}

/** A segment that takes no more appends; deleted (removeSegment) once its rows are committed. */
export interface JournalSegment {
  path: string
  rows: number
}

export interface RequestJournal {
  readonly directory: string
  /**
   * Appends one row with one write system call (O_APPEND). The bytes are in the OS page cache when
   * it returns, which outlives a crash of this process; there is no fsync per request (it would cost
   * milliseconds each), so a power loss of the machine can still take the last rows, as it can take
   * SQLite's last commits under `synchronous = NORMAL`. Throws when the write fails (disk full).
   */
  append(row: RequestLogRow): void
  /**
   * Ends the segment being written (when it holds rows) and opens the next one here, so a request
   * only ever writes. Returns every segment ended since the last call.
   */
  seal(): JournalSegment[]
  /** Closes the segment being written, deleting it when it holds no row (a clean stop leaves nothing). */
  close(): void
}

export interface JournalOptions {
  /** The writer's process id in segment names (tests name a process that is gone). */
  pid?: number
}

function removeFile(path: string) {
  try {
    unlinkSync(path)
  } catch (error) {
    // Already gone: another process starting at the same time replayed and deleted it.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
}

/** Creates the journal folder (0700) and a writer; the first segment is opened by the first append. */
export function openRequestJournal(directory: string, options: JournalOptions = {}): RequestJournal {
  mkdirSync(directory, { recursive: true, mode: 0o700 })
  const pid = options.pid ?? process.pid
  const instance = randomBytes(4).toString('hex')
  openInstances.add(instance)
  let sequence = 0
  let descriptor: number | undefined
  let current: JournalSegment | undefined
  let ended: JournalSegment[] = []

  const openSegment = () => {
    sequence++
    const path = join(directory, `${pid}-${instance}-${String(sequence).padStart(8, '0')}.jsonl`)
    // 0600: rows name keys, workspaces and, when captured, request bodies.
    descriptor = openSync(path, 'a', 0o600)
    current = { path, rows: 0 }
  }
  const endSegment = () => {
    if (descriptor === undefined || !current) return
    closeSync(descriptor)
    descriptor = undefined
    if (current.rows > 0) ended.push(current)
    else removeFile(current.path)
    current = undefined
  }
  /** Writes what a short write left over; a failure leaves a torn record, so its segment ends here. */
  const writeRest = (text: string, written: number) => {
    const bytes = Buffer.from(text)
    try {
      while (written < bytes.length) written += writeSync(descriptor!, bytes, written)
    } catch (error) {
      endSegment()
      throw error
    }
  }

  return {
    directory,
    append(row) {
      if (descriptor === undefined) openSegment()
      const text = encodeRecord(row)
      const written = writeSync(descriptor!, text)
      // Bytes, against UTF-16 units: equal for ASCII; a shorter count is a short write only when
      // the text's byte length says so.
      if (written !== text.length && written < Buffer.byteLength(text)) writeRest(text, written)
      current!.rows++
    },
    seal() {
      if (current && current.rows > 0) {
        endSegment()
        try {
          openSegment()
        } catch {
          // No new segment now (out of descriptors, disk full): the next append tries again, and
          // reports the failure if it persists.
        }
      }
      const segments = ended
      ended = []
      return segments
    },
    close() {
      endSegment()
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

export interface SegmentContents {
  rows: RequestLogRow[]
  /** Lines skipped: a torn last record, or a line that is not a whole record. */
  damaged: number
}

/** Reads a segment's rows; a torn or damaged line is counted and skipped. A missing file has none. */
export function readSegment(path: string): SegmentContents {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { rows: [], damaged: 0 }
    throw error
  }
  const rows: RequestLogRow[] = []
  let damaged = 0
  let start = 0
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start)
    // No line end: the last write did not finish.
    if (end === -1) {
      damaged++
      break
    }
    if (end > start) {
      const row = decodeRecord(bytes.toString('utf8', start, end))
      if (row) rows.push(row)
      else damaged++
    }
    start = end + 1
  }
  return { rows, damaged }
}

/** Deletes a segment once its rows are committed (in SQLite; on a LiteFS replica, acknowledged by the primary). */
export function removeSegment(path: string) {
  removeFile(path)
}
