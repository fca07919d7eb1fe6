/**
 * The network shell of routing: runs the planned attempts in order with their timeouts, the
 * request deadline and the client's hang-up, classifying each failure. Owns the clock and fetch.
 * It is also the one place an upstream answer is first read: a 2xx is checked before it counts as
 * a success, and a non-2xx body and headers are scrubbed of the provider secret before anything
 * downstream (relay, error message, log) sees them.
 */
import { RouterError } from '../../errors/router-error'
import { readReply, scanReply, UnusableReply, type ReplyKind } from '../../dialects/reply-shape'
import { startUpstreamBody, StreamIdleWatch, type UpstreamBody } from '../../dialects/upstream-body'
import { relayableHeaders } from '../../gateways/client'
import { scrubSecret } from '../../gateways/scrub-secret'
import { classify, finalError, type AttemptOutcome, type FailedAttempt } from './classify-failure'
import type { PlanStep, PlannedAttempt } from './plan-route'

/**
 * What one run needs from its caller: the upstream send, the request's deadline and hang-up signal,
 * and the bookkeeping hooks. One object per run (a routed call implements it as a class), so a
 * request allocates no closures for them.
 */
export interface AttemptCall {
  readonly stream: boolean
  readonly deadlineAt: number
  readonly clientSignal: AbortSignal | undefined
  /** RT_STREAM_IDLE_MS: the longest silence a stream may keep once it has begun. */
  readonly streamIdleMs: number
  /** What a 2xx answer to the request `send` last sent must be (send sets it per attempt). */
  readonly replyKind: ReplyKind
  /** A buffered 2xx to the request `send` last sent goes to the client as its bytes: scanned, not parsed (`value` stays undefined). */
  readonly relaysReply: boolean
  /** Every non-2xx is relayed as it came, none failed over (a call pinned to one provider key: retrieval). */
  readonly relaysErrors?: boolean
  /** A further check of a parsed buffered 2xx (its meaning, beyond its kind): a problem fails the attempt over. */
  accept?(value: unknown): string | undefined
  /** Sends this step's upstream request. */
  send(step: PlannedAttempt, signal: AbortSignal): Promise<Response>
  /** Called once per upstream call made, with its outcome, the wait for its answer and its HTTP status when one came. */
  onAttempt?(gateway: string, outcome: string, upstreamMs: number, status?: number): void
  /** Called once with the result, before the run's promise settles. */
  onSettled?(result: RunResult): void
}

interface Common {
  failures: FailedAttempt[]
  /** Upstream calls made (skipped targets are not counted). */
  attempts: number
  /** The attempt path for the log: `gateway:reason` per failed step, then `gateway:ok`. */
  path: string[]
}

export type RunResult =
  | (Common & {
      kind: 'success'
      step: PlannedAttempt
      /** What the answer is (a chat completion, a Response, an embeddings list): the request `send` made decides. */
      replyKind: ReplyKind
      response: Response
      /** Buffered requests: the whole body, read under the attempt's timer, and its checked JSON (undefined when the call relays its bytes). */
      body: ArrayBuffer | undefined
      value: unknown
      /** Stream requests: the body, begun (its first line read and checked under the attempt's timer). */
      stream: UpstreamBody | undefined
      /** Stream requests: aborts the upstream (client hang-up, idle limit); the caller owns it from here. */
      controller: AbortController
      startedAt: number
      /** When the answer began: the whole body read (buffered) or the first line (stream). */
      headersAt: number
      /** The steps the run was given (a continued stream goes on with the serving step's next one). */
      steps: readonly PlanStep[]
    })
  /** A non-retryable upstream error: its body and headers (only those that may be relayed) scrubbed of the secret. */
  | (Common & { kind: 'relay'; step: PlannedAttempt; status: number; body: string; headers: Headers; startedAt: number; headersAt: number })
  | (Common & { kind: 'failed'; error: RouterError; clientClosed: boolean })

type AbortReason = 'ttfb-timeout' | 'timeout' | 'deadline' | 'client-closed'

const noFailures: readonly FailedAttempt[] = Object.freeze([])

