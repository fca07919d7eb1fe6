/**
 * The pure routing core: planRoute / rollRemap / orderTargets / eligibleTargets
 * (SPEC "Routing behavior"), the failure classifier (SPEC "Failover triggers", "Failover reasons",
 * "Errors") and the model-catalog helpers (SPEC "Model ids", "Limits": 72 h staleness).
 */
import { describe, expect, test } from 'bun:test'
import { findGateway } from '../../src/gateways/catalog'
import {
  buildGatewayCatalog,
  canonicalId,
  catalogStaleAfterMs,
  decideModel,
  gatewaysListing,
  isBatchId,
  isFresh,
  isRegionPinned,
  modelKey,
  spellingFor,
  type GatewayCatalog,
} from '../../src/gateways/model-catalog'
import { classify, finalError, isModelMiss400, type FailedAttempt } from '../../src/pipeline/routing/classify-failure'
import { eligibleTargets, orderTargets, planRoute, rollRemap, type PlanInput, type PlannedAttempt, type PlanStep } from '../../src/pipeline/routing/plan-route'
import { RouterError } from '../../src/errors/router-error'
import type { StoredRemap, StoredRule, StoredTarget } from '../../src/storage/repositories/inference-keys'
import type { ProviderEntry } from '../../src/pipeline/read-model/snapshot'

const now = Date.UTC(2025, 0, 10, 12, 0, 0)
const hour = 3_600_000

function provider(id: string, gatewayId: string, options: { disabled?: boolean } = {}): ProviderEntry {
  const gateway = findGateway(gatewayId)
  if (!gateway) throw new Error(`unknown gateway ${gatewayId}`)
  return { id, workspaceId: 'ws-1', gateway, secret: `sk-${id}`, baseUrl: `http://mock/${gatewayId}`, disabled: options.disabled ?? false, postHeaders: { json: {}, stream: {} } }
}

function target(providerKeyId: string, weight: number | null = null, ttfbMs: number | null = null): StoredTarget {
  return { providerKeyId, weight, ttfbMs }
}

function remap(match: string, providerKeyId: string, upstreamModel: string, percent = 100, enabled = true): StoredRemap {
  return { match, percent, providerKeyId, upstreamModel, enabled }
}

function rule(targets: StoredTarget[], strategy: 'priority' | 'split' = 'priority', remaps: StoredRemap[] = []): StoredRule {
  return { strategy, targets, remaps, decisioner: null }
}

const providerMap = (...entries: ProviderEntry[]) => new Map(entries.map((entry) => [entry.id, entry]))

/** A deterministic sequence of `random()` values, repeating the last one. */
function sequence(...values: number[]): () => number {
  let index = 0
  return () => values[Math.min(index++, values.length - 1)]!
}

function input(overrides: Partial<PlanInput> & Pick<PlanInput, 'rule' | 'providers'>): PlanInput {
  return {
    keyFailoverTtfbMs: null,
    keyUpstreamTimeoutMs: null,
    model: 'openai/gpt-4o-mini',
    operation: 'chat',
    gatewayEnabled: new Map(),
    catalogs: new Map(),
    budgets: new Map(),
    now,
    random: () => 0,
    ...overrides,
  }
}

const attempts = (steps: PlanStep[]) => steps.filter((step): step is PlannedAttempt => step.kind === 'attempt')
const summary = (steps: PlanStep[]) => steps.map((step) => (step.kind === 'attempt' ? `${step.gateway}=${step.model}` : `${step.gateway}:${step.reason}`))

function catalogs(...entries: GatewayCatalog[]) {
  return new Map(entries.map((entry) => [entry.gateway, entry]))
}

function expectRouterError(run: () => unknown, code: string, status: number): RouterError {
  let caught: unknown
  try {
    run()
  } catch (error) {
    caught = error
  }
  expect(caught).toBeInstanceOf(RouterError)
  const error = caught as RouterError
  expect(error.code).toBe(code as never)
  expect(error.status).toBe(status)
  return error
}

const openai = provider('p-openai', 'openai')
const groq = provider('p-groq', 'groq')
const together = provider('p-together', 'together')

