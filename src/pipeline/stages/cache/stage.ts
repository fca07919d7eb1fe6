/**
 * The response cache as a stage of the key's chain (CONTRACT §15). Before routing it looks the
 * request up — the exact entry (one indexed read), an identical request in flight on this node
 * (coalescing: stages/cache/flights.ts), then, on a key with a semantic setting, the nearest earlier
 * question (stages/cache/semantic.ts) — and answers from what it finds, so a hit skips the
 * decisioner, the plan and every gateway (the stages after it still open: a spend cap counts the hit
 * toward the requests per minute, and may refuse it). After a miss it keeps the finished answer:
 * decoded into the neutral form (answer/given-answer.ts writes it back in any shape), in the
 * node-local store (storage/cache-store.ts, written off the serving thread). Only whole answers are
 * kept: a finish of stop, length or tool calls; never an error, a cut stream, a tool loop of the
 * key's MCP tools.
 */
import type { AssistantResult } from '../../../dialects/assistant-result'
import { ReplyAssembler } from '../../../dialects/replay'
import type { StreamPart } from '../../../dialects/stream-parts'
import { RouterError } from '../../../errors/router-error'
import type { CachedEntry, CacheStore, CacheWrite, RawValue } from '../../../storage/cache-store'
import type { CacheSettings } from '../../../domain/cache-settings'
import type { SuccessResult } from '../../answer/dialect'
import { keptResponsePrefix } from '../../endpoints/response-ids'
import type { AuthenticatedContext } from '../../request/context'
import type { RunResult } from '../../routing/run-attempts'
import type { InferenceDeps } from '../../types'
import type { RouteOutcome, Stage, StageAnswer, StageRequest, StageRun } from '../stage'
import { cacheControl, cacheRequest, entryKey, semanticKey, type CacheControl, type CachePartition, type CacheRequest } from './entry-key'
import { Flights, waitFor, type Flight, type SettledAnswer } from './flights'
import { closest, embedLastTurn } from './semantic'
import { readStored, storedAnswerOf, storedAnswerOfRaw, wholeReply, type StoredAnswer } from './stored-answer'

/** What X-Router-Cache says of an answer (and router_cache_requests_total counts). */
export type CacheResult = 'hit' | 'semantic-hit' | 'coalesced' | 'miss' | 'bypass'

/** The endpoints whose answers are cached (their dialects' names). */
const cachedDialects = new Set(['chat', 'messages', 'content', 'responses', 'embeddings'])

/** The requests in flight, per store (each server's cache its own). */
const flightsOf = new WeakMap<CacheStore, Flights>()

function flightsFor(store: CacheStore): Flights {
  let flights = flightsOf.get(store)
  if (!flights) flightsOf.set(store, (flights = new Flights()))
  return flights
}

export const responseCacheStage: Stage = {
  name: 'cache',
  appliesTo: (key) => key.cache !== undefined,
  open: openCache,
}

function openCache(request: StageRequest): StageRun | undefined {
  const { context, deps, parsed, dialect } = request
  if (!deps.cache) return undefined
  const store = deps.cache.open()
  // A Responses answer the cache gave, asked for by its id.
  if (parsed.keptAnswerId !== undefined) return keptRetrieval(context, store, parsed.keptAnswerId, context.key.cache!.purgedAt)
  if (!cachedDialects.has(dialect.name)) return undefined
  const settings = context.key.cache!
  const control = cacheControl(request.requestHeaders.get('cache-control'))
  const asked = cacheRequest(parsed)
  if (!asked || (!control.read && !control.write)) {
    mark(context, deps, 'bypass')
    if (control.onlyIfCached) return refusing(asked ? 'Cache-Control: no-store and only-if-cached: nothing is read from the cache.' : 'This request is of a kind the response cache never serves (n > 1, a chained or background Responses turn).')
    return undefined
  }
  return new CacheRun(request, store, settings, control, asked).open()
}

function mark(context: AuthenticatedContext, deps: InferenceDeps, result: CacheResult) {
  context.headers['x-router-cache'] = result
  deps.metrics.countCacheRequest(result)
}

function refusing(message: string): StageRun {
  return { name: 'cache', beforeRouting: () => ({ refusal: new RouterError('cache_miss', message) }) }
}

/** GET /responses/{id} of a Responses answer the cache gave: the written answer as it was given. */
function keptRetrieval(context: AuthenticatedContext, store: CacheStore, upstreamId: string, purgedAt: number): StageRun {
  const entry = store.get(keptKey(upstreamId), undefined, purgedAt)
  const stored = entry ? readStored(entry) : undefined
  if (!stored || stored.body === undefined) {
    return { name: 'cache', beforeRouting: () => ({ refusal: new RouterError('response_not_found', 'This response was served from the response cache and is no longer kept (its entry expired or was purged).') }) }
  }
  return { name: 'cache', beforeRouting: () => ({ answer: { body: stored.body } }) }
}

