/** The response cache's writer thread (cache-writer.ts) for values stored as they are given. */
import { runCacheWriter } from './cache-writer'

runCacheWriter()
