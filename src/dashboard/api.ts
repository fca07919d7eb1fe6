/**
 * The dashboard's calls: the management API (/api/v1) and the dashboard's own routes
 * (/dashboard/api), with the management key the user signed in with. The key lives in this tab's
 * sessionStorage only and is sent to this origin only. Every rule is the server's: the page shows
 * what the API answers, errors included, and checks nothing of its own.
 */

const storageKey = 'router-management-key'

export function storedKey(): string | null {
  return sessionStorage.getItem(storageKey)
}

export function storeKey(key: string | null) {
  if (key === null) sessionStorage.removeItem(storageKey)
  else sessionStorage.setItem(storageKey, key)
}

/** An answer other than 2xx: its status and the API's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/** One call; answers the `data` of the envelope. */
export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const response = await fetch(path, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${storedKey() ?? ''}`, ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  })
  const text = await response.text()
  let parsed: { data?: T; error?: string | { message?: string } } = {}
  try {
    parsed = text ? JSON.parse(text) : {}
  } catch {
    // Not JSON: the status line says what happened.
  }
  if (!response.ok) {
    const error = parsed.error
    throw new ApiError(response.status, (typeof error === 'string' ? error : error?.message) ?? `${response.status} ${response.statusText}`)
  }
  return parsed.data as T
}

export interface Session {
  workspace: { id: string; name: string; kind: string; created_at: string }
  read_only: boolean
}

export interface Target {
  provider_key_id: string
  gateway: string
  weight?: number | null
  ttfb_ms?: number | null
}

export interface Rule {
  strategy: 'priority' | 'split'
  targets: Target[]
  model_remaps: { match: string; percent: number; provider_key_id: string; upstream_model: string; enabled: boolean }[]
  decisioner: Record<string, unknown> | null
}

export interface InferenceKey {
  id: string
  label: string | null
  key_prefix: string
  api_shape: string
  created_at: string
  last_used_at: string | null
  revoked_at: string | null
  routing: Rule
  key?: string
}

/** An inference key's spend caps and rate limits (CONTRACT §11); null: no limit. */
export interface KeyLimits {
  requests_per_minute: number | null
  tokens_per_minute: number | null
  usd_per_day: number | null
  usd_per_month: number | null
}

/** What counts against a key's limits now (CONTRACT §11 `limit_state`; UTC day and calendar month). */
export interface LimitState {
  requests_last_minute: number
  tokens_last_minute: number
  usd_today: number
  usd_this_month: number
}

export interface Provider {
  id: string
  gateway: string
  label: string
  key_last4: string
  created_at: string
  disabled_at: string | null
}

export interface Gateway {
  id: string
  name: string
  routable: boolean
  decisions: boolean
  config_fields?: { name: string; required: boolean; default?: string }[]
}

export interface Summary {
  requests: number
  errors: number
  errorRate: number
  avgLatency: number
  avgOverhead: number
  models: number
}

export interface SeriesItem {
  bucket: string
  requests: number
  errors: number
  avgLatency: number | null
  avgOverhead: number | null
}

export interface RequestRow {
  id: string
  created_at: string
  api_key_id: string | null
  endpoint: string
  model: string | null
  upstream_model: string | null
  gateway: string | null
  status: number
  error_code: string | null
  stream: boolean
  latency_ms: number
  overhead_ms: number | null
  ttfb_ms: number | null
  attempts: number
  attempt_path: string | null
  stage_timings: Record<string, number> | null
  input_tokens: number | null
  output_tokens: number | null
  request_body: string | null
}

/** An audit event (GET /dashboard/api/audit, CONTRACT §12). */
export interface AuditEvent {
  id: string
  time: string
  actor: { kind: string; id: string | null; prefix: string | null }
  via: string
  action: string
  target: { type: string; id: string }
  changes: unknown
  caller_ip: string | null
  request_id: string | null
}

export interface AuditPage {
  data: AuditEvent[]
  has_more: boolean
  last_id: string | null
}