describe('rollRemap', () => {
  test('matches the incoming id case-insensitively and exactly', () => {
    const rows = [remap('OpenAI/GPT-4o', 'p-together', 'meta/llama')]
    expect(rollRemap(rows, 'openai/gpt-4o', () => 0)?.upstreamModel).toBe('meta/llama')
    expect(rollRemap(rows, 'OPENAI/GPT-4O', () => 0.99)?.upstreamModel).toBe('meta/llama')
    // Exact: no prefix, suffix or substring matching.
    expect(rollRemap(rows, 'openai/gpt-4o-mini', () => 0)).toBeUndefined()
    expect(rollRemap(rows, 'gpt-4o', () => 0)).toBeUndefined()
  })

  test('`*` covers every model without its own rule, and only those', () => {
    const rows = [remap('*', 'p-groq', 'star-model'), remap('openai/gpt-4o', 'p-together', 'own-model')]
    expect(rollRemap(rows, 'anthropic/claude-sonnet-4', () => 0)?.upstreamModel).toBe('star-model')
    expect(rollRemap(rows, 'openai/gpt-4o', () => 0)?.upstreamModel).toBe('own-model')
  })

  test('disabled rows are staged, never served', () => {
    expect(rollRemap([remap('openai/gpt-4o', 'p-groq', 'x', 100, false)], 'openai/gpt-4o', () => 0)).toBeUndefined()
    expect(rollRemap([remap('*', 'p-groq', 'x', 100, false)], 'openai/gpt-4o', () => 0)).toBeUndefined()
  })

  test('percent is one roll over the rows of the match; the rest of the range falls to the rule', () => {
    const rows = [remap('m', 'p-groq', 'first', 30), remap('m', 'p-together', 'second', 50)]
    expect(rollRemap(rows, 'm', () => 0)?.upstreamModel).toBe('first')
    expect(rollRemap(rows, 'm', () => 0.299)?.upstreamModel).toBe('first')
    expect(rollRemap(rows, 'm', () => 0.3)?.upstreamModel).toBe('second')
    expect(rollRemap(rows, 'm', () => 0.799)?.upstreamModel).toBe('second')
    expect(rollRemap(rows, 'm', () => 0.8)).toBeUndefined()
    expect(rollRemap(rows, 'm', () => 0.999)).toBeUndefined()
  })

  test('default 100 percent always serves', () => {
    const rows = [remap('m', 'p-groq', 'always')]
    for (const value of [0, 0.5, 0.999999]) expect(rollRemap(rows, 'm', () => value)?.upstreamModel).toBe('always')
  })

  test('a 25 percent remap serves about a quarter of many uniform rolls', () => {
    const rows = [remap('m', 'p-groq', 'quarter', 25)]
    let served = 0
    for (let index = 0; index < 1000; index++) if (rollRemap(rows, 'm', () => index / 1000)) served++
    expect(served).toBe(250)
  })
})

describe('orderTargets', () => {
  const a = target('a', 1)
  const b = target('b', 3)
  const c = target('c', 0)

  test('priority keeps the listed order and never consults random', () => {
    const targets = [target('x'), target('y'), target('z')]
    const random = () => {
      throw new Error('random must not be used on priority')
    }
    expect(orderTargets(rule(targets), targets, random).map((t) => t.providerKeyId)).toEqual(['x', 'y', 'z'])
  })

  test('split picks the first in proportion to weight, then the rest in listed order', () => {
    const targets = [a, b, c]
    const splitRule = rule(targets, 'split')
    // total weight 4: [0, 0.25) → a, [0.25, 1) → b
    expect(orderTargets(splitRule, targets, () => 0).map((t) => t.providerKeyId)).toEqual(['a', 'b', 'c'])
    expect(orderTargets(splitRule, targets, () => 0.24).map((t) => t.providerKeyId)).toEqual(['a', 'b', 'c'])
    expect(orderTargets(splitRule, targets, () => 0.25).map((t) => t.providerKeyId)).toEqual(['b', 'a', 'c'])
    expect(orderTargets(splitRule, targets, () => 0.9999).map((t) => t.providerKeyId)).toEqual(['b', 'a', 'c'])
  })

  test('weight 0 is never the first pick, whatever the roll', () => {
    const targets = [target('zero', 0), target('one', 1), target('two', 1)]
    for (let index = 0; index < 200; index++) {
      const order = orderTargets(rule(targets, 'split'), targets, () => index / 200)
      expect(order[0]!.providerKeyId).not.toBe('zero')
      // Every target is still in the failover order.
      expect(order.map((t) => t.providerKeyId).sort()).toEqual(['one', 'two', 'zero'])
    }
  })

  test('first picks are proportional over many uniform rolls (1:3)', () => {
    const targets = [a, b]
    const firsts: Record<string, number> = { a: 0, b: 0 }
    for (let index = 0; index < 1000; index++) firsts[orderTargets(rule(targets, 'split'), targets, () => index / 1000)[0]!.providerKeyId]!++
    expect(firsts).toEqual({ a: 250, b: 750 })
  })

  test('remaining targets keep listed order after the pick', () => {
    const targets = [target('p', 1), target('q', 0), target('r', 1), target('s', 0)]
    expect(orderTargets(rule(targets, 'split'), targets, () => 0.9).map((t) => t.providerKeyId)).toEqual(['r', 'p', 'q', 's'])
  })
})

