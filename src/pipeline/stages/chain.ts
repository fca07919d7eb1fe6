/**
 * A key's chain at work on one request: its stages (compiled into the key's read-model entry,
 * stages/registry.ts) opened in the registry's order, and their hooks gathered so the answer path
 * (answer/handler.ts, answer/tool-loop.ts) and the routed call (routing/routed-call.ts) call them
 * without knowing which features there are. A plain key never gets here.
 */
import type { AssistantResult } from '../../dialects/assistant-result'
import type { StreamPart } from '../../dialects/stream-parts'
import type { RouterError } from '../../errors/router-error'
import type { ParsedRequest } from '../answer/dialect'
import type { ChainEntry } from '../../domain/read-model'
import type { Snapshot } from '../read-model/entries'
import type { AuthenticatedContext } from '../request/context'
import type { PlannedAttempt, PlanStep, RoutePlan } from '../routing/plan-route'
import type { AttemptWatch, CallHooks, RoutedCallInput, RoutePreference, UpstreamCall } from '../routing/routed-call'
import type { RunResult } from '../routing/run-attempts'
import type { OfferedTool, RoundKind, Stage, StageAnswer, StageRequest, StageRun, StreamRound } from './stage'

/**
 * A key's compiled chain's entries as stages. The floor describes the chain as plain data
 * (domain/read-model.ts), so the key's entry needs no type of the pipeline; the registry is what
 * compiles it, of stages only (stages/registry.ts), which is what makes this one cast hold.
 */
export function stagesOf(entries: readonly ChainEntry[]): readonly Stage[] {
  return entries as readonly Stage[]
}

/** How a chain's opening ended: the request answered now (a refusal, or a stage's own answer), or the route it takes. */
export interface ChainStart {
  chain: ChainRun
  /** The request as the stages rewrote it. */
  parsed: ParsedRequest
  refusal: RouterError | undefined
  /** A stage's answer in place of a model call (the response cache's). */
  answer: StageAnswer | undefined
  preference: RoutePreference | undefined
}

export class ChainRun implements CallHooks {
  private readonly runs: StageRun[] = []
  private constructor(private readonly context: AuthenticatedContext) {}

  /**
   * Opens the key's stages in order, each on the request as the ones before it left it: its rewrite,
   * then its decision before routing (a refusal stops here: the stages after it are never opened, so
   * a refused request makes no call of theirs). A stage that answers (the response cache) does not
   * stop the opening: the stages after it open knowing the request is answered (a spend cap counts
   * it, and may refuse it), and the ones that act on model calls sit out.
   */
  static async open(stages: readonly Stage[], request: Omit<StageRequest, 'answered'>): Promise<ChainStart> {
    const chain = new ChainRun(request.context)
    let parsed = request.parsed
    let preference: RoutePreference | undefined
    let answer: StageAnswer | undefined
    for (const stage of stages) {
      if (!stage.open) continue
      let run = stage.open({ ...request, parsed, answered: answer !== undefined })
      if (run instanceof Promise) run = await run
      if (!run) continue
      chain.runs.push(run)
      if (run.rewrite) parsed = run.rewrite(parsed)
      if (run.beforeRouting) {
        let outcome = run.beforeRouting(parsed)
        if (outcome instanceof Promise) outcome = await outcome
        if (outcome?.refusal) return { chain, parsed, refusal: outcome.refusal, answer: undefined, preference }
        if (outcome?.answer && !answer) answer = outcome.answer
        if (outcome?.prefer) preference = outcome.prefer
      }
    }
    return { chain, parsed, refusal: undefined, answer, preference }
  }

  /** Whether any stage acts on the answer itself (tools, attached fields, transforms, a wrapped stream): then it is not passed through as bytes. */
  get shapesAnswer(): boolean {
    return this.runs.some((run) => run.tools !== undefined || run.attach !== undefined || run.transformReply !== undefined || run.transformParts !== undefined || run.wrapStream !== undefined)
  }

  /** Whether a stage transforms the answer or wraps its stream (then even a reply in the client's own kind is read and written again). */
  get transformsAnswer(): boolean {
    return this.runs.some((run) => run.transformReply !== undefined || run.transformParts !== undefined || run.wrapStream !== undefined)
  }