/** Where a Responses answer the cache gave is kept, by the upstream id its id names. */
const keptKey = (upstreamId: string) => `kept:${upstreamId}`

/** One request's look at the cache, and its part in the answer when it missed. */
class CacheRun {
  private readonly context: AuthenticatedContext
  private readonly deps: InferenceDeps
  private readonly partition: CachePartition
  private readonly key: string
  private readonly maxAgeMs: number | undefined
  /** The request this one waits for, or the flight it leads. */
  private joined: Flight | undefined
  private flight: Flight | undefined
  /** The answer came from the cache or a request in flight (no call was made). */
  private gave = false
  /** What the request's own call answered: a buffered result, or the streamed parts added up. */
  private result: SuccessResult | undefined
  private assembler: ReplyAssembler | undefined
  private embedding: Float32Array | undefined
  private semanticKey: string | undefined

  constructor(
    private readonly request: StageRequest,
    private readonly store: CacheStore,
    private readonly settings: CacheSettings,
    private readonly control: CacheControl,
    private readonly asked: CacheRequest,
  ) {
    this.context = request.context
    this.deps = request.deps
    this.partition = { workspaceId: this.context.key.workspaceId, keyId: settings.scope === 'key' ? this.context.key.id : undefined }
    this.key = entryKey(this.partition, request.parsed.model, asked)
    // Ages count whole seconds (RFC 9111, and the Age header): `max-age=0` takes an entry whose Age is 0.
    this.maxAgeMs = control.maxAgeSeconds === undefined ? undefined : (control.maxAgeSeconds + 1) * 1000 - 1
  }

  open(): StageRun {
    const { context, deps, control } = this
    const flights = flightsFor(this.store)
    if (control.read) {
      const entry = this.store.get(this.key, this.maxAgeMs, this.settings.purgedAt)
      const answer = entry && this.hit(entry, 'hit')
      if (answer) return { name: 'cache', beforeRouting: () => ({ answer }) }
      this.joined = flights.get(this.key)
    }
    if (!this.joined) {
      // Counted once the lookup is over (beforeRouting): a semantic lookup may still find an answer.
      context.headers['x-router-cache'] = control.read ? 'miss' : 'bypass'
      if (control.onlyIfCached) {
        deps.metrics.countCacheRequest('miss')
        return refusing('Cache-Control: only-if-cached, and the response cache holds no answer to this request.')
      }
      // The one call identical requests wait for (a request that reads nothing leads no one).
      if (control.read) this.flight = flights.lead(this.key, this.request.deadlineAt)
    }
    const run: StageRun = {
      name: 'cache',
      beforeRouting: () => this.beforeRouting(),
      finished: (finishedContext) => this.finished(finishedContext),
    }
    // The request's own answer, kept: a stream's parts added up as they pass; a buffered result as the call gave it.
    if (this.request.parsed.stream) run.transformParts = () => this.watchParts()
    else run.wrapCall = (input, next) => next(input).then((result) => this.keep(result))
    return run
  }

  /** Waits for a request in flight, or looks for a near question; a plain miss answers at once (no promise). */
  private beforeRouting(): RouteOutcome | undefined | Promise<RouteOutcome | undefined> {
    if (this.joined || this.semanticApplies()) return this.lookFurther()
    this.deps.metrics.countCacheRequest(this.context.headers['x-router-cache'] as CacheResult)
    return undefined
  }

  private semanticApplies(): boolean {
    return this.settings.semantic !== null && this.control.read && this.asked.lastUserText !== undefined
  }

  private async lookFurther(): Promise<RouteOutcome | undefined> {
    const { context, deps, control } = this
    if (this.joined) {
      const answer = await this.follow(this.joined)
      if (answer) return { answer }
      // It failed before its answer began: this request makes its own call.
      context.headers['x-router-cache'] = 'miss'
      if (control.onlyIfCached) {
        deps.metrics.countCacheRequest('miss')
        return { refusal: new RouterError('cache_miss', 'Cache-Control: only-if-cached: the identical request this one waited for failed, and the response cache holds no answer.') }
      }
      const flights = flightsFor(this.store)
      if (!flights.get(this.key)) this.flight = flights.lead(this.key, this.request.deadlineAt)
    }
    if (this.semanticApplies()) {
      const answer = await this.semanticHit(this.settings.semantic!, this.asked.lastUserText!)
      if (answer) return { answer }
    }
    deps.metrics.countCacheRequest(context.headers['x-router-cache'] as CacheResult)
    return undefined
  }

