import { describe, expect, test } from 'bun:test'
import { startTestServer } from '../harness/server'

describe('app host pages outside /api/v1', () => {
  test('GET /api/model-map serves the live model translation table from the crawled catalogs', async () => {
    await using server = await startTestServer()
    const fresh = Date.now() - 3_600_000
    server.runtime.repositories.gatewayCatalogs.replaceCatalog('openai', fresh, [
      { modelId: 'gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: '{}' },
      { modelId: 'gpt-4.1', canonicalId: 'openai/gpt-4.1', object: '{}' },
    ])
    server.runtime.repositories.gatewayCatalogs.replaceCatalog('groq', Date.now() - 100 * 3_600_000, [
      { modelId: 'llama-3.1-8b-instant', canonicalId: 'meta-llama/llama-3.1-8b-instant', object: '{}' },
    ])
    const response = await fetch(`${server.rootUrl}/api/model-map`)
    expect(response.status).toBe(200)
    const { data } = (await response.json()) as { data: any[] }
    const openai = data.find((entry) => entry.gateway === 'openai')
    expect(openai.stale).toBe(false)
    expect(openai.fetched_at).toBe(new Date(fresh).toISOString())
    expect(openai.models).toEqual([
      { id: 'gpt-4.1', canonical_id: 'openai/gpt-4.1' },
      { id: 'gpt-4o-mini', canonical_id: 'openai/gpt-4o-mini' },
    ])
    // Older than 72 hours: listed, but marked stale (never taken as evidence a model is missing).
    expect(data.find((entry) => entry.gateway === 'groq').stale).toBe(true)
  })

  test('GET /api/model-map shows the prices a catalog lists (USD per token, string or number); a price not listed is unknown (null or absent), never zero', async () => {
    await using server = await startTestServer()
    server.runtime.repositories.gatewayCatalogs.replaceCatalog('openrouter', Date.now(), [
      { modelId: 'openai/gpt-4o-mini', canonicalId: 'openai/gpt-4o-mini', object: JSON.stringify({ id: 'openai/gpt-4o-mini', pricing: { prompt: '0.00000015', completion: 6e-7 } }) },
      { modelId: 'openai/gpt-4.1', canonicalId: 'openai/gpt-4.1', object: JSON.stringify({ id: 'openai/gpt-4.1', pricing: { prompt: '0.000002' } }) },
      { modelId: 'openrouter/auto', canonicalId: 'openrouter/auto', object: JSON.stringify({ id: 'openrouter/auto', pricing: { prompt: '-1', completion: '-1' } }) },
      { modelId: 'meta-llama/llama-3.1-8b-instruct', canonicalId: 'meta-llama/llama-3.1-8b-instruct', object: JSON.stringify({ id: 'meta-llama/llama-3.1-8b-instruct' }) },
    ])
    const { data } = (await (await fetch(`${server.rootUrl}/api/model-map`)).json()) as { data: any[] }
    const models = Object.fromEntries(data.find((entry) => entry.gateway === 'openrouter').models.map((model: any) => [model.id, model]))
    expect(models['openai/gpt-4o-mini'].pricing).toEqual({ prompt: 0.00000015, completion: 6e-7 })
    expect(models['openai/gpt-4.1'].pricing).toEqual({ prompt: 0.000002, completion: null })
    // OpenRouter's -1 ("variable") and a model without pricing: unknown.
    expect(models['openrouter/auto'].pricing).toBeUndefined()
    expect(models['meta-llama/llama-3.1-8b-instruct'].pricing).toBeUndefined()
  })

  test('GET / serves the dashboard page with its script and stylesheet from this origin (no CDN), and no secret', async () => {
    await using server = await startTestServer()
    const response = await fetch(`${server.rootUrl}/`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/html')
    const html = await response.text()
    expect(html).toContain('<div id="app">')
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!)
    expect(assets.length).toBeGreaterThanOrEqual(2)
    for (const asset of assets) {
      // Relative to this origin (the script, the stylesheet, the icon): the page loads nothing from elsewhere.
      expect(asset.startsWith('/')).toBe(true)
      const loaded = await fetch(`${server.rootUrl}${asset}`)
      expect(loaded.status).toBe(200)
      expect(loaded.headers.get('content-type')).toMatch(/javascript|css|image\/svg\+xml/)
      const text = await loaded.text()
      expect(text).not.toMatch(/https?:\/\/(?!127\.0\.0\.1|localhost|www\.w3\.org)[a-z0-9.-]+\.[a-z]{2,}\/[^"'\s]*\.(js|css|woff2?)/i)
    }
    expect(html).not.toContain(server.managementKey)
  })

  test('the proxy role serves neither the dashboard nor the model map', async () => {
    await using server = await startTestServer({ RT_ROLE: 'proxy' })
    expect((await fetch(`${server.rootUrl}/`)).status).toBe(404)
    expect((await fetch(`${server.rootUrl}/api/model-map`)).status).toBe(404)
    expect((await fetch(`${server.rootUrl}/dashboard/api/session`, { headers: { authorization: `Bearer ${server.managementKey}` } })).status).toBe(404)
  })
})
