/**
 * The operator CLI (CONTRACT §5) as a subprocess over a temp data dir, next to an in-process
 * server on the same database (CONTRACT §3: a write by one process is seen by the others).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { loadConfig } from '../../src/config/env'
import { createRuntime, type Runtime } from '../../src/runtime'
import { buildApp } from '../../src/app'
import { silentLogger } from '../../src/observability/logger'
import { gatewayCatalog, gatewayOverrideSlug } from '../../src/gateways/catalog'

const repoRoot = resolve(import.meta.dir, '../..')
const masterKey = Buffer.alloc(32, 11).toString('base64')
const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/

interface CliResult {
  exitCode: number
  stdout: string
  stderr: string
}

/** The process environment without any RT_* setting of the outer shell. */
function baseEnvironment(): Record<string, string> {
  const environment: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('RT_')) environment[name] = value
  return environment
}

let dataDir: string
let runtime: Runtime
let server: ReturnType<typeof Bun.serve>
let rootUrl: string

async function cli(args: string[], extraEnvironment: Record<string, string> = {}): Promise<CliResult> {
  const child = Bun.spawn(['bun', 'run', 'src/cli/index.ts', ...args], {
    cwd: repoRoot,
    env: { ...baseEnvironment(), RT_DATA_DIR: dataDir, RT_MASTER_KEY: masterKey, ...extraEnvironment },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { exitCode, stdout, stderr }
}

/** Success: exit 0 and exactly one JSON object on stdout. */
async function ok<T = any>(args: string[], extraEnvironment?: Record<string, string>): Promise<T> {
  const result = await cli(args, extraEnvironment)
  if (result.exitCode !== 0) throw new Error(`cli ${args.join(' ')} exited ${result.exitCode}: ${result.stderr}`)
  const lines = result.stdout.split('\n').filter((line) => line.trim() !== '')
  expect(lines).toHaveLength(1)
  const parsed = JSON.parse(lines[0]!)
  expect(typeof parsed).toBe('object')
  expect(parsed).not.toBeNull()
  expect(Array.isArray(parsed)).toBe(false)
  return parsed as T
}

/** Failure: exit 1, one `{"error": "..."}` line on stderr, nothing on stdout. */
async function fails(args: string[], extraEnvironment?: Record<string, string>): Promise<string> {
  const result = await cli(args, extraEnvironment)
  expect(result.exitCode).toBe(1)
  expect(result.stdout).toBe('')
  const lines = result.stderr.split('\n').filter((line) => line.trim() !== '')
  expect(lines).toHaveLength(1)
  const parsed = JSON.parse(lines[0]!)
  expect(Object.keys(parsed)).toEqual(['error'])
  expect(typeof parsed.error).toBe('string')
  expect(parsed.error.length).toBeGreaterThan(0)
  return parsed.error
}

async function api(method: string, path: string, key: string, json?: unknown) {
  const response = await fetch(rootUrl + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: json === undefined ? undefined : JSON.stringify(json),
  })
  const text = await response.text()
  let body: any = text
  try {
    body = JSON.parse(text)
  } catch {}
  return { status: response.status, body }
}

/** Every object in a JSON value, depth first. */
function objectsIn(value: unknown): Record<string, unknown>[] {
  if (Array.isArray(value)) return value.flatMap(objectsIn)
  if (typeof value === 'object' && value !== null) return [value as Record<string, unknown>, ...Object.values(value).flatMap(objectsIn)]
  return []
}

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'router-cli-test-'))
  // A server already running on the data dir before any CLI write.
  runtime = createRuntime(loadConfig({ RT_DATA_DIR: dataDir, RT_MASTER_KEY: masterKey, PORT: '0' }), { logger: silentLogger })
  const app = buildApp(runtime)
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, development: false, fetch: (request) => app.handle(request) })
  rootUrl = `http://127.0.0.1:${server.port}`
})

afterAll(async () => {
  await server.stop(true)
  runtime.storage.close()
  rmSync(dataDir, { recursive: true, force: true })
})