  /** Waits for the identical request in flight; its answer, or undefined when it failed (or the wait ran out). */
  private async follow(flight: Flight): Promise<StageAnswer | undefined> {
    const { deadlineAt, clientSignal } = this.request
    // Waiting on the request in flight is waiting on its gateway: not the router's overhead.
    const started = performance.now()
    const answered = this.request.parsed.stream ? waitFor(flight.begun, deadlineAt, clientSignal) : waitFor(flight.done, deadlineAt, clientSignal)
    const outcome = await answered
    this.context.upstreamWaitMs += performance.now() - started
    // A stream takes the parts as they come, once the answer began.
    if (!outcome || flight.settled === null) return undefined
    this.gave = true
    this.joined = flight
    this.context.cache = 'coalesced'
    mark(this.context, this.deps, 'coalesced')
    this.context.headers.age = '0'
    if (flight.gateway) this.context.headers['x-router-cache-provider'] = flight.gateway
    const settled = flight.settled
    if (settled) return this.answerOf({ reply: settled.reply, body: settled.body, providerKeyId: settled.providerKeyId })
    this.usageAsAsked()
    const kept = this.keptFor(flight.providerKeyId)
    return { parts: () => flight.subscribe(), kept, written: kept && ((body) => this.keepWritten(body)) }
  }

  /** The semantic tier: the nearest earlier question at or above the threshold, when its entry is still good. */
  private async semanticHit(semantic: NonNullable<CacheSettings['semantic']>, text: string): Promise<StageAnswer | undefined> {
    const embedding = await embedLastTurn(this.context, this.deps, semantic, text, this.request.deadlineAt, this.request.clientSignal)
    if (!embedding) return undefined
    this.embedding = embedding
    this.semanticKey = semanticKey(this.partition, this.request.parsed.model, this.asked)
    const notBefore = Math.max(this.maxAgeMs === undefined ? -Infinity : Date.now() - this.maxAgeMs, this.settings.purgedAt)
    const nearest = closest(embedding, this.store.candidates(this.semanticKey, 1000), semantic.threshold, notBefore)
    if (!nearest) return undefined
    const entry = this.store.get(nearest.candidate.key, this.maxAgeMs, this.settings.purgedAt)
    const answer = entry && this.hit(entry, 'semantic-hit')
    if (!answer) return undefined
    this.context.headers['x-router-cache-similarity'] = String(Math.round(nearest.similarity * 10_000) / 10_000)
    // Those waiting for this request get the same answer.
    this.flight?.settle(entry ? this.settledOf(entry) : undefined)
    this.flight = undefined
    return answer
  }

  /** A stored entry as this request's answer (undefined when it cannot be read: then it is a miss). */
  private hit(entry: CachedEntry, result: 'hit' | 'semantic-hit'): StageAnswer | undefined {
    const stored = readStored(entry)
    if (!stored) return undefined
    const { context } = this
    this.gave = true
    context.cache = result
    context.savedNanoUsd = entry.costNanoUsd
    mark(context, this.deps, result)
    context.headers.age = String(Math.max(0, Math.floor((Date.now() - entry.createdAt) / 1000)))
    context.headers['x-router-cache-provider'] = entry.gateway
    return this.answerOf(stored)
  }

  private settledOf(entry: CachedEntry): SettledAnswer | undefined {
    const stored = readStored(entry)
    return stored ? { reply: stored.reply, body: stored.body, providerKeyId: stored.providerKeyId, gateway: entry.gateway, costNanoUsd: entry.costNanoUsd } : undefined
  }

  private answerOf(stored: StoredAnswer): StageAnswer {
    if (stored.body !== undefined) return { body: stored.body }
    this.usageAsAsked()
    const kept = this.keptFor(stored.providerKeyId)
    return { reply: stored.reply, kept, written: kept && ((body) => this.keepWritten(body)) }
  }

  private keptId: string | undefined

  /** A chat stream given from the cache carries the usage chunk only when the client asked for it (`stream_options.include_usage`). */
  private usageAsAsked() {
    const options = this.request.parsed.upstreamBody.stream_options as { include_usage?: unknown } | undefined
    if (this.request.dialect.name === 'chat' && this.request.parsed.stream && options?.include_usage !== true) this.context.hideUsageChunk = true
  }

  /** A Responses answer the cache gives is kept, retrievable by its id (under the provider key that served it). */
  private keptFor(providerKeyId: string | undefined): StageAnswer['kept'] {
    if (this.request.dialect.name !== 'responses') return undefined
    const id = providerKeyId ?? this.context.key.rule.targets[0]?.providerKeyId
    if (!id) return undefined
    this.keptId ??= `${keptResponsePrefix}${crypto.randomUUID()}`
    return { providerKeyId: id, upstreamId: this.keptId, createdAt: Math.floor(Date.now() / 1000) }
  }

