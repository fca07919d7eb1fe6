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
