/**
 * The request-log queue (SPEC "What the service does" 7): a finished request's record is written to
 * the request journal (storage/request-journal.ts) before the request is done, so a crash of the
 * process loses no row; the rows are built and written to SQLite in batched transactions on a timer,
 * with last_used_at stamped per key in the same pass, and each journal segment is given back once
 * its rows are committed. The journal is read only after a crash; the batch builds its rows from the
 * requests themselves. Nothing here touches the database synchronously during a request.
 */
import type { Logger } from '../../observability/logger'
import type { Metrics } from '../../observability/metrics'
import type { LogSink } from '../../cluster/writer'
import type { RequestLogRow } from '../../storage/repositories/request-logs'
import { openRequestJournal, orphanSegments, readSegment, removeSegment, type JournalEntry, type JournalOptions, type JournalSegment, type RequestJournal } from '../../storage/request-journal'

/** A finished request: it writes its own journal record, and gives its row to the batch. */
export type LogEntry = JournalEntry

/** What opening the journal found: rows that processes gone from the data directory left in it. */
export interface JournalReplay {
  /** Segments read. */
  segments: number
  /** Rows read from them. */
  rows: number
  /** Rows that were not in SQLite yet (the others were committed before the crash). */
  inserted: number
  /** Torn or damaged lines skipped. */
  damaged: number
  /** Segments left for the timer to retry (the database refused them). */
  pending: number
}

export interface RequestLogQueue {
  push(entry: LogEntry): void
  /** Writes everything queued now (timer, shutdown, tests). */
  flush(): void
  depth(): number
  start(intervalMs?: number): void
  /** Flushes and closes the journal: after a clean stop it holds nothing. */
  stop(): void
  /**
   * Replays into SQLite the rows that processes gone from this data directory left in the journal,
   * then journals every row pushed from now on. Once, at start, before the listener opens (the CLI
   * never opens it: it serves no request).
   */
  openJournal(directory: string, options?: JournalOptions): JournalReplay
}

/** Segments replayed from disk per timer pass once the database works again (each is one flush window of rows). */
const segmentsPerPass = 8
/**
 * While another connection holds the write lock (a job's transaction, the CLI), the timer's flush
 * does not wait for it on the serving thread: it tries again after `deferredRetryMs`. Only after
 * `longestDeferMs` of finding the lock taken does it wait, so the rows always get in.
 */
const deferredRetryMs = 1
const longestDeferMs = 250

/**
 * Rows are written in batches of about `batchSize`: large enough that a commit costs little per
 * row, small enough that one write blocks the event loop for well under a millisecond.
 */
