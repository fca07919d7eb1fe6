/**
 * The API docs (issue 10, items 7 and 8): GET /api/v1/docs loads its viewer from this server only and
 * points it at /api/v1/openapi.json; the document is valid OpenAPI 3.0.3, checked against the official
 * 3.0 JSON schema by @apidevtools/swagger-parser, and documents the statuses the routes really answer.
 *
 * The inference routes (issue 10, part 5): every route of the route table (api/inference/routes.ts) is
 * in the document and nothing else is; each operation has its key schemes, its body, a success and
 * error answers in the envelopes of its shape. The schemas are checked with ajv (draft 04, OpenAPI
 * 3.0's dialect, with `nullable`) against the error renderer, against what the dialects' validators
 * accept and refuse, and against the real answers of the running server.
 */
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import SwaggerParser from '@apidevtools/swagger-parser'
import Ajv from 'ajv-draft-04'
import { createManagementKey } from '../../src/management/workspaces'
import { resolveInferenceRoute } from '../../src/api/inference/routes'
import { inferenceOperations, inferenceTags } from '../../src/api/inference-document'
import { errorCodes, type ErrorCode } from '../../src/errors/codes'
import { errorBody, upstreamErrorBody, type Envelope } from '../../src/errors/render'
import { RouterError } from '../../src/errors/router-error'
import { envelopeForShape } from '../../src/pipeline'
import { apiShapes } from '../../src/management/schemas'
import { startTestServer, type TestServer } from '../harness/server'
import { startMockGateway } from '../harness/mock-gateway'
import { createInferenceKey, httpCall, storeProvider, type CallResult } from '../harness/api'

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

/** The management API's operations (every path under /api/v1). */
function operationsOf(document: Record<string, any>): Operation[] {
  return allOperationsOf(document).filter(({ path }) => path.startsWith('/api/v1/'))
}

/** The inference API's operations (every path under /v1). */
function inferenceOperationsOf(document: Record<string, any>): Operation[] {
  return allOperationsOf(document).filter(({ path }) => path.startsWith('/v1/'))
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
    expect(operations.length).toBe(19)
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
      // CONTRACT §15: the purge of the key's response cache entries.
      'DELETE /keys/{id}/cache': ['200', '401', '403', '404'],
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

  test('leaves out the docs page, its assets and the document itself; every other path is /api/v1 or /v1', async () => {
    await using server = await startTestServer()
    const paths = Object.keys((await fetchDocument(server)).paths)
    expect(paths.filter((path) => path.startsWith('/api/v1/docs') || path.startsWith('/api/v1/openapi'))).toEqual([])
    expect(paths.filter((path) => !path.startsWith('/api/v1/') && !path.startsWith('/v1/'))).toEqual([])
  })

  test('says it documents the whole API, not the management API alone', async () => {
    await using server = await startTestServer()
    const { info } = await fetchDocument(server)
    expect(info.version).toBe('1.0.0')
    expect(info.title).not.toMatch(/management/i)
    expect(info.description).toContain('/v1')
    expect(info.description).toContain('/api/v1')
  })
})

// ---------------------------------------------------------------------------------------------
// The inference routes

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })

/** What is wrong with `value` by `schema` (empty when it validates). */
function violations(schema: object, value: unknown): string[] {
  const validate = ajv.compile(schema)
  return validate(value) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath || '(root)'} ${error.message}`)
}

/** The document with every $ref resolved (components inlined), for validating against. */
async function dereferenced(document: Record<string, any>): Promise<Record<string, any>> {
  return (await SwaggerParser.dereference(structuredClone(document) as never)) as Record<string, any>
}

const envelopeSchemas: Record<Envelope, string> = { chat: '#/components/schemas/ChatError', messages: '#/components/schemas/MessagesError', content: '#/components/schemas/ContentError' }

/** The envelope refs an answer's schema names (one $ref, or an anyOf of them). */
function envelopeRefs(schema: Record<string, any> | undefined): string[] {
  if (!schema) return []
  if (schema.$ref) return [schema.$ref]
  return (schema.anyOf ?? []).map((member: { $ref?: string }) => member.$ref ?? '(inline)')
}

/** A documented path template as a pattern; a parameter may hold slashes (model ids do), and the table drops one trailing slash. */
const templatePattern = (template: string) => new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '.+')}/?$`)

const httpMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']

/**
 * Every request the route table answers, found by trying the paths its own source spells: the table
 * is a function (resolveInferenceRoute), and its string literals (`'chat/completions'`, `'models/'`,
 * …) and the endings of its patterns (`:(generateContent|streamGenerateContent)`) are the only list
 * of what it matches. Each is tried as it is and with a parameter after it, with every method.
 */
async function routeTableRequests(): Promise<{ method: string; path: string; endpoint: string }[]> {
  const source = await Bun.file(new URL('../../src/api/inference/routes.ts', import.meta.url)).text()
  const fragments = [...source.matchAll(/'([^'\n]*)'/g)].map((match) => match[1]!).filter((text) => /^[A-Za-z_][\w/]*$/.test(text))
  const endings = [...source.matchAll(/:\(([\w|]+)\)/g)].flatMap((match) => match[1]!.split('|').map((word) => `:${word}`))
  const candidates = new Set<string>()
  for (const fragment of fragments) {
    candidates.add(`/v1/${fragment}`)
    const base = fragment.endsWith('/') ? fragment : `${fragment}/`
    for (const parameter of ['sample', 'vendor/sample']) {
      candidates.add(`/v1/${base}${parameter}`)
      for (const ending of endings) candidates.add(`/v1/${base}${parameter}${ending}`)
    }
  }
  const found: { method: string; path: string; endpoint: string }[] = []
  for (const method of httpMethods) {
    for (const path of candidates) {
      const route = resolveInferenceRoute(method, path)
      if (route) found.push({ method, path, endpoint: route.endpoint })
    }
  }
  return found
}

/** The route behind a documented operation, by its sample path. */
function routeOf(method: string, path: string) {
  const spec = inferenceOperations.find((operation) => operation.method === method && operation.path === path)
  expect([method, path, spec !== undefined]).toEqual([method, path, true])
  const route = resolveInferenceRoute(method.toUpperCase(), spec!.sample)!
  return { spec: spec!, route }
}

