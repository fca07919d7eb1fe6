/** Reads the operator environment (CONTRACT §2–4) once into a frozen Config. */
import { isAbsolute, join, relative, resolve, sep } from 'node:path'
import { parseOtlpHeaders, type TracingSettings } from '../observability/tracing-settings'

export type Role = 'all' | 'proxy' | 'app'
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

export interface Config {
  host: string
  port: number
  role: Role
  dataDir: string
  dbPath: string
  masterKey: string | undefined
  tlsCert: string | undefined
  tlsKey: string | undefined
  trustProxy: boolean
  deadlineMs: number
  /** RT_STREAM_IDLE_MS: the longest silence a streamed answer may keep once it has begun. */
  streamIdleMs: number
  /** RT_BATCH_UPLOAD_IDLE_MS: the longest silence of a batch upload before it is dropped (408). */
  batchUploadIdleMs: number
  /** RT_MCP_TOOL_TIMEOUT_MS: the longest one MCP tool call may take (also cut to the request's time left). */
  mcpToolTimeoutMs: number
  keytermsEnabled: boolean
  decisionerEnabled: boolean
  adsUrl: string | undefined
  keytermsUrl: string | undefined
  smtpUrl: string | undefined
  webhookAllowPrivate: boolean
  logLevel: LogLevel
  /** RT_GATEWAY_URL_<SLUG> overrides, keyed by the upper-cased slug form. */
  gatewayUrlOverrides: Readonly<Record<string, string>>
  /** RT_LITEFS_DIR: LiteFS's mount; set, the node is a replica while `$RT_LITEFS_DIR/.primary` exists (CONTRACT §10). */
  litefsDir: string | undefined
  /** LiteFS's local HTTP API (RT_LITEFS_API_URL); set only with RT_LITEFS_DIR. */
  litefsApiUrl: string | undefined
  /** RT_LITEFS_HALT_LOCK=1: a CLI command run under `litefs run -with-halt-lock-on`, writing on a replica. */
  litefsHaltLock: boolean
  /** A replica's /healthz fails above this lag behind the primary (RT_MAX_LAG_MS). */
  maxLagMs: number
  /** RT_CLUSTER_SECRET: the bearer a replica shows the primary when it ships request-log rows. */
  clusterSecret: string | undefined
  /** RT_PRIMARY_URL: the primary's base URL for a replica; unset, it is derived from the fly.io names. */
  primaryUrl: string | undefined
  /** FLY_APP_NAME, set by fly.io: names the primary's private address `<host>.vm.<app>.internal`. */
  flyAppName: string | undefined
  /** RT_AUDIT_RETENTION_DAYS: audit events older than this are deleted by the daily `log-prune` job (CONTRACT §12). */
  auditRetentionDays: number
  /** RT_LOG_RETENTION_DAYS: request-log rows older than this are deleted by `log-prune` (CONTRACT §14); roll-ups stay. */
  logRetentionDays: number
  /** RT_BODY_RETENTION_DAYS: captured request bodies older than this are cleared by `log-prune`; the rows stay. */
  bodyRetentionDays: number
  /** RT_LIMIT_SYNC_MS: how often a node reads again what the database shows of its limited keys' usage (CONTRACT §11). */
  limitSyncMs: number
  /** RT_CACHE_PATH: this node's response cache file (CONTRACT §15), never inside LiteFS's mount. */
  cachePath: string
  /** RT_CACHE_MAX_MB: the cache file's size bound in MiB; least recently used entries go first. */
  cacheMaxMb: number
  /** OpenTelemetry traces (CONTRACT §13) from the standard OTEL_* variables; undefined (off) without an OTLP endpoint. */
  tracing: TracingSettings | undefined
}

