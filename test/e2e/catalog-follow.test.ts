/**
 * Catalogs that follow keys (scheduler/catalog-follow.ts). When a provider key arrives for a
 * gateway kind that has no catalog, or is switched back on while its kind's catalog is stale, the
 * service crawls that kind within seconds, on the scheduler's thread. The write that added the key
 * does not wait for the crawl. Canonical ids are then spelled for the gateway (SPEC "Model ids").
 * A kind whose listing fails is not asked again at once. The daily crawl keeps its schedule.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { startService, tempDir } from '../harness/service-process'
import { startMockGateway, type MockGateway } from '../harness/mock-gateway'
import { until } from '../harness/until'

const mocks: MockGateway[] = []
afterEach(async () => {
  for (const mock of mocks.splice(0)) await mock.close()
})

async function mockGateway(models: string[]) {
  const mock = await startMockGateway({ models })
  mocks.push(mock)
  return mock
}


describe('catalogs follow provider keys', () => {
  test('a new kind is crawled within seconds, after its write answered; the first request is spelled for the gateway', async () => {
    const openai = await mockGateway(['gpt-4o-mini', 'gpt-4.1'])
    const groq = await mockGateway(['llama-3.1-8b-instant'])
    // The listing waits until the test lets it go: the provider write must answer before it.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    openai.handle(async (request) => {
      if (request.path.endsWith('/models')) await released
      return undefined
    })
    groq.handle((request) => (request.path.endsWith('/models') ? { status: 500, json: { error: { message: 'listing is down' } } } : undefined))
    const dataDir = tempDir()
    const service = startService(dataDir, { RT_LOG_LEVEL: 'warn', RT_GATEWAY_URL_OPENAI: openai.url, RT_GATEWAY_URL_GROQ: groq.url })
    const { rootUrl } = await service.listening()
    const managementKey = await service.managementKey()
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${rootUrl}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${managementKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: response.status, json: (await response.json()) as any }
    }
    const database = new Database(join(dataDir, 'router.db'))
    const dailyCrawlAt = () => (database.query("select next_run_at as at from job_leases where job = 'catalog-crawl'").get() as { at: number } | null)?.at
    const scheduledAt = await until('the daily crawl is scheduled', () => dailyCrawlAt())

    const provider = await api('POST', '/providers', { gateway: 'openai', key: 'sk-follow-0123456789' })
    expect(provider.status).toBe(201)
    // The write answered while the crawl it set off was still waiting for the listing.
    await until('the crawl asks for the listing', () => (openai.calls('/models').length === 1 ? true : undefined))
    const key = await api('POST', '/keys', { name: 'follow', routing: { targets: [{ provider_key_id: provider.json.data.id }] } })
    expect(key.status).toBe(201)
    const chat = async () => {
      const response = await fetch(`${rootUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.json.data.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      })
      expect(response.status).toBe(200)
      await response.arrayBuffer()
      return openai.calls('/chat/completions').at(-1)!.body.model as string
    }
    // No catalog yet: the canonical id goes as it is (SPEC: a model no catalog knows is forwarded untouched).
    expect(await chat()).toBe('openai/gpt-4o-mini')
    const letGo = Date.now()
    release()
    await until('the request is spelled for the gateway', async () => ((await chat()) === 'gpt-4o-mini' ? true : undefined))
    expect(Date.now() - letGo).toBeLessThan(5000)
    expect(openai.calls('/models')).toHaveLength(1)
    // The crawl was narrowed to the kind that needed it, and the daily crawl kept its time.
    expect(dailyCrawlAt()).toBe(scheduledAt)

    // A kind whose listing fails is asked once, not again at every write (retried a minute later).
    const groqProvider = await api('POST', '/providers', { gateway: 'groq', key: 'gsk-follow-0123456789' })
    expect(groqProvider.status).toBe(201)
    await until('groq is asked for its listing', () => (groq.calls('/models').length === 1 ? true : undefined))
    for (let index = 0; index < 5; index++) expect((await api('PATCH', `/providers/${groqProvider.json.data.id}`, { label: `try ${index}` })).status).toBe(200)
    await Bun.sleep(1500)
    expect(groq.calls('/models')).toHaveLength(1)

    // Switched off, the catalog ages past a day, switched back on: crawled again at once.
    expect((await api('PATCH', `/providers/${provider.json.data.id}`, { disabled: true })).status).toBe(200)
    database.run("update gateway_catalogs set fetched_at = fetched_at - 2 * 86400000 where gateway = 'openai'")
    await Bun.sleep(1500)
    expect(openai.calls('/models')).toHaveLength(1)
    expect((await api('PATCH', `/providers/${provider.json.data.id}`, { disabled: false })).status).toBe(200)
    await until('the stale catalog is crawled again', () => (openai.calls('/models').length === 2 ? true : undefined))
    const fetchedAt = await until('the catalog is fresh', () => {
      const row = database.query("select fetched_at as at from gateway_catalogs where gateway = 'openai'").get() as { at: number }
      return Date.now() - row.at < 60_000 ? row.at : undefined
    })
    expect(fetchedAt).toBeGreaterThan(letGo)
    database.close()
    expect(await service.stop()).toBe(0)
  }, 30_000)
})
