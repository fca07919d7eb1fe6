/**
 * Traces (CONTRACT §13): with an OTLP endpoint set, every upstream attempt of a request is a CLIENT
 * span under the request's SERVER span, and carries that span's `traceparent` upstream. (The
 * request's own span starts before its key is known and ends with its log row: pipeline/index.ts,
 * answer/finish.ts; the plug-in calls and MCP tool calls are spans of the stages that make them.)
 */
import { genAiOperation } from '../../observability/tracing-settings'
import type { Stage } from './stage'

export const tracingStage: Stage = {
  name: 'tracing',
  appliesTo: (_key, flags) => flags.tracing !== undefined,
  open({ context, deps, answered }) {
    // An answered request (the response cache's) makes no attempt to trace.
    if (answered) return undefined
    const tracing = deps.tracing
    const parent = context.span
    if (!tracing || !parent) return undefined
    const operation = genAiOperation(context.endpoint)
    return {
      name: 'tracing',
      attempt(step) {
        const attempt = tracing.startAttempt(parent, operation, step.provider.gateway.id, step.model)
        return {
          header: attempt.traceparent ? ['traceparent', attempt.traceparent] : undefined,
          end: (outcome, status) => tracing.endAttempt(attempt.span, outcome, status),
        }
      },
    }
  },
}
