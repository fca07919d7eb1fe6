/**
 * Keyterm links (SPEC "Monetizable keyterms", CONTRACT §7): only with RT_KEYTERMS_ENABLED=1 and the
 * key's `keyterms` on. The completed reply's text goes to the keyterm service (2 s) with
 * `max_keyterms` from the client's `link_request` sibling; its scored candidates are attached as
 * `keyterms`, or `keyterms_error`.
 */
import { callPlugin, type PluginResult } from './plugin-call'
import { isObject } from '../../http/read-body'
import type { Stage, StageRun } from './stage'

export const keytermLimitMs = 2_000
/** When `link_request.max_keyterms` is absent or not an integer from 1 to 50. */
export const defaultMaxKeyterms = 5

interface Keyterm {
  term: string
  score: number
  url: string
}

function readKeyterms(answer: unknown): Keyterm[] | undefined {
  if (!isObject(answer) || !Array.isArray(answer.keyterms)) return undefined
  for (const entry of answer.keyterms) {
    if (!isObject(entry) || typeof entry.term !== 'string' || typeof entry.score !== 'number' || typeof entry.url !== 'string') return undefined
  }
  return answer.keyterms as Keyterm[]
}

function maxKeyterms(linkRequest: unknown): number {
  const asked = isObject(linkRequest) ? linkRequest.max_keyterms : undefined
  return typeof asked === 'number' && Number.isInteger(asked) && asked >= 1 && asked <= 50 ? asked : defaultMaxKeyterms
}

export const keytermLinksStage: Stage = {
  name: 'keyterms',
  appliesTo: (key, flags) => flags.keytermsEnabled && key.keyterms,
  open({ context, deps, parsed, dialect }): StageRun | undefined {
    if (!dialect.enriched) return undefined
    const max = maxKeyterms(parsed.siblings.linkRequest)
    let result: PluginResult<Keyterm[]> | undefined
    const outcome = () => (result?.error ? result.error.code : 'ok')
    return {
      name: 'keyterms',
      async attach(answerText: string) {
        if (!result) {
          result = await callPlugin(deps, 'keyterms', deps.config.keytermsUrl, { text: answerText, max_keyterms: max }, keytermLimitMs, readKeyterms, undefined, context.span)
          deps.metrics.countEnrichment('keyterms', outcome())
        }
        return result.error ? { keyterms_error: result.error } : { keyterms: result.value }
      },
      logRecord: () => (result ? { outcome: outcome(), ms: result.ms } : { outcome: 'not_attached' }),
    }
  },
}
