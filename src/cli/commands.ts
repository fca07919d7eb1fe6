/**
 * The operator CLI's commands (CONTRACT §5) as data: words, flags, help text and what each runs.
 * Management modules load inside `run`, so parsing and `--help` need no dependency and no database.
 */
import type { Runtime } from '../runtime'
import { jobNames } from '../scheduler/jobs'

/**
 * `text`: `--flag VALUE`. `boolean`: `--flag true/false`. `switch`: `--flag` alone means true
 * (`--flag true/false` works too).
 */
export type OptionKind = 'text' | 'boolean' | 'switch'

export interface OptionSpec {
  kind: OptionKind
  /** The value's placeholder in help, e.g. `ID`; boolean flags show `true/false`. */
  placeholder?: string
  required?: boolean
  description: string
}

/** A command's parsed flags, read by name. */
export interface CommandInput {
  /** A text flag's value (required ones are checked before `run`). */
  text(name: string): string | undefined
  /** A boolean or switch flag: true, false, or undefined when absent. */
  flag(name: string): boolean | undefined
  /** The word after the command, for commands that take one (`jobs run NAME`). */
  argument: string | undefined
}

export interface CommandSpec {
  words: readonly string[]
  /**
   * The management operation the command runs (management/operations.ts, by name): it runs through
   * the same rule and audit log as REST, MCP and the dashboard, as the operator (`actor: cli`).
   */
  operation?: string
  /** The operation's input from the flags. */
  input?(flags: CommandInput): unknown
  /** The flag that names the workspace the operator acts in (a read of one workspace: audit list). */
  workspaceFlag?: string
  /** A positional word after the command words, with its allowed values. */
  argument?: { placeholder: string; choices: readonly string[] }
  /** The flags part of the usage line when generating it from `options` would say less. */
  synopsis?: string
  summary: string
  options: Readonly<Record<string, OptionSpec>>
  /** A command that runs no operation: only reads (runs on a LiteFS replica too), or writes. */
  reads?: true
  run?(runtime: Runtime, input: CommandInput): unknown
}

export class UsageError extends Error {
  /** Human text printed on stderr after the JSON error line (e.g. the sub-commands of a group). */
  constructor(
    message: string,
    readonly details?: string,
  ) {
    super(message)
  }
}

/** Whether `words` begins with `prefix` (a command under a group, or the group itself). */
export function startsWith(words: readonly string[], prefix: readonly string[]): boolean {
  return prefix.every((word, index) => words[index] === word)
}

function required<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new UsageError(message)
  return value
}

