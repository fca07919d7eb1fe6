/**
 * The request-log journal (storage/request-journal.ts) under the log queue: a row is on disk when
 * push returns, batches reach SQLite and only then leave the journal, and a start replays what a
 * crashed process left, once, skipping torn records. Also the owner-only modes of the data files.
 */
import { describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Metrics } from '../../src/observability/metrics'
import { silentLogger, type Logger } from '../../src/observability/logger'
import { createRequestLogQueue, type RequestLogQueue } from '../../src/pipeline/log/log-request'
import { databaseLogSink } from '../../src/cluster/writer'
import { openStorage, type Storage } from '../../src/storage/client'
import { createRepositories, type Repositories } from '../../src/storage/repositories'
import type { RequestLogRow } from '../../src/storage/repositories/request-logs'
import { decodeRecord, encodeRecord, readSegment, requestJournalDirectory, rowEntry } from '../../src/storage/request-journal'
import { startTestServer } from '../harness/server'
import { requestLogs } from '../../src/storage/schema'
import { startMockGateway, chatChunks } from '../harness/mock-gateway'
import { RequestContext } from '../../src/pipeline/request/context'

/** A pid no process can have (Linux caps pids at 2^22): the writer of its segments is gone. */
const deadPid = 2 ** 30

interface Fixture extends Disposable {
  dataDir: string
  journalDir: string
  storage: Storage
  repositories: Repositories
  /** A queue over this fixture's database (a new one plays a process started on the same data dir). */
  queue(options?: { repositories?: Repositories; maxQueued?: number; logger?: Logger }): RequestLogQueue
  rowIds(): string[]
  /** Rows in the journal's segments now, by segment file name. */
  journalRows(): Map<string, number>
}

function createFixture(): Fixture {
  const root = mkdtempSync(join(tmpdir(), 'router-journal-'))
  const dataDir = join(root, 'data')
  const storage = openStorage(join(dataDir, 'router.db'))
  const repositories = createRepositories(storage, () => {})
  const journalDir = requestJournalDirectory(dataDir)
  return {
    dataDir,
    journalDir,
    storage,
    repositories,
    queue: (options = {}) => createRequestLogQueue(databaseLogSink(options.repositories ?? repositories, new Metrics()), new Metrics(), options.logger ?? silentLogger, 128, options.maxQueued),
    rowIds: () => storage.sqlite.query<{ id: string }, []>('select id from request_logs order by seq').all().map((row) => row.id),
    journalRows() {
      const rows = new Map<string, number>()
      let names: string[] = []
      try {
        names = readdirSync(journalDir)
      } catch {}
      for (const name of names.sort()) rows.set(name, readSegment(join(journalDir, name)).rows.length)
      return rows
    },
    [Symbol.dispose]() {
      storage.close()
      rmSync(root, { recursive: true, force: true })
    },
  }
}

let rowNumber = 0
/** A row with every column set, so what comes back from the journal can be compared whole. */
/** Repositories whose request-log inserts fail with `message` while `refuse` is true. */
function refusingDatabase(repositories: Repositories, message: string) {
  const state = {
    refuse: true,
    repositories: {
      ...repositories,
      requestLogs: {
        ...repositories.requestLogs,
        insertMany(rows: RequestLogRow[]) {
          if (state.refuse) throw new Error(message)
          return repositories.requestLogs.insertMany(rows)
        },
      },
    } as Repositories,
  }
  return state
}

function row(values: Partial<RequestLogRow> = {}): RequestLogRow {
  rowNumber++
  return {
    id: crypto.randomUUID(),
    workspaceId: 'ws-journal',
    keyId: 'key-journal',
    createdAt: 1_750_000_000_000 + rowNumber,
    endpoint: 'chat',
    gateway: 'openai',
    providerKeyId: 'pk-1',
    model: 'openai/gpt-4o-mini',
    upstreamModel: 'gpt-4o-mini',
    status: 200,
    errorCode: null,
    stream: false,
    latencyMs: 12.345,
    overheadMs: 0.25,
    ttfbMs: 10.5,
    attempts: 1,
    attemptPath: 'openai:ok',
    stageTimings: '{"auth":0.01,"body":0.02}',
    inputTokens: 11,
    outputTokens: 7,
    clientIp: null,
    requestBody: null,
    enrichment: null,
    costNanoUsd: 123_000,
    // Version 6's fields: none by default (a request the cache, continuation and guardrails left alone).
    cache: null,
    savedNanoUsd: null,
    continued: null,
    guardrails: null,
    ...values,
  }
}

