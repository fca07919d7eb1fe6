/** Management calls the tests repeat: store a provider key, create an inference key (each must answer 201). */
import { expect } from 'bun:test'
import type { TestServer } from './server'

export async function storeProvider(server: TestServer, body: Record<string, unknown>, managementKey?: string | null): Promise<any> {
  const response = await server.call('POST', '/api/v1/providers', body, managementKey)
  expect(response.status).toBe(201)
  return response.body.data
}

export async function createInferenceKey(server: TestServer, body: Record<string, unknown> = {}, managementKey?: string | null): Promise<any> {
  const response = await server.call('POST', '/api/v1/keys', body, managementKey)
  expect(response.status).toBe(201)
  return response.body.data
}

export interface CallResult {
  status: number
  headers: Headers
  text: string
  /** The parsed body, or undefined when it is not JSON. */
  json: any
}

/** One HTTP call to the server: a string body goes as-is, anything else as JSON. */
export async function httpCall(server: TestServer, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<CallResult> {
  const response = await fetch(server.rootUrl + path, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  return readCallResult(response)
}

/** A response read whole: its text, and the text parsed when it is JSON. */
export async function readCallResult(response: Response): Promise<CallResult> {
  const text = await response.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: response.status, headers: response.headers, text, json }
}

/** Authorization for an inference key, or none. */
export const bearerHeader = (secret: string | null | undefined): Record<string, string> => (secret ? { authorization: `Bearer ${secret}` } : {})
