/**
 * The API docs (issue 10, items 7 and 8): GET /api/v1/docs loads its viewer from this server only and
 * points it at /api/v1/openapi.json; the document is valid OpenAPI 3.0.3, checked against the official
 * 3.0 JSON schema by @apidevtools/swagger-parser, and documents the statuses the routes really answer.
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import SwaggerParser from '@apidevtools/swagger-parser'
import { createManagementKey } from '../../src/management/workspaces'
import { startTestServer, type TestServer } from '../harness/server'

const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const

interface Operation {
  method: string
  path: string
  operation: Record<string, any>
}

async function fetchDocument(server: TestServer): Promise<Record<string, any>> {
  const response = await fetch(`${server.rootUrl}/api/v1/openapi.json`)
  expect(response.status).toBe(200)
  return (await response.json()) as Record<string, any>
}

/** The one inference path the document carries (CONTRACT §9 leaves its fields to the service); the rest is the management API. */
const inferencePath = '/v1/decisions'

/** The management API's operations (every path under /api/v1). */
function operationsOf(document: Record<string, any>): Operation[] {
  return allOperationsOf(document).filter(({ path }) => path !== inferencePath)
}

function allOperationsOf(document: Record<string, any>): Operation[] {
  const operations: Operation[] = []
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
    for (const method of methods) if (item[method]) operations.push({ method, path, operation: item[method] })
  }
  return operations
}

/** The page's `src`/`href` references, by tag. */
function references(html: string, tag: 'script' | 'link'): string[] {
  const found: string[] = []
  for (const element of html.match(new RegExp(`<${tag}\\b[^>]*>`, 'gi')) ?? []) {
    if (tag === 'link' && !/\brel=["']?stylesheet/i.test(element)) continue
    const address = element.match(/\b(?:src|href)=["']([^"']+)["']/i)?.[1]
    if (address) found.push(address)
  }
  return found
}

describe('GET /api/v1/docs', () => {
  test('loads nothing from another host: every script and stylesheet comes from this server with its content type', async () => {
    await using server = await startTestServer()
    const docsUrl = `${server.rootUrl}/api/v1/docs`
    const response = await fetch(docsUrl)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/html')
    const html = await response.text()

    const ownHost = new URL(server.rootUrl).host
    const foreign = (html.match(/(?:https?:)?\/\/[^\s"'<>()]+/gi) ?? []).filter((address) => {
      // Protocol-relative and absolute URLs alike; XML namespaces are not requests, but the page has none.
      const url = new URL(address.startsWith('//') ? `http:${address}` : address)
      return url.host !== ownHost
    })
    expect(foreign).toEqual([])
    // The browser is told so too: the page may load from its own origin only.
    expect(response.headers.get('content-security-policy') ?? '').toContain("default-src 'self'")

    const scripts = references(html, 'script')
    const stylesheets = references(html, 'link')
    expect(scripts.length).toBeGreaterThan(0)
    expect(stylesheets.length).toBeGreaterThan(0)
    for (const [addresses, contentType] of [
      [scripts, /^(text|application)\/javascript\b/],
      [stylesheets, /^text\/css\b/],
    ] as const) {
      for (const address of addresses) {
        const url = new URL(address, docsUrl)
        expect(url.origin).toBe(server.rootUrl)
        const asset = await fetch(url)
        expect([address, asset.status]).toEqual([address, 200])
        expect(asset.headers.get('content-type') ?? '').toMatch(contentType)
        expect(asset.headers.get('cache-control') ?? '').toContain('max-age=')
        expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(1000)
      }
    }
  })

  test('points the viewer at the absolute document URL /api/v1/openapi.json, which answers', async () => {
    await using server = await startTestServer()
    const docsUrl = `${server.rootUrl}/api/v1/docs`
    const html = await (await fetch(docsUrl)).text()
    // Either an attribute the page's script reads or a `url` in an inline configuration.
    const documentUrl = html.match(/data-document-url="([^"]+)"|["']?\burl["']?\s*:\s*["']([^"']+)["']/)
    expect(documentUrl).not.toBeNull()
    const address = documentUrl![1] ?? documentUrl![2]
    expect(address).toBe('/api/v1/openapi.json')
    const document = await fetch(new URL(address!, docsUrl))
    expect(document.status).toBe(200)
    expect(document.headers.get('content-type')).toContain('application/json')
    expect(((await document.json()) as { openapi: string }).openapi).toBe('3.0.3')
  })

  test('serves only the viewer files it uses; unknown names and other directories are 404', async () => {
    await using server = await startTestServer()
    const html = await (await fetch(`${server.rootUrl}/api/v1/docs`)).text()
    const script = references(html, 'script')[0]!
    const directory = script.slice(0, script.lastIndexOf('/'))
    for (const name of ['package.json', 'index.html', 'swagger-ui-bundle.js.map', '..%2Fpackage.json', '..%2F..%2Fpackage.json']) {
      expect([name, (await fetch(`${server.rootUrl}${directory}/${name}`)).status]).toEqual([name, 404])
    }
  })

  test('lives on the app role only', async () => {
    await using proxy = await startTestServer({ RT_ROLE: 'proxy' })
    for (const path of ['/api/v1/docs', '/api/v1/openapi.json']) expect([path, (await fetch(`${proxy.rootUrl}${path}`)).status]).toEqual([path, 404])
    await using app = await startTestServer({ RT_ROLE: 'app' })
    const html = await (await fetch(`${app.rootUrl}/api/v1/docs`)).text()
    for (const address of [...references(html, 'script'), ...references(html, 'link')]) {
      expect([address, (await fetch(new URL(address, app.rootUrl))).status]).toEqual([address, 200])
      expect([address, (await fetch(new URL(address, proxy.rootUrl))).status]).toEqual([address, 404])
    }
  })
})