describe('the inference routes in GET /api/v1/openapi.json', () => {
  test('every request the route table answers is a documented operation of the same endpoint, and every documented operation is one the table answers', async () => {
    await using server = await startTestServer()
    const documented = inferenceOperationsOf(await fetchDocument(server))
    // The served document holds exactly the module's operations.
    expect(documented.map(({ method, path }) => `${method} ${path}`).sort()).toEqual(inferenceOperations.map(({ method, path }) => `${method} ${path}`).sort())

    const requests = await routeTableRequests()
    const hit = new Set<string>()
    for (const request of requests) {
      const matches = inferenceOperations.filter((operation) => operation.method.toUpperCase() === request.method && templatePattern(operation.path).test(request.path) && operation.endpoint === request.endpoint)
      // A route the table answers with no operation documenting it names itself here.
      expect([request.method, request.path, request.endpoint, matches.length > 0]).toEqual([request.method, request.path, request.endpoint, true])
      for (const match of matches) hit.add(`${match.method} ${match.path}`)
    }
    // The probe reached every documented operation, so it reads the table well enough to trust its silence.
    expect([...hit].sort()).toEqual(inferenceOperations.map(({ method, path }) => `${method} ${path}`).sort())

    // Every endpoint the pipeline serves, once each at least; each sample path is its route.
    for (const operation of inferenceOperations) {
      expect([operation.path, templatePattern(operation.path).test(operation.sample)]).toEqual([operation.path, true])
      expect([operation.sample, resolveInferenceRoute(operation.method.toUpperCase(), operation.sample)?.endpoint]).toEqual([operation.sample, operation.endpoint])
    }
  })

  test('each operation: one inference tag, the key schemes of SPEC, a JSON body where the route reads one, a success, and errors in the envelope of its shape', async () => {
    await using server = await startTestServer()
    const document = await fetchDocument(server)
    const tagNames = (document.tags as { name: string }[]).map((tag) => tag.name)
    expect(tagNames).toEqual(expect.arrayContaining(inferenceTags.map((tag) => tag.name)))
    const schemes = document.components.securitySchemes
    expect(schemes.inferenceKey).toMatchObject({ type: 'http', scheme: 'bearer' })
    expect(schemes.apiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' })
    expect(schemes.googApiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-goog-api-key' })
    expect(schemes.contentApiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-content-api-key' })
    expect(schemes.keyQuery).toMatchObject({ type: 'apiKey', in: 'query', name: 'key' })

    const operations = inferenceOperationsOf(document)
    expect(operations.length).toBe(inferenceOperations.length)
    const everyEnvelope = Object.values(envelopeSchemas).sort()
    for (const { method, path, operation } of operations) {
      const { spec, route } = routeOf(method, path)
      const at = `${method} ${path}`
      expect([at, operation.tags]).toEqual([at, [spec.tag]])
      expect([at, tagNames.includes(spec.tag)]).toEqual([at, true])

      // SPEC "Authentication" 1: a Bearer key and the dialect headers on every path; `?key=` on :generateContent only.
      const offered = (operation.security as Record<string, string[]>[]).map((requirement) => Object.keys(requirement))
      expect([at, offered.every((names) => names.length === 1 && schemes[names[0]!] !== undefined)]).toEqual([at, true])
      const expectedSchemes = ['inferenceKey', 'apiKeyHeader', 'googApiKeyHeader', 'contentApiKeyHeader', ...(path.includes(':') ? ['keyQuery'] : [])]
      expect([at, offered.flat().sort()]).toEqual([at, expectedSchemes.sort()])

      const body = operation.requestBody?.content?.['application/json']?.schema
      expect([at, body !== undefined, operation.requestBody?.required ?? false]).toEqual([at, method === 'post', method === 'post'])

      const statuses = Object.keys(operation.responses)
      const successes = statuses.filter((status) => status.startsWith('2'))
      // SPEC: :streamGenerateContent answers 400, always; everything else has its success.
      expect([at, successes]).toEqual([at, route.endpoint === 'stream_generate_content' ? [] : [spec.success!.status]])
      for (const status of successes) expect([at, operation.responses[status].content['application/json']?.schema?.$ref]).toEqual([at, `#/components/schemas/${spec.success!.schema}`])
      if (route.endpoint === 'stream_generate_content') expect([at, statuses.includes('400')]).toEqual([at, true])

      // Errors: before the key is known, the path's dialect; after, the envelopes of the shapes the
      // route serves; wrong_api_shape, the calling key's own (one of the other shapes').
      const ofKey = [...new Set(route.shapes.map(envelopeForShape))].map((envelope) => envelopeSchemas[envelope]).sort()
      const ofOthers = [...new Set(apiShapes.filter((shape) => !route.shapes.includes(shape)).map(envelopeForShape))].map((envelope) => envelopeSchemas[envelope])
      const errors = statuses.filter((status) => !status.startsWith('2'))
      expect([at, errors]).toEqual([at, expect.arrayContaining(['401', '403', '500'])])
      for (const status of errors) {
        const refs = envelopeRefs(operation.responses[status].content?.['application/json']?.schema).sort()
        expect([at, status, refs.length > 0 && refs.every((ref) => everyEnvelope.includes(ref))]).toEqual([at, status, true])
        if (status === '401' || status === '403') expect([at, status, refs]).toEqual([at, status, [envelopeSchemas[route.envelope]]])
        else if (status === '404' && ofOthers.length) expect([at, status, refs]).toEqual([at, status, expect.arrayContaining(ofOthers)])
        else if (status === '500') expect([at, status, refs]).toEqual([at, status, expect.arrayContaining([envelopeSchemas[route.envelope], ...ofKey])])
        else expect([at, status, refs]).toEqual([at, status, ofKey])
      }
      // Every answer names its request id and attempts; on messages-dialect paths also as request-id.
      for (const status of statuses) {
        const headers = Object.keys(operation.responses[status].headers ?? {})
        const expected = ['X-Router-Request-Id', 'X-Router-Attempts', ...(route.envelope === 'messages' ? ['request-id'] : [])]
        expect([at, status, headers]).toEqual([at, status, expect.arrayContaining(expected)])
      }
    }
  })

  test('the envelope schemas accept every error the renderer writes, in each envelope, and relayed gateway errors too', async () => {
    await using server = await startTestServer()
    const schemas = (await dereferenced(await fetchDocument(server))).components.schemas
    const byEnvelope: Record<Envelope, object> = { chat: schemas.ChatError, messages: schemas.MessagesError, content: schemas.ContentError }
    for (const envelope of Object.keys(byEnvelope) as Envelope[]) {
      for (const code of Object.keys(errorCodes) as ErrorCode[]) {
        const body = errorBody(envelope, new RouterError(code))
        expect([envelope, code, violations(byEnvelope[envelope], body)]).toEqual([envelope, code, []])
      }
      for (const status of [400, 402, 403, 404, 408, 409, 413, 422, 429, 500, 501, 502, 503, 504, 529]) {
        expect([envelope, status, violations(byEnvelope[envelope], upstreamErrorBody(envelope, status, 'The gateway said no.'))]).toEqual([envelope, status, []])
      }
    }
    // And they tell the envelopes apart.
    expect(violations(schemas.MessagesError, errorBody('chat', new RouterError('no_route')))).not.toEqual([])
    expect(violations(schemas.ContentError, errorBody('messages', new RouterError('no_route')))).not.toEqual([])
  })

  test('documents POST /v1/decisions: the CONTRACT §9 request and answer, errors in the chat envelope', async () => {
    await using server = await startTestServer()
    const document = await dereferenced(await fetchDocument(server))
    const operation = document.paths['/v1/decisions'].post
    const request = operation.requestBody.content['application/json'].schema
    expect(request.required).toEqual(['model', 'state', 'questions'])
    expect(request.properties.questions).toMatchObject({ minItems: 1, maxItems: 16 })
    expect(request.properties.questions.items.properties.type.enum).toEqual(['choice', 'boolean', 'number'])
    expect(request.properties.questions.items.properties.options).toMatchObject({ minItems: 2, maxItems: 32, uniqueItems: true })
    expect(operation.responses['200'].content['application/json'].schema.required).toEqual(['id', 'object', 'model', 'created', 'answers'])
    expect(operation.responses['400'].description).toContain('invalid_decision_request')
    // A decisions key's errors are in the chat envelope; only wrong_api_shape (404) comes in the calling key's.
    for (const status of Object.keys(operation.responses).filter((status) => !status.startsWith('2') && status !== '404')) {
      expect([status, Object.keys(operation.responses[status].content['application/json'].schema.properties.error.properties).sort()]).toEqual([status, ['code', 'message', 'param', 'type']])
    }
  })
})

// ---------------------------------------------------------------------------------------------
// The documented schemas against the validators and the running server

const chatModel = 'openai/gpt-4o-mini'
const userTurn = { role: 'user', content: 'Hello!' }

/** A body for a documented operation, the verdict SPEC and the dialect's validator give it. */
interface BodyCase {
  operation: string
  shape: 'chat' | 'messages' | 'content' | 'decisions'
  body: unknown
  valid: boolean
}

const questions = [
  { id: 'route', type: 'choice', prompt: 'Which team?', options: ['billing', 'shipping'] },
  { id: 'urgent', type: 'boolean', prompt: 'Urgent?' },
  { id: 'refund', type: 'number', prompt: 'How much?', min: 0, max: 100 },
]

const bodyCases: BodyCase[] = [
  // Chat completions (validateChatBody): model, non-empty messages of objects with a string role; the rest passes.
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: true, body: { model: chatModel, messages: [userTurn] } },
  {
    operation: 'post /v1/chat/completions',
    shape: 'chat',
    valid: true,
    body: {
      model: chatModel,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'call_1', content: 'ok' }],
      temperature: 0.2,
      max_tokens: 50,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      user: 'someone',
      ad_request: { placement: 'below' },
    },
  },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { model: chatModel } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { model: chatModel, messages: [] } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { messages: [userTurn] } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { model: '', messages: [userTurn] } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { model: chatModel, messages: [{ content: 'no role' }] } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: { model: chatModel, messages: ['Hello!'] } },
  { operation: 'post /v1/chat/completions', shape: 'chat', valid: false, body: [userTurn] },
  // Embeddings: model and a non-null input.
  { operation: 'post /v1/embeddings', shape: 'chat', valid: true, body: { model: 'openai/text-embedding-3-small', input: ['one', 'two'], encoding_format: 'float', dimensions: 3 } },
  { operation: 'post /v1/embeddings', shape: 'chat', valid: false, body: { model: 'openai/text-embedding-3-small' } },
  { operation: 'post /v1/embeddings', shape: 'chat', valid: false, body: { model: 'openai/text-embedding-3-small', input: null } },
  { operation: 'post /v1/embeddings', shape: 'chat', valid: false, body: { input: 'Hello!' } },
  // Responses: model, and input a string or an array of items.
  { operation: 'post /v1/responses', shape: 'chat', valid: true, body: { model: chatModel, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }], instructions: 'Be brief.', max_output_tokens: 50, store: false } },
  { operation: 'post /v1/responses', shape: 'chat', valid: false, body: { model: chatModel } },
  { operation: 'post /v1/responses', shape: 'chat', valid: false, body: { model: chatModel, input: 5 } },
  { operation: 'post /v1/responses', shape: 'chat', valid: false, body: { input: 'Hello!' } },
  // Messages (validateMessagesBody).
  {
    operation: 'post /v1/messages',
    shape: 'messages',
    valid: true,
    body: {
      model: 'anthropic/claude-sonnet-4',
      max_tokens: 256,
      system: [{ type: 'text', text: 'Be brief.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }, { role: 'assistant', content: 'Hello' }, { role: 'user', content: 'Again' }],
      stop_sequences: ['END'],
      thinking: { type: 'enabled', budget_tokens: 1024 },
      metadata: { user_id: 'someone' },
      top_k: 5,
    },
  },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', max_tokens: 10, messages: [{ role: 'tool', content: 'x' }] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', max_tokens: 0, messages: [userTurn] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', stream: 'yes', messages: [userTurn] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', stop_sequences: [1], messages: [userTurn] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', thinking: { type: 'enabled', budget_tokens: 0 }, messages: [userTurn] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', messages: [{ role: 'user', content: 5 }] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', messages: [{ role: 'user', content: [{ text: 'no type' }] }] } },
  { operation: 'post /v1/messages', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', system: 5, messages: [userTurn] } },
  { operation: 'post /v1/messages/count_tokens', shape: 'messages', valid: true, body: { model: 'anthropic/claude-sonnet-4', system: 'Be brief.', messages: [userTurn], tools: [{ name: 'f', input_schema: { type: 'object' } }] } },
  { operation: 'post /v1/messages/count_tokens', shape: 'messages', valid: false, body: { model: 'anthropic/claude-sonnet-4', messages: [] } },
  // generateContent (validateContentBody).
  {
    operation: 'post /v1/models/{model}:generateContent',
    shape: 'content',
    valid: true,
    body: {
      contents: [{ role: 'user', parts: [{ text: 'Hi' }] }, { role: 'model', parts: [{ text: 'Hello' }] }, { role: 'user', parts: [{ text: 'Again' }] }],
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      generationConfig: { temperature: 0.2, maxOutputTokens: 50 },
      tools: [{ functionDeclarations: [{ name: 'lookup', parameters: { type: 'object' } }] }],
      safetySettings: [],
    },
  },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [] } },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [{ role: 'assistant', parts: [{ text: 'x' }] }] } },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [{ parts: [] }] } },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [{ parts: ['x'] }] } },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [{ parts: [{ text: 'x' }] }], generationConfig: 'hot' } },
  { operation: 'post /v1/models/{model}:generateContent', shape: 'content', valid: false, body: { contents: [{ parts: [{ text: 'x' }] }], tools: [{ functionDeclarations: [{ name: '' }] }] } },
  // Decisions (validateDecisionRequest).
  { operation: 'post /v1/decisions', shape: 'decisions', valid: true, body: { model: chatModel, state: null, questions } },
  { operation: 'post /v1/decisions', shape: 'decisions', valid: false, body: { model: chatModel, questions } },
  { operation: 'post /v1/decisions', shape: 'decisions', valid: false, body: { model: chatModel, state: {}, questions: [] } },
  { operation: 'post /v1/decisions', shape: 'decisions', valid: false, body: { model: chatModel, state: {}, questions: Array.from({ length: 17 }, (_, index) => ({ id: `q${index}`, type: 'boolean', prompt: 'Yes?' })) } },
  { operation: 'post /v1/decisions', shape: 'decisions', valid: false, body: { model: chatModel, state: {}, questions: [{ id: 'q', type: 'choice', prompt: 'Which?', options: ['only'] }] } },
  { operation: 'post /v1/decisions', shape: 'decisions', valid: false, body: { model: chatModel, state: {}, questions: [{ id: 'q', type: 'text', prompt: 'Which?' }] } },
]

