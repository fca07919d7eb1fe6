/**
 * The deployment files (CONTRACT §10, "deploy as they stand"): fly.toml and litefs.yml parse, and
 * they, the Dockerfile and the container entry agree with each other and with the paths and
 * variables the service reads.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { loadConfig } from '../../src/config/env'
import { internalLogsPath } from '../../src/cluster/ship-logs'
import { spoolPath } from '../../src/cluster/spool'

const root = join(import.meta.dir, '../..')
const read = (name: string) => readFileSync(join(root, name), 'utf8')

const fly = Bun.TOML.parse(read('fly.toml')) as any
const litefs = Bun.YAML.parse(read('litefs.yml')) as any
const dockerfile = read('Dockerfile')
const entry = read('scripts/container-entry')

/** LiteFS expands `${NAME}` from the environment; fly.toml's [env] is that environment. */
const expand = (text: string) => text.replace(/\$\{(\w+)\}/g, (_, name: string) => fly.env[name] ?? `\${${name}}`)
const inside = (path: string, folder: string) => !relative(folder, path).startsWith('..')

describe('fly.toml', () => {
  test('the HTTP service is the port the service listens on, checked on /healthz, with a volume', () => {
    expect(typeof fly.app).toBe('string')
    expect(typeof fly.primary_region).toBe('string')
    expect(fly.build.dockerfile).toBe('Dockerfile')
    // Longer than the service's 30 s drain on SIGTERM.
    expect(fly.kill_timeout).toBe('35s')
    // fly sends SIGINT unless told; the service finishes requests in flight on SIGTERM (CONTRACT §2).
    expect(fly.kill_signal).toBe('SIGTERM')
    expect(fly.mounts.auto_extend_size_threshold).toBeGreaterThan(0)
    expect(typeof fly.mounts.auto_extend_size_limit).toBe('string')
    expect(fly.http_service.internal_port).toBe(loadConfig(fly.env).port)
    expect(fly.http_service.checks).toEqual([expect.objectContaining({ method: 'GET', path: '/healthz' })])
    // Replicas serve their region: never stopped for idleness.
    expect(fly.http_service.auto_stop_machines).toBe('off')
    expect(fly.mounts.destination).toBe('/data')
    expect(typeof fly.mounts.source).toBe('string')
  })

  test('the service reads the database from the LiteFS mount and keeps its own files on the volume, outside the mount', () => {
    const config = loadConfig(fly.env)
    expect(config.litefsDir).toBe('/litefs')
    expect(config.dbPath).toBe('/litefs/router.db')
    expect(inside(config.dataDir, fly.mounts.destination)).toBe(true)
    expect(inside(spoolPath(config.dataDir), config.litefsDir!)).toBe(false)
    // Replicas reach the primary over fly's private IPv6 network: the listener takes IPv6.
    expect(config.host).toBe('::')
    expect(config.trustProxy).toBe(true)
  })
})

describe('litefs.yml', () => {
  test('mounts where the service reads, keeps its data on the volume apart from the service, and leases through Consul', () => {
    expect(expand(litefs.fuse.dir)).toBe(loadConfig(fly.env).litefsDir as string)
    const dataDir = litefs.data.dir as string
    expect(inside(dataDir, fly.mounts.destination)).toBe(true)
    expect(inside(dataDir, loadConfig(fly.env).dataDir)).toBe(false)
    expect(inside(loadConfig(fly.env).dataDir, dataDir)).toBe(false)
    expect(litefs.lease.type).toBe('consul')
    // A LiteFS that fails at start stops the machine (fly restarts it) rather than idling without the service.
    expect(litefs['exit-on-error']).toBe(true)
    expect(litefs.lease.promote).toBe(true)
    expect(litefs.lease.consul.url).toBe('${FLY_CONSUL_URL}')
    expect(litefs.lease['advertise-url']).toContain('.vm.${FLY_APP_NAME}.internal')
  })

  test('runs the service as its last command, and no proxy (inference POSTs are served on every node)', () => {
    const commands = (litefs.exec as { cmd: string }[]).map((step) => step.cmd)
    expect(commands.at(-1)).toContain('bun run src/main.ts')
    expect(litefs.proxy).toBeUndefined()
  })
})

describe('the image', () => {
  test('the Dockerfile installs fuse3 and the litefs binary from its official image, carries litefs.yml, and checks /healthz', () => {
    expect(dockerfile).toMatch(/FROM flyio\/litefs:[\d.]+ AS litefs/)
    expect(dockerfile).toContain('COPY --from=litefs /usr/local/bin/litefs /usr/local/bin/litefs')
    expect(dockerfile).toMatch(/apt-get install[^\n]*fuse3/)
    expect(dockerfile).toContain('COPY litefs.yml /etc/litefs.yml')
    expect(dockerfile).toMatch(/HEALTHCHECK[^\n]*\n?[^\n]*\/healthz/)
    expect(dockerfile).toContain('ENTRYPOINT ["/app/scripts/container-entry"]')
    expect(dockerfile).toContain('COPY scripts/container-entry ./scripts/container-entry')
  })

  test('the entry mounts LiteFS when RT_LITEFS_DIR is set and otherwise runs the service, unprivileged', () => {
    expect(statSync(join(root, 'scripts/container-entry')).mode & 0o111).not.toBe(0)
    expect(entry).toContain('exec litefs mount -config /etc/litefs.yml')
    expect(entry).toContain('exec setpriv --reuid=bun --regid=bun --init-groups bun run src/main.ts')
  })

  test('.dockerignore keeps local data, keys, tools and git out of the build context', () => {
    const ignored = read('.dockerignore').split('\n').filter((line) => line && !line.startsWith('#'))
    for (const name of ['.git', 'node_modules', 'data', '.tools']) expect(ignored).toContain(name)
  })

  test('the internal path replicas ship to is the one the service serves', () => {
    expect(internalLogsPath).toBe('/internal/v1/logs')
  })
})