describe('eligibleTargets', () => {
  test('an empty rule is 402 no_route', () => {
    expectRouterError(() => eligibleTargets(rule([]), providerMap(openai), new Map()), 'no_route', 402)
  })

  test('every provider disabled or missing is 502 no_healthy_target', () => {
    const disabled = provider('p-off', 'openai', { disabled: true })
    expectRouterError(() => eligibleTargets(rule([target('p-off'), target('p-missing')]), providerMap(disabled), new Map()), 'no_healthy_target', 502)
  })

  test('every gateway switched off platform-wide is 503 gateway_disabled', () => {
    const enabled = new Map([
      ['openai', false],
      ['groq', false],
    ])
    expectRouterError(() => eligibleTargets(rule([target('p-openai'), target('p-groq')]), providerMap(openai, groq), enabled), 'gateway_disabled', 503)
  })

  test('only decision-only gateways is 501', () => {
    const decisionOnly = provider('p-dec', 'not-diamond')
    expect(decisionOnly.gateway.routable).toBe(false)
    const error = expectRouterError(() => eligibleTargets(rule([target('p-dec')]), providerMap(decisionOnly), new Map()), 'gateway_not_supported', 501)
    expect(error.status).toBe(501)
  })

  test('disabled, missing, switched-off and decision-only targets are dropped; the rest keep order', () => {
    const off = provider('p-off', 'openai', { disabled: true })
    const dec = provider('p-dec', 'martian')
    const targets = [target('p-off'), target('p-missing'), target('p-groq'), target('p-dec'), target('p-together'), target('p-openai')]
    const enabled = new Map([['openai', false]])
    const kept = eligibleTargets(rule(targets), providerMap(off, dec, groq, together, openai), enabled)
    expect(kept.map((t) => t.providerKeyId)).toEqual(['p-groq', 'p-together'])
  })
})

