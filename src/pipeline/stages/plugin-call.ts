/**
 * One call to a plug-in service (CONTRACT §7: companion ads, keyterm links): a JSON POST within a
 * time limit, its answer read and checked. Every way it can go wrong is a code the answer carries as
 * `<stage>_error` — the call never throws and never fails inference. The services are the
 * operator's own (RT_ADS_URL, RT_KEYTERMS_URL), called as configured.
 */
import type { Span } from '@opentelemetry/api'
import type { InferenceDeps } from '../types'
import { timeLimit } from './time-limit'

export interface PluginResult<T> {
  /** The checked answer, when the call succeeded. */
  value?: T
  error?: { code: string; message: string }
  ms: number
}

/** A plug-in answer's check: the value to attach, or undefined when the answer is malformed. */
export type PluginReader<T> = (answer: unknown) => T | undefined

export async function callPlugin<T>(
  deps: InferenceDeps,
  stage: 'ads' | 'keyterms',
  url: string | undefined,
  body: unknown,
  limitMs: number,
  read: PluginReader<T>,
  hangUp?: AbortSignal,
  /** The request's span when traced: the call gets an INTERNAL span under it (CONTRACT §13). */
  parent?: Span,
): Promise<PluginResult<T>> {
  const tracing = deps.tracing
  if (tracing && parent) {
    return tracing.internal(parent, `plugin ${stage}`, { 'router.plugin': stage }, () => callPlugin(deps, stage, url, body, limitMs, read, hangUp), (result) => result.error?.code)
  }
  const started = performance.now()
  const elapsed = () => Math.round((performance.now() - started) * 1000) / 1000
  const fail = (code: string, message: string): PluginResult<T> => ({ error: { code: `${stage}_${code}`, message }, ms: elapsed() })
  const setting = stage === 'ads' ? 'RT_ADS_URL' : 'RT_KEYTERMS_URL'
  if (!url) return fail('unconfigured', `The ${stage === 'ads' ? 'companion-ad' : 'keyterm'} service is not configured (${setting} is not set).`)
  // Ended by its limit, or when the client went away (nobody will read the answer).
  const limit = timeLimit(limitMs, hangUp)
  try {
    let response: Response
    try {
      response = await deps.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body), signal: limit.signal })
    } catch {
      return limit.signal.aborted ? fail('timeout', `The service did not answer within ${limitMs} ms.`) : fail('unreachable', 'The service could not be reached.')
    }
    let text: string
    try {
      text = await response.text()
    } catch {
      return limit.signal.aborted ? fail('timeout', `The service did not answer within ${limitMs} ms.`) : fail('unreachable', 'The service broke off its answer.')
    }
    if (!response.ok) return fail('upstream_error', `The service answered HTTP ${response.status}.`)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return fail('malformed', 'The service answered with something that is not JSON.')
    }
    const value = read(parsed)
    if (value === undefined) return fail('malformed', `The service's answer is not of the expected form.`)
    return { value, ms: elapsed() }
  } finally {
    limit.release()
  }
}