describe('operator CLI', () => {
  let workspaceId: string
  let managementKey: string
  let inferenceKeyId: string
  let inferenceSecret: string

  test('workspace create prints exactly {workspace:{id,name,kind,created_at}, management_key}', async () => {
    const created = await ok(['workspace', 'create', '--name', 'Acme'])
    expect(Object.keys(created).sort()).toEqual(['management_key', 'workspace'])
    expect(Object.keys(created.workspace).sort()).toEqual(['created_at', 'id', 'kind', 'name'])
    expect(created.workspace.name).toBe('Acme')
    expect(typeof created.workspace.id).toBe('string')
    expect(typeof created.workspace.kind).toBe('string')
    expect(created.workspace.created_at).toMatch(isoTimestamp)
    expect(created.management_key).toMatch(/^rt_mgmt_\S+$/)
    workspaceId = created.workspace.id
    managementKey = created.management_key
  })

  test("the running server sees the CLI's workspace and full-access key on its next request", async () => {
    const account = await api('GET', '/api/v1/account', managementKey)
    expect(account.status).toBe(200)
    expect(account.body.data.workspace).toEqual({ id: workspaceId, name: 'Acme', kind: expect.any(String), created_at: expect.any(String) })
    // Full access: a write works.
    const key = await api('POST', '/api/v1/keys', managementKey, { name: 'for cli tests' })
    expect(key.status).toBe(201)
    expect(key.body.data.key).toMatch(/^rt_live_/)
    inferenceKeyId = key.body.data.id
    inferenceSecret = key.body.data.key
  })

  test('workspace create without --name fails', async () => {
    await fails(['workspace', 'create'])
  })

  test('workspace set with allowed-ips, steering message, capture-bodies and suspended', async () => {
    const settings = await ok([
      'workspace',
      'set',
      '--workspace',
      workspaceId,
      '--allowed-ips',
      '10.0.0.0/8,192.168.1.5',
      '--steering-message',
      'Answer briefly.',
      '--capture-bodies',
      'true',
      '--suspended',
      'true',
    ])
    const text = JSON.stringify(settings)
    expect(text).toContain('10.0.0.0/8')
    expect(text).toContain('192.168.1.5')
    expect(text).toContain('Answer briefly.')
    const back = await ok(['workspace', 'set', '--workspace', workspaceId, '--suspended', 'false', '--allowed-ips', ''])
    expect(JSON.stringify(back)).not.toContain('10.0.0.0/8')
    // Allowlists never restrict management keys (SPEC "Authentication" 5).
    await ok(['workspace', 'set', '--workspace', workspaceId, '--allowed-ips', '10.0.0.0/8'])
    expect((await api('GET', '/api/v1/account', managementKey)).status).toBe(200)
    await ok(['workspace', 'set', '--workspace', workspaceId, '--allowed-ips', ''])
  })

  test('workspace set refuses an invalid allowlist entry, a non-boolean flag and an unknown workspace', async () => {
    expect(await fails(['workspace', 'set', '--workspace', workspaceId, '--allowed-ips', '10.0.0.0/8,not-an-ip'])).toContain('not-an-ip')
    await fails(['workspace', 'set', '--workspace', workspaceId, '--suspended', 'maybe'])
    await fails(['workspace', 'set', '--workspace', crypto.randomUUID(), '--suspended', 'false'])
  })

  test('member add prints the member; the account counts it and never shows the e-mail', async () => {
    const before = (await api('GET', '/api/v1/account', managementKey)).body.data.members.total
    const member = await ok(['member', 'add', '--workspace', workspaceId, '--email', 'ops@example.com'])
    expect(JSON.stringify(member)).toContain('ops@example.com')
    const account = await api('GET', '/api/v1/account', managementKey)
    expect(account.body.data.members.total).toBe(before + 1)
    expect(JSON.stringify(account.body)).not.toContain('ops@example.com')
    await fails(['member', 'add', '--workspace', workspaceId, '--email', 'not an email'])
  })

  test('mgmt-key create prints {id,key,prefix,read_only}; --read-only makes a read-only key', async () => {
    const full = await ok(['mgmt-key', 'create', '--workspace', workspaceId])
    expect(Object.keys(full).sort()).toEqual(['id', 'key', 'prefix', 'read_only'])
    expect(full.key).toMatch(/^rt_mgmt_/)
    expect(full.prefix).toMatch(/^rt_mgmt_/)
    expect(full.key.startsWith(full.prefix)).toBe(true)
    expect(full.key).not.toBe(full.prefix)
    expect(full.read_only).toBe(false)
    expect((await api('POST', '/api/v1/keys', full.key, { name: 'by second key' })).status).toBe(201)

    const readOnly = await ok(['mgmt-key', 'create', '--workspace', workspaceId, '--read-only'])
    expect(Object.keys(readOnly).sort()).toEqual(['id', 'key', 'prefix', 'read_only'])
    expect(readOnly.read_only).toBe(true)
    expect((await api('GET', '/api/v1/account', readOnly.key)).status).toBe(200)
    expect((await api('POST', '/api/v1/keys', readOnly.key, { name: 'refused' })).status).toBe(403)

    await fails(['mgmt-key', 'create', '--workspace', crypto.randomUUID()])
  })

  test('mgmt-key set flips the read-only flag; the running server applies it on the next request', async () => {
    const created = await ok(['mgmt-key', 'create', '--workspace', workspaceId])
    expect((await api('POST', '/api/v1/providers', created.key, { gateway: 'openai', key: 'sk-cli-aaaa' })).status).toBe(201)

    const record = await ok(['mgmt-key', 'set', '--id', created.id, '--read-only', 'true'])
    expect(record.read_only).toBe(true)
    expect(record.prefix).toBe(created.prefix)
    expect(JSON.stringify(record)).not.toContain(created.key)
    expect((await api('POST', '/api/v1/providers', created.key, { gateway: 'openai', key: 'sk-cli-bbbb' })).status).toBe(403)
    expect((await api('GET', '/api/v1/providers', created.key)).status).toBe(200)

    const back = await ok(['mgmt-key', 'set', '--id', created.id, '--read-only', 'false'])
    expect(back.read_only).toBe(false)
    expect((await api('POST', '/api/v1/providers', created.key, { gateway: 'openai', key: 'sk-cli-cccc' })).status).toBe(201)

    await fails(['mgmt-key', 'set', '--id', created.id])
    await fails(['mgmt-key', 'set', '--id', crypto.randomUUID(), '--read-only', 'true'])
  })

  test('key rotate prints {key, grace_until}', async () => {
    const started = Date.now()
    const rotated = await ok(['key', 'rotate', '--id', inferenceKeyId, '--grace-seconds', '120'])
    expect(Object.keys(rotated).sort()).toEqual(['grace_until', 'key'])
    expect(rotated.key).toMatch(/^rt_live_/)
    expect(rotated.key).not.toBe(inferenceSecret)
    expect(rotated.grace_until).toMatch(isoTimestamp)
    const graceUntil = Date.parse(rotated.grace_until)
    expect(graceUntil).toBeGreaterThanOrEqual(started + 119_000)
    expect(graceUntil).toBeLessThanOrEqual(Date.now() + 121_000)

    const again = await ok(['key', 'rotate', '--id', inferenceKeyId])
    expect(Object.keys(again).sort()).toEqual(['grace_until', 'key'])
    expect(again.key).not.toBe(rotated.key)
    expect(Date.parse(again.grace_until)).toBeGreaterThan(Date.now())

    // The key prefix the API shows follows the new secret.
    const shown = await api('GET', `/api/v1/keys/${inferenceKeyId}`, managementKey)
    expect(again.key.startsWith(shown.body.data.key_prefix)).toBe(true)

    await fails(['key', 'rotate', '--id', crypto.randomUUID()])
  })

  test('key webhook --url with RT_WEBHOOK_ALLOW_PRIVATE=1 accepts http loopback; --rotate-secret; --clear', async () => {
    const allow = { RT_WEBHOOK_ALLOW_PRIVATE: '1' }
    const set = await ok(['key', 'webhook', '--id', inferenceKeyId, '--url', 'http://127.0.0.1:9/hook'], allow)
    expect(Object.keys(set).sort()).toEqual(['signing_secret', 'url'])
    expect(set.url).toBe('http://127.0.0.1:9/hook')
    expect(set.signing_secret).toMatch(/^whsec_\S+$/)

    const rotated = await ok(['key', 'webhook', '--id', inferenceKeyId, '--rotate-secret'], allow)
    expect(Object.keys(rotated).sort()).toEqual(['signing_secret', 'url'])
    expect(rotated.url).toBe(set.url)
    expect(rotated.signing_secret).toMatch(/^whsec_\S+$/)
    expect(rotated.signing_secret).not.toBe(set.signing_secret)

    const cleared = await ok(['key', 'webhook', '--id', inferenceKeyId, '--clear'], allow)
    expect(cleared.url ?? null).toBeNull()
  })

  test('key webhook without RT_WEBHOOK_ALLOW_PRIVATE refuses loopback/private targets and http', async () => {
    await fails(['key', 'webhook', '--id', inferenceKeyId, '--url', 'http://127.0.0.1:9/hook'])
    await fails(['key', 'webhook', '--id', inferenceKeyId, '--url', 'https://127.0.0.1:9/hook'])
    await fails(['key', 'webhook', '--id', inferenceKeyId, '--url', 'https://10.1.2.3/hook'])
    await fails(['key', 'webhook', '--id', inferenceKeyId, '--url', 'https://[::1]/hook'])
    // A public address over plain http.
    await fails(['key', 'webhook', '--id', inferenceKeyId, '--url', 'http://93.184.215.14/hook'])
    await fails(['key', 'webhook', '--id', crypto.randomUUID(), '--url', 'http://127.0.0.1:9/hook'], { RT_WEBHOOK_ALLOW_PRIVATE: '1' })
  })

  test('key notify-email --on true/false', async () => {
    const on = await ok(['key', 'notify-email', '--id', inferenceKeyId, '--on', 'true'])
    expect(JSON.stringify(on)).toContain('true')
    const off = await ok(['key', 'notify-email', '--id', inferenceKeyId, '--on', 'false'])
    expect(JSON.stringify(off)).toContain('false')
    await fails(['key', 'notify-email', '--id', inferenceKeyId, '--on', 'perhaps'])
    await fails(['key', 'notify-email', '--id', crypto.randomUUID(), '--on', 'true'])
  })

  test('key limits sets caps and rate limits (none clears one, flags not given stay) and prints the key; bad values and unknown keys fail', async () => {
    const set = await ok(['key', 'limits', '--id', inferenceKeyId, '--rpm', '60', '--usd-day', '2.5'])
    expect(set.limits).toEqual({ requests_per_minute: 60, tokens_per_minute: null, usd_per_day: 2.5, usd_per_month: null })
    expect(set.limit_state).toEqual({ requests_last_minute: 0, tokens_last_minute: 0, usd_today: 0, usd_this_month: 0 })
    const changed = await ok(['key', 'limits', '--id', inferenceKeyId, '--rpm', 'none', '--tpm', '10000'])
    expect(changed.limits).toEqual({ requests_per_minute: null, tokens_per_minute: 10000, usd_per_day: 2.5, usd_per_month: null })
    expect(await fails(['key', 'limits', '--id', inferenceKeyId, '--rpm', '2.5'])).toBe('Invalid limits.requests_per_minute: expected a whole number of at least 1, or null for no limit.')
    expect(await fails(['key', 'limits', '--id', inferenceKeyId, '--usd-month', 'lots'])).toBe('Invalid limits.usd_per_month: must be a number or null.')
    await fails(['key', 'limits', '--id', inferenceKeyId])
    await fails(['key', 'limits', '--id', crypto.randomUUID(), '--rpm', '5'])
    // Nothing the refused commands said was kept.
    const stored = runtime.repositories.inferenceKeys.getById(inferenceKeyId)!
    expect(JSON.parse(stored.limits!)).toEqual({ requests_per_minute: null, tokens_per_minute: 10000, usd_per_day: 2.5, usd_per_month: null })
  })

  test('key mcp add / list / remove', async () => {
    const url = 'http://127.0.0.1:9/mcp'
    // A loopback http server: allowed only for tests and closed networks (the last describe).
    const added = await ok(['key', 'mcp', 'add', '--id', inferenceKeyId, '--url', url, '--name', 'tools'], { RT_WEBHOOK_ALLOW_PRIVATE: '1' })
    const attached = objectsIn(added).filter((entry) => entry.url === url)
    expect(attached).toHaveLength(1)
    expect(attached[0]!.name).toBe('tools')
    const serverId = attached[0]!.id
    expect(typeof serverId).toBe('string')

    const listed = await ok(['key', 'mcp', 'list', '--id', inferenceKeyId])
    expect(objectsIn(listed).filter((entry) => entry.url === url && entry.id === serverId)).toHaveLength(1)

    const removed = await ok(['key', 'mcp', 'remove', '--id', inferenceKeyId, '--server', serverId as string])
    expect(objectsIn(removed).filter((entry) => entry.url === url)).toHaveLength(0)
    const after = await ok(['key', 'mcp', 'list', '--id', inferenceKeyId])
    expect(objectsIn(after).filter((entry) => entry.url === url)).toHaveLength(0)

    await fails(['key', 'mcp', 'remove', '--id', inferenceKeyId, '--server', serverId as string])
    await fails(['key', 'mcp', 'add', '--id', inferenceKeyId, '--url', 'not a url'])
    await fails(['key', 'mcp', 'list', '--id', crypto.randomUUID()])
  })

  test('gateway set --gateway SLUG --enabled true/false', async () => {
    const disabled = await ok(['gateway', 'set', '--gateway', 'groq', '--enabled', 'false'])
    expect(JSON.stringify(disabled)).toContain('groq')
    const enabled = await ok(['gateway', 'set', '--gateway', 'groq', '--enabled', 'true'])
    expect(JSON.stringify(enabled)).toContain('groq')
    await fails(['gateway', 'set', '--gateway', 'no-such-gateway', '--enabled', 'false'])
    await fails(['gateway', 'set', '--gateway', 'groq'])
  })

  test('gateways prints {gateways:[...]}: 21 entries in catalog order with capabilities', async () => {
    const printed = await ok(['gateways'])
    expect(Object.keys(printed)).toEqual(['gateways'])
    const entries = printed.gateways as any[]
    expect(entries).toHaveLength(21)
    expect(entries.map((entry) => entry.id)).toEqual(gatewayCatalog.map((gateway) => gateway.id))
    for (const entry of entries) {
      for (const field of ['id', 'name', 'base_url', 'auth_header']) expect(typeof entry[field]).toBe('string')
      expect(typeof entry.routable).toBe('boolean')
      expect(typeof entry.decisions).toBe('boolean')
      expect(Object.keys(entry.capabilities).sort()).toEqual(['batch', 'chain', 'chat', 'decisioner', 'embeddings', 'omit_params', 'responses', 'retrieve'])
      for (const name of ['chat', 'embeddings', 'chain', 'retrieve', 'batch', 'decisioner']) expect(typeof entry.capabilities[name]).toBe('boolean')
      expect(['native', 'translated', 'only']).toContain(entry.capabilities.responses)
      expect(Array.isArray(entry.capabilities.omit_params)).toBe(true)
    }
    expect(entries.filter((entry) => entry.routable)).toHaveLength(19)
    expect(entries.filter((entry) => entry.decisions)).toHaveLength(8)
    const byId = new Map(entries.map((entry) => [entry.id, entry]))
    for (const gateway of gatewayCatalog) expect(byId.get(gateway.id).base_url).toBe(gateway.baseUrl)
  })

  test('RT_GATEWAY_URL_<SLUG> shows in base_url (slug upper-cased, non-alphanumerics as _)', async () => {
    const slug = gatewayOverrideSlug('cloudflare-ai-gateway')
    expect(slug).toBe('CLOUDFLARE_AI_GATEWAY')
    const printed = await ok(['gateways'], { RT_GATEWAY_URL_CLOUDFLARE_AI_GATEWAY: 'http://127.0.0.1:4010/cf', RT_GATEWAY_URL_OPENAI_RESPONSES: 'http://127.0.0.1:4011/r' })
    const byId = new Map((printed.gateways as any[]).map((entry) => [entry.id, entry]))
    expect(byId.get('cloudflare-ai-gateway').base_url).toBe('http://127.0.0.1:4010/cf')
    expect(byId.get('openai-responses').base_url).toBe('http://127.0.0.1:4011/r')
    expect(byId.get('openai').base_url).toBe(gatewayCatalog.find((gateway) => gateway.id === 'openai')!.baseUrl)
  })

  test('jobs run with an unknown job name fails', async () => {
    await fails(['jobs', 'run', 'nope'])
  })

  test('unknown command and no command fail with {error} on stderr', async () => {
    await fails(['frobnicate'])
    await fails([])
    await fails(['key', 'webhook', '--id', inferenceKeyId])
  })
})

