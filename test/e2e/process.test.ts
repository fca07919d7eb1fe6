/**
 * The real service process (CONTRACT §1–3, §8): first start on an empty data dir, master key file,
 * SIGTERM, later starts, and the listener roles. Output is read as it arrives; no fixed sleeps.
 */
import { describe, expect, test } from 'bun:test'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { managementKeyLine, startService as start, tempDir } from '../harness/service-process'

describe('service process', () => {
  test('first start prints the management key (stderr) and writes master.key (0600); SIGTERM exits 0; a second start prints no key', async () => {
    const dataDir = tempDir()

    const first = start(dataDir)
    const { rootUrl } = await first.listening()
    const managementKey = await first.managementKey()
    const keyLines = first.stderrLines().filter(managementKeyLine)
    expect(keyLines).toHaveLength(1)
    expect(keyLines[0]!.startsWith('management key: rt_mgmt_')).toBe(true)
    // The secret is never in the log stream.
    expect(first.stdout).not.toContain('rt_mgmt_')

    // RT_MASTER_KEY unset: a random key file, mode 0600.
    const masterKeyPath = join(dataDir, 'master.key')
    const mode = statSync(masterKeyPath).mode & 0o777
    expect(mode.toString(8)).toBe('600')
    expect(statSync(masterKeyPath).size).toBeGreaterThan(0)
    // ...and a warning about it (CONTRACT §3), as a log line.
    const warnings = [...first.stdoutLines(), ...first.stderr.split('\n')]
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => entry.level === 'warn' && /master/i.test(JSON.stringify(entry)))
    expect(warnings.length).toBeGreaterThanOrEqual(1)

    // The printed key is a full-access key of the `default` workspace.
    const account = await fetch(`${rootUrl}/api/v1/account`, { headers: { authorization: `Bearer ${managementKey}` } })
    expect(account.status).toBe(200)
    const snapshot = (await account.json()) as { data: { workspace: { name: string } } }
    expect(snapshot.data.workspace.name).toBe('default')
    const write = await fetch(`${rootUrl}/api/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'e2e' }),
    })
    expect(write.status).toBe(201)

    expect(await first.stop()).toBe(0)
    const masterKeyBefore = await Bun.file(masterKeyPath).text()

    const second = start(dataDir)
    const again = await second.listening()
    // The key from the first start still works.
    expect((await fetch(`${again.rootUrl}/api/v1/account`, { headers: { authorization: `Bearer ${managementKey}` } })).status).toBe(200)
    expect(await second.stop()).toBe(0)
    // Later starts print no secret: no key line anywhere in the whole output.
    expect(second.stderrLines().filter(managementKeyLine)).toEqual([])
    expect(second.stdout).not.toContain('rt_mgmt_')
    expect(second.stderr).not.toContain('rt_mgmt_')
    // The master key file is reused, not replaced.
    expect(await Bun.file(masterKeyPath).text()).toBe(masterKeyBefore)
  })

  test('stdout is JSON lines only: the ready line is the `listening` log line; the key line is on stderr', async () => {
    const service = start(tempDir())
    const { line: listeningLine, rootUrl } = await service.listening()
    await service.managementKey()
    await fetch(`${rootUrl}/healthz`)
    expect(await service.stop()).toBe(0)
    expect(service.stdoutLines().length).toBeGreaterThan(1)
    for (const line of service.stdoutLines()) expect(() => JSON.parse(line)).not.toThrow()
    expect(JSON.parse(listeningLine)).toMatchObject({ level: 'info', event: 'listening', role: 'all', message: `listening on ${rootUrl} (role all)` })
    expect(service.stdoutLines().filter((line) => line.includes('listening on'))).toEqual([listeningLine])
  })

  test('the listening line is printed at RT_LOG_LEVEL=warn too (CONTRACT §2)', async () => {
    const service = start(tempDir(), { RT_LOG_LEVEL: 'warn' })
    await service.listening()
    expect(await service.stop()).toBe(0)
  })

  test('RT_ROLE=proxy serves /healthz, /metrics and /mcp but not /api/v1', async () => {
    const service = start(tempDir(), { RT_ROLE: 'proxy' })
    const { rootUrl } = await service.listening()
    const managementKey = await service.managementKey()

    const health = await fetch(`${rootUrl}/healthz`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ ok: true })
    expect((await fetch(`${rootUrl}/metrics`)).status).toBe(200)

    const mcp = await fetch(`${rootUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    })
    expect(mcp.status).toBe(200)
    expect(await mcp.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} })

    const account = await fetch(`${rootUrl}/api/v1/account`, { headers: { authorization: `Bearer ${managementKey}` } })
    expect(account.status).toBe(404)
    expect(await service.stop()).toBe(0)
  })

  test('RT_ROLE=app serves /api/v1 and /healthz but not /mcp', async () => {
    const service = start(tempDir(), { RT_ROLE: 'app' })
    const { rootUrl } = await service.listening()
    const managementKey = await service.managementKey()

    expect((await fetch(`${rootUrl}/healthz`)).status).toBe(200)
    expect((await fetch(`${rootUrl}/metrics`)).status).toBe(200)
    const account = await fetch(`${rootUrl}/api/v1/account`, { headers: { authorization: `Bearer ${managementKey}` } })
    expect(account.status).toBe(200)

    const mcp = await fetch(`${rootUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    })
    expect(mcp.status).toBe(404)
    expect(await service.stop()).toBe(0)
  })
})

describe('a port already in use', () => {
  test('a second start on a busy port exits 1 with one JSON line naming host:port as in use; the first keeps serving alone', async () => {
    const first = start(tempDir())
    const { rootUrl } = await first.listening()
    const port = new URL(rootUrl).port

    const second = start(tempDir(), { PORT: port })
    expect(await second.exited()).toBe(1)
    expect(second.stdout).not.toContain('listening on')
    const lines = [...second.stdoutLines(), ...second.stderrLines()]
    const failures = lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.level === 'error')
    expect(failures).toHaveLength(1)
    expect(failures[0]!.message).toContain(`127.0.0.1:${port} is in use`)
    // No plain line either (the key of a database that never served is not spent).
    expect(lines.filter((line) => !line.startsWith('{'))).toEqual([])

    // Every request still lands on the first process.
    for (let index = 0; index < 20; index++) expect((await fetch(`${rootUrl}/healthz`)).status).toBe(200)
    expect(await first.stop()).toBe(0)
  })
})

describe('the master key of the database', () => {
  test('a well-formed but wrong RT_MASTER_KEY: the service refuses to start, with one JSON line saying so (exit 1)', async () => {
    const dataDir = tempDir()
    const first = start(dataDir, { RT_MASTER_KEY: Buffer.alloc(32, 1).toString('base64') })
    await first.listening()
    expect(await first.stop()).toBe(0)

    const wrong = start(dataDir, { RT_MASTER_KEY: Buffer.alloc(32, 2).toString('hex') })
    expect(await wrong.exited()).toBe(1)
    expect(wrong.stdout).not.toContain('listening on')
    const failure = JSON.parse(wrong.stderrLines().at(-1)!) as Record<string, unknown>
    expect(failure).toMatchObject({ level: 'error', event: 'startup_failed' })
    expect(failure.message).toContain('not the key of the database')
  })
})

describe('TLS', () => {
  const openssl = Bun.which('openssl')
  test.skipIf(!openssl)('with RT_TLS_CERT and RT_TLS_KEY the listener speaks HTTPS (CONTRACT §2)', async () => {
    const dir = tempDir()
    const made = Bun.spawnSync([openssl!, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=localhost'])
    expect(made.exitCode).toBe(0)
    const service = start(join(dir, 'data'), { RT_TLS_CERT: join(dir, 'cert.pem'), RT_TLS_KEY: join(dir, 'key.pem') })
    const { line } = await service.listening()
    expect(line).toContain('listening on https://')
    const port = /:(\d+)/.exec(line.slice(line.indexOf('https://') + 8))![1]
    const response = await fetch(`https://127.0.0.1:${port}/healthz`, { tls: { rejectUnauthorized: false } } as RequestInit)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ ok: true })
    expect(await service.stop()).toBe(0)
  })
})

