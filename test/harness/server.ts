/**
 * Test harness: the real app on a loopback port (port 0) over a real SQLite file in a temp dir.
 * `await using server = await startTestServer()` tears everything down at scope end.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/env'
import { createRuntime, enableTracing, type Runtime } from '../../src/runtime'
import { buildApp, createErrorHandler, createFetchHandler } from '../../src/app'
import { dashboardPageRoutes } from '../../src/api/dashboard'
import { createWorkspace } from '../../src/management/workspaces'
import { silentLogger } from '../../src/observability/logger'
import { requestJournalDirectory } from '../../src/storage/request-journal'

export const testMasterKey = Buffer.alloc(32, 7).toString('base64')

export interface TestServer extends AsyncDisposable {
  /** e.g. http://127.0.0.1:PORT */
  rootUrl: string
  appUrl: string
  baseUrl: string
  dataDir: string
  runtime: Runtime
  /** Full-access management key of the `default` test workspace. */
  managementKey: string
  workspaceId: string
  /** fetch against the root URL with the management key unless other headers are given. */
  api(path: string, init?: RequestInit & { json?: unknown; key?: string | null }): Promise<Response>
  /** Same as api(), returning `{status, body}` with the JSON body parsed. */
  call<T = any>(method: string, path: string, json?: unknown, key?: string | null): Promise<{ status: number; body: T; headers: Headers }>
  env: Record<string, string>
}

export async function startTestServer(environment: Record<string, string> = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'router-test-'))
  const env: Record<string, string> = { RT_DATA_DIR: dataDir, RT_MASTER_KEY: testMasterKey, PORT: '0', ...environment }
  const config = loadConfig(env)
  const runtime = createRuntime(config, { logger: silentLogger })
  await enableTracing(runtime)
  // As src/main.ts does before it listens: rows are journaled (and a journal left there replayed).
  runtime.logQueue.openJournal(requestJournalDirectory(config.dataDir))
  const created = createWorkspace(runtime, 'default')
  const app = buildApp(runtime)
  const server = Bun.serve({
    // `HOST` as the service reads it ('::' listens on IPv6 and IPv4 alike); loopback otherwise.
    hostname: environment.HOST ?? '127.0.0.1',
    port: 0,
    development: false,
    routes: dashboardPageRoutes(config),
    fetch: createFetchHandler(app, runtime),
    error: createErrorHandler(runtime),
  })
  const rootUrl = `http://127.0.0.1:${server.port}`

  const api: TestServer['api'] = (path, init = {}) => {
    const headers = new Headers(init.headers)
    const key = init.key === undefined ? created.management_key : init.key
    if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`)
    let body = init.body
    if (init.json !== undefined) {
      body = JSON.stringify(init.json)
      if (!headers.has('content-type')) headers.set('content-type', 'application/json')
    }
    return fetch(rootUrl + path, { ...init, headers, body })
  }
  const call: TestServer['call'] = async (method, path, json, key) => {
    const response = await api(path, { method, json, key })
    const text = await response.text()
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: response.status, body: body as never, headers: response.headers }
  }

  return {
    rootUrl,
    appUrl: `${rootUrl}/api/v1`,
    baseUrl: `${rootUrl}/v1`,
    dataDir,
    runtime,
    managementKey: created.management_key,
    workspaceId: created.workspace.id,
    api,
    call,
    env,
    async [Symbol.asyncDispose]() {
      await server.stop(true)
      runtime.logQueue.stop()
      runtime.limiter.stop()
      await runtime.tracing?.shutdown().catch(() => undefined)
      runtime.mcpServers.close()
      runtime.snapshots.close()
      runtime.reads.close()
      await runtime.cache?.close()
      runtime.storage.close()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
