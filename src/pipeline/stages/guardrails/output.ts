/**
 * The answer's side of a key's guardrails (CONTRACT §17 "Output"): the output rules run over what
 * the model wrote — a match masked as `[REDACTED:<DETECTOR>]`, or the answer blocked (a buffered
 * answer 502 `guardrail_blocked`, a stream's in-stream error) — and then the placeholders of a masked
 * request are put back to the client's values. Output rules run on the text as the model wrote it,
 * placeholders and all, so the client's own values put back are never redacted. A stream is held
 * back by at most 64 characters at the end of what came (none without output rules, beyond a
 * placeholder's start that may still be split), and never cut inside a match.
 */
import type { AssistantResult } from '../../../dialects/assistant-result'
import type { StreamPart } from '../../../dialects/stream-parts'
import { RouterError } from '../../../errors/router-error'
import type { GuardrailRule } from '../../../domain/guardrail-settings'
import { redaction, replaceHits, scan, type Findings, type Hit, type Placeholders } from './scan'

/** The most a stream is held back for the output rules. */
export const outputHoldback = 64

/** What the answer's side works with. */
export interface OutputGuard {
  /** The key's output rules (none: only placeholders to put back). */
  rules: readonly GuardrailRule[]
  /** Enforce (mask and block); false: monitor (only counted). */
  enforce: boolean
  placeholders: Placeholders
  findings: Findings
}

/** The block of a rule on the answer, as the client gets it. */
function blockedAnswer(rule: GuardrailRule): RouterError {
  return new RouterError('guardrail_blocked', `The answer was blocked by the guardrail rule '${rule.name}' (${rule.detector} in the output).`, undefined, 502)
}

/**
 * A piece of the answer as the client gets it: its hits counted; masked (or the block); the
 * placeholders put back (`json`: a tool call's arguments, JSON text).
 */
function guardText(guard: OutputGuard, text: string, hits: readonly Hit[], json: boolean): string | RouterError {
  if (hits.length > 0) {
    guard.findings.addHits(hits, 'output')
    if (guard.enforce) {
      const block = hits.find((hit) => hit.rule.action === 'block')
      if (block) return blockedAnswer(block.rule)
      text = replaceHits(text, hits, (hit) => redaction(hit.rule))
    }
  }
  return guard.placeholders.restore(text, json)
}

function guardWhole(guard: OutputGuard, text: string, json: boolean): string {
  if (text === '') return text
  const guarded = guardText(guard, text, guard.rules.length > 0 ? scan(guard.rules, text) : [], json)
  if (guarded instanceof RouterError) throw guarded
  return guarded
}

/** A buffered answer guarded; a block throws the 502. */
export function guardReply(guard: OutputGuard, reply: AssistantResult): AssistantResult {
  return {
    ...reply,
    text: guardWhole(guard, reply.text, false),
    reasoning: guardWhole(guard, reply.reasoning, false),
    toolCalls: reply.toolCalls.map((call) => ({ ...call, arguments: guardWhole(guard, call.arguments, true) })),
  }
}

type Delta = Extract<StreamPart, { type: 'text-delta' | 'reasoning-delta' | 'tool-input-delta' }>

/** A streamed answer guarded part by part: each kind of delta (text, reasoning, a tool call's arguments) held back apart. */
export function guardParts(guard: OutputGuard): TransformStream<StreamPart, StreamPart> {
  /** The delta kind being held (its last part, for the kind and the tool index) and what is held of it. */
  let held: Delta | undefined
  let buffer = ''
  let ended = false

  const partOf = (like: Delta, text: string): StreamPart => (like.type === 'tool-input-delta' ? { type: 'tool-input-delta', index: like.index, delta: text } : { type: like.type, delta: text })

  /** Sends what may go now (everything when `all`); false when a block ended the stream. */
  const release = (controller: TransformStreamDefaultController<StreamPart>, all: boolean): boolean => {
    if (!held || buffer === '') return true
    const hits = guard.rules.length > 0 ? scan(guard.rules, buffer) : []
    let cut = all ? buffer.length : Math.max(0, buffer.length - (guard.rules.length > 0 ? outputHoldback : 0))
    if (!all) {
      // Never inside a match (one that ends at the end may still grow), nor a placeholder's start.
      for (const hit of hits) if (hit.start < cut && hit.end >= cut) cut = hit.start
      cut = guard.placeholders.safeEnd(buffer.slice(0, cut))
    }
    if (cut === 0) return true
    const sent = buffer.slice(0, cut)
    const guarded = guardText(guard, sent, hits.filter((hit) => hit.end <= cut), held.type === 'tool-input-delta')
    if (guarded instanceof RouterError) {
      ended = true
      controller.enqueue({ type: 'error', code: 'guardrail_blocked', message: guarded.message })
      controller.terminate()
      return false
    }
    buffer = buffer.slice(cut)
    if (guarded !== '') controller.enqueue(partOf(held, guarded))
    return true
  }

  return new TransformStream<StreamPart, StreamPart>({
    transform(part, controller) {
      if (ended) return
      if (part.type === 'text-delta' || part.type === 'reasoning-delta' || part.type === 'tool-input-delta') {
        const same = held !== undefined && held.type === part.type && (part.type !== 'tool-input-delta' || (held as typeof part).index === part.index)
        if (!same && !release(controller, true)) return
        if (!same) buffer = ''
        held = part
        buffer += part.delta
        release(controller, false)
        return
      }
      if (!release(controller, true)) return
      held = undefined
      buffer = ''
      controller.enqueue(part)
    },
    flush(controller) {
      if (!ended) release(controller, true)
    },
  })
}