const entry = (logRow: RequestLogRow) => rowEntry(logRow)
const total = (rows: Map<string, number>) => [...rows.values()].reduce((sum, count) => sum + count, 0)

describe('the journal record', () => {
  test('a row goes to one record and comes back equal: nulls, a stream flag, line breaks and non-ASCII text in the body', () => {
    const original = row({ stream: true, errorCode: 'stream_aborted', keyId: null, ttfbMs: null, requestBody: '{"messages":[{"content":"line one\\nline two — ünïcødé 🦊\u2028"}]}\n', clientIp: '10.0.0.1' })
    const record = encodeRecord(original)
    // The record starts with its own length: the reader needs no separator.
    expect(record.readUInt32LE(0)).toBe(record.length)
    expect(decodeRecord(record)).toEqual(original)
    expect(decodeRecord(encodeRecord(row({ stream: false })))).toMatchObject({ stream: false })
    // Stage timings ride as numbers and read back as the same text: none at all, none reached, some.
    for (const stageTimings of [null, '{}', '{"upstream":2.5}', '{"auth":0.012,"body":0.004,"plan":0.031,"upstream":12.345}']) {
      const timed = row({ stageTimings })
      expect(decodeRecord(encodeRecord(timed))).toEqual(timed)
    }
  })

  test('an enrichment record (what a tool loop did) and a cost come back as written; records of the versions before those columns still read', () => {
    const enriched = row({ enrichment: JSON.stringify({ mcp: { rounds: 2, calls: [{ name: 'add', server: 's-1', ms: 3.25, ok: true }] } }) })
    expect(decodeRecord(encodeRecord(enriched))).toEqual(enriched)
    // Whole nano-dollars come back exactly, up to the largest a number holds exactly.
    for (const costNanoUsd of [0, 1, 83_700, 9_007_199_254_740_991]) {
      const costed = row({ costNanoUsd })
      expect(decodeRecord(encodeRecord(costed))).toEqual(costed)
    }
    // Version 3 wrote the same fields without the last one (the cost), version 2 without the last two:
    // a record of this version without them, relabelled. The missing fields read as null.
    const plain = row({ costNanoUsd: null })
    for (const version of [3, 2]) {
      const previous = Buffer.from(encodeRecord(plain))
      previous[4] = version
      expect(decodeRecord(previous)).toEqual(plain)
    }
    // Relabelled, a record that carries a cost is not a whole version-3 record, nor one with enrichment a version-2 one.
    const costed = Buffer.from(encodeRecord(row()))
    costed[4] = 3
    expect(decodeRecord(costed)).toBeUndefined()
    const enrichedAsPrevious = Buffer.from(encodeRecord({ ...enriched, costNanoUsd: null }))
    enrichedAsPrevious[4] = 2
    expect(decodeRecord(enrichedAsPrevious)).toBeUndefined()
    // An unknown version is refused.
    const future = Buffer.from(encodeRecord(plain))
    future[4] = 9
    expect(decodeRecord(future)).toBeUndefined()
  })

  test('a version-4 record (the cost in USD, as a build before nano-dollars wrote it) reads with its cost in whole nano-dollars', () => {
    // Version 4 wrote the same fields as version 5, the last one USD: a record of this version
    // holding the USD there (and none of version 6's fields), relabelled.
    const written = row()
    const asVersion4 = (costUsd: number | null) => {
      const record = Buffer.from(encodeRecord({ ...written, costNanoUsd: costUsd }))
      record[4] = 4
      return record
    }
    for (const [usd, nano] of [
      [0.000123, 123_000],
      // 75 prompt and 51 completion tokens at $0.30 and $1.20 per million: 0.0000837 USD.
      [75 * 0.0000003 + 51 * 0.0000012, 83_700],
      [0, 0],
      [1.5, 1_500_000_000],
      // Below half a nano-dollar rounds to 0; above it, up to 1.
      [4e-10, 0],
      [6e-10, 1],
    ] as const) {
      const read = decodeRecord(asVersion4(usd))
      expect(read).toEqual({ ...written, costNanoUsd: nano })
      expect(Number.isInteger(read!.costNanoUsd)).toBe(true)
    }
    // An unknown cost stays unknown.
    expect(decodeRecord(asVersion4(null))).toEqual({ ...written, costNanoUsd: null })
    // This version's cost is read as it is, not as USD.
    expect(decodeRecord(encodeRecord(row({ costNanoUsd: 2 })))?.costNanoUsd).toBe(2)
  })

  test("version 6: the cache outcome, its saving, continuations and guardrail findings come back as written; a version-5 record reads with them null", () => {
    const findings = JSON.stringify([
      { rule: 'email', where: 'input', action: 'mask', count: 2 },
      { rule: 'secret', where: 'output', action: 'block', count: 1 },
    ])
    for (const values of [
      { cache: 'hit', savedNanoUsd: 83_700 },
      { cache: 'semantic-hit', savedNanoUsd: null },
      { cache: 'coalesced', savedNanoUsd: 0 },
      { continued: 3 },
      { guardrails: findings },
      { cache: 'hit', savedNanoUsd: 9_007_199_254_740_991, continued: 1, guardrails: '[]', costNanoUsd: 0 },
      // The last of the 32 null flags: the findings alone, every field before them null that can be.
      { keyId: null, gateway: null, providerKeyId: null, model: null, upstreamModel: null, overheadMs: null, ttfbMs: null, attemptPath: null, stageTimings: null, inputTokens: null, outputTokens: null, costNanoUsd: null, guardrails: findings },
    ] satisfies Partial<RequestLogRow>[]) {
      const written = row(values)
      expect(decodeRecord(encodeRecord(written))).toEqual(written)
    }
    // A version-5 record: this version's record of a row without the new fields, with the header a
    // version-5 writer gives it (its label, and no null flags past its 28 values).
    const asVersion5 = (logRow: RequestLogRow) => {
      const record = Buffer.from(encodeRecord(logRow))
      record[4] = 5
      record.writeUInt32LE(record.readUInt32LE(5) & 0x0fffffff, 5)
      return record
    }
    const plain = row()
    const read = decodeRecord(asVersion5(plain))
    expect(read).toEqual(plain)
    expect(read).toMatchObject({ cache: null, savedNanoUsd: null, continued: null, guardrails: null, costNanoUsd: 123_000 })
    // Its cost is nano-dollars already (version 4's USD conversion is not applied to it).
    expect(decodeRecord(asVersion5(row({ costNanoUsd: 2 })))?.costNanoUsd).toBe(2)
    // Relabelled, a record that carries a version-6 field is not a whole version-5 record.
    for (const values of [{ cache: 'hit' }, { savedNanoUsd: 1 }, { continued: 1 }, { guardrails: '[]' }] satisfies Partial<RequestLogRow>[]) {
      expect(decodeRecord(asVersion5(row(values)))).toBeUndefined()
    }
  })

  test("a request's own record (written field by field on its path) is the row its log batch builds, the new fields included", () => {
    const context = new RequestContext('chat', 'chat', undefined, undefined, false)
    context.model = 'openai/gpt-4o-mini'
    context.cache = 'semantic-hit'
    context.savedNanoUsd = 41_250
    context.continued = 2
    context.guardrails = [
      { rule: 'email', where: 'input', action: 'mask', count: 3 },
      { rule: 'moderation', where: 'output', action: 'block', count: 1 },
    ]
    context.finish(200, undefined)
    const logRow = context.logRow()
    expect(logRow).toMatchObject({ cache: 'semantic-hit', savedNanoUsd: 41_250, continued: 2, guardrails: JSON.stringify(context.guardrails) })
    expect(decodeRecord(encodeRecord(context))).toEqual(logRow)
    // A request none of them touched: all four null, in the record as in the row.
    const plain = new RequestContext('chat', 'chat', undefined, undefined, false)
    plain.finish(200, undefined)
    expect(plain.logRow()).toMatchObject({ cache: null, savedNanoUsd: null, continued: null, guardrails: null })
    expect(decodeRecord(encodeRecord(plain))).toEqual(plain.logRow())
  })

  test("a request's record has room for its findings however many: the record's bound counts the cache and guardrail texts", () => {
    // recordTextUnits sizes the record before it is written into the segment's mapping; a text it
    // leaves out is cut short there, silently, when the texts outgrow the bound's slack.
    const context = new RequestContext('chat', 'chat', undefined, undefined, false)
    context.cache = 'semantic-hit'
    context.guardrails = Array.from({ length: 40 }, (_, index) => ({ rule: `regex-${index}`, where: index % 2 ? ('output' as const) : ('input' as const), action: 'mask', count: index + 1 }))
    context.finish(200, undefined)
    expect(context.recordTextUnits()).toBeGreaterThanOrEqual(context.requestId.length + 'semantic-hit'.length + JSON.stringify(context.guardrails).length)
    expect(decodeRecord(encodeRecord(context))).toEqual(context.logRow())
  })

  test('bytes that are not one whole record of this version are refused', () => {
    const record = encodeRecord(row())
    const otherVersion = Buffer.from(record)
    otherVersion[4] = 1
    expect(decodeRecord(otherVersion)).toBeUndefined()
    expect(decodeRecord(Buffer.concat([record, Buffer.from([0])]))).toBeUndefined()
    expect(decodeRecord(new Uint8Array(0))).toBeUndefined()
    // Every proper prefix (a write cut short) is refused, never half a row, whatever its length field says.
    for (let cut = 0; cut < record.length; cut++) {
      expect(decodeRecord(record.subarray(0, cut))).toBeUndefined()
      const relabelled = Buffer.from(record.subarray(0, cut))
      if (cut >= 4) relabelled.writeUInt32LE(cut, 0)
      expect(decodeRecord(relabelled)).toBeUndefined()
    }
  })
})

