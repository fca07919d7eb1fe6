/**
 * A request's worst-case cost under a spend cap (CONTRACT §11): an upper bound, never a guess, so a
 * cap that admits on it holds. Prompt tokens are bounded from above by what the request shows: every
 * text as its UTF-8 bytes (no tokenizer makes more tokens than bytes; the JSON around the text covers
 * the few tokens a chat template adds per message), each image at the most tokens any model we route
 * gives one, tool definitions with the system prompt some vendors add for them, and the model's whole
 * context where the request names content it does not carry (a file by id, an earlier response of a
 * chain): whatever that holds, the prompt cannot be longer than the context. Completion tokens are the
 * largest output-token field the request sets, else the model's listed maximum, else the bound the
 * router sends upstream itself; times the choices asked for (`n`). Pure: values in, numbers out.
 */
import type { ModelPricing } from '../../gateways/model-prices'
import { usdToNanoUp } from '../../storage/money'
import type { Operation } from '../routing/plan-route'

/** The output bound the router sends upstream when a capped request sets none and its model lists none (CONTRACT §11). */
export const defaultMaxTokens = 4096
/**
 * Tokens one image can take, at most: OpenAI's patch-based models cap an image at 1,536 patches (×
 * 2.46 for the smallest, about 3,800 tokens), Anthropic scales images down to about 1,600 tokens,
 * Gemini bills 258 per tile; twice the largest of them, for models that count more.
 */
export const imageTokenBound = 8192
/** Tokens a vendor's tool-use system prompt adds when tools are offered (Anthropic documents up to 530). */
export const toolsOverheadTokens = 1024
/** A model's context when its catalog entry lists none: the largest context window of the models we know. */
export const unlistedContextTokens = 2_000_000

/** What bounds a request's prompt tokens from above. */
export interface PromptMeasure {
  /** UTF-8 bytes of every text and name the request sends, with its JSON punctuation. */
  bytes: number
  images: number
  tools: boolean
  /** The request names content it does not carry: only the model's context bounds its prompt. */
  unbounded: boolean
}

/** The output-token bound a request sets (the largest of its fields; undefined: none), and how many answers it asks for. */
export interface OutputBound {
  requested: number | undefined
  choices: number
}

/** Content part types that are images, counted at imageTokenBound each (not by their data's bytes). */
const imageParts = new Set(['image_url', 'input_image', 'image'])
/** Content part types whose tokens their bytes do not bound (a PDF's pages are read as images too; a video by its length): the context does. */
const unboundedParts = new Set(['file', 'input_file', 'document', 'video_url', 'input_video', 'video', 'item_reference'])
/** Request fields that name content held elsewhere. */
const elsewhere = ['previous_response_id', 'conversation', 'prompt'] as const

/** UTF-8 bytes of a text: a short ASCII one (a role, a name, a key) by its length, with no call into the runtime. */
function utf8Bytes(text: string): number {
  if (text.length > 48) return Buffer.byteLength(text, 'utf8')
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) > 0x7f) return Buffer.byteLength(text, 'utf8')
  return text.length
}

function walk(value: unknown, measure: PromptMeasure) {
  if (typeof value === 'string') {
    measure.bytes += utf8Bytes(value) + 3
    return
  }
  if (typeof value !== 'object' || value === null) {
    // A number, true, false or null: at most a few characters.
    measure.bytes += 8
    return
  }
  if (Array.isArray(value)) {
    measure.bytes += 2
    for (const item of value) walk(item, measure)
    return
  }
  const object = value as Record<string, unknown>
  const type = object.type
  if (typeof type === 'string') {
    if (imageParts.has(type)) {
      measure.images++
      return
    }
    if (unboundedParts.has(type)) {
      measure.unbounded = true
      return
    }
  }
  for (const name in object) {
    measure.bytes += utf8Bytes(name) + 4
    walk(object[name], measure)
  }
}

/** The prompt bound of a body as it goes upstream (chat, Responses, embeddings or decisions form). */
export function measurePrompt(body: Record<string, unknown>): PromptMeasure {
  const measure: PromptMeasure = { bytes: 0, images: 0, tools: Array.isArray(body.tools) && body.tools.length > 0, unbounded: false }
  for (const name of elsewhere) {
    const named = body[name]
    if (named !== undefined && named !== null && named !== '') measure.unbounded = true
  }
  walk(body, measure)
  return measure
}

/**
 * A count as an upstream may read it: a number, or a string of one (a lax upstream reads `"9"` as 9,
 * so it is counted as 9; a strict one refuses it, which costs nothing).
 */
function countOf(value: unknown): number | undefined {
  if (typeof value === 'number') return value
  if (typeof value === 'string' && value.trim() !== '') {
    const number = Number(value)
    return Number.isNaN(number) ? undefined : number
  }
  return undefined
}

/** The output bound a body sets: the largest of its output-token fields, and `n` on chat. */
export function outputBound(body: Record<string, unknown>, operation: Operation): OutputBound {
  let requested: number | undefined
  for (const name of ['max_completion_tokens', 'max_tokens', 'max_output_tokens'] as const) {
    const value = countOf(body[name])
    if (value !== undefined && value > 0 && (requested === undefined || value > requested)) requested = value
  }
  const n = countOf(body.n)
  return { requested, choices: operation === 'chat' && n !== undefined && n > 1 ? n : 1 }
}

/**
 * Bytes the router may add to a body on its way to one attempt: the fields it sends itself (a
 * `stream_options` asking for usage, its own output bound), and a longer spelling of the model.
 */
export function addedBytes(bodyModel: unknown, stepModel: string): number {
  const asked = typeof bodyModel === 'string' ? bodyModel.length : 0
  return 64 + Math.max(0, utf8Bytes(stepModel) - asked)
}

/** The prompt tokens a measured body can take at most on a model (capped at its listed context: a longer prompt is refused). */
export function promptTokenBound(measure: PromptMeasure, pricing: ModelPricing, extraBytes = 0): number {
  const context = pricing.context ?? unlistedContextTokens
  if (measure.unbounded) return context
  return Math.min(measure.bytes + extraBytes + measure.images * imageTokenBound + (measure.tools ? toolsOverheadTokens : 0), context)
}

/** The completion tokens an answer can take at most on a model: the request's bound within the listed maximum, else the listed maximum, else the default; per choice. */
export function completionTokenBound(output: OutputBound, pricing: ModelPricing): number {
  const listed = pricing.maxOutput
  const bound = output.requested === undefined ? (listed ?? defaultMaxTokens) : listed === undefined ? output.requested : Math.min(output.requested, listed)
  return bound * output.choices
}

/**
 * The worst case of one attempt in nano-dollars (rounded up), or undefined when its model lists no
 * price for a side the request uses (its cost could not be counted). Embeddings answer no tokens.
 * A bound too large for a plain number to count exactly comes back as it is: the limiter refuses it.
 */
export function worstCaseNano(pricing: ModelPricing | undefined, prompt: PromptMeasure, output: OutputBound, operation: Operation, extraBytes = 0): number | undefined {
  if (pricing?.prompt === undefined) return undefined
  const promptUsd = promptTokenBound(prompt, pricing, extraBytes) * pricing.prompt
  if (operation === 'embeddings') return usdToNanoUp(promptUsd)
  if (pricing.completion === undefined) return undefined
  return usdToNanoUp(promptUsd + completionTokenBound(output, pricing) * pricing.completion)
}

/** Whether the router must send its own output bound to this model (the request set none and the model lists none). */
export function needsDefaultBound(output: OutputBound, pricing: ModelPricing | undefined): boolean {
  return output.requested === undefined && pricing?.maxOutput === undefined
}
