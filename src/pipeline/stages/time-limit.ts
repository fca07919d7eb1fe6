/**
 * A time limit for one call to an outside service (MCP servers, plug-ins, the decision model): a
 * signal fired by its own timer or by `linked` (the client hanging up), released when the call is
 * done so neither fires afterwards. (The MCP SDK never removes the listener it puts on a request's
 * signal: an abort after the fact would make it cancel a request that already finished.)
 */
export interface TimeLimit {
  signal: AbortSignal
  /** Whether the timer, not `linked`, ended the call. */
  timedOut(): boolean
  release(): void
}

export function timeLimit(timeoutMs: number, linked?: AbortSignal): TimeLimit {
  const controller = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    controller.abort(new Error(`no answer within ${timeoutMs} ms`))
  }, timeoutMs)
  const onAbort = () => controller.abort(linked!.reason)
  if (linked?.aborted) controller.abort(linked.reason)
  else linked?.addEventListener('abort', onAbort, { once: true })
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    release: () => {
      clearTimeout(timer)
      linked?.removeEventListener('abort', onAbort)
    },
  }
}
