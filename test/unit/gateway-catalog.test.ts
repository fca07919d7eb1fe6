/** The gateway catalog as data: counts and capabilities of CONTRACT §6 and SPEC "Gateway catalog entry". */
import { describe, expect, test } from 'bun:test'
import { describeGateway, findGateway, gatewayCatalog, gatewayOverrideSlug, resolveBaseUrl } from '../../src/gateways/catalog'
import { loadConfig } from '../../src/config/env'

const entries = gatewayCatalog.map((gateway) => describeGateway(gateway, {}))
const count = (predicate: (entry: (typeof entries)[number]) => boolean) => entries.filter(predicate).length

describe('gateway catalog counts (CONTRACT §6)', () => {
  test('21 entries with unique ids', () => {
    expect(entries).toHaveLength(21)
    expect(new Set(entries.map((entry) => entry.id)).size).toBe(21)
    for (const entry of entries) {
      expect(typeof entry.id).toBe('string')
      expect(entry.id.length).toBeGreaterThan(0)
      expect(typeof entry.name).toBe('string')
      expect(entry.name.length).toBeGreaterThan(0)
      expect(findGateway(entry.id)?.id).toBe(entry.id)
    }
  })

  test('19 routable, 2 decision-only (routable false, decisions true)', () => {
    expect(count((entry) => entry.routable)).toBe(19)
    const decisionOnly = entries.filter((entry) => !entry.routable)
    expect(decisionOnly).toHaveLength(2)
    for (const entry of decisionOnly) expect(entry.decisions).toBe(true)
  })

  test('7 embeddings, 5 chain, 2 retrieve, 1 batch', () => {
    expect(count((entry) => entry.capabilities.embeddings)).toBe(7)
    expect(count((entry) => entry.capabilities.chain)).toBe(5)
    expect(count((entry) => entry.capabilities.retrieve)).toBe(2)
    expect(count((entry) => entry.capabilities.batch)).toBe(1)
  })

  test('responses: exactly 1 "only", exactly 1 "translated", the rest "native"', () => {
    expect(count((entry) => entry.capabilities.responses === 'only')).toBe(1)
    expect(count((entry) => entry.capabilities.responses === 'translated')).toBe(1)
    for (const entry of entries) expect(['native', 'translated', 'only']).toContain(entry.capabilities.responses)
  })

  test('8 decision-capable; 5 can host a decisioner and each of them is decision-capable', () => {
    expect(count((entry) => entry.decisions)).toBe(8)
    const hosts = entries.filter((entry) => entry.capabilities.decisioner)
    expect(hosts).toHaveLength(5)
    for (const host of hosts) expect(host.decisions).toBe(true)
  })

  test('exactly 1 entry has config_fields: account_id (required) and gateway_id (optional, default "default")', () => {
    const withFields = entries.filter((entry) => 'config_fields' in entry && entry.config_fields !== undefined)
    expect(withFields).toHaveLength(1)
    expect((withFields[0] as { config_fields: unknown }).config_fields).toEqual([
      { name: 'account_id', required: true },
      { name: 'gateway_id', required: false, default: 'default' },
    ])
  })

  test("exactly 1 entry has the top_p quirk (omit_params ['top_p']); the others omit nothing", () => {
    const quirky = entries.filter((entry) => entry.capabilities.omit_params.length > 0)
    expect(quirky).toHaveLength(1)
    expect(quirky[0]!.capabilities.omit_params).toEqual(['top_p'])
  })

  test('each entry has the capability fields of CONTRACT §6 with the right types', () => {
    for (const entry of entries) {
      expect(typeof entry.routable).toBe('boolean')
      expect(typeof entry.decisions).toBe('boolean')
      expect(typeof entry.base_url).toBe('string')
      expect(typeof entry.auth_header).toBe('string')
      expect(Object.keys(entry.capabilities).sort()).toEqual(
        ['batch', 'chain', 'chat', 'decisioner', 'embeddings', 'omit_params', 'responses', 'retrieve'].sort(),
      )
      for (const name of ['chat', 'embeddings', 'chain', 'retrieve', 'batch', 'decisioner'] as const) {
        expect(typeof entry.capabilities[name]).toBe('boolean')
      }
      expect(Array.isArray(entry.capabilities.omit_params)).toBe(true)
    }
  })
})

describe('RT_GATEWAY_URL_<SLUG> override (CONTRACT §4)', () => {
  test('slug is the id upper-cased with every non-alphanumeric character as _', () => {
    expect(gatewayOverrideSlug('openai')).toBe('OPENAI')
    expect(gatewayOverrideSlug('cloudflare-ai-gateway')).toBe('CLOUDFLARE_AI_GATEWAY')
    expect(gatewayOverrideSlug('openai-responses')).toBe('OPENAI_RESPONSES')
    for (const gateway of gatewayCatalog) expect(gatewayOverrideSlug(gateway.id)).toMatch(/^[A-Z0-9_]+$/)
  })

  test('an override from the environment replaces only that gateway kind', () => {
    const config = loadConfig({ RT_GATEWAY_URL_OPENAI_RESPONSES: 'http://127.0.0.1:9999/mock', RT_GATEWAY_URL_VERCEL_AI_GATEWAY: 'http://127.0.0.1:9998/v' })
    const byId = new Map(gatewayCatalog.map((gateway) => [gateway.id, describeGateway(gateway, config.gatewayUrlOverrides)]))
    expect(byId.get('openai-responses')!.base_url).toBe('http://127.0.0.1:9999/mock')
    expect(byId.get('vercel-ai-gateway')!.base_url).toBe('http://127.0.0.1:9998/v')
    // The plain `openai` kind shares no slug with `openai-responses`.
    expect(byId.get('openai')!.base_url).toBe(findGateway('openai')!.baseUrl)
    expect(resolveBaseUrl(findGateway('openai')!, config.gatewayUrlOverrides)).toBe(findGateway('openai')!.baseUrl)
  })
})
