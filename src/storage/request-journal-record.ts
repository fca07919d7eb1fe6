/**
 * The request journal's record format (request-journal.ts keeps the files): one request-log row as a
 * record, written field by field (RecordWriter) straight into a segment's mapping, and read back.
 *
 * Records follow each other from the start of a segment; a zero length where a record should begin
 * ends them (the unused rest of the segment, a record whose writing had not finished, or a prefix
 * zeroed after a commit). A record that does not decode is skipped and counted, never fatal.
 */
import type { RequestLogRow } from './repositories/request-logs/types'
import { usdToNano } from './money'

/**
 * Record format, version 6, little-endian: `u32 length` (of the whole record, written last), `u8
 * version`, `u32` null flags (bit i: value i is null), then each field that is not null in the
 * request_logs column order (`fields`): a text as `u32 byte length` + UTF-8, a number as `f64`, the
 * stream flag as `u8`. Until the length is written the record reads as the end of the segment.
 */
const recordVersion = 6
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
  // Version 6 (CONTRACT §15, §16, §17).
  ['cache', Field.OptionalText],
  /** Whole nano-dollars, like the cost. */
  ['savedNanoUsd', Field.OptionalNumber],
  ['continued', Field.OptionalNumber],
  /** The findings' JSON text. */
  ['guardrails', Field.OptionalText],
]

/**
 * Records of earlier versions are still read (a journal left by a previous build): version 5 ends
 * before the four fields version 6 appended; version 4 is version 5 with its last field, the cost, in
 * USD (turned into nano-dollars as it is read); version 3 ends before the cost column, version 2
 * before the enrichment column too. Their missing fields are null.
 */
const version5Fields = fields.slice(0, -4)
const fieldsByVersion: Readonly<Record<number, typeof fields>> = {
  [recordVersion]: fields,
  5: version5Fields,
  4: version5Fields,
  3: version5Fields.slice(0, -1),
  2: version5Fields.slice(0, -2),
}
const fieldsOfVersion = (version: number): typeof fields | undefined => fieldsByVersion[version]

/**
 * The null flags are one `u32`: every value (a field, each stage timing too) takes a bit, and version 6
 * takes all 32. A field more needs a wider header (a new version): checked here, not found as a flag
 * that silently wraps around onto the first field.
 */
const flagBits = fields.reduce((bits, [, kind]) => bits + (kind === Field.Stages ? 1 + stageNames.length : 1), 0)
if (flagBits > 32) throw new Error(`request journal: ${flagBits} values do not fit the record's 32 null flags`)

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
export function readRecords(bytes: Buffer): SegmentContents {
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
