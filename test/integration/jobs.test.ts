/**
 * The scheduled jobs run once from the CLI (CONTRACT §5 `jobs run NAME`): the model-catalog crawl
 * feeds the not-listed rule of a running server, and the budget learner sets the failover timeout.
 */
import { describe, expect, test } from 'bun:test'
import { resolve } from 'node:path'
import { startTestServer, type TestServer } from '../harness/server'
import { startMockGateway } from '../harness/mock-gateway'
import { createInferenceKey, storeProvider } from '../harness/api'
import { histogramOf, nextBudget } from '../../src/scheduler/jobs/budget-learn'

const repoRoot = resolve(import.meta.dir, '../..')

async function runJob(server: TestServer, name: string, extraEnvironment: Record<string, string> = {}) {
  const environment: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('RT_')) environment[key] = value
  const child = Bun.spawn(['bun', 'run', 'src/cli/index.ts', 'jobs', 'run', name], {
    cwd: repoRoot,
    env: { ...environment, ...server.env, ...extraEnvironment },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { exitCode, stdout, stderr }
}

const chat = (server: TestServer, secret: string, model: string, stream = false) =>
  fetch(`${server.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream }),
  })

describe('jobs run catalog-crawl', () => {
  test('crawls each gateway kind with a provider key, and a running server routes on the new catalogs at once', async () => {
    await using openai = await startMockGateway({ models: ['gpt-4o-mini', 'gpt-4.1'] })
    await using groq = await startMockGateway({ models: ['llama-3.1-8b-instant'] })
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: openai.url, RT_GATEWAY_URL_GROQ: groq.url })
    const first = await storeProvider(server, { gateway: 'groq', key: 'gsk-upstream-secret-1' })
    const second = await storeProvider(server, { gateway: 'openai', key: 'sk-upstream-secret-2' })
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: first.id }, { provider_key_id: second.id }] } })

    // Before the crawl no catalog knows the model: it goes to the first target untouched.
    expect((await chat(server, key.key, 'openai/gpt-4o-mini')).status).toBe(200)
    expect(groq.calls('/chat/completions')).toHaveLength(1)
    expect(groq.calls('/chat/completions')[0]!.body.model).toBe('openai/gpt-4o-mini')

    const result = await runJob(server, 'catalog-crawl')
    expect(result.exitCode).toBe(0)
    const printed = JSON.parse(result.stdout)
    expect(printed).toEqual({ job: 'catalog-crawl', gateways: { openai: { models: 2 }, groq: { models: 1 } } })
    // The crawl used each gateway's stored secret on GET …/models.
    expect(openai.calls('/models')[0]!.headers.authorization).toBe('Bearer sk-upstream-secret-2')

    // Now groq's fresh catalog lacks the model that openai lists: groq is skipped without a call,
    // and openai receives its own spelling.
    const response = await chat(server, key.key, 'openai/gpt-4o-mini')
    expect(response.status).toBe(200)
    expect(response.headers.get('x-router-failover')).toBe('groq:not-listed')
    expect(response.headers.get('x-router-attempts')).toBe('1')
    expect(groq.calls('/chat/completions')).toHaveLength(1)
    expect(openai.calls('/chat/completions').at(-1)!.body.model).toBe('gpt-4o-mini')

    // GET /api/model-map shows the crawled table.
    const map = (await (await fetch(`${server.rootUrl}/api/model-map`)).json()) as { data: { gateway: string; models: { id: string; canonical_id: string }[] }[] }
    expect(map.data.find((entry) => entry.gateway === 'openai')!.models).toContainEqual({ id: 'gpt-4o-mini', canonical_id: 'openai/gpt-4o-mini' })
  })

  test('a gateway whose listing fails keeps its previous catalog and is reported', async () => {
    await using openai = await startMockGateway({ handler: (request) => (request.path.endsWith('/models') ? { status: 503, json: { error: { message: 'down' } } } : undefined) })
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: openai.url })
    await storeProvider(server, { gateway: 'openai', key: 'sk-upstream-secret-3' })
    const result = await runJob(server, 'catalog-crawl')
    expect(result.exitCode).toBe(0)
    expect(JSON.parse(result.stdout).gateways.openai.error).toContain('503')
    expect(server.runtime.repositories.gatewayCatalogs.listCatalogs()).toHaveLength(0)
  })
})

describe('jobs run budget-learn', () => {
  test('the learned budget is twice the p95 first-byte time, within 5–15 s, moving at most 3 s a run', () => {
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 1000)), undefined)).toBe(5000)
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 4000)), undefined)).toBe(8000)
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 4000)), 5000)).toBe(8000)
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 7000)), 5000)).toBe(8000)
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 20000)), 14000)).toBe(15000)
    expect(nextBudget(histogramOf(Array.from({ length: 100 }, () => 100)), 12000)).toBe(9000)
  })

  test("learns from streamed requests' first byte only: buffered answers, errors and rows older than 14 days do not count", async () => {
    await using server = await startTestServer()
    const now = Date.now()
    const rows = (count: number, gateway: string, fields: { stream: boolean; ttfbMs: number; status?: number; ageMs?: number; workspaceId?: string }) =>
      Array.from({ length: count }, (_, index) => ({
        id: `${gateway}-${fields.stream}-${fields.ttfbMs}-${index}`,
        workspaceId: fields.workspaceId ?? server.workspaceId,
        createdAt: now - (fields.ageMs ?? 0) - index * 60_000,
        endpoint: 'chat',
        gateway,
        status: fields.status ?? 200,
        stream: fields.stream,
        latencyMs: fields.ttfbMs + 500,
        ttfbMs: fields.ttfbMs,
      }))
    server.runtime.repositories.requestLogs.insertMany([
      // openai: 40 streams whose first byte came at 3 s (in two workspaces), beside 200 buffered
      // answers of 12 s each (their time is the whole answer's), 30 failed streams at 9 s and 30
      // streams at 9 s from 15 days ago. Only the 40 count: p95 3 s, budget 6 s.
      ...rows(30, 'openai', { stream: true, ttfbMs: 3000 }),
      ...rows(10, 'openai', { stream: true, ttfbMs: 3000, workspaceId: '' }),
      ...rows(200, 'openai', { stream: false, ttfbMs: 12_000 }),
      ...rows(30, 'openai', { stream: true, ttfbMs: 9000, status: 502 }),
      ...rows(30, 'openai', { stream: true, ttfbMs: 9000, ageMs: 15 * 86_400_000 }),
      // groq: 19 streams, too few to learn from, however many buffered answers there are.
      ...rows(19, 'groq', { stream: true, ttfbMs: 4000 }),
      ...rows(100, 'groq', { stream: false, ttfbMs: 4000 }),
    ])
    const result = await runJob(server, 'budget-learn')
    expect(result.exitCode).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ job: 'budget-learn', budgets: { openai: 6000 } })
    expect(server.runtime.repositories.gatewayCatalogs.listBudgets()).toEqual([expect.objectContaining({ gateway: 'openai', ttfbBudgetMs: 6000 })])
  })

  test('learns from the request log and the running server uses the budget as the failover timeout', async () => {
    await using slow = await startMockGateway()
    await using fast = await startMockGateway()
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: slow.url, RT_GATEWAY_URL_GROQ: fast.url })
    const slowProvider = await storeProvider(server, { gateway: 'openai', key: 'sk-upstream-secret-4' })
    const fastProvider = await storeProvider(server, { gateway: 'groq', key: 'gsk-upstream-secret-5' })
    // 14 days of first-byte times around 4 s for openai: the budget becomes 8 s after one run.
    const now = Date.now()
    server.runtime.repositories.requestLogs.insertMany(
      Array.from({ length: 50 }, (_, index) => ({
        id: `seed-${index}`,
        workspaceId: server.workspaceId,
        createdAt: now - index * 60_000,
        endpoint: 'chat',
        gateway: 'openai',
        status: 200,
        stream: true,
        latencyMs: 4100,
        ttfbMs: 4000,
      })),
    )
    const result = await runJob(server, 'budget-learn')
    expect(result.exitCode).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ job: 'budget-learn', budgets: { openai: 8000 } })
    expect(server.runtime.repositories.gatewayCatalogs.listBudgets()).toEqual([expect.objectContaining({ gateway: 'openai', ttfbBudgetMs: 8000 })])

    // A streaming request: no target ttfb_ms and no key value, so the learned 8 s applies to openai
    // (first of two targets). A first byte after 5.5 s is therefore waited for, not failed over
    // as the 5 s default would.
    slow.handle((request) => (request.path.endsWith('/chat/completions') ? { delayMs: 5500, sse: ['[DONE]'] } : undefined))
    const key = await createInferenceKey(server, { routing: { targets: [{ provider_key_id: slowProvider.id }, { provider_key_id: fastProvider.id }] } })
    const response = await chat(server, key.key, 'openai/gpt-4o-mini', true)
    expect(response.status).toBe(200)
    expect(response.headers.get('x-router-provider')).toBe('openai')
    expect(response.headers.get('x-router-failover')).toBeNull()
    await response.text()
    expect(fast.calls('/chat/completions')).toHaveLength(0)
  }, 20_000)
})
