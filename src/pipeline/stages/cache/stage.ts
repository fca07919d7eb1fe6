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
import { readChatCompletion } from '../../../dialects/chat/convert-response'
import { readResponseObject } from '../../../dialects/responses/convert-response'
import { ReplyAssembler } from '../../../dialects/replay'
import type { StreamPart } from '../../../dialects/stream-parts'
import { RouterError } from '../../../errors/router-error'
import type { CachedEntry, CacheStore } from '../../../storage/cache-store'
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

/** What X-Router-Cache says of an answer (and router_cache_requests_total counts). */
export type CacheResult = 'hit' | 'semantic-hit' | 'coalesced' | 'miss' | 'bypass'

/** The endpoints whose answers are cached (their dialects' names). */
const cachedDialects = new Set(['chat', 'messages', 'content', 'responses', 'embeddings'])
/** The finishes of a whole answer. */
const wholeFinishes = new Set(['stop', 'length', 'tool_calls'])

/** An entry's stored form: a chat-like answer in neutral form, or an embeddings list; and the provider key that served it. */
interface StoredAnswer {
  reply?: AssistantResult
  body?: unknown
  providerKeyId: string
}

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

function readStored(entry: CachedEntry): StoredAnswer | undefined {
  try {
    const stored = JSON.parse(entry.value) as StoredAnswer
    return typeof stored === 'object' && stored !== null && (stored.reply !== undefined || stored.body !== undefined) ? stored : undefined
  } catch {
    return undefined
  }
}

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
      mark(context, deps, control.read ? 'miss' : 'bypass')
      if (control.onlyIfCached) return refusing('Cache-Control: only-if-cached, and the response cache holds no answer to this request.')
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
    else run.wrapCall = async (input, next) => this.keep(await next(input))
    return run
  }

  private async beforeRouting(): Promise<RouteOutcome | undefined> {
    const { context, deps, control } = this
    if (this.joined) {
      const answer = await this.follow(this.joined)
      if (answer) return { answer }
      // It failed before its answer began: this request makes its own call.
      mark(context, deps, 'miss')
      if (control.onlyIfCached) return { refusal: new RouterError('cache_miss', 'Cache-Control: only-if-cached: the identical request this one waited for failed, and the response cache holds no answer.') }
      const flights = flightsFor(this.store)
      if (!flights.get(this.key)) this.flight = flights.lead(this.key, this.request.deadlineAt)
    }
    const semantic = this.settings.semantic
    if (semantic && control.read && this.asked.lastUserText !== undefined) {
      const answer = await this.semanticHit(semantic, this.asked.lastUserText)
      if (answer) return { answer }
    }
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
    const answer = this.whole(context)
    this.flight?.settle(answer)
    if (!answer || !this.control.write) return
    const now = Date.now()
    const stored: StoredAnswer = answer.reply ? { reply: answer.reply, providerKeyId: answer.providerKeyId } : { body: answer.body, providerKeyId: answer.providerKeyId }
    this.store.put({
      key: this.key,
      workspaceId: this.partition.workspaceId,
      keyId: this.partition.keyId,
      model: this.request.parsed.model,
      createdAt: now,
      expiresAt: now + this.settings.ttlSeconds * 1000,
      gateway: answer.gateway,
      costNanoUsd: answer.costNanoUsd,
      value: JSON.stringify(stored),
      ...(this.semanticKey && this.embedding ? { semanticKey: this.semanticKey, embedding: this.embedding } : {}),
    })
  }

  /** The request's own answer when it is one to keep: whole, of one model round, answered 200. */
  private whole(context: AuthenticatedContext): SettledAnswer | undefined {
    if (context.status !== 200 || context.errorCode !== undefined || context.rounds !== undefined) return undefined
    const gateway = context.gateway
    const providerKeyId = context.providerKeyId
    if (!gateway || !providerKeyId) return undefined
    const costNanoUsd = context.costNanoUsd
    if (this.assembler) {
      const reply = this.assembler.reply
      return reply && wholeFinishes.has(reply.finishReason) ? { reply, providerKeyId, gateway, costNanoUsd } : undefined
    }
    const result = this.result
    if (!result || result.stream) return undefined
    try {
      const value = result.value !== undefined ? result.value : JSON.parse(new TextDecoder().decode(result.body))
      if (result.replyKind === 'embeddings') return typeof value === 'object' && value !== null && Array.isArray((value as { data?: unknown }).data) ? { body: value, providerKeyId, gateway, costNanoUsd } : undefined
      if (result.replyKind !== 'chat' && result.replyKind !== 'response') return undefined
      const reply = result.replyKind === 'response' ? readResponseObject(value) : readChatCompletion(value)
      return wholeFinishes.has(reply.finishReason) ? { reply, providerKeyId, gateway, costNanoUsd } : undefined
    } catch {
      // An answer the translators cannot read is not kept (the client had it as the gateway gave it).
      return undefined
    }
  }
}