describe('the journal segments', () => {
  test('rows fill a segment and go on in the next; committed segments are reused, not multiplied; a row larger than a segment gets a file of its own', () => {
    using fixture = createFixture()
    const queue = fixture.queue()
    queue.openJournal(fixture.journalDir, { segmentBytes: 4096 })
    const files = () => readdirSync(fixture.journalDir).sort()
    for (let round = 0; round < 5; round++) {
      // About 500 bytes a row: 20 rows span three 4 KB segments.
      const rows = Array.from({ length: 20 }, () => row())
      for (const logRow of rows) queue.push(entry(logRow))
      expect(total(fixture.journalRows())).toBe(20)
      queue.flush()
      expect(total(fixture.journalRows())).toBe(0)
    }
    expect(fixture.rowIds()).toHaveLength(100)
    // Five rounds of three segments each ran on the same few files.
    expect(files().length).toBeLessThanOrEqual(4)

    const captured = row({ requestBody: JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }) })
    const before = new Set(files())
    queue.push(entry(captured))
    const own = files().filter((name) => !before.has(name))
    expect(own).toHaveLength(1)
    expect(readSegment(join(fixture.journalDir, own[0]!)).rows).toEqual([captured])
    queue.flush()
    expect(files()).not.toContain(own[0])
    expect(fixture.rowIds()).toContain(captured.id)
    queue.stop()
    expect(files()).toEqual([])
  })
})

