/**
 * The feature registry: every stage a key can turn on, one entry each, in the order they act on a
 * request (stages/stage.ts), and the compiled chain of a key, made once when the key's read-model
 * entry is built (pipeline/read-model/snapshot.ts), never per request. A plain key's chain is empty
 * and its requests take the straight path (answer/handler.ts: bytes relayed where the dialects match).
 *
 * The order: steering rewrites the request first, so everything after it (a spend cap's price among
 * them, the cache's entry key) sees the request as it goes upstream; guardrails then mask what must
 * not leave (or refuse the request before anything else acts), so the cache keys and the cap prices
 * the masked request; the response cache answers a
 * hit before anything else acts (a hit skips the decisioner and the plan; the spend cap after it
 * counts the hit as a request and nothing more); the spend cap admits the rest before anything calls
 * out (the decisioner's call included); the decisioner picks the target; a continuation wraps each
 * round's stream (a break goes on elsewhere before the tool loop and the transforms see the parts);
 * the tools, attached fields and traces then shape the call and the answer; body capture only sets what the log row keeps.
 */
import type { CompiledChain } from '../../domain/read-model'
import type { KeyEntry, WorkspaceEntry } from '../read-model/entries'
import { steeringStage } from './steering'
import { guardrailsStage } from './guardrails/stage'
import { responseCacheStage } from './cache/stage'
import { spendLimitsStage } from '../limits/stage'
import { decisionerStage } from './decisioner'
import { continuationStage } from './continuation/stage'
import { mcpToolsStage } from './mcp-tools'
import { companionAdsStage } from './companion-ads'
import { keytermLinksStage } from './keyterm-links'
import { tracingStage } from './tracing'
import { bodyCaptureStage } from './body-capture'
import type { ChainSettings, FeatureFlags, KeyFeatures, Stage } from './stage'

/** Every stage, in the order it acts on a request. */
const stages: Stage[] = [steeringStage, guardrailsStage, responseCacheStage, spendLimitsStage, decisionerStage, continuationStage, mcpToolsStage, companionAdsStage, keytermLinksStage, tracingStage, bodyCaptureStage]

/**
 * Adds a stage to the registry, after the ones there (or before the one named `before`): a feature
 * that is not part of the service itself (a test's) plugs in with this one line. Keys' chains built
 * from then on include it where it applies.
 */
export function registerStage(stage: Stage, before?: string) {
  if (stages.some((entry) => entry.name === stage.name)) throw new Error(`A stage named ${stage.name} is registered already.`)
  const at = before === undefined ? -1 : stages.findIndex((entry) => entry.name === before)
  if (at === -1) stages.push(stage)
  else stages.splice(at, 0, stage)
}

/** The registered stages' names, in order. */
export function stageNames(): string[] {
  return stages.map((stage) => stage.name)
}

/** Takes a stage registered with registerStage out again (a test's, when it is done). */
export function unregisterStage(name: string) {
  const at = stages.findIndex((entry) => entry.name === name)
  if (at !== -1) stages.splice(at, 1)
}

/** A key's compiled chain: the stages that apply to its requests, in order, and what they set (the floor's CompiledChain, with its entries typed). */
export interface KeyPipeline extends Readonly<ChainSettings>, CompiledChain {
  /** The stages a request of the answer path opens. */
  readonly stages: readonly Stage[]
  /** No stage to open: the straight path. */
  readonly plain: boolean
  /** Stages run as any request of the key is authenticated, and as any of its answers is finished (most keys: none). */
  readonly onAuthenticated: readonly Stage[]
  readonly onAnswered: readonly Stage[]
}

const none: readonly never[] = Object.freeze([])

export function compileKeyPipeline(key: Omit<KeyEntry, 'pipeline'>, workspace: WorkspaceEntry | undefined, flags: FeatureFlags): KeyPipeline {
  const features: KeyFeatures = { ...key, workspace }
  const applying = stages.filter((stage) => stage.appliesTo(features, flags))
  const settings: ChainSettings = { steering: undefined, captureBodies: false }
  for (const stage of applying) Object.assign(settings, stage.settings?.(features))
  // The stages a request opens: one of settings only is not opened.
  const opened = applying.filter((stage) => stage.open !== undefined)
  const listed = (list: Stage[]) => (list.length ? list : none)
  return Object.freeze({
    stages: listed(opened),
    ...settings,
    plain: opened.length === 0,
    onAuthenticated: listed(applying.filter((stage) => stage.authenticated !== undefined)),
    onAnswered: listed(applying.filter((stage) => stage.answered !== undefined)),
  })
}
