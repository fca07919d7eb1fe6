/**
 * GET /metrics after real requests through mock gateways (CONTRACT §8): `router_tokens_total`
 * appears with the serving gateway, the model as sent to it and the direction, and the whole output
 * keeps the Prometheus conventions (checked in JS, and by `promtool` when it is installed).
 */
import { describe, expect, test } from 'bun:test'
import type { TestServer } from '../harness/server'
import { bearerHeader, createInferenceKey, httpCall } from '../harness/api'
import { startGateways } from '../harness/gateways'
import { parseExposition, promtoolFindings, type Sample } from '../harness/prometheus'

const A = 'openai'
const B = 'groq'

const chat = (server: TestServer, secret: string, body: Record<string, unknown> = {}) =>
  httpCall(server, 'POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...body }, bearerHeader(secret))

async function scrape(server: TestServer) {
  const response = await fetch(`${server.rootUrl}/metrics`)
  expect(response.status).toBe(200)
  const text = await response.text()
  return { text, ...parseExposition(text) }
}

/** The router_tokens_total samples as `gateway model direction` → value. */
function tokenSamples(samples: Sample[] | undefined): Record<string, number> {
  const byLabels: Record<string, number> = {}
  for (const sample of samples ?? []) {
    expect(Object.keys(sample.labels).sort()).toEqual(['direction', 'gateway', 'model'])
    byLabels[`${sample.labels.gateway} ${sample.labels.model} ${sample.labels.direction}`] = sample.value
  }
  return byLabels
}

describe('GET /metrics after real requests', () => {
  test('router_tokens_total counts the tokens of finished requests by serving gateway, upstream model and direction', async () => {
    await using env = await startGateways([A, B])
    const { server, mocks, providers } = env
    const failingFirst = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: providers[A] }, { provider_key_id: providers[B] }] } })

    // Before any request the family is declared and empty.
    const empty = await scrape(server)
    expect(empty.problems).toEqual([])
    expect(empty.families.get('router_tokens_total')?.type).toBe('counter')
    expect(empty.families.get('router_tokens_total')?.samples).toEqual([])

    // A buffered chat that fails over: only the gateway that answered is counted (usage 11 + 7).
    mocks[A]!.handle((request) => (request.path.endsWith('/chat/completions') ? { status: 500, json: { error: { message: 'down' } } } : undefined))
    const failedOver = await chat(server, failingFirst.key)
    expect(failedOver.status).toBe(200)
    expect(failedOver.headers.get('x-router-provider')).toBe(B)
    // A stream through the same route: the mock's final chunk carries usage 11 + 3.
    const streamed = await chat(server, failingFirst.key, { stream: true, stream_options: { include_usage: true } })
    expect(streamed.status).toBe(200)
    expect(streamed.text).toContain('[DONE]')

    // With a crawled catalog, openai receives its own spelling, and the label is that spelling.
    mocks[A]!.handle(() => undefined)
    server.runtime.repositories.gatewayCatalogs.replaceCatalog(A, Date.now(), [{ modelId: 'gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: '{}' }])
    const direct = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: providers[A] }] } })
    expect((await chat(server, direct.key)).status).toBe(200)
    expect(mocks[A]!.calls('/chat/completions').at(-1)!.body.model).toBe('gpt-4o-mini')

    // A translated request (messages dialect in, chat upstream) is counted the same way.
    const messagesKey = await createInferenceKey(server, { api_shape: 'messages', routing: { targets: [{ provider_key_id: providers[A] }] } })
    const message = await httpCall(
      server,
      'POST',
      '/v1/messages',
      { model: 'openai/gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-api-key': messagesKey.key, 'anthropic-version': '2023-06-01' },
    )
    expect(message.status).toBe(200)
    expect(message.json.usage).toEqual(expect.objectContaining({ input_tokens: 11, output_tokens: 7 }))

    // An answer without token counts (an upstream error relayed) adds nothing.
    mocks[A]!.handle((request) => (request.path.endsWith('/chat/completions') ? { status: 400, json: { error: { message: 'bad body' } } } : undefined))
    expect((await chat(server, direct.key)).status).toBe(400)

    const after = await scrape(server)
    expect(after.problems).toEqual([])
    expect(tokenSamples(after.families.get('router_tokens_total')?.samples)).toEqual({
      'groq openai/gpt-4o-mini prompt': 22,
      'groq openai/gpt-4o-mini completion': 10,
      'openai gpt-4o-mini prompt': 22,
      'openai gpt-4o-mini completion': 14,
    })
    // The latency histograms are in seconds under their new names.
    expect(after.families.get('router_upstream_latency_seconds')?.type).toBe('histogram')
    expect(after.families.get('router_added_latency_seconds')?.type).toBe('histogram')
    expect([...after.families.keys()].some((name) => name.endsWith('_ms'))).toBe(false)

    const findings = await promtoolFindings(after.text)
    if (findings) {
      expect(findings.output).toBe('')
      expect(findings.exitCode).toBe(0)
    }
  })
})
