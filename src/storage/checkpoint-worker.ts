/**
 * The WAL checkpointer's thread (see client.ts startBackgroundCheckpoints): its own connection
 * copies the write-ahead log into the database file on an interval, so the serving thread never
 * stalls on a checkpoint. PASSIVE never blocks the writer; it copies what it can.
 */
import { Database } from 'bun:sqlite'

declare const self: Worker

type Command = { type: 'start'; path: string; intervalMs: number } | { type: 'stop' }

let database: Database | undefined
let timer: ReturnType<typeof setInterval> | undefined

function checkpoint() {
  if (!database) return
  try {
    const result = database.query('PRAGMA wal_checkpoint(PASSIVE)').get() as { busy: number; log: number; checkpointed: number }
    if (result.checkpointed > 0) self.postMessage({ type: 'checkpointed', pages: result.checkpointed })
  } catch (error) {
    self.postMessage({ type: 'failed', error: error instanceof Error ? error.message : String(error) })
  }
}

self.onmessage = (event: MessageEvent<Command>) => {
  const command = event.data
  if (command.type === 'start') {
    database = new Database(command.path)
    database.exec('PRAGMA busy_timeout = 5000')
    timer = setInterval(checkpoint, command.intervalMs)
    self.postMessage({ type: 'started' })
    return
  }
  if (timer) clearInterval(timer)
  checkpoint()
  database?.close()
  database = undefined
  self.postMessage({ type: 'stopped' })
}
