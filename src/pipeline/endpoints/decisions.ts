/**
 * POST /decisions on `decisions` keys (CONTRACT §9): typed questions answered with calibrated
 * probabilities by a decision-capable gateway. The request is checked whole before anything is sent
 * (400 invalid_decision_request naming the field); it is routed with failover over the key's
 * decision-capable targets like chat; a gateway's answer is relayed as it came once it is checked to
 * answer every question in order, with choice probabilities summing to 1 ± 0.01 (anything else
 * fails over like an unusable reply).
 */
import { RouterError } from '../../errors/router-error'
import type { ClientDialect, ParsedRequest } from '../answer/dialect'
import { requireModel } from '../request/prepare-chat'
import { isObject, readJsonBody } from '../../http/read-body'
import { upstreamCall } from '../routing/routed-call'

export type QuestionType = 'choice' | 'boolean' | 'number'

export interface DecisionQuestion {
  id: string
  type: QuestionType
  prompt: string
  options?: string[]
  min?: number
  max?: number
}

export const maxQuestions = 16
export const maxOptions = 32
const probabilityTolerance = 0.01

const invalid = (field: string, rule: string) => new RouterError('invalid_decision_request', `${field}: ${rule}`)

/** The CONTRACT §9 request, checked whole; the first fault is named. */
export function validateDecisionRequest(value: unknown): { model: string; questions: DecisionQuestion[] } {
  if (!isObject(value)) throw invalid('body', 'must be a JSON object {model, state, questions}.')
  if (typeof value.model !== 'string' || value.model === '') throw invalid('model', 'required, a non-empty string.')
  const model = requireModel(value.model)
  if (!('state' in value)) throw invalid('state', 'required (any JSON value).')
  if (!Array.isArray(value.questions) || value.questions.length < 1 || value.questions.length > maxQuestions) {
    throw invalid('questions', `required, 1 to ${maxQuestions} questions.`)
  }
  const ids = new Set<string>()
  const questions = value.questions.map((question: unknown, index: number): DecisionQuestion => {
    const at = `questions[${index}]`
    if (!isObject(question)) throw invalid(at, 'must be an object {id, type, prompt}.')
    if (typeof question.id !== 'string' || question.id.length < 1 || question.id.length > 64) throw invalid(`${at}.id`, 'required, 1 to 64 characters.')
    if (ids.has(question.id)) throw invalid(`${at}.id`, `'${question.id}' is used by another question.`)
    ids.add(question.id)
    if (typeof question.prompt !== 'string' || question.prompt === '') throw invalid(`${at}.prompt`, 'required, a non-empty string.')
    const base = { id: question.id, prompt: question.prompt }
    switch (question.type) {
      case 'choice': {
        const options = question.options
        if (!Array.isArray(options) || options.length < 2 || options.length > maxOptions || !options.every((option) => typeof option === 'string')) {
          throw invalid(`${at}.options`, `required for a choice, 2 to ${maxOptions} strings.`)
        }
        if (new Set(options).size !== options.length) throw invalid(`${at}.options`, 'must be unique.')
        return { ...base, type: 'choice', options: options as string[] }
      }
      case 'boolean':
        return { ...base, type: 'boolean' }
      case 'number': {
        for (const bound of ['min', 'max'] as const) {
          if (question[bound] !== undefined && (typeof question[bound] !== 'number' || !Number.isFinite(question[bound]))) throw invalid(`${at}.${bound}`, 'must be a finite number.')
        }
        const min = question.min as number | undefined
        const max = question.max as number | undefined
        if (min !== undefined && max !== undefined && min > max) throw invalid(`${at}.min`, 'must not be above max.')
        return { ...base, type: 'number', ...(min !== undefined ? { min } : {}), ...(max !== undefined ? { max } : {}) }
      }
      default:
        throw invalid(`${at}.type`, "must be 'choice', 'boolean' or 'number'.")
    }
  })
  return { model, questions }
}

const isProbability = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 1

/** Whether a gateway's answer answers these questions (undefined), or what is wrong with it. */
export function checkDecisionAnswer(value: unknown, questions: readonly DecisionQuestion[]): string | undefined {
  const answers = (value as { answers?: unknown }).answers
  if (!Array.isArray(answers) || answers.length !== questions.length) return `the answer does not answer the ${questions.length} question(s) one by one`
  for (let index = 0; index < questions.length; index++) {
    const question = questions[index]!
    const answer = answers[index] as Record<string, unknown> | undefined
    const at = `answers[${index}]`
    if (!isObject(answer) || answer.id !== question.id) return `${at} is not the answer to question '${question.id}'`
    if (question.type === 'choice') {
      const probabilities = answer.probabilities
      if (typeof answer.answer !== 'string' || !question.options!.includes(answer.answer)) return `${at}.answer is not one of the options`
      if (!isObject(probabilities)) return `${at}.probabilities is missing`
      let sum = 0
      for (const [option, probability] of Object.entries(probabilities)) {
        if (!question.options!.includes(option) || !isProbability(probability)) return `${at}.probabilities has an entry that is not an option's probability`
        sum += probability
      }
      if (Math.abs(sum - 1) > probabilityTolerance) return `${at}.probabilities sum to ${Math.round(sum * 1000) / 1000}, not 1`
    } else if (question.type === 'boolean') {
      if (typeof answer.answer !== 'boolean' || !isProbability(answer.probability)) return `${at} is not a boolean answer with a probability`
    } else {
      const interval = answer.interval
      if (typeof answer.answer !== 'number' || !Number.isFinite(answer.answer)) return `${at}.answer is not a number`
      if (!Array.isArray(interval) || interval.length !== 2 || !interval.every((bound) => typeof bound === 'number' && Number.isFinite(bound)) || interval[0] > interval[1]) {
        return `${at}.interval is not [low, high]`
      }
    }
  }
  return undefined
}

interface DecisionsRequest extends ParsedRequest {
  raw: Uint8Array<ArrayBuffer>
  questions: DecisionQuestion[]
}

/** POST /decisions: the gateway's answer is relayed as it came once it is checked to answer the questions. */
export const decisionsDialect: ClientDialect<DecisionsRequest> = {
  name: 'decisions',
  replyKind: 'decision',
  // Parsed, not only scanned: `accept` checks what it answers.
  relaysBytes: false,
  enriched: false,
  attachesToStream: false,
  async parse(context, request) {
    const { bytes, text, value } = await readJsonBody(request)
    const { model, questions } = validateDecisionRequest(value)
    context.requestBody = text
    context.model = model
    return { model, stream: false, operation: 'decisions', upstreamBody: value as Record<string, unknown>, raw: bytes, questions, siblings: { adRequest: undefined, linkRequest: undefined } }
  },
  toUpstream: (step, parsed) => upstreamCall('/decisions', step, parsed.upstreamBody, parsed.raw),
  accept: (answer, parsed) => checkDecisionAnswer(answer, parsed.questions),
}
