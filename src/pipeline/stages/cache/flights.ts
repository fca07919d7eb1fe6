/**
 * Coalescing (CONTRACT §15): while a request that missed the cache is in flight, identical requests
 * on this node wait for it rather than calling a gateway too. A waiter that streams gets the answer's
 * parts as they arrive (a late one first what came so far); a buffered one gets the answer once it is
 * whole. If the request in flight fails before its answer began, each waiter makes its own call; a
 * streamed answer cut after it began is cut for its waiters too (they have had part of it).
 */
import type { AssistantResult } from '../../../dialects/assistant-result'
import type { StreamPart } from '../../../dialects/stream-parts'

/** The answer a request in flight settled with: what the cache stores. */
export interface SettledAnswer {
  /** A chat-like answer in neutral form. */
  reply?: AssistantResult
  /** An embeddings list as the gateway gave it. */
  body?: unknown
  /** The provider key and gateway that served it. */
  providerKeyId: string
  gateway: string
  /** What it cost, nano-dollars; null when unpriced. */
  costNanoUsd: number | null
}

export class Flight {
  /** The streamed answer's parts so far. */
  private readonly parts: StreamPart[] = []
  private readonly listeners = new Set<ReadableStreamDefaultController<StreamPart>>()
  private sentError = false
  /** The gateway and provider key serving it, once its answer began. */
  gateway: string | undefined
  providerKeyId: string | undefined
  /** Undefined while in flight; the answer, or null when it failed. */
  settled: SettledAnswer | null | undefined
  // Made when a request first waits (most flights have no one waiting: a miss pays for no promise).
  private beganPromise: Promise<boolean> | undefined
  private donePromise: Promise<SettledAnswer | undefined> | undefined
  private markBegun: ((begun: boolean) => void) | undefined
  private markDone: ((answer: SettledAnswer | undefined) => void) | undefined

  /** Someone waits for it (its answer is decoded for them when it ends). */
  get awaited(): boolean {
    return this.beganPromise !== undefined || this.donePromise !== undefined || this.listeners.size > 0
  }

  /** True once its answer began to stream or is whole; false when it failed before. */
  get begun(): Promise<boolean> {
    if (!this.beganPromise) {
      if (this.gateway !== undefined || this.settled) this.beganPromise = Promise.resolve(true)
      else if (this.settled === null) this.beganPromise = Promise.resolve(false)
      else this.beganPromise = new Promise<boolean>((resolve) => (this.markBegun = resolve))
    }
    return this.beganPromise
  }

  /** The whole answer, or undefined when it failed (a stream cut short included). */
  get done(): Promise<SettledAnswer | undefined> {
    if (!this.donePromise) {
      if (this.settled !== undefined) this.donePromise = Promise.resolve(this.settled ?? undefined)
      else this.donePromise = new Promise<SettledAnswer | undefined>((resolve) => (this.markDone = resolve))
    }
    return this.donePromise
  }

  constructor(
    private readonly flights: Map<string, Flight>,
    private readonly key: string,
    /** performance.now() time after which it is taken for lost (its request's deadline): no one waits for it any more. */
    readonly staleAt: number,
  ) {}

  /** Its streamed answer began (the first part, from this gateway and provider key). */
  begin(gateway: string, providerKeyId: string) {
    if (this.gateway !== undefined || this.settled !== undefined) return
    this.gateway = gateway
    this.providerKeyId = providerKeyId
    this.markBegun?.(true)
  }

  /** A part of its streamed answer, passed on to the waiters reading it. */
  push(part: StreamPart) {
    if (this.settled !== undefined) return
    this.parts.push(part)
    if (part.type === 'error') this.sentError = true
    for (const listener of this.listeners) listener.enqueue(part)
  }

  /** It ended: with its answer, or without one (its waiters that had nothing yet make their own calls). */
  settle(answer: SettledAnswer | undefined) {
    if (this.settled !== undefined) return
    this.settled = answer ?? null
    if (this.flights.get(this.key) === this) this.flights.delete(this.key)
    if (answer) {
      this.gateway ??= answer.gateway
      this.providerKeyId ??= answer.providerKeyId
    }
    this.markBegun?.(answer !== undefined || this.gateway !== undefined)
    this.markDone?.(answer)
    for (const listener of this.listeners) {
      if (!answer && !this.sentError) listener.enqueue({ type: 'error', code: 'stream_aborted', message: 'The answer this request shared with an identical one in flight was cut short.' })
      listener.close()
    }
    this.listeners.clear()
    // A settled flight is no longer in the map: a late waiter takes the stored answer instead.
    this.parts.length = 0
  }

  /** Its streamed answer's parts: what came so far, then as they arrive; the stream ends once it settles. */
  subscribe(): ReadableStream<StreamPart> {
    let own: ReadableStreamDefaultController<StreamPart> | undefined
    return new ReadableStream<StreamPart>({
      start: (controller) => {
        for (const part of this.parts) controller.enqueue(part)
        if (this.settled !== undefined) {
          if (this.settled === null && !this.sentError) controller.enqueue({ type: 'error', code: 'stream_aborted', message: 'The answer this request shared with an identical one in flight was cut short.' })
          controller.close()
          return
        }
        own = controller
        this.listeners.add(controller)
      },
      cancel: () => {
        if (own) this.listeners.delete(own)
      },
    })
  }
}

/** The requests in flight on this node, by entry key. */
export class Flights {
  private readonly flights = new Map<string, Flight>()

  /**
   * The request in flight under this entry key, if any. One past its deadline that has not begun to
   * answer is taken for lost (a request that ended without settling it): dropped, no one waits for it.
   */
  get(key: string): Flight | undefined {
    const flight = this.flights.get(key)
    if (flight && flight.gateway === undefined && performance.now() > flight.staleAt) {
      this.flights.delete(key)
      flight.settle(undefined)
      return undefined
    }
    return flight
  }

  /** Registers a request that will make the call for this entry key (the one others wait for), until `staleAt` at the latest. */
  lead(key: string, staleAt: number): Flight {
    const flight = new Flight(this.flights, key, staleAt)
    this.flights.set(key, flight)
    return flight
  }

  get size(): number {
    return this.flights.size
  }
}

/** Waits for `promise`, at most until the deadline or the client goes away (then undefined). */
export function waitFor<T>(promise: Promise<T>, deadlineAt: number, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (signal?.aborted) return Promise.resolve(undefined)
  return new Promise<T | undefined>((resolve) => {
    const timer = setTimeout(() => finish(undefined), Math.max(0, deadlineAt - performance.now()))
    const onAbort = () => finish(undefined)
    signal?.addEventListener('abort', onAbort, { once: true })
    function finish(value: T | undefined) {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      resolve(value)
    }
    promise.then(finish, () => finish(undefined))
  })
}
