/**
 * A cache writer thread that writes nothing (bench/stages.ts): it answers each batch as committed, so
 * the micro-benchmark of a miss counts the serving thread's work (the entry key, the lookup, the
 * answer queued and posted to the thread) and not the writer's SQLite work on the other core.
 */
import { unpackWrite, type CacheWriterCommand, type CacheWriterReply } from '../src/storage/cache-protocol'

declare const self: Worker

const reply = (message: CacheWriterReply) => self.postMessage(message)

self.onmessage = (event: MessageEvent<CacheWriterCommand>) => {
  let command = event.data
  if (command.type === 'write-packed') command = unpackWrite(command)
  if (command.type === 'write') reply({ type: 'committed', entries: 0, bytes: 0, evicted: 0, chars: 0, puts: command.puts.length, deleted: [] })
  else if (command.type === 'flush') reply({ type: 'flushed', id: command.id })
  else if (command.type === 'close') reply({ type: 'closed' })
}
