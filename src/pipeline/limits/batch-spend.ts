/**
 * A batch submit on a key with limits (CONTRACT §11): it counts one request, and with a USD cap each
 * item's worst case is reserved as the item is read, before it is sent; an item that does not fit
 * aborts the upload (nothing is created upstream) with 429 key_budget_exhausted. What the items
 * reserved stays held on the batch's row once the gateway has the batch, until it ends and settles
 * to its reported cost (storage/repositories/batches.ts). The Batch API (batch/submit.ts) uses it
 * through the pipeline's public entry (pipeline/index.ts).
 */
import { RouterError } from '../../errors/router-error'
import { spellingFor } from '../../gateways/model-catalog'
import type { ModelPricing } from '../../gateways/model-prices'
import type { Snapshot } from '../read-model/entries'
import type { AuthenticatedContext } from '../request/context'
import type { Operation } from '../routing/plan-route'
import type { InferenceDeps } from '../types'
import { LimitedRequest } from './admission'
import { addedBytes, defaultMaxTokens, measurePrompt, needsDefaultBound, outputBound, worstCaseNano } from './worst-case'

/** Where a batch goes: the gateway kind, its spelling of the batch's model, and the plain spelling (without `:batch`). */
export interface BatchPricing {
  gateway: string
  upstreamModel: string
  plainModel: string
}

export class BatchSpend {
  private count = 0
  private pricing: ModelPricing | undefined
  private operation: Operation = 'chat'
  private upstreamModel = ''
  /** The steering message each item is sent with (its bytes, and a blank line). */
  private steeringBytes = 0

  private constructor(
    private readonly deps: InferenceDeps,
    private readonly limited: LimitedRequest,
  ) {}

  /** Admits the submit as one request, or throws the refusal; undefined unless the key has a USD cap (a rate limit alone counts the request only). */
  static async admit(context: AuthenticatedContext, deps: InferenceDeps): Promise<BatchSpend | undefined> {
    const limits = context.key.limits
    if (!limits) return undefined
    const limited = new LimitedRequest(context, deps.limiter, limits, 'chat', false)
    context.limited = limited
    let admission = deps.limiter.admit(context.key.id, context.key.workspaceId, limits, 0, context.requestId, context.createdAt)
    if (admission instanceof Promise) admission = await admission
    context.headers['ratelimit-policy'] = admission.headers['ratelimit-policy']
    context.headers.ratelimit = admission.headers.ratelimit
    if (admission.refusal) throw admission.refusal
    limited.ticket = admission.ticket
    // Settled when the submit's answer is finished, as an answer of the answer path is by its chain.
    context.chain = { finished: () => limited.settle() }
    return limited.usdCap ? new BatchSpend(deps, limited) : undefined
  }

  /** The target's price for the batch's model (its `:batch` spelling, else the plain one), or the 400 when it lists none. */
  price(snapshot: Snapshot, target: BatchPricing, operation: Operation, model: string, steering: string | undefined) {
    this.operation = operation
    this.steeringBytes = steering && operation !== 'embeddings' ? Buffer.byteLength(steering, 'utf8') + 32 : 0
    const catalog = snapshot.catalogs.get(target.gateway)
    const plain = catalog ? spellingFor(catalog, target.plainModel) : undefined
    this.pricing = catalog?.prices.get(target.upstreamModel) ?? (plain === undefined ? undefined : catalog?.prices.get(plain))
    this.upstreamModel = target.upstreamModel
    const known = this.pricing?.prompt !== undefined && (operation === 'embeddings' || this.pricing.completion !== undefined)
    if (!known) throw new RouterError('key_budget_unpriced_model', `This key has a spend cap, and ${target.gateway} lists no price for ${model}: the batch's cost could not be counted.`, { 'Retry-After': '60' })
  }

  /** Reserves one item's worst case (the next one, in order), or throws the refusal. */
  reserve(body: Record<string, unknown>) {
    const worst = worstCaseNano(this.pricing, measurePrompt(body), outputBound(body, this.operation), this.operation, addedBytes(body.model, this.upstreamModel) + this.steeringBytes)!
    const refusal = this.deps.limiter.reserveMore(this.limited.ticket!, this.limited.limits, worst)
    if (refusal) throw new RouterError(refusal.code, `Item ${this.count + 1} of the batch does not fit: ${refusal.message} Nothing was submitted.`, refusal.extraHeaders)
    this.count++
  }

  /** The router's own output bound for an item that sets none, where the model lists none (CONTRACT §11). */
  boundOf(body: Record<string, unknown>): Record<string, unknown> | undefined {
    if (this.operation === 'embeddings' || !needsDefaultBound(outputBound(body, this.operation), this.pricing)) return undefined
    return { ...body, [this.operation === 'responses' ? 'max_output_tokens' : 'max_tokens']: defaultMaxTokens }
  }

  /** The gateway has (or may have) the batch: what its items reserved stays held, on its row (returned, to write there). */
  hold(batchId: string): number {
    const reserved = this.limited.ticket!.reserved
    this.limited.held = { nano: reserved, batchId }
    return reserved
  }
}
