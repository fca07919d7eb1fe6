/**
 * The Batch API's place in the service: its endpoint (/v1/batches) and its two scheduled jobs
 * (`batch-refresh`, `webhooks`), registered into the tables that run them. The composition root
 * (runtime.ts) calls this once; the tables themselves import no feature.
 */
import { registerEndpoint } from '../pipeline'
import { registerJobs } from '../scheduler/jobs'
import { deliverOutbox } from './deliver'
import { handleBatches } from './handlers'
import { refreshBatches } from './refresh'

let registered = false

export function registerBatch() {
  if (registered) return
  registered = true
  registerEndpoint('batches', handleBatches)
  registerJobs({ 'batch-refresh': refreshBatches, webhooks: deliverOutbox })
}