export const commands: readonly CommandSpec[] = [
  {
    words: ['workspace', 'create'],
    summary: 'Creates a workspace and prints it with a new full-access management key.',
    options: { name: { kind: 'text', placeholder: 'N', required: true, description: 'the workspace name' } },
    operation: 'workspaces.create',
    input: (flags) => ({ name: flags.text('name')! }),
  },
  {
    words: ['workspace', 'set'],
    summary: "Changes a workspace's settings and prints them.",
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      'allowed-ips': { kind: 'text', placeholder: 'LIST', description: "comma-separated IPs and CIDR ranges allowed to use the workspace's inference keys; '' clears" },
      'steering-message': { kind: 'text', placeholder: 'S', description: 'a system message added to every request' },
      'capture-bodies': { kind: 'boolean', description: 'keep request and response bodies in the request log' },
      suspended: { kind: 'boolean', description: "suspend (true) or resume (false) the workspace's inference keys" },
    },
    operation: 'workspace.set',
    input: (flags) => ({
      workspaceId: flags.text('workspace')!,
      allowedIps: flags.text('allowed-ips'),
      steeringMessage: flags.text('steering-message'),
      captureBodies: flags.flag('capture-bodies'),
      suspended: flags.flag('suspended'),
    }),
  },
  {
    words: ['member', 'add'],
    summary: 'Adds a member (an e-mail address that gets key notifications) to a workspace.',
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      email: { kind: 'text', placeholder: 'E', required: true, description: "the member's e-mail address" },
    },
    operation: 'members.add',
    input: (flags) => ({ workspaceId: flags.text('workspace')!, email: flags.text('email')! }),
  },
  {
    words: ['mgmt-key', 'create'],
    summary: 'Creates a management key for a workspace and prints it (the secret is shown only here).',
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      'read-only': { kind: 'switch', description: 'a key that may only read' },
    },
    operation: 'management_keys.create',
    input: (flags) => ({ workspaceId: flags.text('workspace')!, readOnly: flags.flag('read-only') ?? false }),
  },
  {
    words: ['mgmt-key', 'set'],
    summary: "Sets a management key's read-only flag.",
    options: {
      id: { kind: 'text', placeholder: 'ID', required: true, description: 'the management key id' },
      'read-only': { kind: 'boolean', required: true, description: 'true: reads only; false: full access' },
    },
    operation: 'management_keys.set',
    input: (flags) => ({ id: flags.text('id')!, readOnly: flags.flag('read-only')! }),
  },
  {
    words: ['key', 'rotate'],
    summary: "Gives an inference key a new secret; the old one keeps working until grace_until.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      'grace-seconds': { kind: 'text', placeholder: 'N', description: 'how long the old secret keeps working, default 86400' },
    },
    operation: 'keys.rotate',
    input: (flags) => {
      const grace = flags.text('grace-seconds')
      return { id: flags.text('id')!, graceSeconds: grace === undefined ? undefined : Number(grace) }
    },
  },
  {
    words: ['key', 'limits'],
    summary: "Sets an inference key's spend caps and rate limits (CONTRACT §11); `none` clears one, flags not given stay. Prints the key.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      rpm: { kind: 'text', placeholder: 'N', description: 'requests per minute (a whole number), or none' },
      tpm: { kind: 'text', placeholder: 'N', description: 'tokens per minute (a whole number), or none' },
      'usd-day': { kind: 'text', placeholder: 'X', description: 'USD per UTC day, or none' },
      'usd-month': { kind: 'text', placeholder: 'X', description: 'USD per UTC calendar month, or none' },
    },
    operation: 'keys.set_limits',
    input: (flags) => {
      const limits: Record<string, number | null | string> = {}
      for (const [flag, field] of [
        ['rpm', 'requests_per_minute'],
        ['tpm', 'tokens_per_minute'],
        ['usd-day', 'usd_per_day'],
        ['usd-month', 'usd_per_month'],
      ] as const) {
        const value = flags.text(flag)
        if (value === undefined) continue
        // A number as typed; anything else goes to the rule as it is, which names the field it refuses.
        limits[field] = value === 'none' ? null : value.trim() !== '' && Number.isFinite(Number(value)) ? Number(value) : value
      }
      if (Object.keys(limits).length === 0) throw new UsageError('key limits needs at least one of --rpm, --tpm, --usd-day, --usd-month')
      return { id: flags.text('id')!, body: { limits } }
    },
  },
  {
    words: ['key', 'cache'],
    summary:
      "Turns an inference key's response cache on or sets its TTL and scope (CONTRACT §15): flags not given keep what is set (3600 s and scope key when the cache was off), and a semantic lookup already set is kept (set or clear one with PATCH /api/v1/keys/{id} or MCP set_key_cache). --off turns the cache off. Prints the key.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      ttl: { kind: 'text', placeholder: 'S', description: 'seconds an answer is served from the cache, 1 to 2592000 (30 days)' },
      scope: { kind: 'text', placeholder: 'key|workspace', description: "key: the key's own entries; workspace: shared with the workspace's other workspace-scoped keys" },
      off: { kind: 'switch', description: 'turns the cache off (its entries are no longer served); takes no --ttl or --scope' },
    },
    operation: 'keys.set_cache',
    input: (flags) => {
      const ttl = flags.text('ttl')
      const scope = flags.text('scope')
      if (flags.flag('off')) {
        if (ttl !== undefined || scope !== undefined) throw new UsageError('key cache --off takes no --ttl or --scope')
        return { id: flags.text('id')!, cache: null }
      }
      const cache: Record<string, unknown> = {}
      // A number as typed; anything else goes to the rule as it is, which names the field it refuses.
      if (ttl !== undefined) cache.ttl_seconds = ttl.trim() !== '' && Number.isFinite(Number(ttl)) ? Number(ttl) : ttl
      if (scope !== undefined) cache.scope = scope
      return { id: flags.text('id')!, cache, keepStored: true }
    },
  },
  {
    words: ['key', 'continuation'],
    summary:
      "Turns an inference key's mid-stream continuation on or sets its hops (CONTRACT §16): a streamed answer whose stream breaks is continued by the next target, at most --max-hops times (not given: what is set, 1 when continuation was off). --off turns it off. Prints the key.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      'max-hops': { kind: 'text', placeholder: 'N', description: 'how many continuations one answer may take, 1 to 3' },
      off: { kind: 'switch', description: 'turns continuation off (a broken stream ends with an in-stream error); takes no --max-hops' },
    },
    operation: 'keys.set_continuation',
    input: (flags) => {
      const hops = flags.text('max-hops')
      if (flags.flag('off')) {
        if (hops !== undefined) throw new UsageError('key continuation --off takes no --max-hops')
        return { id: flags.text('id')!, continuation: null }
      }
      const continuation: Record<string, unknown> = {}
      // A number as typed; anything else goes to the rule as it is, which names the field it refuses.
      if (hops !== undefined) continuation.max_hops = hops.trim() !== '' && Number.isFinite(Number(hops)) ? Number(hops) : hops
      return { id: flags.text('id')!, continuation, keepStored: true }
    },
  },
  {
    words: ['key', 'guardrails'],
    synopsis: '--id KEY_ID (--json OBJECT | --off)',
    summary:
      'Sets an inference key\'s guardrails (CONTRACT §17), replacing the whole setting: --json \'{"mode":"enforce","input":[{"detector":"email","action":"mask"}],"output":[]}\' (mode enforce or monitor; rules {detector, action mask|block, name}: email, phone, credit_card, iban, us_ssn, ip_address, secret, regex with pattern, moderation with provider_key_id and categories, input only, block only). --off turns them off. Prints the key.',
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      json: { kind: 'text', placeholder: 'OBJECT', description: 'the whole setting as a JSON object {mode, input, output}' },
      off: { kind: 'switch', description: 'turns guardrails off; takes no --json' },
    },
    operation: 'keys.set_guardrails',
    input: (flags) => {
      const json = flags.text('json')
      if (flags.flag('off')) {
        if (json !== undefined) throw new UsageError('key guardrails --off takes no --json')
        return { id: flags.text('id')!, guardrails: null }
      }
      if (json === undefined) throw new UsageError('key guardrails needs --json OBJECT (the whole setting) or --off')
      let guardrails: unknown
      try {
        guardrails = JSON.parse(json)
      } catch {
        throw new UsageError('key guardrails --json: not valid JSON')
      }
      // Null (JSON `null`) is --off's job; anything else goes to the rule as it is, which names the field it refuses.
      if (guardrails === null) throw new UsageError('key guardrails --json takes an object; --off turns guardrails off')
      return { id: flags.text('id')!, guardrails }
    },
  },
  {
    words: ['cache', 'purge'],
    summary:
      "Deletes the response cache entries an inference key's requests are answered from on this machine: the key's own, or its workspace's shared entries when the key's cache scope is workspace. Prints {\"purged\": <entries>}.",
    options: { key: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' } },
    operation: 'cache.purge',
    input: (flags) => ({ id: flags.text('key')! }),
  },
  {
    words: ['key', 'webhook'],
    synopsis: '--id KEY_ID (--url URL | --rotate-secret | --clear)',
    summary: "Sets, re-keys or clears an inference key's webhook; prints the URL and the signing secret.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      url: { kind: 'text', placeholder: 'URL', description: 'the webhook URL (https, public address unless RT_WEBHOOK_ALLOW_PRIVATE=1)' },
      'rotate-secret': { kind: 'switch', description: 'a new signing secret for the same URL' },
      clear: { kind: 'switch', description: 'removes the webhook' },
    },
    operation: 'keys.webhook.set',
    input: (flags) => ({ id: flags.text('id')!, url: flags.text('url'), rotateSecret: flags.flag('rotate-secret'), clear: flags.flag('clear') }),
  },
  {
    words: ['key', 'notify-email'],
    summary: "Turns the key's e-mail notifications (to the workspace's members) on or off.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      on: { kind: 'boolean', required: true, description: 'true: send; false: do not' },
    },
    operation: 'keys.notify_email.set',
    input: (flags) => ({ id: flags.text('id')!, on: flags.flag('on')! }),
  },
  {
    words: ['key', 'mcp', 'add'],
    summary: 'Attaches an MCP server (streamable HTTP) to an inference key; prints the attached servers.',
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      url: { kind: 'text', placeholder: 'URL', required: true, description: "the MCP server's URL (https, public address unless RT_WEBHOOK_ALLOW_PRIVATE=1)" },
      name: { kind: 'text', placeholder: 'N', description: 'a name for it' },
    },
    operation: 'keys.mcp_servers.add',
    input: (flags) => ({ id: flags.text('id')!, url: flags.text('url')!, name: flags.text('name') }),
  },
  {
    words: ['key', 'mcp', 'list'],
    summary: 'Prints the MCP servers attached to an inference key.',
    options: { id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' } },
    operation: 'keys.mcp_servers.list',
    input: (flags) => ({ id: flags.text('id')! }),
  },
  {
    words: ['key', 'mcp', 'remove'],
    summary: 'Detaches an MCP server from an inference key; prints the attached servers.',
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      server: { kind: 'text', placeholder: 'ID', required: true, description: "the attached server's id (from key mcp list)" },
    },
    operation: 'keys.mcp_servers.remove',
    input: (flags) => ({ id: flags.text('id')!, server: flags.text('server')! }),
  },
  {
    words: ['gateway', 'set'],
    summary: 'Switches a gateway kind on or off for the whole platform.',
    options: {
      gateway: { kind: 'text', placeholder: 'SLUG', required: true, description: 'the gateway id (see: gateways)' },
      enabled: { kind: 'boolean', required: true, description: 'true: routable; false: gateway_disabled' },
    },
    operation: 'gateways.set',
    input: (flags) => ({ gateway: flags.text('gateway')!, enabled: flags.flag('enabled')! }),
  },
  {
    words: ['gateways'],
    summary: 'Prints every gateway kind of the catalog with its capabilities and base URL (after RT_GATEWAY_URL_<SLUG>).',
    options: {},
    operation: 'gateways.describe',
    input: () => ({}),
  },
  {
    words: ['audit', 'list'],
    summary: "Prints a workspace's audit events, newest first (every management write: who, through which door, what it changed).",
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      limit: { kind: 'text', placeholder: 'N', description: 'how many, 1 to 100, default 50' },
      after: { kind: 'text', placeholder: 'EVENT_ID', description: 'the events older than this one (the last_id of a page)' },
    },
    operation: 'audit.list',
    workspaceFlag: 'workspace',
    input: (flags) => ({ limit: flags.text('limit'), after: flags.text('after') }),
  },
  {
    words: ['backup'],
    summary: 'Writes a consistent copy of the database to PATH while the server serves (a new file, checked with PRAGMA integrity_check); prints its path and size. Restore: stop, put the copy at RT_DB_PATH, start with the same master key.',
    options: { to: { kind: 'text', placeholder: 'PATH', required: true, description: 'the file to write; it must not exist' } },
    reads: true,
    run: async (runtime, input) => {
      const { backupDatabase } = await import('../storage/backup')
      return backupDatabase(runtime.storage.sqlite, input.text('to')!, runtime.random)
    },
  },
  {
    words: ['jobs', 'run'],
    argument: { placeholder: 'NAME', choices: jobNames },
    summary: 'Runs a scheduled job once, now, under its lease, and prints its result (catalog-crawl daily, budget-learn every 4 hours; all runs each).',
    options: {},
    run: async (runtime, input) => {
      const name = required(input.argument, 'jobs run needs a job name')
      const [{ createHolderId, runJobNow }, { createLogger }] = await Promise.all([import('../scheduler/lease'), import('../observability/logger')])
      // Progress goes to stderr as JSON log lines: stdout carries the one result object (CONTRACT §5).
      const logger = createLogger(runtime.config.logLevel, (line) => process.stderr.write(line))
      return runJobNow(runtime, name, { holder: createHolderId(runtime.random), logger })
    },
  },
]
