/**
 * Usage queries never run on the serving thread (issue: "they must never block the event loop
 * that serves inference"): with the serving connection's usage queries made to throw, the REST
 * usage endpoints and the MCP usage tools still answer, from the usage thread's own connection,
 * and see the rows the log flush committed.
 */
import { expect, test } from 'bun:test'
import { startTestServer } from '../harness/server'
import { createInferenceKey } from '../harness/api'

test('GET /usage/summary|series|breakdown and the MCP usage tools answer from the usage thread', async () => {
  await using server = await startTestServer()
  const key = await createInferenceKey(server)
  const now = Date.now()
  server.runtime.repositories.requestLogs.insertMany(
    Array.from({ length: 5 }, (_, index) => ({
      id: crypto.randomUUID(),
      workspaceId: server.workspaceId,
      keyId: key.id,
      createdAt: now - index * 60_000,
      endpoint: 'chat',
      gateway: 'openai',
      model: 'openai/gpt-4o-mini',
      status: index === 0 ? 502 : 200,
      stream: false,
      latencyMs: 100,
      overheadMs: 0.5,
      attempts: 1,
    })),
  )
  const logs = server.runtime.repositories.requestLogs
  const onServingThread = () => {
    throw new Error('a usage query ran on the serving thread')
  }
  logs.summary = onServingThread
  logs.series = onServingThread
  logs.breakdown = onServingThread

  const summary = await server.call('GET', '/api/v1/usage/summary?range=24h')
  expect(summary.status).toBe(200)
  expect(summary.body.data).toMatchObject({ requests: 5, errors: 1, errorRate: 20, avgLatency: 100, avgOverhead: 0.5, models: 1 })
  const series = await server.call('GET', `/api/v1/usage/series?range=24h&api_key_id=${key.id}`)
  expect(series.status).toBe(200)
  expect((series.body.data as { requests: number }[]).reduce((sum, bucket) => sum + bucket.requests, 0)).toBe(5)
  const breakdown = await server.call('GET', '/api/v1/usage/breakdown?by=gateway&range=24h')
  // Rows written without a cost: each unknown, none counted as $0, so the name's cost is unknown (null).
  expect(breakdown.body.data).toEqual([{ name: 'openai', requests: 5, cost_usd: null, unpriced_requests: 5 }])
  // Refusals are still the management rule's, before any query.
  expect((await server.call('GET', '/api/v1/usage/breakdown?by=nothing')).status).toBe(400)

  const mcp = await fetch(`${server.rootUrl}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_usage_summary', arguments: { range: '24h' } } },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_usage_breakdown', arguments: { by: 'model', range: '24h' } } },
    ]),
  })
  expect(mcp.status).toBe(200)
  const answers = (await mcp.json()) as { id: number; result: { content: { text: string }[]; isError?: boolean } }[]
  expect(answers.map((answer) => answer.id)).toEqual([1, 2])
  expect(JSON.parse(answers[0]!.result.content[0]!.text)).toMatchObject({ requests: 5, errors: 1 })
  expect(JSON.parse(answers[1]!.result.content[0]!.text)).toEqual([{ name: 'openai/gpt-4o-mini', requests: 5, cost_usd: null, unpriced_requests: 5 }])
})
