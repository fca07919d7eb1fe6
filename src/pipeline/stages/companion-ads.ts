/**
 * Companion ads (SPEC "Companion ads", CONTRACT §7): on a key with `companion_ads` on, the ad service
 * is called with the client's `ad_request` sibling in parallel with the model call (2 s), and its
 * answer is attached to a successful answer as `ads` (`[]` is a no-fill, not an error) or
 * `ads_error`.
 */
import { callPlugin, type PluginResult } from './plugin-call'
import { isObject } from '../../http/read-body'
import type { Stage, StageRun } from './stage'

/** The ad call's limit, counted from the start of the request's answer (CONTRACT §7). */
export const adLimitMs = 2_000

const readAds = (answer: unknown): unknown[] | undefined => (isObject(answer) && Array.isArray(answer.ads) ? answer.ads : undefined)

export const companionAdsStage: Stage = {
  name: 'ads',
  appliesTo: (key) => key.companionAds,
  open({ context, deps, parsed, dialect }): StageRun | undefined {
    if (!dialect.enriched) return undefined
    const body = { ad_request: parsed.siblings.adRequest ?? null, model: parsed.model, key_id: context.key.id }
    let call: Promise<PluginResult<unknown[]>> | undefined
    let result: PluginResult<unknown[]> | undefined
    const outcome = () => (result?.error ? result.error.code : result?.value?.length ? 'fill' : 'no_fill')
    return {
      name: 'ads',
      // Started with the first model call (the route is planned), in parallel with it.
      begin(hangUp) {
        call ??= callPlugin(deps, 'ads', deps.config.adsUrl, body, adLimitMs, readAds, hangUp, context.span)
      },
      async attach() {
        if (!result) {
          result = await (call ??= callPlugin(deps, 'ads', deps.config.adsUrl, body, adLimitMs, readAds, undefined, context.span))
          deps.metrics.countEnrichment('ads', outcome())
        }
        return result.error ? { ads_error: result.error } : { ads: result.value }
      },
      logRecord: () => (result ? { outcome: outcome(), ms: result.ms } : { outcome: 'not_attached' }),
    }
  },
}