describe('CLI help and incomplete commands', () => {
  /** A data dir that help and usage errors must never create (no database touched). */
  const neverCreated = () => join(dataDir, 'never-created')

  test('--help and -h print human help on stdout and exit 0 for the CLI, a group and a command, without touching a database', async () => {
    const cases: [string[], string[]][] = [
      [['--help'], ['usage: ./scripts/cli <command>', 'workspace create --name N', 'key mcp add --id KEY_ID --url URL [--name N]', 'jobs run catalog-crawl|budget-learn|batch-refresh|webhooks|log-prune|cache-prune|all']],
      [['-h'], ['usage: ./scripts/cli <command>']],
      [['workspace', '--help'], ['workspace create --name N', 'workspace set --workspace ID']],
      [['key', '-h'], ['key rotate --id KEY_ID', 'key webhook --id KEY_ID (--url URL | --rotate-secret | --clear)', 'key mcp list --id KEY_ID']],
      [['key', 'mcp', '--help'], ['key mcp add', 'key mcp list', 'key mcp remove --id KEY_ID --server ID']],
      [['mgmt-key', '--help'], ['mgmt-key create --workspace ID [--read-only]', 'mgmt-key set --id ID --read-only true/false']],
      [['jobs', '--help'], ['jobs run catalog-crawl|budget-learn|batch-refresh|webhooks|log-prune|cache-prune|all']],
      [['workspace', 'set', '--help'], ['usage: ./scripts/cli workspace set', '--allowed-ips LIST', '--suspended true/false']],
      [['gateways', '-h'], ['usage: ./scripts/cli gateways']],
      [['jobs', 'run', '--help'], ['usage: ./scripts/cli jobs run']],
    ]
    for (const [args, expected] of cases) {
      const result = await cli(args, { RT_DATA_DIR: neverCreated() })
      expect({ args, exitCode: result.exitCode, stderr: result.stderr }).toEqual({ args, exitCode: 0, stderr: '' })
      expect(result.stdout.startsWith('usage: ')).toBe(true)
      for (const text of expected) expect(result.stdout).toContain(text)
    }
    expect(existsSync(neverCreated())).toBe(false)
  })

  test('an incomplete command exits 1: the {"error"} line, then the sub-commands for a person, on stderr', async () => {
    const cases: [string[], string[]][] = [
      [['workspace'], ['workspace create --name N', 'workspace set --workspace ID']],
      [['key'], ['key rotate', 'key notify-email --id KEY_ID --on true/false', 'key mcp remove']],
      [['key', 'mcp'], ['key mcp add', 'key mcp list', 'key mcp remove']],
      [['mgmt-key'], ['mgmt-key create', 'mgmt-key set']],
      [['member'], ['member add --workspace ID --email E']],
      [['gateway'], ['gateway set --gateway SLUG --enabled true/false']],
      [['jobs'], ['jobs run']],
    ]
    for (const [args, expected] of cases) {
      const result = await cli(args, { RT_DATA_DIR: neverCreated() })
      expect({ args, exitCode: result.exitCode, stdout: result.stdout }).toEqual({ args, exitCode: 1, stdout: '' })
      const [first, ...rest] = result.stderr.split('\n')
      expect(JSON.parse(first!)).toEqual({ error: expect.stringContaining(`incomplete command '${args.join(' ')}'`) })
      for (const text of expected) expect(rest.join('\n')).toContain(text)
    }
    expect(existsSync(neverCreated())).toBe(false)
  })

  test('an unknown flag or a stray word is a usage error naming it', async () => {
    expect(await fails(['workspace', 'create', '--nam', 'x'], { RT_DATA_DIR: neverCreated() })).toContain("'--nam'")
    expect(await fails(['gateways', 'extra'], { RT_DATA_DIR: neverCreated() })).toContain('gateways extra')
    expect(await fails(['jobs', 'run'], { RT_DATA_DIR: neverCreated() })).toContain('catalog-crawl')
    expect(existsSync(neverCreated())).toBe(false)
  })
})

