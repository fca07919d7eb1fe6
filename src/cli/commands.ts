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
  /** A positional word after the command words, with its allowed values. */
  argument?: { placeholder: string; choices: readonly string[] }
  /** The flags part of the usage line when generating it from `options` would say less. */
  synopsis?: string
  summary: string
  options: Readonly<Record<string, OptionSpec>>
  /** Only reads: runs on a LiteFS replica too (every other command writes and is refused there). */
  reads?: true
  run(runtime: Runtime, input: CommandInput): unknown
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
    run: async (runtime, input) => (await import('../management/workspaces')).createWorkspace(runtime, input.text('name')!),
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
    run: async (runtime, input) =>
      (await import('../management/workspaces')).setWorkspaceSettings(runtime, input.text('workspace')!, {
        allowedIps: input.text('allowed-ips'),
        steeringMessage: input.text('steering-message'),
        captureBodies: input.flag('capture-bodies'),
        suspended: input.flag('suspended'),
      }),
  },
  {
    words: ['member', 'add'],
    summary: 'Adds a member (an e-mail address that gets key notifications) to a workspace.',
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      email: { kind: 'text', placeholder: 'E', required: true, description: "the member's e-mail address" },
    },
    run: async (runtime, input) => (await import('../management/workspaces')).addMember(runtime, input.text('workspace')!, input.text('email')!),
  },
  {
    words: ['mgmt-key', 'create'],
    summary: 'Creates a management key for a workspace and prints it (the secret is shown only here).',
    options: {
      workspace: { kind: 'text', placeholder: 'ID', required: true, description: 'the workspace id' },
      'read-only': { kind: 'switch', description: 'a key that may only read' },
    },
    run: async (runtime, input) => (await import('../management/workspaces')).createManagementKey(runtime, input.text('workspace')!, input.flag('read-only') ?? false),
  },
  {
    words: ['mgmt-key', 'set'],
    summary: "Sets a management key's read-only flag.",
    options: {
      id: { kind: 'text', placeholder: 'ID', required: true, description: 'the management key id' },
      'read-only': { kind: 'boolean', required: true, description: 'true: reads only; false: full access' },
    },
    run: async (runtime, input) => (await import('../management/workspaces')).setManagementKeyReadOnly(runtime, input.text('id')!, input.flag('read-only')!),
  },
  {
    words: ['key', 'rotate'],
    summary: "Gives an inference key a new secret; the old one keeps working until grace_until.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      'grace-seconds': { kind: 'text', placeholder: 'N', description: 'how long the old secret keeps working, default 86400' },
    },
    run: async (runtime, input) => {
      const grace = input.text('grace-seconds')
      return (await import('../management/keys')).rotateKey(runtime, input.text('id')!, grace === undefined ? undefined : Number(grace))
    },
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
    run: async (runtime, input) =>
      (await import('../management/key-settings')).setWebhook(runtime, input.text('id')!, {
        url: input.text('url'),
        rotateSecret: input.flag('rotate-secret'),
        clear: input.flag('clear'),
      }),
  },
  {
    words: ['key', 'notify-email'],
    summary: "Turns the key's e-mail notifications (to the workspace's members) on or off.",
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      on: { kind: 'boolean', required: true, description: 'true: send; false: do not' },
    },
    run: async (runtime, input) => (await import('../management/key-settings')).setNotifyEmail(runtime, input.text('id')!, input.flag('on')!),
  },
  {
    words: ['key', 'mcp', 'add'],
    summary: 'Attaches an MCP server (streamable HTTP) to an inference key; prints the attached servers.',
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      url: { kind: 'text', placeholder: 'URL', required: true, description: "the MCP server's URL (https, public address unless RT_WEBHOOK_ALLOW_PRIVATE=1)" },
      name: { kind: 'text', placeholder: 'N', description: 'a name for it' },
    },
    run: async (runtime, input) => (await import('../management/key-settings')).addMcpServer(runtime, input.text('id')!, input.text('url')!, input.text('name')),
  },
  {
    words: ['key', 'mcp', 'list'],
    summary: 'Prints the MCP servers attached to an inference key.',
    reads: true,
    options: { id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' } },
    run: async (runtime, input) => (await import('../management/key-settings')).listMcpServers(runtime, input.text('id')!),
  },
  {
    words: ['key', 'mcp', 'remove'],
    summary: 'Detaches an MCP server from an inference key; prints the attached servers.',
    options: {
      id: { kind: 'text', placeholder: 'KEY_ID', required: true, description: 'the inference key id' },
      server: { kind: 'text', placeholder: 'ID', required: true, description: "the attached server's id (from key mcp list)" },
    },
    run: async (runtime, input) => (await import('../management/key-settings')).removeMcpServer(runtime, input.text('id')!, input.text('server')!),
  },
  {
    words: ['gateway', 'set'],
    summary: 'Switches a gateway kind on or off for the whole platform.',
    options: {
      gateway: { kind: 'text', placeholder: 'SLUG', required: true, description: 'the gateway id (see: gateways)' },
      enabled: { kind: 'boolean', required: true, description: 'true: routable; false: gateway_disabled' },
    },
    run: async (runtime, input) => {
      const gateway = (await import('../management/providers')).requireGateway(input.text('gateway')!)
      const row = runtime.repositories.providerKeys.setGatewayEnabled(gateway.id, input.flag('enabled')!, runtime.now().toISOString())
      return { gateway: row.gateway, enabled: row.enabled, updated_at: row.updatedAt }
    },
  },
  {
    words: ['gateways'],
    summary: 'Prints every gateway kind of the catalog with its capabilities and base URL (after RT_GATEWAY_URL_<SLUG>).',
    reads: true,
    options: {},
    run: async (runtime) => {
      const { describeGateway, gatewayCatalog } = await import('../gateways/catalog')
      return { gateways: gatewayCatalog.map((gateway) => describeGateway(gateway, runtime.config.gatewayUrlOverrides)) }
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