describe('planRoute: order, remaps, timeouts', () => {
  test('priority plan: one attempt per target in listed order, model forwarded as sent when no catalog knows it', () => {
    const plan = planRoute(input({ rule: rule([target('p-groq'), target('p-openai')]), providers: providerMap(openai, groq), model: 'acme/some-model' }))
    expect(summary(plan.steps)).toEqual(['groq=acme/some-model', 'openai=acme/some-model'])
    expect(plan.remap).toBeUndefined()
  })

  test('remap runs before the rule; the rule targets follow it', () => {
    const rows = [remap('openai/gpt-4o', 'p-together', 'meta-llama/llama-3.3-70b')]
    const plan = planRoute(
      input({ rule: rule([target('p-openai'), target('p-groq')], 'priority', rows), providers: providerMap(openai, groq, together), model: 'OpenAI/GPT-4o' }),
    )
    expect(summary(plan.steps)).toEqual(['together=meta-llama/llama-3.3-70b', 'openai=OpenAI/GPT-4o', 'groq=OpenAI/GPT-4o'])
    expect(attempts(plan.steps)[0]!.remap).toBe(true)
    expect(plan.remap?.upstreamModel).toBe('meta-llama/llama-3.3-70b')
  })

  test('a remap that does not roll leaves only the rule', () => {
    const rows = [remap('m', 'p-together', 'x', 40)]
    const plan = planRoute(input({ rule: rule([target('p-openai')], 'priority', rows), providers: providerMap(openai, together), model: 'm', random: () => 0.5 }))
    expect(summary(plan.steps)).toEqual(['openai=m'])
  })

  test('a remap onto a :batch id is skipped as batch-only, the rule still serves', () => {
    const rows = [remap('openai/gpt-4o', 'p-together', 'openai/gpt-4o:batch')]
    const plan = planRoute(input({ rule: rule([target('p-openai')], 'priority', rows), providers: providerMap(openai, together), model: 'openai/gpt-4o' }))
    expect(summary(plan.steps)).toEqual(['together:batch-only', 'openai=openai/gpt-4o'])
  })

  test('a :batch id on a synchronous call is 400 batch_only_model', () => {
    expectRouterError(
      () => planRoute(input({ rule: rule([target('p-openai')]), providers: providerMap(openai), model: 'openai/gpt-4o-mini:batch' })),
      'batch_only_model',
      400,
    )
  })

  test('a remap from a :batch id to a regular model still serves', () => {
    const rows = [remap('openai/gpt-4o-mini:batch', 'p-together', 'meta-llama/llama-3.3-70b')]
    const plan = planRoute(
      input({ rule: rule([target('p-openai')], 'priority', rows), providers: providerMap(openai, together), model: 'openai/gpt-4o-mini:batch' }),
    )
    const sent = attempts(plan.steps)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.gateway).toBe('together')
    expect(sent[0]!.model).toBe('meta-llama/llama-3.3-70b')
  })

  test('split: the rolled target comes first, weight-0 targets only as failover', () => {
    const targets = [target('p-openai', 0), target('p-groq', 1), target('p-together', 1)]
    for (const [roll, first] of [
      [0, 'groq'],
      [0.49, 'groq'],
      [0.5, 'together'],
      [0.99, 'together'],
    ] as const) {
      const plan = planRoute(input({ rule: rule(targets, 'split'), providers: providerMap(openai, groq, together), random: () => roll, model: 'x/y' }))
      expect(attempts(plan.steps)[0]!.gateway).toBe(first)
      expect(attempts(plan.steps).map((step) => step.gateway).sort()).toEqual(['groq', 'openai', 'together'])
    }
  })

  test('split and a partial remap each use their own roll', () => {
    const targets = [target('p-openai', 1), target('p-groq', 1)]
    const rows = [remap('m', 'p-together', 'r', 50)]
    // remap roll 0.2 → served; split roll 0.9 → groq first
    const plan = planRoute(input({ rule: rule(targets, 'split', rows), providers: providerMap(openai, groq, together), model: 'm', random: sequence(0.2, 0.9) }))
    expect(summary(plan.steps)).toEqual(['together=r', 'groq=m', 'openai=m'])
  })

  test('failover timeout precedence: target ttfb_ms, then key value, then learned budget, then 5 s', () => {
    const providers = providerMap(openai, groq, together)
    const targets = [target('p-openai', null, 1500), target('p-groq'), target('p-together')]
    const budgets = new Map([['groq', 9000]])
    const withKey = planRoute(input({ rule: rule(targets), providers, budgets, keyFailoverTtfbMs: 2500 }))
    expect(attempts(withKey.steps).map((step) => step.failoverTimeoutMs)).toEqual([1500, 2500, 2500])
    const withoutKey = planRoute(input({ rule: rule(targets), providers, budgets }))
    expect(attempts(withoutKey.steps).map((step) => step.failoverTimeoutMs)).toEqual([1500, 9000, 5000])
  })

  test('a learned budget is held between 5 s and 15 s', () => {
    const providers = providerMap(openai, groq)
    const budgets = new Map([
      ['openai', 1200],
      ['groq', 42000],
    ])
    const plan = planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers, budgets }))
    expect(attempts(plan.steps).map((step) => step.failoverTimeoutMs)).toEqual([5000, 15000])
  })

  test('the failover timeout never exceeds the upstream timeout; upstream timeout defaults to 60 s', () => {
    const providers = providerMap(openai, groq)
    const targets = [target('p-openai', null, 20000), target('p-groq')]
    const capped = planRoute(input({ rule: rule(targets), providers, keyUpstreamTimeoutMs: 8000, keyFailoverTtfbMs: 12000 }))
    expect(attempts(capped.steps).map((step) => [step.failoverTimeoutMs, step.upstreamTimeoutMs])).toEqual([
      [8000, 8000],
      [8000, 8000],
    ])
    const defaults = planRoute(input({ rule: rule(targets), providers }))
    expect(attempts(defaults.steps).map((step) => [step.failoverTimeoutMs, step.upstreamTimeoutMs])).toEqual([
      [20000, 60000],
      [5000, 60000],
    ])
  })

  test("a remap hop never carries a target's ttfb_ms: key value, then learned budget, then 5 s", () => {
    const providers = providerMap(openai, together)
    // The remap destination is also a target with its own ttfb_ms.
    const targets = [target('p-together', null, 1000), target('p-openai', null, 1000)]
    const rows = [remap('m', 'p-together', 'r')]
    const keyed = planRoute(input({ rule: rule(targets, 'priority', rows), providers, model: 'm', keyFailoverTtfbMs: 3000 }))
    expect(attempts(keyed.steps).map((step) => [step.remap, step.failoverTimeoutMs])).toEqual([
      [true, 3000],
      [false, 1000],
      [false, 1000],
    ])
    const learned = planRoute(input({ rule: rule(targets, 'priority', rows), providers, model: 'm', budgets: new Map([['together', 7000]]) }))
    expect(attempts(learned.steps)[0]!.failoverTimeoutMs).toBe(7000)
    const plain = planRoute(input({ rule: rule(targets, 'priority', rows), providers, model: 'm' }))
    expect(attempts(plain.steps)[0]!.failoverTimeoutMs).toBe(5000)
  })
})

