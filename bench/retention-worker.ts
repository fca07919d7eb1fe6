/**
 * The retention curve's scheduler thread (bench/scale.ts `retentionCurve`): its own runtime and
 * connection, as the scheduler's worker has, running the `log-prune` job at the simulated time the
 * main thread sends.
 */
import type { Config } from '../src/config/env'
import { createRuntime, type Runtime } from '../src/runtime'
import { silentLogger } from '../src/observability/logger'
import { pruneLogs } from '../src/scheduler/jobs/log-prune'

declare const self: Worker

export type RetentionCommand = { type: 'open'; config: Config } | { type: 'prune'; nowMs: number } | { type: 'close' }
export type RetentionReply = { type: 'opened' } | { type: 'pruned'; result: Record<string, unknown>; ms: number } | { type: 'closed' }

let runtime: Runtime | undefined
let now = 0

self.onmessage = async (event: MessageEvent<RetentionCommand>) => {
  const command = event.data
  if (command.type === 'open') {
    runtime = createRuntime(command.config, { asPrimary: true, readsInPlace: true, logger: silentLogger })
    runtime.now = () => new Date(now)
    self.postMessage({ type: 'opened' } satisfies RetentionReply)
  } else if (command.type === 'prune') {
    now = command.nowMs
    const started = performance.now()
    const result = await pruneLogs(runtime!, () => {})
    self.postMessage({ type: 'pruned', result, ms: performance.now() - started } satisfies RetentionReply)
  } else {
    runtime?.reads.close()
    runtime?.storage.close()
    self.postMessage({ type: 'closed' } satisfies RetentionReply)
  }
}
