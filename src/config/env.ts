/** Reads the operator environment (../shared/CONTRACT.md §2–4) once into a frozen Config. */
import { join } from 'node:path'

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
  keytermsEnabled: boolean
  decisionerEnabled: boolean
  adsUrl: string | undefined
  keytermsUrl: string | undefined
  smtpUrl: string | undefined
  webhookAllowPrivate: boolean
  logLevel: LogLevel
  /** RT_GATEWAY_URL_<SLUG> overrides, keyed by the upper-cased slug form. */
  gatewayUrlOverrides: Readonly<Record<string, string>>
}

export class ConfigError extends Error {}

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

export function loadConfig(environment: Record<string, string | undefined> = Bun.env): Config {
  const dataDir = environment.RT_DATA_DIR || './data'
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
    dbPath: environment.RT_DB_PATH || join(dataDir, 'router.db'),
    masterKey: environment.RT_MASTER_KEY || undefined,
    tlsCert,
    tlsKey,
    trustProxy: environment.RT_TRUST_PROXY === '1',
    deadlineMs: integerSetting(environment, 'RT_DEADLINE_MS', 95_000, 1, 3_600_000),
    keytermsEnabled: environment.RT_KEYTERMS_ENABLED === '1',
    decisionerEnabled: environment.RT_DECISIONER_ENABLED === '1',
    adsUrl: environment.RT_ADS_URL || undefined,
    keytermsUrl: environment.RT_KEYTERMS_URL || undefined,
    smtpUrl: environment.RT_SMTP_URL || undefined,
    webhookAllowPrivate: environment.RT_WEBHOOK_ALLOW_PRIVATE === '1',
    logLevel: oneOf(environment, 'RT_LOG_LEVEL', ['debug', 'info', 'warn', 'error'] as const, 'info'),
    gatewayUrlOverrides: Object.freeze(overrides),
  })
}