describe('planRoute: catalogs', () => {
  const fresh = now - hour
  const stale = now - 73 * hour

  test('a target lacking the model in a fresh catalog is skipped as not-listed when another catalog lists it', () => {
    const cats = catalogs(buildGatewayCatalog('openai', fresh, ['gpt-4o']), buildGatewayCatalog('groq', fresh, ['meta-llama/llama-3.3-70b-versatile']))
    const plan = planRoute(
      input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'meta-llama/llama-3.3-70b-versatile' }),
    )
    expect(summary(plan.steps)).toEqual(['openai:not-listed', 'groq=meta-llama/llama-3.3-70b-versatile'])
  })

  test('a stale catalog (older than 72 h) is never assumed to lack the model', () => {
    const cats = catalogs(buildGatewayCatalog('openai', stale, ['gpt-4o']), buildGatewayCatalog('groq', fresh, ['meta-llama/llama-3.3-70b']))
    const plan = planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'meta-llama/llama-3.3-70b' }))
    expect(summary(plan.steps)).toEqual(['openai=meta-llama/llama-3.3-70b', 'groq=meta-llama/llama-3.3-70b'])
  })

  test('a missing catalog is never assumed to lack the model', () => {
    const cats = catalogs(buildGatewayCatalog('groq', fresh, ['meta-llama/llama-3.3-70b']))
    const plan = planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'meta-llama/llama-3.3-70b' }))
    expect(summary(plan.steps)).toEqual(['openai=meta-llama/llama-3.3-70b', 'groq=meta-llama/llama-3.3-70b'])
  })

  test('a model no catalog knows is forwarded untouched everywhere', () => {
    const cats = catalogs(buildGatewayCatalog('openai', fresh, ['gpt-4o']), buildGatewayCatalog('groq', fresh, ['llama-3.3-70b']))
    const plan = planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'Acme/Brand-New-1' }))
    expect(summary(plan.steps)).toEqual(['openai=Acme/Brand-New-1', 'groq=Acme/Brand-New-1'])
  })

  test("each target receives its catalog's spelling; a target listing the exact id receives it unchanged", () => {
    const cats = catalogs(buildGatewayCatalog('openai', fresh, ['gpt-4o-mini']), buildGatewayCatalog('groq', fresh, ['openai/gpt-4o-mini']))
    const plan = planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'openai/gpt-4o-mini' }))
    expect(summary(plan.steps)).toEqual(['openai=gpt-4o-mini', 'groq=openai/gpt-4o-mini'])
  })

  test('no target lists the model: 404 model_not_available naming the gateways that list it', () => {
    const cats = catalogs(
      buildGatewayCatalog('openai', fresh, ['gpt-4o']),
      buildGatewayCatalog('groq', fresh, ['llama-3.3-70b']),
      buildGatewayCatalog('together', fresh, ['deepseek-ai/DeepSeek-V3']),
    )
    const error = expectRouterError(
      () => planRoute(input({ rule: rule([target('p-openai'), target('p-groq')]), providers: providerMap(openai, groq), catalogs: cats, model: 'deepseek-ai/DeepSeek-V3' })),
      'model_not_available',
      404,
    )
    expect(error.message).toContain('together')
  })

  test('embeddings: a gateway without an embeddings route is skipped as no-embeddings; catalogs never skip an embedding id', () => {
    const cats = catalogs(buildGatewayCatalog('openai', fresh, ['gpt-4o']), buildGatewayCatalog('together', fresh, ['gpt-4o']))
    const plan = planRoute(
      input({
        rule: rule([target('p-groq'), target('p-openai'), target('p-together')]),
        providers: providerMap(openai, groq, together),
        catalogs: cats,
        model: 'openai/text-embedding-3-small',
        operation: 'embeddings',
      }),
    )
    expect(summary(plan.steps)).toEqual(['groq:no-embeddings', 'openai=openai/text-embedding-3-small', 'together=openai/text-embedding-3-small'])
  })

  test('embeddings with no serving target: 501 embeddings_unsupported naming picked and serving gateways', () => {
    const cerebras = provider('p-cerebras', 'cerebras')
    const error = expectRouterError(
      () =>
        planRoute(
          input({ rule: rule([target('p-groq'), target('p-cerebras')]), providers: providerMap(groq, cerebras), model: 'openai/text-embedding-3-small', operation: 'embeddings' }),
        ),
      'embeddings_unsupported',
      501,
    )
    expect(error.message).toContain('groq')
    expect(error.message).toContain('cerebras')
    expect(error.message).toContain('openai')
  })
})