/** Batch submits: the head is read as it streams in, so these are checked against the schema alone. */
const batchCases: { body: unknown; valid: boolean }[] = [
  { valid: true, body: { endpoint: '/v1/messages', model: 'anthropic/claude-sonnet-4', provider: { only: ['anthropic'] }, completion_window: '24h', requests: [{ custom_id: 'a', body: { max_tokens: 10, messages: [userTurn] } }] } },
  { valid: false, body: { endpoint: '/v1/completions', model: chatModel, requests: [{ custom_id: 'a', body: {} }] } },
  { valid: false, body: { endpoint: '/v1/chat/completions', model: chatModel, requests: [] } },
  { valid: false, body: { endpoint: '/v1/chat/completions', model: chatModel, completion_window: '1h', requests: [{ custom_id: 'a', body: {} }] } },
  { valid: false, body: { endpoint: '/v1/chat/completions', model: chatModel, provider: { only: [] }, requests: [{ custom_id: 'a', body: {} }] } },
  { valid: false, body: { endpoint: '/v1/chat/completions', model: chatModel, requests: [{ custom_id: 'a', body: {} }], extra: true } },
  { valid: false, body: { model: chatModel, requests: [{ custom_id: 'a', body: {} }] } },
]

/** A Response object as a native gateway answers. */
function responseObject(model: string) {
  return {
    id: 'resp_upstream_1',
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    model,
    output: [{ type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [] }] }],
    usage: { input_tokens: 3, output_tokens: 1, total_tokens: 4 },
  }
}

