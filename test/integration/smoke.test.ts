import { describe, expect, test } from 'bun:test'
import { startTestServer } from '../harness/server'

describe('health', () => {
  test('GET /healthz needs no auth and answers {ok:true}', async () => {
    await using server = await startTestServer()
    const response = await fetch(`${server.rootUrl}/healthz`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ ok: true })
  })
})
