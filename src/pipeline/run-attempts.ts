/**
 * The network shell of routing: runs the planned attempts in order with their timeouts, the
 * request deadline and the client's hang-up, classifying each failure. Owns the clock and fetch.
 */
import { RouterError } from '../errors/router-error'
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
  /** Sends this step's upstream request. */
  send(step: PlannedAttempt, signal: AbortSignal): Promise<Response>
  /** Called once per upstream call made, with its outcome and the wait for its answer. */
  onAttempt?(gateway: string, outcome: string, upstreamMs: number): void
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
      response: Response
      /** Buffered requests: the whole body, read under the attempt's timer. */
      body: ArrayBuffer | undefined
      /** Stream requests: aborts the upstream (client hang-up); the caller owns it from here. */
      controller: AbortController
      startedAt: number
      headersAt: number
    })
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
      // An answer to hand back: settled after the attempt's try, so a throwing hook can never be
      // taken for a failed attempt (and the run never goes on after a success).
      let answer: RunResult | undefined
      let outcome!: AttemptOutcome
      let responseHeaders: Headers | undefined
      try {
        const response = await call.send(step, controller.signal)
        const headersAt = now()
        responseHeaders = response.headers
        if (response.status >= 200 && response.status < 300) {
          // A buffered body is read under the attempt's timer (a stalled body is a timeout like a
          // stalled head); a stream belongs to the caller from its headers on.
          let body: ArrayBuffer | undefined
          if (!call.stream) {
            if (controller.signal.aborted) throw new Error('aborted')
            body = await response.arrayBuffer()
          }
          clearTimeout(timer)
          call.onAttempt?.(step.gateway, 'ok', headersAt - startedAt)
          path.push(`${step.gateway}:ok`)
          answer = { kind: 'success', step, response, body, controller, startedAt, headersAt: call.stream ? headersAt : now(), failures, attempts, path }
        } else {
          if (controller.signal.aborted) throw new Error('aborted')
          const text = await response.text()
          clearTimeout(timer)
          outcome = { kind: 'status', status: response.status, body: text }
          const verdict = classify(outcome)
          call.onAttempt?.(step.gateway, verdict.reason, headersAt - startedAt)
          if (!verdict.retryable) {
            path.push(`${step.gateway}:${verdict.reason}`)
            answer = { kind: 'relay', step, status: response.status, body: text, headers: response.headers, startedAt, headersAt, failures, attempts, path }
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
            : responseHeaders
              ? { kind: 'unreadable' }
              : { kind: 'unreachable' }
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