describe('the request-log queue with its journal', () => {
  test('a pushed row is in the journal when push returns; a flush writes it to SQLite and empties its segment; stop leaves the journal empty', () => {
    using fixture = createFixture()
    const queue = fixture.queue()
    expect(queue.openJournal(fixture.journalDir)).toEqual({ segments: 0, rows: 0, inserted: 0, damaged: 0, pending: 0 })
    const rows = [row(), row({ stream: true }), row({ status: 502, errorCode: 'all_targets_failed' })]
    for (const logRow of rows) queue.push(entry(logRow))

    // On disk before any flush: what a kill -9 now would leave.
    const [segment] = readdirSync(fixture.journalDir)
    expect(readSegment(join(fixture.journalDir, segment!))).toEqual({ rows, damaged: 0 })
    expect(fixture.rowIds()).toEqual([])

    queue.flush()
    expect(fixture.rowIds()).toEqual(rows.map((logRow) => logRow.id))
    // The written segment holds no row any more (it is zeroed for reuse); requests only ever write.
    expect(readSegment(join(fixture.journalDir, segment!))).toEqual({ rows: [], damaged: 0 })
    expect(total(fixture.journalRows())).toBe(0)

    queue.push(entry(row()))
    expect(total(fixture.journalRows())).toBe(1)
    queue.stop()
    expect(fixture.rowIds()).toHaveLength(4)
    expect(readdirSync(fixture.journalDir)).toEqual([])
  })

  test('a start replays the rows a dead process journaled, writes each once and deletes its segments', () => {
    using fixture = createFixture()
    const crashed = fixture.queue()
    crashed.openJournal(fixture.journalDir, { pid: deadPid })
    const rows = Array.from({ length: 5 }, () => row())
    for (const logRow of rows.slice(0, 3)) crashed.push(entry(logRow))
    crashed.flush()
    for (const logRow of rows.slice(3)) crashed.push(entry(logRow))
    // The process dies here: 3 rows written, 2 only in the journal.
    expect(fixture.rowIds()).toHaveLength(3)
    expect(total(fixture.journalRows())).toBe(2)

    const restarted = fixture.queue()
    // Two segments: the written one, emptied by the flush, and the one being written when it died.
    expect(restarted.openJournal(fixture.journalDir)).toEqual({ segments: 2, rows: 2, inserted: 2, damaged: 0, pending: 0 })
    expect(fixture.rowIds().sort()).toEqual(rows.map((logRow) => logRow.id).sort())
    expect(readdirSync(fixture.journalDir)).toEqual([])
    // Rows replayed are complete rows, not only ids.
    const replayed = fixture.storage.sqlite.query<{ latency_ms: number; stage_timings: string; input_tokens: number }, [string]>('select latency_ms, stage_timings, input_tokens from request_logs where id = ?').get(rows[4]!.id)
    expect(replayed).toEqual({ latency_ms: 12.345, stage_timings: '{"auth":0.01,"body":0.02}', input_tokens: 11 })
    restarted.stop()
  })

  test('a crash between the SQLite commit and the segment deletion: the replay writes no row twice', () => {
    using fixture = createFixture()
    const crashed = fixture.queue()
    crashed.openJournal(fixture.journalDir, { pid: deadPid })
    const committed = Array.from({ length: 4 }, () => row())
    for (const logRow of committed) crashed.push(entry(logRow))
    const [name] = readdirSync(fixture.journalDir)
    const path = join(fixture.journalDir, name!)
    const beforeDeletion = readFileSync(path)
    crashed.flush()
    // The state of a process killed after the commit and before the unlink: the segment is back.
    writeFileSync(path, beforeDeletion)
    const notCommitted = row()
    crashed.push(entry(notCommitted))

    const restarted = fixture.queue()
    expect(restarted.openJournal(fixture.journalDir)).toMatchObject({ rows: 5, inserted: 1, damaged: 0, pending: 0 })
    const ids = fixture.rowIds()
    expect(ids).toHaveLength(5)
    expect(new Set(ids).size).toBe(5)
    expect(ids.sort()).toEqual([...committed, notCommitted].map((logRow) => logRow.id).sort())
    // A second replay of the same rows (another start racing this one) adds nothing either.
    expect(fixture.repositories.requestLogs.insertManyIfAbsent([...committed, notCommitted])).toBe(0)
    restarted.stop()
  })

  test('a torn last record (the process died inside the write) and a damaged record are skipped, not fatal', () => {
    using fixture = createFixture()
    const crashed = fixture.queue()
    crashed.openJournal(fixture.journalDir, { pid: deadPid })
    const whole = [row(), row(), row()]
    for (const logRow of whole) crashed.push(entry(logRow))
    const [name] = readdirSync(fixture.journalDir)
    const path = join(fixture.journalDir, name!)
    // A damaged record in the middle (its length right, its contents not), then the first 60 bytes
    // of a fourth record: a copy the process did not finish.
    const records = whole.map((logRow) => encodeRecord(logRow))
    const damaged = Buffer.from(records[1]!)
    damaged[4] = 99
    writeFileSync(path, Buffer.concat([records[0]!, damaged, records[1]!, records[2]!, encodeRecord(row()).subarray(0, 60)]))

    const warnings: Record<string, unknown>[] = []
    const logger: Logger = { ...silentLogger, warn: (event, fields) => void warnings.push({ event, ...fields }) }
    const restarted = fixture.queue({ logger })
    expect(restarted.openJournal(fixture.journalDir)).toEqual({ segments: 1, rows: 3, inserted: 3, damaged: 2, pending: 0 })
    expect(fixture.rowIds().sort()).toEqual(whole.map((logRow) => logRow.id).sort())
    expect(warnings).toEqual([expect.objectContaining({ event: 'request_journal_damaged', skipped: 2, rows: 3 })])
    expect(readdirSync(fixture.journalDir)).toEqual([])
    restarted.stop()
  })

  test('segments of a process that still runs, or of a journal open in this process, are not replayed', () => {
    using fixture = createFixture()
    // The parent process runs: its segment belongs to a live writer (another role on the same data dir).
    const otherProcess = fixture.queue()
    otherProcess.openJournal(fixture.journalDir, { pid: process.ppid })
    otherProcess.push(entry(row()))
    const sameProcess = fixture.queue()
    sameProcess.openJournal(fixture.journalDir)
    sameProcess.push(entry(row()))

    const starting = fixture.queue()
    expect(starting.openJournal(fixture.journalDir)).toEqual({ segments: 0, rows: 0, inserted: 0, damaged: 0, pending: 0 })
    expect(fixture.rowIds()).toEqual([])
    expect(total(fixture.journalRows())).toBe(2)
    for (const queue of [otherProcess, sameProcess, starting]) queue.stop()
    expect(fixture.rowIds()).toHaveLength(2)
  })

  test('while the database refuses batches the rows and their segments stay; the next pass writes them and deletes the segments', () => {
    using fixture = createFixture()
    const database = refusingDatabase(fixture.repositories, 'disk I/O error')
    const queue = fixture.queue({ repositories: database.repositories })
    queue.openJournal(fixture.journalDir)
    const rows = Array.from({ length: 3 }, () => row())
    for (const logRow of rows.slice(0, 2)) queue.push(entry(logRow))
    queue.flush()
    queue.push(entry(rows[2]!))
    queue.flush()
    expect(queue.depth()).toBe(3)
    expect(total(fixture.journalRows())).toBe(3)

    database.refuse = false
    queue.flush()
    expect(queue.depth()).toBe(0)
    expect(fixture.rowIds()).toEqual(rows.map((logRow) => logRow.id))
    expect(total(fixture.journalRows())).toBe(0)
    queue.stop()
    expect(readdirSync(fixture.journalDir)).toEqual([])
  })

  test("while another connection holds the write lock the timer's flush does not wait for it: the rows stay journaled and go in once it is free", async () => {
    using fixture = createFixture()
    const metrics = new Metrics()
    const queue = createRequestLogQueue(databaseLogSink(fixture.repositories, metrics), metrics, silentLogger)
    queue.openJournal(fixture.journalDir)
    const other = new Database(fixture.storage.sqlite.filename)
    other.exec('BEGIN IMMEDIATE')
    const rows = Array.from({ length: 3 }, () => row())
    for (const logRow of rows) queue.push(entry(logRow))
    queue.start(5)
    // Were a flush to wait in SQLite's busy handler, this thread would sleep in it (up to 5 s) and
    // then fail; it tries the lock, finds it taken and comes back after a millisecond instead.
    const began = performance.now()
    await Bun.sleep(60)
    expect(performance.now() - began).toBeLessThan(1000)
    expect(metrics.logFlushesDeferred).toBeGreaterThan(0)
    expect(queue.depth()).toBe(3)
    expect(total(fixture.journalRows())).toBe(3)
    expect(fixture.rowIds()).toEqual([])

    other.exec('COMMIT')
    other.close()
    await Bun.sleep(40)
    expect(fixture.rowIds()).toEqual(rows.map((logRow) => logRow.id))
    expect(queue.depth()).toBe(0)
    expect(total(fixture.journalRows())).toBe(0)
    expect(metrics.logRowsWritten).toBe(3)
    queue.stop()
  })

  test('flush() (at stop, or asked for) waits for a lock another thread holds, and writes', async () => {
    using fixture = createFixture()
    const metrics = new Metrics()
    const queue = createRequestLogQueue(databaseLogSink(fixture.repositories, metrics), metrics, silentLogger)
    queue.openJournal(fixture.journalDir)
    const worker = new Worker(new URL('../harness/write-lock-worker.ts', import.meta.url))
    const messages: string[] = []
    const held = new Promise<void>((resolve) => {
      worker.onmessage = (event: MessageEvent<string>) => {
        messages.push(event.data)
        if (event.data === 'held') resolve()
      }
    })
    worker.postMessage({ path: fixture.storage.sqlite.filename, holdMs: 150 })
    await held
    const rows = [row(), row()]
    for (const logRow of rows) queue.push(entry(logRow))
    queue.flush()
    expect(fixture.rowIds()).toEqual(rows.map((logRow) => logRow.id))
    expect(metrics.logFlushesDeferred).toBe(0)
    queue.stop()
    await Bun.sleep(10)
    worker.terminate()
    expect(messages).toEqual(['held', 'released'])
  })

  test('a journal that cannot be written does not fail the push: the row is kept in memory and written with the next batch', () => {
    using fixture = createFixture()
    const errors: Record<string, unknown>[] = []
    const queue = fixture.queue({ logger: { ...silentLogger, error: (event, fields) => void errors.push({ event, ...fields }) } })
    queue.openJournal(fixture.journalDir)
    // The folder gone: no segment can be created.
    rmSync(fixture.journalDir, { recursive: true })
    const rows = [row(), row()]
    for (const logRow of rows) expect(() => queue.push(entry(logRow))).not.toThrow()
    // Reported once, not per row.
    expect(errors).toEqual([expect.objectContaining({ event: 'request_journal_write_failed' })])
    queue.flush()
    expect(fixture.rowIds()).toEqual(rows.map((logRow) => logRow.id))
    queue.stop()
  })

  test('a queue over its bound while the database refuses is put down to the journal and read back from it later', () => {
    using fixture = createFixture()
    const database = refusingDatabase(fixture.repositories, 'database is locked')
    const queue = fixture.queue({ repositories: database.repositories, maxQueued: 5 })
    queue.openJournal(fixture.journalDir)
    const rows = Array.from({ length: 8 }, () => row())
    for (const logRow of rows) queue.push(entry(logRow))
    queue.flush()
    // Memory let go of them; the journal holds every one.
    expect(queue.depth()).toBe(0)
    expect(total(fixture.journalRows())).toBe(8)

    database.refuse = false
    const later = row()
    queue.push(entry(later))
    queue.flush()
    expect(fixture.rowIds().sort()).toEqual([...rows, later].map((logRow) => logRow.id).sort())
    expect(total(fixture.journalRows())).toBe(0)
    queue.stop()
  })
})