describe('CLI and the master key', () => {
  test('a well-formed but wrong RT_MASTER_KEY is refused with a clear message and writes nothing', async () => {
    const before = runtime.repositories.workspaces.count()
    const error = await fails(['workspace', 'create', '--name', 'written under the wrong key'], { RT_MASTER_KEY: Buffer.alloc(32, 12).toString('base64') })
    expect(error).toContain('not the key of the database')
    expect(runtime.repositories.workspaces.count()).toBe(before)
  })
})

describe('CLI key mcp add: the webhook target rule (SPEC "Batch notifications")', () => {
  let keyId: string

  beforeAll(async () => {
    const created = await ok(['workspace', 'create', '--name', 'MCP targets'])
    const key = await api('POST', '/api/v1/keys', created.management_key, { name: 'mcp targets' })
    expect(key.status).toBe(201)
    keyId = key.body.data.id
  })

  const attached = async () => objectsIn(await ok(['key', 'mcp', 'list', '--id', keyId])).filter((entry) => typeof entry.url === 'string')

  // Each refused URL with what its message must say.
  const refused: [string, RegExp][] = [
    ['https://169.254.169.254/latest/meta-data/', /169\.254\.169\.254, a link-local address/],
    ['https://127.0.0.1:6379/', /127\.0\.0\.1, a loopback address/],
    ['https://[::1]/mcp', /::1, a loopback address/],
    ['https://10.1.2.3/mcp', /10\.1\.2\.3, a private address/],
    ['https://[fd00::1]/mcp', /fd00::1, a unique-local address/],
    ['https://[fd12:3456::8]/mcp', /unique-local/],
    ['https://localhost/mcp', /host 'localhost' resolves to (127\.0\.0\.1|::1), a loopback address/],
    ['http://93.184.215.14/mcp', /must use https/],
    ['https://user:secret@93.184.215.14/mcp', /must not carry credentials/],
  ]

  test('refuses private, loopback, link-local, unique-local and metadata targets, http and credentials, with a clear error; saves nothing', async () => {
    const errors = await Promise.all(refused.map(([url]) => fails(['key', 'mcp', 'add', '--id', keyId, '--url', url])))
    for (const [index, [url, reason]] of refused.entries()) {
      expect({ url, error: errors[index] }).toEqual({ url, error: expect.stringMatching(reason) })
      expect(errors[index]!.startsWith('MCP server ')).toBe(true)
    }
    expect(await attached()).toEqual([])
  })

  test('a public https address is saved', async () => {
    const added = await ok(['key', 'mcp', 'add', '--id', keyId, '--url', 'https://93.184.215.14/mcp'])
    expect(objectsIn(added).filter((entry) => entry.url === 'https://93.184.215.14/mcp')).toHaveLength(1)
  })

  test('RT_WEBHOOK_ALLOW_PRIVATE=1 accepts the private and http targets; credentials stay refused', async () => {
    const allow = { RT_WEBHOOK_ALLOW_PRIVATE: '1' }
    const allowed = refused.map(([url]) => url).filter((url) => !url.includes('@'))
    // One at a time: each add is a write to the same key.
    for (const url of allowed) await ok(['key', 'mcp', 'add', '--id', keyId, '--url', url], allow)
    const urls = (await attached()).map((entry) => entry.url)
    for (const url of allowed) expect(urls).toContain(new URL(url).href)
    expect(await fails(['key', 'mcp', 'add', '--id', keyId, '--url', 'https://user:secret@127.0.0.1/mcp'], allow)).toContain('must not carry credentials')
  })
})
