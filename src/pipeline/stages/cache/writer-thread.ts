/**
 * The response cache's writer thread as the service runs it (runtime.ts names it): the store's writer
 * (storage/cache-writer.ts), which also decodes the answers put raw into their stored form, so a
 * miss's answer is decoded off the serving thread.
 */
import { runCacheWriter } from '../../../storage/cache-writer'
import { storedValueOf } from './stored-answer'

runCacheWriter(storedValueOf)