describe('model catalog helpers', () => {
  test('dash-written and dotted versions share one key', () => {
    expect(modelKey('anthropic/claude-3-5-sonnet')).toBe(modelKey('anthropic/claude-3.5-sonnet'))
    expect(modelKey('Claude-3-7-Sonnet')).toBe(modelKey('claude-3.7-sonnet'))
    // Only digit-dash-digit is a version separator.
    expect(modelKey('gpt-4o-mini')).toBe('gpt-4o-mini')
  })

  test('a catalog listing the dotted form serves the dash-written request (and the other way round)', () => {
    const dotted = buildGatewayCatalog('openrouter', now, ['anthropic/claude-3.5-sonnet'])
    expect(spellingFor(dotted, 'anthropic/claude-3-5-sonnet')).toBe('anthropic/claude-3.5-sonnet')
    const dashed = buildGatewayCatalog('together', now, ['anthropic/claude-3-5-sonnet'])
    expect(spellingFor(dashed, 'anthropic/claude-3.5-sonnet')).toBe('anthropic/claude-3-5-sonnet')
  })

  test('canonical ids: slashed ids unchanged, bare ids get their vendor', () => {
    expect(canonicalId('openai/gpt-4o', 'groq')).toBe('openai/gpt-4o')
    expect(canonicalId('gpt-4o-mini', 'openai')).toBe('openai/gpt-4o-mini')
    expect(canonicalId('claude-sonnet-4', 'portkey')).toBe('anthropic/claude-sonnet-4')
    expect(canonicalId('gemini-2.5-pro', 'litellm')).toBe('google/gemini-2.5-pro')
  })

  test("the gateway's bare spelling is found from the canonical id and vice versa", () => {
    const bare = buildGatewayCatalog('openai', now, ['gpt-4o-mini'])
    expect(spellingFor(bare, 'openai/gpt-4o-mini')).toBe('gpt-4o-mini')
    expect(spellingFor(bare, 'OPENAI/GPT-4O-MINI')).toBe('gpt-4o-mini')
    expect(spellingFor(bare, 'gpt-4o-mini')).toBe('gpt-4o-mini')
    const slashed = buildGatewayCatalog('openrouter', now, ['openai/gpt-4o-mini'])
    expect(spellingFor(slashed, 'openai/gpt-4o-mini')).toBe('openai/gpt-4o-mini')
    expect(spellingFor(slashed, 'gpt-4o-mini')).toBe('openai/gpt-4o-mini')
    expect(spellingFor(slashed, 'openai/gpt-4o')).toBeUndefined()
  })

  test('region pins go only to catalogs listing that exact pin', () => {
    expect(isRegionPinned('anthropic/claude-sonnet-4@eu')).toBe(true)
    expect(isRegionPinned('anthropic/claude-sonnet-4')).toBe(false)
    const plain = buildGatewayCatalog('openrouter', now, ['anthropic/claude-sonnet-4'])
    const pinned = buildGatewayCatalog('portkey', now, ['anthropic/claude-sonnet-4@eu'])
    expect(spellingFor(plain, 'anthropic/claude-sonnet-4@eu')).toBeUndefined()
    expect(spellingFor(pinned, 'anthropic/claude-sonnet-4@eu')).toBe('anthropic/claude-sonnet-4@eu')
    expect(spellingFor(pinned, 'anthropic/claude-sonnet-4@us')).toBeUndefined()
    expect(decideModel(plain, 'anthropic/claude-sonnet-4@eu', true, now)).toEqual({ kind: 'not-listed' })
    expect(decideModel(pinned, 'anthropic/claude-sonnet-4@eu', true, now)).toEqual({ kind: 'send', model: 'anthropic/claude-sonnet-4@eu' })
    // A pin no catalog lists still does not go to a fresh catalog that lacks it.
    expect(decideModel(plain, 'anthropic/claude-sonnet-4@eu', false, now)).toEqual({ kind: 'not-listed' })
  })

  test('72 hours: a catalog is fresh up to the limit and stale past it', () => {
    expect(catalogStaleAfterMs).toBe(72 * hour)
    expect(isFresh(buildGatewayCatalog('openai', now - 72 * hour, []), now)).toBe(true)
    expect(isFresh(buildGatewayCatalog('openai', now - 72 * hour - 1, []), now)).toBe(false)
    expect(isFresh(undefined, now)).toBe(false)
  })

  test('decideModel: send the spelling, skip when fresh and listed elsewhere, forward when unknown or stale', () => {
    const catalog = buildGatewayCatalog('openai', now - hour, ['gpt-4o-mini'])
    expect(decideModel(catalog, 'openai/gpt-4o-mini', true, now)).toEqual({ kind: 'send', model: 'gpt-4o-mini' })
    expect(decideModel(catalog, 'meta-llama/llama-3.3-70b', true, now)).toEqual({ kind: 'not-listed' })
    expect(decideModel(catalog, 'acme/new-model', false, now)).toEqual({ kind: 'send', model: 'acme/new-model' })
    const old = buildGatewayCatalog('openai', now - 100 * hour, ['gpt-4o-mini'])
    expect(decideModel(old, 'meta-llama/llama-3.3-70b', true, now)).toEqual({ kind: 'send', model: 'meta-llama/llama-3.3-70b' })
    expect(decideModel(undefined, 'meta-llama/llama-3.3-70b', true, now)).toEqual({ kind: 'send', model: 'meta-llama/llama-3.3-70b' })
  })

  test('gatewaysListing counts fresh catalogs only', () => {
    const cats = catalogs(
      buildGatewayCatalog('openai', now - hour, ['gpt-4o-mini']),
      buildGatewayCatalog('groq', now - 80 * hour, ['openai/gpt-4o-mini']),
      buildGatewayCatalog('together', now - hour, ['openai/gpt-4o-mini']),
      buildGatewayCatalog('deepinfra', now - hour, ['other']),
    )
    expect(gatewaysListing(cats, 'openai/gpt-4o-mini', now).sort()).toEqual(['openai', 'together'])
  })

  test(':batch ids', () => {
    expect(isBatchId('openai/gpt-4o:batch')).toBe(true)
    expect(isBatchId('openai/gpt-4o:BATCH')).toBe(true)
    expect(isBatchId('openai/gpt-4o')).toBe(false)
  })
})

