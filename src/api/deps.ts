/** Everything the HTTP layer needs, built once in main.ts (or by the test harness). */
import type { Config } from '../config/env'
import type { ManagementDeps } from '../management/context'
import type { Logger } from '../observability/logger'
import type { Metrics } from '../observability/metrics'
import type { Storage } from '../storage/client'
import type { InferenceDeps } from '../pipeline'
import type { Writer } from '../cluster/writer'
import type { KeyLimiter } from '../pipeline/limits/ledger'

export interface AppDeps extends ManagementDeps, InferenceDeps {
  config: Config
  storage: Storage
  metrics: Metrics
  logger: Logger
  /** The writer seam (cluster/writer.ts): where a write goes on this node's role. */
  writer: Writer
  /** Admission against keys' limits, and their live state for the key object. */
  limiter: KeyLimiter
  /** This node's response cache: the cache stage reads and writes its store, management purges it. */
  cache?: NonNullable<ManagementDeps['cache']> & NonNullable<InferenceDeps['cache']>
}