describe('GET /api/v1/openapi.json', () => {
  test('is valid OpenAPI 3.0.3 by the official 3.0 JSON schema and the specification rules', async () => {
    await using server = await startTestServer()
    const document = await fetchDocument(server)
    expect(document.openapi).toBe('3.0.3')
    // validate() dereferences in place; it throws with every violation listed.
    await SwaggerParser.validate(structuredClone(document) as never)
  })

  test('has no patternProperties anywhere, and numeric bounds in the 3.0 form', async () => {
    await using server = await startTestServer()
    const document = await fetchDocument(server)
    // Where each keyword sits, as a JSON pointer, so that a failure names the schema.
    const patternProperties: string[] = []
    const numericBounds: string[] = []
    const walk = (value: unknown, pointer: string) => {
      if (typeof value !== 'object' || value === null) return
      for (const [name, member] of Object.entries(value)) {
        const at = `${pointer}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`
        if (name === 'patternProperties') patternProperties.push(at)
        if ((name === 'exclusiveMinimum' || name === 'exclusiveMaximum') && typeof member !== 'boolean') numericBounds.push(at)
        walk(member, at)
      }
    }
    walk(document, '')
    expect(patternProperties).toEqual([])
    expect(numericBounds).toEqual([])
  })

  test('every operation has responses: a success, and each error status with the {error} envelope', async () => {
    await using server = await startTestServer()
    const operations = operationsOf(await fetchDocument(server))
    expect(operations.length).toBe(18)
    for (const { method, path, operation } of operations) {
      const statuses = Object.keys(operation.responses ?? {})
      expect([method, path, statuses.some((status) => status.startsWith('2'))]).toEqual([method, path, true])
      // Every management route needs a management key.
      expect([method, path, statuses.includes('401')]).toEqual([method, path, true])
      for (const status of statuses.filter((status) => status.startsWith('4'))) {
        const schema = operation.responses[status].content?.['application/json']?.schema
        expect([method, path, status, schema?.properties?.error?.type, schema?.required]).toEqual([method, path, status, 'string', ['error']])
      }
    }
  })

  test('documents the statuses each route answers (SPEC "Management API")', async () => {
    await using server = await startTestServer()
    const documented = Object.fromEntries(
      operationsOf(await fetchDocument(server)).map(({ method, path, operation }) => [`${method.toUpperCase()} ${path.replace(/^\/api\/v1/, '')}`, Object.keys(operation.responses).sort()]),
    )
    expect(documented).toEqual({
      'GET /gateways': ['200', '401'],
      'GET /providers': ['200', '401'],
      'POST /providers': ['201', '400', '401', '403'],
      'GET /providers/{id}': ['200', '401', '404'],
      'PATCH /providers/{id}': ['200', '400', '401', '403', '404'],
      'DELETE /providers/{id}': ['200', '401', '403', '404'],
      'GET /keys': ['200', '400', '401'],
      'POST /keys': ['201', '400', '401', '403'],
      'GET /keys/{id}': ['200', '401', '404'],
      'PATCH /keys/{id}': ['200', '400', '401', '403', '404', '409'],
      'DELETE /keys/{id}': ['200', '401', '403', '404'],
      'GET /keys/{id}/routing': ['200', '401', '404'],
      'PUT /keys/{id}/routing': ['200', '400', '401', '403', '404', '409'],
      'GET /usage/summary': ['200', '400', '401', '404'],
      'GET /usage/series': ['200', '400', '401', '404'],
      'GET /usage/breakdown': ['200', '400', '401', '404'],
      'GET /account': ['200', '401'],
      // CONTRACT §12: the audit log, readable with a read-only key.
      'GET /audit': ['200', '400', '401'],
    })
  })

  test('every status a probe gets back is one the document lists for that operation', async () => {
    await using server = await startTestServer()
    const operations = operationsOf(await fetchDocument(server))
    const readOnlyKey = createManagementKey(server.runtime, server.workspaceId, true).key
    const observed: string[] = []
    for (const { method, path, operation } of operations) {
      const url = server.rootUrl + path.replace('{id}', randomUUID())
      const writes = method !== 'get'
      const probes: { key: string | null; body?: string }[] = [
        { key: null },
        { key: readOnlyKey, body: writes ? '{}' : undefined },
        { key: server.managementKey, body: writes ? '{}' : undefined },
        ...(writes && method !== 'delete' ? [{ key: server.managementKey, body: '{not json' }] : []),
      ]
      for (const probe of probes) {
        const headers: Record<string, string> = probe.body === undefined ? {} : { 'content-type': 'application/json' }
        if (probe.key) headers.authorization = `Bearer ${probe.key}`
        const response = await fetch(url, { method: method.toUpperCase(), headers, body: probe.body })
        const status = String(response.status)
        observed.push(status)
        expect([method, path, status, Object.hasOwn(operation.responses, status)]).toEqual([method, path, status, true])
      }
    }
    // The probes reached 401, 403, 404 and 400 at least once each.
    expect([...new Set(observed)].sort()).toEqual(expect.arrayContaining(['400', '401', '403', '404']))
  })

  test('GET /keys documents its offset and GET /providers its gateway filter', async () => {
    await using server = await startTestServer()
    const document = await fetchDocument(server)
    const offset = (document.paths['/api/v1/keys'].get.parameters ?? []).find((parameter: { name: string }) => parameter.name === 'offset')
    expect(offset).toMatchObject({ in: 'query', required: false, schema: { type: 'integer', minimum: 0 } })
    const gateway = (document.paths['/api/v1/providers'].get.parameters ?? []).find((parameter: { name: string }) => parameter.name === 'gateway')
    expect(gateway).toMatchObject({ in: 'query', required: false, schema: { type: 'string' } })
  })

  test('every request body is documented as JSON with its schema', async () => {
    await using server = await startTestServer()
    const writes = operationsOf(await fetchDocument(server)).filter(({ method }) => method === 'post' || method === 'patch' || method === 'put')
    expect(writes.length).toBe(5)
    for (const { method, path, operation } of writes) {
      const schema = operation.requestBody?.content?.['application/json']?.schema
      expect([method, path, schema?.type, Object.keys(schema?.properties ?? {}).length > 0]).toEqual([method, path, 'object', true])
    }
  })

  test('leaves out the docs page, its assets and the document itself', async () => {
    await using server = await startTestServer()
    const paths = Object.keys((await fetchDocument(server)).paths)
    expect(paths.filter((path) => !path.startsWith('/api/v1/') || path.startsWith('/api/v1/docs') || path.startsWith('/api/v1/openapi'))).toEqual([inferencePath])
  })

  test('documents POST /v1/decisions: the CONTRACT §9 request and answer, an inference key, errors in the chat envelope', async () => {
    await using server = await startTestServer()
    const document = await fetchDocument(server)
    const operations = allOperationsOf(document).filter(({ path }) => path === inferencePath)
    expect(operations.map(({ method }) => method)).toEqual(['post'])
    const operation = operations[0]!.operation
    expect(operation.security).toEqual([{ inferenceKey: [] }])
    expect(document.components.securitySchemes.inferenceKey).toMatchObject({ type: 'http', scheme: 'bearer' })
    const request = operation.requestBody.content['application/json'].schema
    expect(request.required).toEqual(['model', 'state', 'questions'])
    expect(request.properties.questions).toMatchObject({ minItems: 1, maxItems: 16 })
    expect(request.properties.questions.items.properties.type.enum).toEqual(['choice', 'boolean', 'number'])
    expect(request.properties.questions.items.properties.options).toMatchObject({ minItems: 2, maxItems: 32, uniqueItems: true })
    const answer = operation.responses['200'].content['application/json'].schema
    expect(answer.required).toEqual(['id', 'object', 'model', 'created', 'answers'])
    expect(Object.keys(operation.responses).sort()).toEqual(['200', '400', '401', '404', '502'])
    for (const status of ['400', '401', '404', '502']) {
      const schema = operation.responses[status].content['application/json'].schema
      expect(Object.keys(schema.properties.error.properties).sort()).toEqual(['code', 'message', 'type'])
    }
    expect(operation.responses['400'].description).toContain('invalid_decision_request')
  })
})
