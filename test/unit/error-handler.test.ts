/** Bun.serve's last guard (src/app.ts createErrorHandler): a 500 in the chat envelope, with a request id, logged. */
import { expect, test } from 'bun:test'
import type { AppDeps } from '../../src/api/deps'
import { createErrorHandler } from '../../src/app'

test('an error that escaped every route is answered 500 internal with the router headers, and logged', async () => {
  const logged: { event: string; fields: Record<string, unknown> }[] = []
  const record = (event: string, fields: Record<string, unknown> = {}) => void logged.push({ event, fields })
  const deps = { logger: { debug: record, info: record, warn: record, error: record } } as unknown as AppDeps
  const response = createErrorHandler(deps)(new Error('boom'))
  expect(response.status).toBe(500)
  expect(response.headers.get('content-type')).toContain('application/json')
  expect(response.headers.get('x-router-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  expect(response.headers.get('x-router-attempts')).toBe('0')
  const body = (await response.json()) as { error: { code: string; message: string } }
  expect(body.error.code).toBe('internal')
  expect(body.error.message).not.toContain('boom')
  expect(logged).toEqual([{ event: 'unhandled_error', fields: { error: 'boom' } }])
})
