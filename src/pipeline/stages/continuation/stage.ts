/**
 * Mid-stream continuation (CONTRACT §16) as a stage that wraps each model round's stream: when a
 * streamed chat, messages or Responses answer breaks after its first byte (the upstream ends early,
 * sends an error event or an unreadable record, or the stall limit cuts it) and the break is in
 * text, the round is asked again of the plan's next target with the text already sent as the
 * assistant's partial turn (request.ts), and its text goes on in the same client stream: its start
 * dropped (the same ids and content index), the repeat at the seam removed (overlap.ts), one comment
 * line `: router-continued <hop> <from> <to>` at the seam, usage summed over the attempts, the last
 * attempt's finish. No continuation inside a tool call or a reasoning block, after `max_hops`, past
 * the request deadline, or when a spend cap refuses the attempt's reservation: the break then ends
 * the stream as it would without the stage. The broken attempt is `<gateway>:mid_stream_<why>` in
 * the row's path, and the row says how many continuations the answer took.
 */
import { RouterError } from '../../../errors/router-error'
import { addUsage, type StreamBreak, type StreamPart, type Usage } from '../../../dialects/stream-parts'
import type { SuccessResult } from '../../answer/dialect'
import type { AuthenticatedContext } from '../../request/context'
import type { RunResult } from '../../routing/run-attempts'
import type { InferenceDeps } from '../../types'
import type { Stage, StreamRound } from '../stage'
import { Seam } from './overlap'
import { continuationInput, continuationSteps, prefillOf } from './request'

/** The client dialects whose streams are continued. */
const continuedDialects = new Set(['chat', 'messages', 'responses'])

export const continuationStage: Stage = {
  name: 'continuation',
  appliesTo: (key) => key.continuation !== undefined,
  open({ context, deps, parsed, dialect, deadlineAt, answered }) {
    // Only a stream can break after its first byte; an answer a stage gave makes no call.
    if (answered || !parsed.stream || !continuedDialects.has(dialect.name)) return undefined
    const hops = new Hops(context, deps, context.key.continuation!.maxHops, deadlineAt)
    return { name: 'continuation', wrapStream: (parts, round) => continued(parts, round, hops) }
  },
}

/** The continuations of one request (all its rounds together), and what the row and metrics say of them. */
class Hops {
  count = 0
  constructor(
    readonly context: AuthenticatedContext,
    readonly deps: InferenceDeps,
    readonly max: number,
    readonly deadlineAt: number,
  ) {}

  /** Marks the broken attempt in the row's path: its `ok` becomes the break. */
  markBroken(result: SuccessResult, why: StreamBreak) {
    const path = this.context.path ? [...this.context.path] : []
    const at = path.lastIndexOf(`${result.step.gateway}:ok`)
    if (at !== -1) path[at] = `${result.step.gateway}:mid_stream_${why}`
    this.context.path = path
  }

  /** A continuation went on from `broken` on `next`: counted, and each attempt priced at its own target. */
  continued(broken: SuccessResult, brokenUsage: Usage | undefined, next: SuccessResult) {
    this.count++
    this.context.continued = this.count
    const rounds = (this.context.rounds ??= [])
    if (rounds.length === 0) rounds.push({ step: broken.step, usage: brokenUsage })
    else rounds[rounds.length - 1]!.usage = brokenUsage
    rounds.push({ step: next.step, usage: undefined })
    this.deps.metrics.countContinuation('continued')
  }
}


const ignore = () => {}

/**
 * One round's parts, continued where they break. The text sent is kept as the list of its deltas,
 * joined only on a break; the parts otherwise pass as they come.
 */