export function createRequestLogQueue(sink: LogSink, metrics: Metrics, logger: Logger, batchSize = 128, maxQueued = 200_000): RequestLogQueue {
  /** Requests whose records are in a journal segment, their rows not committed yet. */
  let journaled: LogEntry[] = []
  /** Requests held only here: no journal is open, or writing to it failed. */
  let inMemoryOnly: LogEntry[] = []
  let journal: RequestJournal | undefined
  /** Ended segments whose rows are all in `journaled`: deleted after the commit that writes them. */
  let sealed: JournalSegment[] = []
  /** Segments whose rows are not in memory (left by a dead process, or put down when the queue overflowed): replayed from disk. */
  let onDisk: string[] = []
  let journalFailing = false
  let timer: ReturnType<typeof setInterval> | undefined
  let scheduled = false
  /** When the timer's flush first found the write lock taken (undefined: it did not, or it got in since). */
  let deferredSince: number | undefined

  /**
   * Writes rows through the sink (the writer seam: this database on the primary, the spool on a
   * replica), which stamps the keys' last use with them. Rows `replayed` from the journal's files
   * may be there already (a crash came between their commit and their segment's release) and are
   * skipped; rows of this process's own requests are new.
   */
  const commit = (rows: RequestLogRow[], replayed: boolean): number => (rows.length === 0 ? 0 : sink.commit(rows, replayed))

  const removeSegments = (paths: readonly string[]) => {
    try {
      for (const path of paths) removeSegment(path)
    } catch (error) {
      // The rows are committed; a segment left behind is replayed once more at the next start and skipped there.
      logger.error('request_journal_remove_failed', { error: error instanceof Error ? error.message : String(error) })
    }
  }

  /** Commits segments on disk, oldest first, up to `limit`; stops at the first the database refuses (it stays for the next pass). */
  const replayOnDisk = (limit: number, totals: JournalReplay) => {
    while (onDisk.length > 0 && limit-- > 0) {
      const path = onDisk[0]!
      const contents = readSegment(path)
      totals.inserted += commit(contents.rows, true)
      removeSegments([path])
      onDisk.shift()
      totals.segments++
      totals.rows += contents.rows.length
      totals.damaged += contents.damaged
      if (contents.damaged > 0) logger.warn('request_journal_damaged', { segment: path, skipped: contents.damaged, rows: contents.rows.length })
    }
  }

  /**
   * Commits the batch. `wait` false (the timer's and a full batch's flush): if the write lock is
   * taken, nothing is written and false is returned, unless it has been taken for `longestDeferMs`.
   */
  const commitBatch = (rows: RequestLogRow[], wait: boolean): boolean => {
    const now = performance.now()
    if (wait || (deferredSince !== undefined && now - deferredSince >= longestDeferMs)) {
      commit(rows, false)
      deferredSince = undefined
      return true
    }
    if (rows.length > 0 && sink.tryCommit(rows) === undefined) {
      deferredSince ??= now
      metrics.logFlushesDeferred++
      return false
    }
    deferredSince = undefined
    return true
  }

  const flush = (wait = true) => {
    scheduled = false
    if (journal) {
      try {
        for (const segment of journal.seal()) sealed.push(segment)
      } catch (error) {
        logger.error('request_journal_write_failed', { error: error instanceof Error ? error.message : String(error) })
      }
    }
    if (journaled.length > 0 || inMemoryOnly.length > 0) {
      const fromJournal = journaled
      const fromMemory = inMemoryOnly
      const segments = sealed
      journaled = []
      inMemoryOnly = []
      sealed = []
      const rows: RequestLogRow[] = []
      for (const entry of fromJournal) rows.push(entry.logRow())
      for (const entry of fromMemory) rows.push(entry.logRow())
      let written: boolean
      try {
        written = commitBatch(rows, wait)
      } catch (error) {
        journaled = fromJournal
        inMemoryOnly = fromMemory
        sealed = segments
        // A database that keeps failing must not take the process's memory with it. Journaled rows
        // are put down (their segments are read again once the database works); rows held only here
        // are kept up to the bound, and the rest dropped and counted.
        if (journaled.length + inMemoryOnly.length > maxQueued) {
          if (journaled.length > 0) {
            for (const segment of sealed) onDisk.push(segment.path)
            journal?.abandon(sealed)
            logger.warn('request_log_queue_spilled', { rows: journaled.length, segments: sealed.length })
            journaled = []
            sealed = []
          }
          if (inMemoryOnly.length > maxQueued) {
            metrics.logRowsDropped += inMemoryOnly.length - maxQueued
            inMemoryOnly = inMemoryOnly.slice(inMemoryOnly.length - maxQueued)
          }
        }
        logger.error('request_log_flush_failed', { rows: rows.length, error: error instanceof Error ? error.message : String(error) })
        return
      }
      if (!written) {
        // The lock is another connection's for now: the same rows, a little later, off this turn.
        journaled = fromJournal.concat(journaled)
        inMemoryOnly = fromMemory.concat(inMemoryOnly)
        sealed = segments.concat(sealed)
        if (!scheduled) {
          scheduled = true
          setTimeout(flushSoon, deferredRetryMs)
        }
        return
      }
      // Only now, with the rows committed: a crash before this line replays the segments at the next
      // start, and the replay skips the rows already there.
      try {
        journal?.release(segments)
      } catch (error) {
        logger.error('request_journal_remove_failed', { error: error instanceof Error ? error.message : String(error) })
      }
    }
    if (onDisk.length > 0) {
      try {
        replayOnDisk(segmentsPerPass, { segments: 0, rows: 0, inserted: 0, damaged: 0, pending: 0 })
      } catch (error) {
        logger.error('request_journal_replay_failed', { segments: onDisk.length, error: error instanceof Error ? error.message : String(error) })
      }
    }
  }

  /** The timer's and a full batch's flush: on the serving thread, so it never waits for the write lock. */
  const flushSoon = () => flush(false)

  const queueApi: RequestLogQueue = {
    push(entry) {
      if (journal) {
        try {
          journal.append(entry)
          journaled.push(entry)
          journalFailing = false
        } catch (error) {
          // The request still succeeds; its row is written with the next batch, but would not survive a crash.
          inMemoryOnly.push(entry)
          if (!journalFailing) logger.error('request_journal_write_failed', { error: error instanceof Error ? error.message : String(error) })
          journalFailing = true
        }
      } else inMemoryOnly.push(entry)
      if (journaled.length + inMemoryOnly.length >= batchSize && !scheduled) {
        scheduled = true
        setImmediate(flushSoon)
      }
    },
    flush: () => flush(true),
    depth: () => journaled.length + inMemoryOnly.length,
    start(intervalMs = 50) {
      if (timer) return
      timer = setInterval(flushSoon, intervalMs)
      timer.unref?.()
    },
    stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      flush()
      if (!journal) return
      journal.close()
      journal = undefined
      const left = sealed.length + onDisk.length
      if (left > 0) logger.warn('request_journal_left', { segments: left, message: 'Request-log rows not yet in the database stay in the journal; the next start writes them.' })
    },
    openJournal(directory, options) {
      // Listed before this process's own journal exists, so none of its segments is taken for a dead writer's.
      for (const path of orphanSegments(directory)) onDisk.push(path)
      journal = openRequestJournal(directory, options)
      const replay: JournalReplay = { segments: 0, rows: 0, inserted: 0, damaged: 0, pending: 0 }
      try {
        replayOnDisk(Number.POSITIVE_INFINITY, replay)
      } catch (error) {
        logger.error('request_journal_replay_failed', { segments: onDisk.length, error: error instanceof Error ? error.message : String(error) })
      }
      replay.pending = onDisk.length
      return replay
    },
  }
  metrics.logQueueDepth = queueApi.depth
  return queueApi
}