describe('classify', () => {
  const status = (code: number, body = '') => classify({ kind: 'status', status: code, body })

  test('failover triggers and their reasons', () => {
    expect(status(500)).toEqual({ retryable: true, reason: 'server-error' })
    expect(status(502)).toEqual({ retryable: true, reason: 'server-error' })
    expect(status(503)).toEqual({ retryable: true, reason: 'server-error' })
    expect(status(429)).toEqual({ retryable: true, reason: 'rate-limited' })
    expect(status(401)).toEqual({ retryable: true, reason: 'provider-auth' })
    expect(status(402)).toEqual({ retryable: true, reason: 'http-402' })
    expect(status(403)).toEqual({ retryable: true, reason: 'http-403' })
    expect(status(404)).toEqual({ retryable: true, reason: 'no-model' })
    expect(classify({ kind: 'ttfb-timeout' })).toEqual({ retryable: true, reason: 'ttfb-timeout' })
    expect(classify({ kind: 'timeout' })).toEqual({ retryable: true, reason: 'timeout' })
    expect(classify({ kind: 'unreachable' })).toEqual({ retryable: true, reason: 'unreachable' })
  })

  test('a model-miss 400 is no-model; other 400s are relayed without retry', () => {
    expect(status(400, JSON.stringify({ error: { message: 'The model `foo/bar` does not exist', code: 'model_not_found' } }))).toEqual({ retryable: true, reason: 'no-model' })
    expect(status(400, JSON.stringify({ error: { message: 'Unknown model: foo/bar' } }))).toEqual({ retryable: true, reason: 'no-model' })
    expect(status(400, JSON.stringify({ error: { message: 'foo/bar is not a valid model ID' } }))).toEqual({ retryable: true, reason: 'no-model' })
    const malformed = status(400, JSON.stringify({ error: { message: "'messages' must be an array", type: 'invalid_request_error' } }))
    expect(malformed.retryable).toBe(false)
    expect(status(400, '').retryable).toBe(false)
    expect(isModelMiss400(JSON.stringify({ error: { message: 'temperature must be between 0 and 2' } }))).toBe(false)
  })

  test('the deadline and a client hang-up stop the run', () => {
    expect(classify({ kind: 'deadline' })).toEqual({ retryable: false, reason: 'deadline' })
    expect(classify({ kind: 'client-closed' })).toEqual({ retryable: false, reason: 'client-closed' })
  })

  test('other statuses are http-NNN and not retried', () => {
    expect(status(409)).toEqual({ retryable: false, reason: 'http-409' })
    expect(status(422)).toEqual({ retryable: false, reason: 'http-422' })
  })
})