function continued(parts: ReadableStream<StreamPart>, round: StreamRound, hops: Hops): ReadableStream<StreamPart> {
  let reader = parts.getReader()
  let result = round.result
  const sent: string[] = []
  /** What the client got last: text, reasoning, or nothing yet (a tool call is `toolCalled`, for good). */
  let last: 'none' | 'text' | 'reasoning' = 'none'
  let toolCalled = false
  /** In a continuation: its start is not the client's, nor its reasoning once text went out. */
  let continuing = false
  let seam: Seam | undefined
  /** The usage the broken attempts reported (rarely any). */
  let brokenUsage: Usage | undefined
  let cancelled = false

  /** Text the seam held goes out (the continuation went on with something else, or ended). */
  const settleSeam = (controller: ReadableStreamDefaultController<StreamPart>) => {
    if (!seam) return
    const text = seam.settle()
    seam = undefined
    if (text) {
      sent.push(text)
      controller.enqueue({ type: 'text-delta', delta: text })
    }
  }

  /** Why a break is not continued (the metric's result), or undefined when it is. */
  const refusal = (): string | undefined => {
    if (toolCalled || last === 'reasoning') return 'not_text'
    if (hops.count >= hops.max) return 'max_hops'
    if (performance.now() >= hops.deadlineAt) return 'deadline'
    return undefined
  }

  /** Makes the continuation call: its result, or why there is none. */
  const call = async (text: string): Promise<RunResult | string> => {
    const steps = continuationSteps(result.steps, result.step)
    let made = round.call(continuationInput(round.input, steps, text, true))
    if (made instanceof RouterError) return 'refused'
    let next = await made
    // A target whose gateway takes a prefill but whose model does not answers 400: asked again without one.
    if (next.kind === 'relay' && next.status === 400 && text !== '' && prefillOf(next.step) !== false) {
      made = round.call(continuationInput(round.input, steps, text, false))
      if (made instanceof RouterError) return 'refused'
      next = await made
    }
    return next
  }

  /** Goes on after a break: true when the continuation's parts follow. */
  const goOn = async (controller: ReadableStreamDefaultController<StreamPart>, part: Extract<StreamPart, { type: 'error' }>): Promise<boolean> => {
    hops.markBroken(result, part.why!)
    const notContinued = refusal()
    if (notContinued) {
      hops.deps.metrics.countContinuation(notContinued)
      return false
    }
    const text = sent.join('')
    const next = await call(text)
    if (cancelled) {
      if (typeof next !== 'string' && next.kind === 'success') next.controller.abort('client-closed')
      return false
    }
    if (typeof next === 'string' || next.kind !== 'success') {
      hops.deps.metrics.countContinuation(typeof next === 'string' ? next : 'failed')
      return false
    }
    brokenUsage = addUsage(brokenUsage, part.usage)
    hops.continued(result, part.usage, next)
    reader.cancel().catch(ignore)
    const from = result.step.gateway
    result = next
    reader = round.parts(next).getReader()
    continuing = true
    seam = text ? new Seam(text) : undefined
    controller.enqueue({ type: 'comment', text: `router-continued ${hops.count} ${from} ${next.step.gateway}` })
    return true
  }

  return new ReadableStream<StreamPart>({
    async pull(controller) {
      for (;;) {
        const { value: part, done } = await reader.read()
        if (cancelled) return
        if (done) {
          settleSeam(controller)
          controller.close()
          return
        }
        switch (part.type) {
          case 'start':
            if (continuing) continue
            break
          case 'text-delta': {
            last = 'text'
            if (seam) {
              const text = seam.feed(part.delta)
              if (text === undefined) continue
              seam = undefined
              if (!text) continue
              sent.push(text)
              controller.enqueue(text === part.delta ? part : { type: 'text-delta', delta: text })
              return
            }
            sent.push(part.delta)
            break
          }
          case 'reasoning-delta':
          case 'reasoning-signature':
            // A continuation's own thinking is not shown after the text it goes on from.
            if (continuing && sent.length > 0) continue
            settleSeam(controller)
            last = 'reasoning'
            break
          case 'tool-input-start':
          case 'tool-input-delta':
            settleSeam(controller)
            toolCalled = true
            break
          case 'finish':
            settleSeam(controller)
            if (continuing) {
              controller.enqueue({ ...part, usage: addUsage(brokenUsage, part.usage), lastUsage: part.usage })
              return
            }
            break
          case 'error':
            settleSeam(controller)
            if (part.why !== undefined && (await goOn(controller, part))) return
            // The client went away while the continuation was asked for.
            if (cancelled) return
            break
          default:
            break
        }
        controller.enqueue(part)
        return
      }
    },
    cancel() {
      cancelled = true
      result.controller.abort('client-closed')
      reader.cancel().catch(ignore)
    },
  })
}