describe('a served request is journaled before it is done', () => {
  test('buffered: the row is in the journal when the response arrives; streamed: when the stream ends, not before', async () => {
    await using mock = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const provider = await server.call('POST', '/api/v1/providers', { gateway: 'openai', key: 'sk-upstream' })
    const key = await server.call('POST', '/api/v1/keys', { routing: { targets: [{ provider_key_id: provider.body.data.id }] } })
    const journalDir = requestJournalDirectory(server.dataDir)
    const journaled = () => readdirSync(journalDir).flatMap((name) => readSegment(join(journalDir, name)).rows)
    const chat = (stream: boolean) =>
      fetch(`${server.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.body.data.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream }),
      })

    const buffered = await chat(false)
    expect(buffered.status).toBe(200)
    const bufferedId = buffered.headers.get('x-router-request-id')!
    expect(journaled().find((logRow) => logRow.id === bufferedId)).toMatchObject({ status: 200, stream: false, inputTokens: 11, outputTokens: 7 })
    await buffered.arrayBuffer()

    mock.handle(() => ({ sse: chatChunks('gpt-4o-mini'), chunkDelayMs: 30 }))
    const streamed = await chat(true)
    const streamedId = streamed.headers.get('x-router-request-id')!
    const reader = streamed.body!.getReader()
    expect((await reader.read()).done).toBe(false)
    // Open: the row is not final yet.
    expect(journaled().some((logRow) => logRow.id === streamedId)).toBe(false)
    while (!(await reader.read()).done) {}
    expect(journaled().find((logRow) => logRow.id === streamedId)).toMatchObject({ status: 200, stream: true, outputTokens: 3 })

    // Nothing was written to SQLite yet (the harness flushes on demand): the journal alone held both.
    expect(server.runtime.repositories.requestLogs.count()).toBe(0)
    const inJournal = journaled()
    server.runtime.logQueue.flush()
    expect(server.runtime.repositories.requestLogs.count()).toBe(2)
    expect(journaled()).toEqual([])
    // The batch builds its rows from the requests; the journal holds the same rows, field for field
    // (what a replay after a crash would write).
    const stored = server.runtime.storage.db.select().from(requestLogs).all()
    expect(stored.map((row) => row.id).sort()).toEqual(inJournal.map((row) => row.id).sort())
    for (const row of inJournal) expect(stored.find((candidate) => candidate.id === row.id)).toMatchObject(row)
  })
})

describe('owner-only files (0600) and folders (0700)', () => {
  test('a new data dir, router.db with its -wal and -shm, the journal folder and its segments', () => {
    const root = mkdtempSync(join(tmpdir(), 'router-modes-'))
    try {
      const dataDir = join(root, 'several', 'levels', 'data')
      const storage = openStorage(join(dataDir, 'router.db'))
      const queue = createRequestLogQueue(databaseLogSink(createRepositories(storage, () => {}), new Metrics()), new Metrics(), silentLogger)
      queue.openJournal(requestJournalDirectory(dataDir))
      queue.push(entry(row()))
      queue.flush()
      queue.push(entry(row()))
      const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)
      for (const folder of [join(root, 'several'), join(root, 'several', 'levels'), dataDir, requestJournalDirectory(dataDir)]) expect([folder, mode(folder)]).toEqual([folder, '700'])
      for (const file of ['router.db', 'router.db-wal', 'router.db-shm']) expect([file, mode(join(dataDir, file))]).toEqual([file, '600'])
      const segments = readdirSync(requestJournalDirectory(dataDir))
      expect(segments.length).toBeGreaterThan(0)
      for (const segment of segments) expect(mode(join(requestJournalDirectory(dataDir), segment))).toBe('600')
      queue.stop()
      storage.close()
      // The database reopens (the file made before SQLite opened it is a valid database).
      const again = new Database(join(dataDir, 'router.db'))
      expect(again.query<{ n: number }, []>('select count(*) as n from request_logs').get()!.n).toBe(2)
      again.close()
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