describe('finalError', () => {
  const failed = (gateway: string, code: number, body = '', headers?: Record<string, string>): FailedAttempt => ({
    gateway,
    outcome: { kind: 'status', status: code, body },
    reason: classify({ kind: 'status', status: code, body }).reason,
    headers: headers ? new Headers(headers) : undefined,
  })

  test('every target 402 → 402 all_targets_failed', () => {
    const error = finalError([failed('openai', 402), failed('groq', 402)])
    expect(error.status).toBe(402)
    expect(['all_targets_failed', 'all_targets_failed_402']).toContain(error.code)
  })

  test("every target 429 → 429 rate_limited with the last gateway's Retry-After", () => {
    const error = finalError([failed('openai', 429, '', { 'retry-after': '7' }), failed('groq', 429, '', { 'retry-after': '13' })])
    expect(error.code).toBe('rate_limited')
    expect(error.status).toBe(429)
    expect(error.extraHeaders?.['retry-after']).toBe('13')
  })

  test("every target 404 → 404 model_not_found relaying the last gateway's message", () => {
    const error = finalError([
      failed('openai', 404, JSON.stringify({ error: { message: 'first gateway says no' } })),
      failed('groq', 404, JSON.stringify({ error: { message: 'The model foo/bar does not exist on groq' } })),
    ])
    expect(error.code).toBe('model_not_found')
    expect(error.status).toBe(404)
    expect(error.message).toContain('The model foo/bar does not exist on groq')
  })

  test('a final 401 → 502 provider_auth_failed', () => {
    const error = finalError([failed('openai', 500), failed('groq', 401)])
    expect(error.code).toBe('provider_auth_failed')
    expect(error.status).toBe(502)
  })

  test('mixed failures → 502 all_targets_failed', () => {
    const error = finalError([failed('openai', 429), failed('groq', 503)])
    expect(error.code).toBe('all_targets_failed')
    expect(error.status).toBe(502)
  })

  test('the deadline → 504 deadline_exceeded', () => {
    const error = finalError([failed('openai', 500), { gateway: 'groq', outcome: { kind: 'deadline' }, reason: 'deadline' }])
    expect(error.code).toBe('deadline_exceeded')
    expect(error.status).toBe(504)
  })

  test('a body that broke off → 502 upstream_unreadable', () => {
    const error = finalError([{ gateway: 'openai', outcome: { kind: 'unreadable' }, reason: 'unknown' }])
    expect(error.code).toBe('upstream_unreadable')
    expect(error.status).toBe(502)
  })
})
