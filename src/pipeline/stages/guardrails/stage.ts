/**
 * Guardrails as a stage of the key's chain (CONTRACT §17): the key's input rules run over every text
 * the request sends before anything goes upstream — a match that blocks refuses the request (400
 * `guardrail_blocked` naming the rule, no upstream call), a match that masks is replaced by a
 * placeholder (texts.ts, scan.ts) — and its output rules and the placeholders' restoring run over the
 * answer, buffered or part by part (output.ts). In monitor mode nothing is changed and every match is
 * a finding all the same. The request-log row keeps the findings (rule, where, action, count: never
 * the matched text); `router_guardrail_findings_total{detector,where,action}` counts them.
 */
import { RouterError } from '../../../errors/router-error'
import type { GuardrailRule, GuardrailSettings } from '../../../domain/guardrail-settings'
import type { ParsedRequest } from '../../answer/dialect'
import type { AuthenticatedContext } from '../../request/context'
import type { InferenceDeps } from '../../types'
import type { RouteOutcome, Stage, StageRequest, StageRun } from '../stage'
import { moderate } from './moderation'
import { guardParts, guardReply, type OutputGuard } from './output'
import { Findings, labelOf, Placeholders, replaceHits, scan } from './scan'
import { rewriteRequestTexts, type BodyForm } from './texts'

export const guardrailsStage: Stage = {
  name: 'guardrails',
  appliesTo: (key) => key.guardrails !== undefined,
  open: openGuardrails,
}

/** The body form of each operation whose texts are guarded (others carry none of the client's text). */
function formOf(parsed: ParsedRequest): BodyForm | undefined {
  if (parsed.operation === 'chat') return 'chat'
  if (parsed.operation === 'responses') return parsed.pinnedStep ? undefined : 'responses'
  if (parsed.operation === 'embeddings') return 'embeddings'
  return undefined
}

function openGuardrails(request: StageRequest): StageRun | undefined {
  const form = formOf(request.parsed)
  if (!form) return undefined
  return new GuardrailRun(request.context, request.deps, request.context.key.guardrails!, form, request.deadlineAt, request.clientSignal).run
}

/** One request's guardrails: what its input rules found and did, and the guard of its answer. */
class GuardrailRun {
  readonly run: StageRun
  private readonly findings = new Findings()
  private readonly placeholders = new Placeholders()
  private refusal: RouterError | undefined
  private readonly enforce: boolean
  /** The texts as they go upstream, for the moderation rules (collected only where there are some). */
  private readonly texts: string[] | undefined

  constructor(
    private readonly context: AuthenticatedContext,
    private readonly deps: InferenceDeps,
    private readonly settings: GuardrailSettings,
    private readonly form: BodyForm,
    private readonly deadlineAt: number,
    private readonly clientSignal: AbortSignal | undefined,
  ) {
    this.enforce = settings.mode === 'enforce'
    let moderated = false
    for (const rule of settings.input) if (rule.detector === 'moderation') moderated = true
    if (moderated) this.texts = []
    this.run = {
      name: 'guardrails',
      rewrite: (parsed) => this.guardInput(parsed),
      beforeRouting: () => (this.refusal ? { refusal: this.refusal } : moderated ? this.moderate() : undefined),
      finished: (finished) => this.finished(finished),
    }
  }

  /** The moderation rules' checks, one after another: the first that blocks refuses the request. */
  private async moderate(): Promise<RouteOutcome | undefined> {
    for (const rule of this.settings.input) {
      if (rule.detector !== 'moderation') continue
      const matched = await moderate(this.context, this.deps, rule, this.texts!, this.deadlineAt, this.clientSignal)
      if (matched instanceof RouterError) return { refusal: matched }
      if (matched.length === 0) continue
      this.findings.add(rule, 'input', 'block', matched.length)
      if (this.enforce) return { refusal: new RouterError('guardrail_blocked', `The request was blocked by the guardrail rule '${rule.name}' (moderation flagged ${matched.join(', ')} in the input).`) }
    }
    return undefined
  }

  /** The request with its input rules applied: masked texts (a new body), or the refusal kept for beforeRouting. */
  private guardInput(parsed: ParsedRequest): ParsedRequest {
    const rules = this.settings.input
    let blocked: GuardrailRule | undefined
    let body = parsed.upstreamBody
    if (rules.length > 0) {
      const guarded = rewriteRequestTexts(body, this.form, (text) => {
        const hits = scan(rules, text)
        if (hits.length === 0) {
          this.texts?.push(text)
          return text
        }
        this.findings.addHits(hits, 'input')
        if (!this.enforce) {
          this.texts?.push(text)
          return text
        }
        blocked ??= hits.find((hit) => hit.rule.action === 'block')?.rule
        const masked = replaceHits(text, hits, (hit, value) => (hit.rule.action === 'mask' ? this.placeholders.of(labelOf(hit.rule), value) : value))
        this.texts?.push(masked)
        return masked
      })
      if (blocked) {
        this.refusal = new RouterError('guardrail_blocked', `The request was blocked by the guardrail rule '${blocked.name}' (${blocked.detector} in the input).`)
        return parsed
      }
      body = guarded
    }
    this.guardAnswer()
    // The client's bytes no longer go upstream once a text was masked.
    return body === parsed.upstreamBody ? parsed : { ...parsed, upstreamBody: body, raw: undefined }
  }

  /**
   * The answer is guarded where there are output rules, or placeholders to put back (an embeddings
   * list has neither). Set from `rewrite`, while the chain is opening: the answer path reads a run's
   * hooks once every stage is open, so a request with nothing to put back keeps the pass-through.
   */
  private guardAnswer() {
    if (this.form === 'embeddings' || (this.settings.output.length === 0 && this.placeholders.size === 0)) return
    const guard: OutputGuard = { rules: this.settings.output, enforce: this.enforce, placeholders: this.placeholders, findings: this.findings }
    this.run.transformReply = (reply) => guardReply(guard, reply)
    this.run.transformParts = () => guardParts(guard)
  }

  private finished(context: AuthenticatedContext) {
    const findings = this.findings
    if (findings.list.length === 0) return
    context.guardrails = findings.list
    findings.list.forEach((finding, index) => this.deps.metrics.countGuardrailFinding(findings.detectors[index]!, finding.where, finding.action, finding.count))
  }
}