  private keepWritten(body: unknown) {
    const now = Date.now()
    const { context } = this
    this.store.put({
      key: keptKey(this.keptId!),
      // In the partition of the entries it was given from: a purge of them takes it too.
      workspaceId: this.partition.workspaceId,
      keyId: this.partition.keyId,
      model: this.request.parsed.model,
      createdAt: now,
      expiresAt: now + this.settings.ttlSeconds * 1000,
      gateway: context.headers['x-router-cache-provider'] ?? '',
      costNanoUsd: null,
      value: JSON.stringify({ body, providerKeyId: '' }),
    })
  }

  /** A buffered call's result, kept for the answer's end (each model round's: a tool loop's is never stored). */
  private keep(result: RunResult): RunResult {
    if (result.kind === 'success') this.result = result
    return result
  }

  /** A streamed answer's parts, added up as they pass (and passed on to the requests waiting for it). */
  private watchParts(): TransformStream<StreamPart, StreamPart> {
    // On an answer from the cache the parts are the stored answer's: nothing to keep.
    if (this.gave) return new TransformStream()
    const assembler = (this.assembler = new ReplyAssembler())
    const flight = this.flight
    return new TransformStream<StreamPart, StreamPart>({
      transform: (part, controller) => {
        assembler.add(part)
        if (flight) {
          if (part.type === 'start' && this.context.gateway && this.context.providerKeyId) flight.begin(this.context.gateway, this.context.providerKeyId)
          flight.push(part)
        }
        controller.enqueue(part)
      },
    })
  }

  /** The request is finished: its answer stored when whole, the requests waiting for it released. */
  private finished(context: AuthenticatedContext) {
    if (this.gave) {
      // A request in flight answered this one: what that answer cost is what this one saved.
      if (context.cache === 'coalesced') context.savedNanoUsd = this.joined?.settled?.costNanoUsd ?? null
      return
    }
    const made = this.made(context)
    const flight = this.flight
    if (flight) {
      // Decoded here only for requests waiting on it; its stored form is made on the writer thread.
      let settled: SettledAnswer | undefined
      if (made && flight.awaited) {
        const stored = made.stored ?? this.decoded(made.raw!)
        if (stored) settled = { ...stored, gateway: made.gateway, costNanoUsd: made.costNanoUsd }
      }
      flight.settle(settled)
    }
    if (!made || !this.control.write) return
    const now = Date.now()
    const entry: CacheWrite = {
      key: this.key,
      workspaceId: this.partition.workspaceId,
      keyId: this.partition.keyId,
      model: this.request.parsed.model,
      createdAt: now,
      expiresAt: now + this.settings.ttlSeconds * 1000,
      gateway: made.gateway,
      costNanoUsd: made.costNanoUsd,
    }
    if (made.stored) entry.value = JSON.stringify(made.stored)
    else entry.raw = made.raw
    if (this.semanticKey && this.embedding) {
      entry.semanticKey = this.semanticKey
      entry.embedding = this.embedding
    }
    this.store.put(entry)
  }

  private decoded(raw: RawValue): StoredAnswer | undefined {
    try {
      return storedAnswerOfRaw(raw)
    } catch {
      return undefined
    }
  }

  /**
   * The request's own answer when it may be kept: answered 200 in one model round. A stream's parts
   * added up (whole, or nothing); a buffered answer as the gateway's text, decoded off the serving
   * thread (an answer already parsed is decoded here: it costs no parse).
   */
  private made(context: AuthenticatedContext): { stored?: StoredAnswer; raw?: RawValue; gateway: string; costNanoUsd: number | null } | undefined {
    if (context.status !== 200 || context.errorCode !== undefined || context.rounds !== undefined) return undefined
    const gateway = context.gateway
    const providerKeyId = context.providerKeyId
    if (!gateway || !providerKeyId) return undefined
    const costNanoUsd = context.costNanoUsd
    if (this.assembler) {
      const reply = this.assembler.reply
      const stored = reply && wholeReply(reply, providerKeyId)
      return stored ? { stored, gateway, costNanoUsd } : undefined
    }
    const result = this.result
    if (!result || result.stream) return undefined
    if (result.value !== undefined) {
      let stored: StoredAnswer | undefined
      try {
        stored = storedAnswerOf(result.replyKind, result.value, providerKeyId)
      } catch {
        // An answer the translators cannot read is not kept (the client had it as the gateway gave it).
      }
      return stored ? { stored, gateway, costNanoUsd } : undefined
    }
    if (!result.body) return undefined
    return { raw: { form: result.replyKind, bytes: new Uint8Array(result.body), origin: providerKeyId }, gateway, costNanoUsd }
  }
}