function abortAttempt(controller: AbortController, reason: AbortReason) {
  controller.abort(reason)
}

const now = () => performance.now()

/**
 * Forwards the client's hang-up to the attempt in flight. One listener object per run, registered
 * as an EventListener (no closure); after the run, a piped stream notices a hang-up through its
 * own cancel().
 */
class HangUp {
  current: AbortController | undefined = undefined
  handleEvent() {
    this.current?.abort('client-closed')
  }
}

/** Hands the result to the caller's hook and returns it (every return of a run goes through here). */
function settled(call: AttemptCall, result: RunResult): RunResult {
  call.onSettled?.(result)
  return result
}

/**
 * Runs the planned steps in order. One async function for the whole run (each nested async layer
 * costs a promise and a microtask on every request); timers get their arguments instead of a closure.
 */
export async function runAttempts(steps: readonly PlanStep[], call: AttemptCall): Promise<RunResult> {
  const clientSignal = call.clientSignal
  const hangUp = clientSignal ? new HangUp() : undefined
  if (hangUp) clientSignal!.addEventListener('abort', hangUp)
  let failures = noFailures as FailedAttempt[]
  const path: string[] = []
  let attempts = 0
  let lastAttemptIndex = steps.length - 1
  while (lastAttemptIndex >= 0 && steps[lastAttemptIndex]!.kind !== 'attempt') lastAttemptIndex--

  try {
    for (let index = 0; index < steps.length; index++) {
      const step = steps[index]!
      if (step.kind === 'skip') {
        if (failures === noFailures) failures = []
        recordFailure(failures, path, { gateway: step.gateway, outcome: { kind: 'skipped' }, reason: step.reason })
        continue
      }
      if (clientSignal?.aborted) return settled(call, clientClosed(failures, attempts, path))
      const remaining = call.deadlineAt - now()
      if (remaining <= 0) {
        if (failures === noFailures) failures = []
        recordFailure(failures, path, { gateway: step.gateway, outcome: { kind: 'deadline' }, reason: 'deadline' })
        return settled(call, { kind: 'failed', error: deadlineError(failures), clientClosed: false, failures, attempts, path })
      }

      // Streams with another attempt after this one fail over on the first-byte timeout; everything
      // else runs on the upstream timeout. Each timer is cut to the time the deadline leaves.
      const failoverApplies = call.stream && index < lastAttemptIndex
      const ownTimeout = failoverApplies ? step.failoverTimeoutMs : step.upstreamTimeoutMs
      const timerReason: AbortReason = ownTimeout <= remaining ? (failoverApplies ? 'ttfb-timeout' : 'timeout') : 'deadline'
      const controller = new AbortController()
      if (hangUp) hangUp.current = controller
      const timer = setTimeout(abortAttempt, ownTimeout <= remaining ? ownTimeout : remaining, controller, timerReason)

      attempts++
      const startedAt = now()
      const watch = call.stream ? new StreamIdleWatch(call.streamIdleMs) : undefined
      // An answer to hand back: settled after the attempt's try, so a throwing hook can never be
      // taken for a failed attempt (and the run never goes on after a success).
      let answer: RunResult | undefined
      let outcome!: AttemptOutcome
      let responseHeaders: Headers | undefined
      try {
        const response = await call.send(step, controller.signal)
        const headersAt = now()
        responseHeaders = response.headers
        if (controller.signal.aborted) throw new Error('aborted')
        if (response.status >= 200 && response.status < 300) {
          // The answer is read and checked under the attempt's timer before it counts: a buffered
          // body whole, a stream up to its first line (a stall before the first byte is a timeout
          // like a stalled head; an unusable 2xx throws UnusableReply and fails over).
          let body: ArrayBuffer | undefined
          let value: unknown
          let started: UpstreamBody | undefined
          if (watch) {
            const begun = await startUpstreamBody(response, watch)
            if (typeof begun === 'string') throw new UnusableReply(begun)
            started = begun
          } else {
            body = await response.arrayBuffer()
            if (call.relaysReply) scanReply(call.replyKind, body)
            else {
              value = readReply(call.replyKind, body)
              const problem = call.accept?.(value)
              if (problem !== undefined) throw new UnusableReply(problem)
            }
          }
          clearTimeout(timer)
          const answeredAt = now()
          // The first line of a stream is the upstream's first byte; a buffered attempt waited for its head.
          call.onAttempt?.(step.gateway, 'ok', (watch ? answeredAt : headersAt) - startedAt, response.status)
          path.push(`${step.gateway}:ok`)
          // SPEC "Timeouts": from its first byte on, a stream is never cut by the deadline; only the idle limit applies.
          watch?.start(controller)
          answer = { kind: 'success', step, replyKind: call.replyKind, response, body, value, stream: started, controller, startedAt, headersAt: answeredAt, failures, attempts, path, steps }
        } else {
          // The one read of a failed answer: scrubbed here, so no relay, message or log downstream holds the secret.
          const secret = step.provider.secret
          const text = scrubSecret(await response.text(), secret)
          clearTimeout(timer)
          responseHeaders = relayableHeaders(response.headers, secret)
          outcome = { kind: 'status', status: response.status, body: text }
          const verdict = classify(outcome)
          call.onAttempt?.(step.gateway, verdict.reason, headersAt - startedAt, response.status)
          if (!verdict.retryable || call.relaysErrors) {
            path.push(`${step.gateway}:${verdict.reason}`)
            answer = { kind: 'relay', step, status: response.status, body: text, headers: responseHeaders, startedAt, headersAt, failures, attempts, path }
          }
        }
      } catch (error) {
        clearTimeout(timer)
        // A request that cannot be built for this target (bad client input) is the client's error.
        if (error instanceof RouterError) return settled(call, { kind: 'failed', error, clientClosed: false, failures, attempts: attempts - 1, path })
        const reason = controller.signal.aborted ? (controller.signal.reason as AbortReason) : undefined
        outcome =
          reason === 'client-closed' || reason === 'ttfb-timeout' || reason === 'timeout' || reason === 'deadline'
            ? { kind: reason }
            : error instanceof UnusableReply
              ? { kind: 'unusable', detail: error.message }
              : responseHeaders
                ? { kind: 'unreadable' }
                : { kind: 'unreachable' }
        if (responseHeaders) responseHeaders = relayableHeaders(responseHeaders, step.provider.secret)
        call.onAttempt?.(step.gateway, outcome.kind, now() - startedAt)
      }
      if (answer) return settled(call, answer)
      if (failures === noFailures) failures = []
      recordFailure(failures, path, { gateway: step.gateway, outcome, reason: classify(outcome).reason, headers: responseHeaders })
      if (outcome.kind === 'client-closed') return settled(call, clientClosed(failures, attempts, path))
      if (outcome.kind === 'deadline') return settled(call, { kind: 'failed', error: deadlineError(failures), clientClosed: false, failures, attempts, path })
    }
  } finally {
    if (hangUp) clientSignal!.removeEventListener('abort', hangUp)
  }
  const called = failures.filter((failure) => failure.outcome.kind !== 'skipped')
  return settled(call, { kind: 'failed', error: finalError(called.length ? called : failures), clientClosed: false, failures, attempts, path })
}

function recordFailure(failures: FailedAttempt[], path: string[], failure: FailedAttempt) {
  failures.push(failure)
  path.push(`${failure.gateway}:${failure.reason}`)
}

/** The client hung up: nothing is sent, the request is logged 499. */
function clientClosed(failures: FailedAttempt[], attempts: number, path: string[]): RunResult {
  return { kind: 'failed', error: new RouterError('internal', 'client closed'), clientClosed: true, failures, attempts, path }
}

function deadlineError(failures: FailedAttempt[]): RouterError {
  return new RouterError('deadline_exceeded', undefined, { 'x-router-failover': failoverHeader(failures) })
}

/** `gateway:reason` per losing attempt, comma-separated (X-Router-Failover). */
export function failoverHeader(failures: readonly FailedAttempt[]): string {
  return failures.map((failure) => `${failure.gateway}:${failure.reason}`).join(',')
}
