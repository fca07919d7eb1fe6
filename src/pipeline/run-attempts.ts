/**
 * The network shell of routing: runs the planned attempts in order with their timeouts, the
 * request deadline and the client's hang-up, classifying each failure. Owns the clock and fetch.
 */
import { RouterError } from '../errors/router-error'
import { classify, finalError, type AttemptOutcome, type FailedAttempt } from './classify-failure'
import type { PlanStep, PlannedAttempt } from './plan-route'

export interface AttemptSpec {
  stream: boolean
  /** Sends this step's upstream request. */
  send(step: PlannedAttempt, signal: AbortSignal): Promise<Response>
}

export interface RunOptions {
  deadlineAt: number
  clientSignal: AbortSignal | undefined
  now: () => number
  onAttempt?(gateway: string, outcome: string, upstreamMs: number): void
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

export async function runAttempts(steps: readonly PlanStep[], spec: AttemptSpec, options: RunOptions): Promise<RunResult> {
  // One hang-up listener for the whole run: it aborts whichever attempt is in flight. After the
  // run, a piped stream notices a hang-up through its own cancel().
  let current: AbortController | undefined
  const onClientAbort = () => current?.abort('client-closed')
  options.clientSignal?.addEventListener('abort', onClientAbort)
  try {
    return await runSteps(steps, spec, options, (controller) => (current = controller))
  } finally {
    options.clientSignal?.removeEventListener('abort', onClientAbort)
  }
}

async function runSteps(
  steps: readonly PlanStep[],
  spec: AttemptSpec,
  options: RunOptions,
  setCurrent: (controller: AbortController) => void,
): Promise<RunResult> {
  const failures: FailedAttempt[] = []
  const path: string[] = []
  let attempts = 0
  const lastAttemptIndex = steps.findLastIndex((step) => step.kind === 'attempt')

  for (let index = 0; index < steps.length; index++) {
    const step = steps[index]!
    if (step.kind === 'skip') {
      failures.push({ gateway: step.gateway, outcome: { kind: 'skipped' }, reason: step.reason })
      path.push(`${step.gateway}:${step.reason}`)
      continue
    }
    if (options.clientSignal?.aborted) {
      return { kind: 'failed', error: new RouterError('internal', 'client closed'), clientClosed: true, failures, attempts, path }
    }
    const remaining = options.deadlineAt - options.now()
    if (remaining <= 0) {
      failures.push({ gateway: step.gateway, outcome: { kind: 'deadline' }, reason: 'deadline' })
      path.push(`${step.gateway}:deadline`)
      return { kind: 'failed', error: deadlineError(failures), clientClosed: false, failures, attempts, path }
    }

    // Streams with another attempt after this one fail over on the first-byte timeout; everything
    // else runs on the upstream timeout. Each timer is cut to the time the deadline leaves.
    const failoverApplies = spec.stream && index < lastAttemptIndex
    const ownTimeout = failoverApplies ? step.failoverTimeoutMs : step.upstreamTimeoutMs
    const timerReason: AbortReason = ownTimeout <= remaining ? (failoverApplies ? 'ttfb-timeout' : 'timeout') : 'deadline'
    const controller = new AbortController()
    setCurrent(controller)
    const timer = setTimeout(() => controller.abort(timerReason), Math.min(ownTimeout, remaining))
    const release = () => clearTimeout(timer)

    attempts++
    const startedAt = options.now()
    let outcome: AttemptOutcome
    let responseHeaders: Headers | undefined
    try {
      const response = await spec.send(step, controller.signal)
      const headersAt = options.now()
      responseHeaders = response.headers
      if (response.status >= 200 && response.status < 300) {
        if (spec.stream) {
          clearTimeout(timer)
          options.onAttempt?.(step.gateway, 'ok', headersAt - startedAt)
          path.push(`${step.gateway}:ok`)
          return { kind: 'success', step, response, body: undefined, controller, startedAt, headersAt, failures, attempts, path }
        }
        const body = await readUnderTimer(response, controller)
        release()
        options.onAttempt?.(step.gateway, 'ok', headersAt - startedAt)
        path.push(`${step.gateway}:ok`)
        return { kind: 'success', step, response, body, controller, startedAt, headersAt: options.now(), failures, attempts, path }
      }
      const text = await readTextUnderTimer(response, controller)
      release()
      outcome = { kind: 'status', status: response.status, body: text }
      const verdict = classify(outcome)
      options.onAttempt?.(step.gateway, verdict.reason, headersAt - startedAt)
      if (!verdict.retryable) {
        path.push(`${step.gateway}:${verdict.reason}`)
        return { kind: 'relay', step, status: response.status, body: text, headers: response.headers, startedAt, headersAt, failures, attempts, path }
      }
    } catch (error) {
      release()
      // A request that cannot be built for this target (bad client input) is the client's error.
      if (error instanceof RouterError) return { kind: 'failed', error, clientClosed: false, failures, attempts: attempts - 1, path }
      const reason = controller.signal.aborted ? (controller.signal.reason as AbortReason) : undefined
      outcome =
        reason === 'client-closed' || reason === 'ttfb-timeout' || reason === 'timeout' || reason === 'deadline'
          ? { kind: reason }
          : responseHeaders
            ? { kind: 'unreadable' }
            : { kind: 'unreachable' }
      options.onAttempt?.(step.gateway, outcome.kind, options.now() - startedAt)
    }
    const verdict = classify(outcome)
    failures.push({ gateway: step.gateway, outcome, reason: verdict.reason, headers: responseHeaders })
    path.push(`${step.gateway}:${verdict.reason}`)
    if (outcome.kind === 'client-closed') {
      return { kind: 'failed', error: new RouterError('internal', 'client closed'), clientClosed: true, failures, attempts, path }
    }
    if (outcome.kind === 'deadline') return { kind: 'failed', error: deadlineError(failures), clientClosed: false, failures, attempts, path }
  }
  const called = failures.filter((failure) => failure.outcome.kind !== 'skipped')
  return { kind: 'failed', error: finalError(called.length ? called : failures), clientClosed: false, failures, attempts, path }
}

function deadlineError(failures: FailedAttempt[]): RouterError {
  return new RouterError('deadline_exceeded', undefined, { 'x-router-failover': failoverHeader(failures) })
}

/** `gateway:reason` per losing attempt, comma-separated (X-Router-Failover). */
export function failoverHeader(failures: readonly FailedAttempt[]): string {
  return failures.map((failure) => `${failure.gateway}:${failure.reason}`).join(',')
}

async function readUnderTimer(response: Response, controller: AbortController): Promise<ArrayBuffer> {
  if (controller.signal.aborted) throw new Error('aborted')
  return response.arrayBuffer()
}

async function readTextUnderTimer(response: Response, controller: AbortController): Promise<string> {
  if (controller.signal.aborted) throw new Error('aborted')
  return response.text()
}