describe('SIGTERM with a request in flight', () => {
  test('the request finishes, its log row is written, and the process exits 0 (CONTRACT §2)', async () => {
    const { startMockGateway } = await import('../harness/mock-gateway')
    await using mock = await startMockGateway({
      handler: (request) =>
        request.path.endsWith('/chat/completions')
          ? { delayMs: 800, json: { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'late' }, finish_reason: 'stop' }] } }
          : undefined,
    })
    const dataDir = tempDir()
    const service = start(dataDir, { RT_GATEWAY_URL_OPENAI: mock.url })
    const { rootUrl } = await service.listening()
    const managementKey = await service.managementKey()
    const admin = (path: string, body: unknown) =>
      fetch(`${rootUrl}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
        (response) => response.json() as Promise<{ data: any }>,
      )
    const provider = (await admin('/providers', { gateway: 'openai', key: 'sk-upstream-secret-9' })).data
    const key = (await admin('/keys', { routing: { targets: [{ provider_key_id: provider.id }] } })).data

    const inFlight = fetch(`${rootUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    })
    // Signal once the upstream has the request, so it is truly in flight.
    while (mock.calls('/chat/completions').length === 0) await new Promise((resolve) => setImmediate(resolve))
    service.child.kill('SIGTERM')
    const response = await inFlight
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).choices[0].message.content).toBe('late')
    expect(await service.stop()).toBe(0)

    const { Database } = await import('bun:sqlite')
    const database = new Database(join(dataDir, 'router.db'), { readonly: true })
    const rows = database.query('select status, endpoint from request_logs').all()
    database.close()
    expect(rows).toEqual([{ status: 200, endpoint: 'chat' }])
  })
})