/** CONTRACT §13: off unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set. */
function tracingSettings(environment: Record<string, string | undefined>): TracingSettings | undefined {
  const tracesEndpoint = environment.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()
  const endpoint = environment.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()
  if (!tracesEndpoint && !endpoint) return undefined
  // The signal's own endpoint is used as given; the general one gets the traces path (OTLP/HTTP spec).
  const url = tracesEndpoint || `${endpoint!.replace(/\/+$/, '')}/v1/traces`
  try {
    new URL(url)
  } catch {
    throw new ConfigError(`OTEL_EXPORTER_OTLP${tracesEndpoint ? '_TRACES' : ''}_ENDPOINT must be a URL, got '${tracesEndpoint || endpoint}'`)
  }
  const protocolName = environment.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL'
  const protocol = oneOf(environment, protocolName, ['http/protobuf', 'http/json'] as const, 'http/protobuf')
  const sampler = oneOf(environment, 'OTEL_TRACES_SAMPLER', ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const, 'parentbased_always_on')
  const samplerArg = environment.OTEL_TRACES_SAMPLER_ARG
  if (samplerArg !== undefined && samplerArg !== '' && !(Number(samplerArg) >= 0 && Number(samplerArg) <= 1)) throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got '${samplerArg}'`)
  return {
    url,
    protocol,
    headers: { ...parseOtlpHeaders(environment.OTEL_EXPORTER_OTLP_HEADERS), ...parseOtlpHeaders(environment.OTEL_EXPORTER_OTLP_TRACES_HEADERS) },
    serviceName: environment.OTEL_SERVICE_NAME?.trim() || 'router',
    sampler,
    samplerArg,
    timeoutMs: integerSetting(environment, environment.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000, 1, 600_000),
  }
}

export class ConfigError extends Error {}

/** The repository root: the directory holding scripts/, src/ and db/. */
export const repositoryRoot = resolve(import.meta.dir, '../..')

/**
 * The data directory when RT_DATA_DIR is unset: `data/` of the repository, wherever the command
 * runs from, so the server and the CLI started from another directory share one database and one
 * master key. A one-file build has no repository: `./data` of the current directory (CONTRACT §3).
 * An RT_DATA_DIR or RT_DB_PATH that is given resolves from the current directory.
 */
export const defaultDataDir = Bun.isStandaloneExecutable ? resolve('data') : join(repositoryRoot, 'data')

/** Every variable loadConfig reads, for `scripts/start --help`: [name, meaning]. */
export const environmentVariables: readonly (readonly [string, string])[] = [
  ['HOST', 'listen address, default 127.0.0.1'],
  ['PORT', 'listen port, default 8080 (0 picks a free port); a port in use is an error'],
  ['RT_ROLE', 'all (default), proxy (/v1, /mcp, /healthz) or app (/api/v1, dashboard, /healthz)'],
  ['RT_TLS_CERT, RT_TLS_KEY', 'PEM file paths; both set: the listener speaks HTTPS'],
  ['RT_DATA_DIR', Bun.isStandaloneExecutable ? "master.key and router.db; default ./data of the current directory" : `master.key and router.db; default ${defaultDataDir} (the repository's data/, from any current directory); a relative path resolves from the current directory`],
  ['RT_DB_PATH', 'the SQLite database file, default $RT_DATA_DIR/router.db ($RT_LITEFS_DIR/router.db with RT_LITEFS_DIR); a relative path resolves from the current directory'],
  ['RT_LITEFS_DIR', "LiteFS's mount (e.g. /litefs): the node is a read-only replica while $RT_LITEFS_DIR/.primary exists, the primary otherwise; re-read when it changes"],
  ['RT_LITEFS_API_URL', "LiteFS's local HTTP API, default http://127.0.0.1:20202 (with RT_LITEFS_DIR): its /info and /events confirm the role and announce a promotion at once"],
  ['RT_LITEFS_HALT_LOCK', "1 for one CLI command run on a replica under `litefs run -with-halt-lock-on $RT_DB_PATH --`: LiteFS lets it write there (forwarding to the primary), so the CLI writes instead of refusing"],
  ['RT_MAX_LAG_MS', "a replica's /healthz answers 503 while its lag behind the primary ($RT_LITEFS_DIR/.lag) exceeds this; default 10000"],
  ['RT_CLUSTER_SECRET', 'the bearer a replica shows the primary when it ships request-log rows (POST /internal/v1/logs); unset on the primary: that path answers 401'],
  ['RT_PRIMARY_URL', "a replica's URL of the primary, default http://<primary host>.vm.$FLY_APP_NAME.internal:$PORT"],
  ['RT_MASTER_KEY', '32 bytes (64 hex digits or base64) encrypting stored secrets; unset: $RT_DATA_DIR/master.key, created only for a database without secrets. A key that is not the database\'s own is refused'],
  ['RT_GATEWAY_URL_<SLUG>', 'replaces one gateway kind\'s base URL; SLUG is the catalog id upper-cased, non-alphanumerics as _'],
  ['RT_TRUST_PROXY', '1: the caller address is Fly-Client-IP or the first X-Forwarded-For entry'],
  ['RT_DEADLINE_MS', 'request deadline, default 95000'],
  ['RT_STREAM_IDLE_MS', 'a started stream with no upstream byte for this long is ended as stream_aborted; default 45000, 1000 to 90000'],
  ['RT_BATCH_UPLOAD_IDLE_MS', 'a batch upload silent this long is dropped with 408; default 120000 (SPEC: two minutes), 1000 to 120000'],
  ['RT_MCP_TOOL_TIMEOUT_MS', 'the longest one MCP tool call on a key may take before its result is an error text for the model; default 30000, 100 to 90000 (also cut to the request deadline)'],
  ['RT_KEYTERMS_ENABLED, RT_DECISIONER_ENABLED', 'operator flags; 1 turns on'],
  ['RT_ADS_URL, RT_KEYTERMS_URL', 'the companion-ad and keyterm link services'],
  ['RT_SMTP_URL', 'SMTP server for batch e-mails, e.g. smtp://127.0.0.1:2525'],
  ['RT_WEBHOOK_ALLOW_PRIVATE', '1: webhooks and MCP servers may target loopback/private addresses and http (tests, closed networks)'],
  ['BUN_CONFIG_MAX_HTTP_REQUESTS', 'Bun\'s cap on concurrent upstream requests, read when Bun starts; scripts/start sets 65535 (Bun\'s own default is 256)'],
  ['RT_LOG_LEVEL', 'debug, info (default), warn, error'],
  ['RT_AUDIT_RETENTION_DAYS', 'days audit events are kept (the daily log-prune job deletes older ones); default 400, a whole number from 1'],
  ['RT_LOG_RETENTION_DAYS', 'days request-log rows are kept (log-prune deletes older ones; usage roll-ups stay); default 90, a whole number from 1'],
  ['RT_BODY_RETENTION_DAYS', 'days captured request bodies are kept (log-prune clears older ones; the rows stay); default 7, a whole number from 1'],
  ['OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OpenTelemetry traces over OTLP/HTTP to this collector (the general endpoint gets /v1/traces); unset: no traces'],
  ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http/protobuf (default) or http/json; OTEL_EXPORTER_OTLP_HEADERS k=v,k2=v2 for the collector; OTEL_EXPORTER_OTLP_TIMEOUT ms'],
  ['OTEL_SERVICE_NAME', "the traces' service.name, default router"],
  ['OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG', 'always_on, always_off, traceidratio, parentbased_always_on (default), parentbased_always_off, parentbased_traceidratio; the ratio 0 to 1'],
  ['RT_CACHE_PATH', "this node's response cache file (keys with a cache), default $RT_DATA_DIR/cache.db; never inside RT_LITEFS_DIR: every node keeps its own"],
  ['RT_CACHE_MAX_MB', 'the response cache\'s size bound in MB (least recently used entries go first); default 256, a whole number from 1'],
  ['RT_LIMIT_SYNC_MS', "how often a node reads again what the database shows of its limited keys' usage (another node's share); default 1000, 10 to 60000"],
]

function integerSetting(environment: Record<string, string | undefined>, name: string, fallback: number, min: number, max: number): number {
  const raw = environment[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`)
  }
  return value
}

function oneOf<T extends string>(environment: Record<string, string | undefined>, name: string, allowed: readonly T[], fallback: T): T {
  const raw = environment[name]
  if (raw === undefined || raw === '') return fallback
  if (!(allowed as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got '${raw}'`)
  return raw as T
}

/**
 * RT_CACHE_PATH (CONTRACT §15): the cache is node-local, so a path inside LiteFS's mount (which
 * would replicate it, or be read-only on a replica) stops the start.
 */
function cachePathSetting(environment: Record<string, string | undefined>, dataDir: string, litefsDir: string | undefined): string {
  const path = environment.RT_CACHE_PATH ? resolve(environment.RT_CACHE_PATH) : join(dataDir, 'cache.db')
  if (litefsDir) {
    const inside = relative(litefsDir, path)
    if (inside === '' || (inside !== '..' && !inside.startsWith(`..${sep}`) && !isAbsolute(inside))) {
      throw new ConfigError(`RT_CACHE_PATH must be outside RT_LITEFS_DIR (${litefsDir}): the response cache is per node, got '${path}'`)
    }
  }
  return path
}

export function loadConfig(environment: Record<string, string | undefined> = Bun.env): Config {
  const dataDir = environment.RT_DATA_DIR ? resolve(environment.RT_DATA_DIR) : defaultDataDir
  const litefsDir = environment.RT_LITEFS_DIR ? resolve(environment.RT_LITEFS_DIR) : undefined
  const dbPath =
    environment.RT_DB_PATH === ':memory:' ? ':memory:' : environment.RT_DB_PATH ? resolve(environment.RT_DB_PATH) : join(litefsDir ?? dataDir, 'router.db')
  const overrides: Record<string, string> = {}
  for (const [name, value] of Object.entries(environment)) {
    if (name.startsWith('RT_GATEWAY_URL_') && value) overrides[name.slice('RT_GATEWAY_URL_'.length)] = value.replace(/\/+$/, '')
  }
  const tlsCert = environment.RT_TLS_CERT || undefined
  const tlsKey = environment.RT_TLS_KEY || undefined
  return Object.freeze({
    host: environment.HOST || '127.0.0.1',
    port: integerSetting(environment, 'PORT', 8080, 0, 65535),
    role: oneOf(environment, 'RT_ROLE', ['all', 'proxy', 'app'] as const, 'all'),
    dataDir,
    dbPath,
    masterKey: environment.RT_MASTER_KEY || undefined,
    tlsCert,
    tlsKey,
    trustProxy: environment.RT_TRUST_PROXY === '1',
    deadlineMs: integerSetting(environment, 'RT_DEADLINE_MS', 95_000, 1, 3_600_000),
    // Below the roughly 100 s idle cutoff in front of the service (SPEC "Limits"), like the upstream timeout.
    streamIdleMs: integerSetting(environment, 'RT_STREAM_IDLE_MS', 45_000, 1000, 90_000),
    batchUploadIdleMs: integerSetting(environment, 'RT_BATCH_UPLOAD_IDLE_MS', 120_000, 1000, 120_000),
    mcpToolTimeoutMs: integerSetting(environment, 'RT_MCP_TOOL_TIMEOUT_MS', 30_000, 100, 90_000),
    keytermsEnabled: environment.RT_KEYTERMS_ENABLED === '1',
    decisionerEnabled: environment.RT_DECISIONER_ENABLED === '1',
    adsUrl: environment.RT_ADS_URL || undefined,
    keytermsUrl: environment.RT_KEYTERMS_URL || undefined,
    smtpUrl: environment.RT_SMTP_URL || undefined,
    webhookAllowPrivate: environment.RT_WEBHOOK_ALLOW_PRIVATE === '1',
    logLevel: oneOf(environment, 'RT_LOG_LEVEL', ['debug', 'info', 'warn', 'error'] as const, 'info'),
    gatewayUrlOverrides: Object.freeze(overrides),
    litefsDir,
    litefsApiUrl: litefsDir ? (environment.RT_LITEFS_API_URL || 'http://127.0.0.1:20202').replace(/\/+$/, '') : undefined,
    litefsHaltLock: environment.RT_LITEFS_HALT_LOCK === '1',
    maxLagMs: integerSetting(environment, 'RT_MAX_LAG_MS', 10_000, 1, 3_600_000),
    clusterSecret: environment.RT_CLUSTER_SECRET || undefined,
    primaryUrl: environment.RT_PRIMARY_URL ? environment.RT_PRIMARY_URL.replace(/\/+$/, '') : undefined,
    flyAppName: environment.FLY_APP_NAME || undefined,
    auditRetentionDays: integerSetting(environment, 'RT_AUDIT_RETENTION_DAYS', 400, 1, 1_000_000),
    logRetentionDays: integerSetting(environment, 'RT_LOG_RETENTION_DAYS', 90, 1, 1_000_000),
    bodyRetentionDays: integerSetting(environment, 'RT_BODY_RETENTION_DAYS', 7, 1, 1_000_000),
    limitSyncMs: integerSetting(environment, 'RT_LIMIT_SYNC_MS', 1000, 10, 60_000),
    cachePath: cachePathSetting(environment, dataDir, litefsDir),
    cacheMaxMb: integerSetting(environment, 'RT_CACHE_MAX_MB', 256, 1, 1_000_000),
    tracing: tracingSettings(environment),
  })
}