  /** Whether a stage wraps a round's stream. */
  get wrapsStream(): boolean {
    return this.runs.some((run) => run.wrapStream !== undefined)
  }

  /** A round's streamed parts through the stages that wrap them (the first one outermost). */
  wrapStream(parts: ReadableStream<StreamPart>, round: StreamRound): ReadableStream<StreamPart> {
    let result = parts
    for (let index = this.runs.length - 1; index >= 0; index--) {
      const run = this.runs[index]!
      if (run.wrapStream) result = run.wrapStream(result, round)
    }
    return result
  }

  /** The stages that offer tools, with the tools. */
  toolOwners(): { run: StageRun; tool: OfferedTool }[] {
    const owners: { run: StageRun; tool: OfferedTool }[] = []
    for (const run of this.runs) for (const tool of run.tools ?? []) owners.push({ run, tool })
    return owners
  }

  /** Whether a stage attaches fields to the answer. */
  get attaches(): boolean {
    return this.runs.some((run) => run.attach !== undefined)
  }

  begin(hangUp: AbortSignal) {
    for (const run of this.runs) run.begin?.(hangUp)
  }

  /** The refusal of a model round before it is sent, if a stage has one. */
  beforeRound(snapshot: Snapshot, bodyOf: (step: PlannedAttempt) => Record<string, unknown> | undefined, kind: RoundKind): RouterError | undefined {
    for (const run of this.runs) {
      const refusal = run.beforeRound?.(snapshot, bodyOf, kind)
      if (refusal) return refusal
    }
    return undefined
  }

  plan(): RoutePlan | undefined {
    for (const run of this.runs) {
      const plan = run.plan?.()
      if (plan) return plan
    }
    return undefined
  }

  steps(snapshot: Snapshot, steps: readonly PlanStep[]): PlanStep[] {
    let result = steps as PlanStep[]
    for (const run of this.runs) if (run.steps) result = run.steps(snapshot, result)
    return result
  }

  upstreamCall(snapshot: Snapshot, step: PlannedAttempt, call: UpstreamCall): UpstreamCall {
    let result = call
    for (const run of this.runs) if (run.upstreamCall) result = run.upstreamCall(snapshot, step, result)
    return result
  }

  attempt(step: PlannedAttempt): AttemptWatch | undefined {
    let watch: AttemptWatch | undefined
    for (const run of this.runs) watch = run.attempt?.(step) ?? watch
    return watch
  }

  /** A model round's routed call, wrapped by the stages that wrap it (the first one outermost). */
  call(input: RoutedCallInput, routed: (input: RoutedCallInput) => Promise<RunResult>): Promise<RunResult> {
    let next = routed
    for (let index = this.runs.length - 1; index >= 0; index--) {
      const run = this.runs[index]!
      if (!run.wrapCall) continue
      const inner = next
      next = (wrapped) => run.wrapCall!(wrapped, inner)
    }
    return next({ ...input, hooks: this })
  }

  transformReply(reply: AssistantResult): AssistantResult {
    let result = reply
    for (const run of this.runs) if (run.transformReply) result = run.transformReply(result)
    return result
  }

  /** The stream parts through every stage that transforms them, in order. */
  transformParts(parts: ReadableStream<StreamPart>): ReadableStream<StreamPart> {
    let result = parts
    for (const run of this.runs) if (run.transformParts) result = result.pipeThrough(run.transformParts())
    return result
  }

  /** The fields the stages attach to a successful answer whose text is `text`, together; each stage keeps its own limit. */
  async attach(text: string): Promise<Record<string, unknown> | undefined> {
    const attached = await Promise.all(this.runs.map((run) => run.attach?.(text)))
    let fields: Record<string, unknown> | undefined
    for (const added of attached) if (added) fields = Object.assign(fields ?? {}, added)
    return fields
  }

  /** The request-log row's record of the stages (`enrichment`), given the model rounds the answer took. */
  record(rounds: number) {
    let log: Record<string, unknown> | undefined
    for (const run of this.runs) {
      if (!run.logRecord) continue
      ;(log ??= {})[run.name] = run.logRecord(rounds)
    }
    if (log) this.context.enrichment = JSON.stringify(log)
  }

  /** The request is finished: the stages' last word before its row is written. */
  finished() {
    for (const run of this.runs) run.finished?.(this.context)
  }
}