/** A decision answering each question the way CONTRACT §9 asks. */
function decisionFor(body: { model: string; questions: { id: string; type: string; options?: string[] }[] }) {
  const answers = body.questions.map((question) =>
    question.type === 'choice'
      ? { id: question.id, type: 'choice', answer: question.options![0], probabilities: Object.fromEntries(question.options!.map((option, index) => [option, index === 0 ? 1 : 0])) }
      : question.type === 'boolean'
        ? { id: question.id, type: 'boolean', answer: true, probability: 0.8 }
        : { id: question.id, type: 'number', answer: 10, interval: [5, 20] },
  )
  return { id: 'dec_1', object: 'decision', model: body.model, created: 1_700_000_000, answers, usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }
}

describe('the inference schemas against the validators and the running server', () => {
  test('the documented example bodies, and batch submits, validate as SPEC and the body reader say', async () => {
    await using server = await startTestServer()
    const document = await dereferenced(await fetchDocument(server))
    for (const { method, path, operation } of inferenceOperationsOf(document)) {
      const media = operation.requestBody?.content?.['application/json']
      if (!media) continue
      expect([method, path, violations(media.schema, media.example)]).toEqual([method, path, []])
    }
    const batchSchema = document.paths['/v1/batches'].post.requestBody.content['application/json'].schema
    for (const { body, valid } of batchCases) expect([body, violations(batchSchema, body).length === 0]).toEqual([body, valid])
  })

  test('a body the dialect accepts is accepted by its schema and answered 200; one it refuses is refused by both, 400; the answers validate', async () => {
    await using mock = await startMockGateway()
    mock.handle((request) => {
      if (request.path.endsWith('/responses')) return { json: responseObject(String(request.body?.model)) }
      if (request.path.endsWith('/decisions')) return { json: decisionFor(request.body) }
      return undefined
    })
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const provider = await storeProvider(server, { gateway: 'openai', key: 'sk-upstream' })
    const routing = { targets: [{ provider_key_id: provider.id }] }
    const keys: Record<BodyCase['shape'], string> = {
      chat: (await createInferenceKey(server, { routing })).key,
      messages: (await createInferenceKey(server, { api_shape: 'messages', routing })).key,
      content: (await createInferenceKey(server, { api_shape: 'content', routing })).key,
      decisions: (await createInferenceKey(server, { api_shape: 'decisions', routing })).key,
    }
    const document = await dereferenced(await fetchDocument(server))
    for (const { operation: name, shape, body, valid } of bodyCases) {
      const [method, path] = name.split(' ') as [string, string]
      const spec = inferenceOperations.find((operation) => operation.method === method && operation.path === path)!
      const operation = document.paths[path][method]
      const schemaVerdict = violations(operation.requestBody.content['application/json'].schema, body)
      expect([name, body, schemaVerdict.length === 0]).toEqual([name, body, valid])
      const answer = await httpCall(server, method.toUpperCase(), spec.sample, body, { authorization: `Bearer ${keys[shape]}` })
      expect([name, body, answer.status]).toEqual([name, body, valid ? 200 : 400])
      expectDocumentedAnswer(operation, `${name} ${JSON.stringify(body).slice(0, 80)}`, answer)
    }
  })

  test('real answers of every route, success and error, are answers the document lists, in its schema, with its headers', async () => {
    await using mock = await startMockGateway()
    mock.handle((request) => (request.path.endsWith('/responses') ? { json: responseObject(String(request.body?.model)) } : undefined))
    await using server = await startTestServer({ RT_GATEWAY_URL_OPENAI: mock.url })
    const provider = await storeProvider(server, { gateway: 'openai', key: 'sk-upstream' })
    const routing = { targets: [{ provider_key_id: provider.id }] }
    const keyOf = async (body: Record<string, unknown>) => (await createInferenceKey(server, body)).key as string
    const keys: Record<string, string> = {
      chat: await keyOf({ routing }),
      messages: await keyOf({ api_shape: 'messages', routing }),
      content: await keyOf({ api_shape: 'content', routing }),
      decisions: await keyOf({ api_shape: 'decisions', routing }),
    }
    // No routing targets: 402 no_route, in each shape's envelope.
    const unrouted: Record<string, string> = {
      chat: await keyOf({}),
      messages: await keyOf({ api_shape: 'messages' }),
      content: await keyOf({ api_shape: 'content' }),
    }
    const document = await dereferenced(await fetchDocument(server))
    const seen = new Map<string, Set<string>>()

    const probe = async (method: string, path: string, expectedStatus: number, init: { key?: string; header?: string; body?: unknown; query?: string } = {}) => {
      const { spec, route } = routeOf(method, path)
      const headers: Record<string, string> = init.key ? { [init.header ?? 'authorization']: init.header ? init.key : `Bearer ${init.key}` } : {}
      const body = init.body !== undefined ? init.body : spec.body?.example
      const answer = await httpCall(server, method.toUpperCase(), spec.sample + (init.query ?? ''), body, headers)
      const at = `${method} ${path} (${init.key ? 'key' : 'no key'})`
      expect([at, answer.status]).toEqual([at, expectedStatus])
      expectDocumentedAnswer(document.paths[path][method], at, answer)
      if (route.envelope === 'messages') expect([at, answer.headers.get('request-id')]).toEqual([at, answer.headers.get('x-router-request-id')])
      const statuses = seen.get(`${method} ${path}`) ?? new Set()
      statuses.add(String(answer.status))
      seen.set(`${method} ${path}`, statuses)
      return answer
    }

    // Without a key: 401 on every route, in the path's dialect.
    for (const operation of inferenceOperations) await probe(operation.method, operation.path, 401)
    // A key of a shape the route does not serve: 404 wrong_api_shape in that key's envelope.
    const otherShape: Record<string, string> = { chat: 'messages', chat_router: 'messages', messages: 'content', content: 'chat', decisions: 'chat' }
    for (const operation of inferenceOperations) {
      const { route } = routeOf(operation.method, operation.path)
      const other = apiShapes.find((shape) => !route.shapes.includes(shape) && shape !== 'chat_router')
      if (!other) continue
      const answer = await probe(operation.method, operation.path, 404, { key: keys[other] })
      expect(answer.text).toContain('wrong_api_shape')
    }
    // Each shape's own header, and the query parameter on :generateContent.
    await probe('post', '/v1/messages', 200, { key: keys.messages!, header: 'x-api-key' })
    await probe('post', '/v1/models/{model}:generateContent', 200, { key: keys.content!, header: 'x-goog-api-key' })
    await probe('post', '/v1/models/{model}:generateContent', 200, { key: keys.content!, header: 'x-content-api-key' })
    await probe('post', '/v1/models/{model}:generateContent', 200, { query: `?key=${keys.content}` })

    // Successes.
    await probe('post', '/v1/chat/completions', 200, { key: keys.chat })
    const chatStream = await probe('post', '/v1/chat/completions', 200, { key: keys.chat, body: { model: chatModel, messages: [userTurn], stream: true } })
    expect(chatStream.text).toContain('data: [DONE]')
    await probe('post', '/v1/responses', 200, { key: keys.chat })
    await probe('post', '/v1/embeddings', 200, { key: keys.chat })
    await probe('post', '/v1/messages', 200, { key: keys.messages })
    const messagesStream = await probe('post', '/v1/messages', 200, { key: keys.messages, body: { model: chatModel, max_tokens: 10, messages: [userTurn], stream: true } })
    expect(messagesStream.text).toContain('event: message_stop')
    const counted = await probe('post', '/v1/messages/count_tokens', 200, { key: keys.messages })
    expect(counted.headers.get('x-router-count-tokens')).toBe('estimate')
    await probe('post', '/v1/models/{model}:generateContent', 200, { key: keys.content })
    for (const shape of ['chat', 'messages', 'content', 'decisions']) await probe('get', '/v1/models', 200, { key: keys[shape] })
    await probe('get', '/v1/models/{model}', 200, { key: keys.chat })
    await probe('get', '/v1/batches', 200, { key: keys.chat })

    // Errors of each kind.
    await probe('post', '/v1/models/{model}:streamGenerateContent', 400, { key: keys.content })
    for (const [method, path, shape] of [
      ['post', '/v1/chat/completions', 'chat'],
      ['post', '/v1/messages', 'messages'],
      ['post', '/v1/models/{model}:generateContent', 'content'],
    ] as const) {
      await probe(method, path, 400, { key: keys[shape], body: '{"not json' })
      await probe(method, path, 402, { key: unrouted[shape] })
      await probe('get', '/v1/models', 402, { key: unrouted[shape] })
    }
    await probe('post', '/v1/chat/completions', 400, { key: keys.chat, body: { model: `${chatModel}:batch`, messages: [userTurn] } })
    await probe('get', '/v1/models/{model}', 404, { key: keys.chat, body: undefined, query: '-unknown' })
    await probe('get', '/v1/responses/{response_id}', 400, { key: keys.chat })
    await probe('get', '/v1/batches/{batch_id}', 404, { key: keys.chat })
    await probe('delete', '/v1/batches/{batch_id}', 404, { key: keys.chat })
    await probe('get', '/v1/batches', 400, { key: keys.chat, query: '?limit=0' })
    await probe('post', '/v1/batches', 400, { key: keys.chat, body: { model: chatModel, endpoint: '/v1/chat/completions', requests: [] } })

    // The probes reached a success or a refusal beyond 401 and 404 on most routes.
    expect([...seen.values()].flatMap((statuses) => [...statuses]).sort()).toEqual(expect.arrayContaining(['200', '400', '401', '402', '404']))
  })
})

