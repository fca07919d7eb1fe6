/**
 * A key's spend caps and rate limits as a stage of its chain (CONTRACT §11): the request is admitted
 * before routing (pipeline/limits/admission.ts), or refused with the answer that says why; the plan
 * it was priced on is the plan run, its targets screened and each call bounded as it was priced;
 * every further model round is reserved before it is sent; and when it is finished its reservation
 * is settled in the key's ledger. Every answer of a limited key, refusals before admission included,
 * carries the RateLimit fields, and the first request of a key on this node waits for its ledger's
 * first read.
 */
import type { RequestContext } from '../request/context'
import type { InferenceDeps } from '../types'
import { admitLimited, LimitedRequest } from './admission'
import type { Stage, StageRun } from '../stages/stage'

export const spendLimitsStage: Stage = {
  name: 'limits',
  appliesTo: (key) => key.limits !== undefined,
  authenticated(context, deps) {
    const key = context.key!
    return deps.limiter.prepare(key.id, key.workspaceId)
  },
  answered: limitFields,
  async open({ context, deps, parsed, answered }): Promise<StageRun | undefined> {
    const limits = context.key.limits!
    // An answered request (the response cache's) counts toward the requests per minute only (CONTRACT §15).
    let refused = admitLimited(context, deps, limits, parsed, answered)
    if (refused instanceof Promise) refused = await refused
    const limited = context.limited as LimitedRequest
    return {
      name: 'limits',
      beforeRouting: () => (refused ? { refusal: refused } : undefined),
      plan: () => limited.plan,
      steps: (snapshot, steps) => (limited.usdCap ? limited.screen(snapshot, steps) : [...steps]),
      upstreamCall: (snapshot, step, call) => limited.bound(snapshot, step, call),
      beforeRound: (snapshot, bodyOf, kind) => limited.reserveRound(snapshot, bodyOf, kind),
      finished: () => limited.settle(),
    }
  },
}

/**
 * The RateLimit fields every answer of a limited key carries: the admission's where the request was
 * admitted or refused there, else the windows as they stand (a request refused before admission: a
 * bad body, an unpriced model).
 */
function limitFields(context: RequestContext, deps: InferenceDeps) {
  if (context.headers['ratelimit-policy'] !== undefined) return
  const key = context.key!
  const fields = deps.limiter.peekHeaders(key.id, key.workspaceId, key.limits!)
  context.headers['ratelimit-policy'] = fields['ratelimit-policy']
  context.headers.ratelimit = fields.ratelimit
}
