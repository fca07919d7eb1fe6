/**
 * What a scheduled job is given: the parts of the service a job may use (JobDeps, which the runtime
 * has: runtime.ts builds it, the scheduler's thread and the CLI pass it) and its progress report.
 * Each job takes the few parts it uses (a Pick of these), never the runtime.
 */
import type { Config } from '../config/env'
import type { ProviderEntry } from '../domain/read-model'
import type { UpstreamClient } from '../gateways/client'
import type { Logger } from '../observability/logger'
import type { CacheStore } from '../storage/cache-store'
import type { Storage } from '../storage/client'
import type { SecretBox } from '../storage/crypto'
import type { Repositories } from '../storage/repositories'

export interface JobDeps {
  config: Config
  storage: Storage
  repositories: Repositories
  secretBox: SecretBox
  logger: Logger
  /** Every call to a gateway (gateways/client.ts). */
  upstream: UpstreamClient
  /** Outside calls that are not to a gateway (webhooks). */
  fetch: typeof fetch
  now: () => Date
  random: () => number
  /** The read model as it is now: the provider entries (secrets decrypted) a job calls gateways with. */
  snapshots: { current(): { providers: ReadonlyMap<string, ProviderEntry> } }
  /** This node's response cache file (CONTRACT §15: the runtime's NodeCache), absent when the process has none. */
  cache?: Pick<CacheStore, 'prune' | 'stats'>
}

/** Reports progress of a run: items done out of the total known so far. */
export type JobProgress = (done: number, total: number) => void

export type Job = (deps: JobDeps, progress: JobProgress) => Promise<Record<string, unknown>>