/** The answer's status is one the operation lists (or its `default`), its body is in that answer's schema, and its router headers are listed there. */
function expectDocumentedAnswer(operation: Record<string, any>, at: string, answer: CallResult) {
  const status = String(answer.status)
  const documented = operation.responses[status] ?? (status.startsWith('2') ? undefined : operation.responses.default)
  expect([at, status, documented !== undefined]).toEqual([at, status, true])
  const contentType = (answer.headers.get('content-type') ?? '').split(';')[0]!.trim()
  expect([at, status, Object.keys(documented.content ?? {})]).toEqual([at, status, expect.arrayContaining([contentType])])
  if (contentType === 'application/json') expect([at, status, violations(documented.content[contentType].schema, answer.json)]).toEqual([at, status, []])
  const listed = Object.keys(documented.headers ?? {}).map((name) => name.toLowerCase())
  for (const name of ['x-router-request-id', 'x-router-attempts', 'x-router-provider', 'x-router-failover', 'x-router-key-grace-until', 'x-router-count-tokens', 'x-router-responses-mode', 'request-id']) {
    if (answer.headers.get(name) !== null) expect([at, status, name, listed.includes(name)]).toEqual([at, status, name, true])
  }
  expect([at, answer.headers.get('x-router-request-id') !== null, answer.headers.get('x-router-attempts') !== null]).toEqual([at, true, true])
}
