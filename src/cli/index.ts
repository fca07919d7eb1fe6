/**
 * The operator CLI (CONTRACT §5): `./scripts/cli <command> [flags]`. One JSON object on stdout and
 * exit 0, or `{"error": "..."}` on stderr and exit 1. Works on the server's database directly.
 */
import { loadConfig } from '../config/env'
import { createRuntime, type Runtime } from '../runtime'
import { silentLogger } from '../observability/logger'
import { ManagementError } from '../management/errors'
import { addMember, createManagementKey, createWorkspace, setManagementKeyReadOnly, setWorkspaceSettings } from '../management/workspaces'
import { rotateKey } from '../management/keys'
import { addMcpServer, listMcpServers, removeMcpServer, setNotifyEmail, setWebhook } from '../management/key-settings'
import { describeGateway, gatewayCatalog } from '../gateways/catalog'
import { requireGateway } from '../management/providers'
import { jobNames, runJob } from '../scheduler/jobs'

class UsageError extends Error {}

interface ParsedArguments {
  words: string[]
  flags: Map<string, string | true>
}

function parseArguments(argv: string[]): ParsedArguments {
  const words: string[] = []
  const flags = new Map<string, string | true>()
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!
    if (!argument.startsWith('--')) {
      words.push(argument)
      continue
    }
    const equals = argument.indexOf('=')
    if (equals !== -1) {
      flags.set(argument.slice(2, equals), argument.slice(equals + 1))
      continue
    }
    const next = argv[index + 1]
    if (next !== undefined && !next.startsWith('--')) {
      flags.set(argument.slice(2), next)
      index++
    } else flags.set(argument.slice(2), true)
  }
  return { words, flags }
}

function text(flags: ParsedArguments['flags'], name: string, required: true): string
function text(flags: ParsedArguments['flags'], name: string, required?: false): string | undefined
function text(flags: ParsedArguments['flags'], name: string, required = false): string | undefined {
  const value = flags.get(name)
  if (value === undefined) {
    if (required) throw new UsageError(`--${name} is required`)
    return undefined
  }
  if (value === true) throw new UsageError(`--${name} needs a value`)
  return value
}

function bool(flags: ParsedArguments['flags'], name: string): boolean | undefined {
  const value = flags.get(name)
  if (value === undefined) return undefined
  if (value === true || value === 'true') return true
  if (value === 'false') return false
  throw new UsageError(`--${name} must be true or false`)
}

const usage = `usage: cli <command> [flags]
  workspace create --name N
  workspace set --workspace ID [--allowed-ips LIST] [--steering-message S] [--capture-bodies true/false] [--suspended true/false]
  member add --workspace ID --email E
  mgmt-key create --workspace ID [--read-only]
  mgmt-key set --id ID --read-only true/false
  key rotate --id KEY_ID [--grace-seconds N]
  key webhook --id KEY_ID (--url URL | --rotate-secret | --clear)
  key notify-email --id KEY_ID --on true/false
  key mcp add --id KEY_ID --url URL [--name N] | key mcp list --id KEY_ID | key mcp remove --id KEY_ID --server ID
  gateway set --gateway SLUG --enabled true/false
  gateways
  jobs run ${jobNames.join('|')}`

export async function runCli(argv: string[], runtime: Runtime): Promise<unknown> {
  const { words, flags } = parseArguments(argv)
  const command = words.join(' ')
  switch (command) {
    case 'workspace create':
      return createWorkspace(runtime, text(flags, 'name', true))
    case 'workspace set':
      return setWorkspaceSettings(runtime, text(flags, 'workspace', true), {
        allowedIps: text(flags, 'allowed-ips'),
        steeringMessage: text(flags, 'steering-message'),
        captureBodies: bool(flags, 'capture-bodies'),
        suspended: bool(flags, 'suspended'),
      })
    case 'member add':
      return addMember(runtime, text(flags, 'workspace', true), text(flags, 'email', true))
    case 'mgmt-key create':
      return createManagementKey(runtime, text(flags, 'workspace', true), bool(flags, 'read-only') ?? false)
    case 'mgmt-key set': {
      const readOnly = bool(flags, 'read-only')
      if (readOnly === undefined) throw new UsageError('--read-only true/false is required')
      return setManagementKeyReadOnly(runtime, text(flags, 'id', true), readOnly)
    }
    case 'key rotate': {
      const grace = text(flags, 'grace-seconds')
      return rotateKey(runtime, text(flags, 'id', true), grace === undefined ? 86_400 : Number(grace))
    }
    case 'key webhook':
      return setWebhook(runtime, text(flags, 'id', true), {
        url: text(flags, 'url'),
        rotateSecret: bool(flags, 'rotate-secret'),
        clear: bool(flags, 'clear'),
      })
    case 'key notify-email': {
      const on = bool(flags, 'on')
      if (on === undefined) throw new UsageError('--on true/false is required')
      return setNotifyEmail(runtime, text(flags, 'id', true), on)
    }
    case 'key mcp add':
      return addMcpServer(runtime, text(flags, 'id', true), text(flags, 'url', true), text(flags, 'name'))
    case 'key mcp list':
      return listMcpServers(runtime, text(flags, 'id', true))
    case 'key mcp remove':
      return removeMcpServer(runtime, text(flags, 'id', true), text(flags, 'server', true))
    case 'gateway set': {
      const gateway = requireGateway(text(flags, 'gateway', true))
      const enabled = bool(flags, 'enabled')
      if (enabled === undefined) throw new UsageError('--enabled true/false is required')
      const row = runtime.repositories.providerKeys.setGatewayEnabled(gateway.id, enabled, runtime.now().toISOString())
      return { gateway: row.gateway, enabled: row.enabled, updated_at: row.updatedAt }
    }
    case 'gateways':
      return { gateways: gatewayCatalog.map((gateway) => describeGateway(gateway, runtime.config.gatewayUrlOverrides)) }
    default:
      if (words[0] === 'jobs' && words[1] === 'run' && words.length === 3) return runJob(runtime, words[2]!)
      throw new UsageError(command ? `unknown command '${command}'\n${usage}` : usage)
  }
}

if (import.meta.main) {
  let runtime: Runtime | undefined
  try {
    runtime = createRuntime(loadConfig(), { logger: silentLogger })
    const result = await runCli(process.argv.slice(2), runtime)
    process.stdout.write(JSON.stringify(result) + '\n')
    runtime.storage.close()
    process.exit(0)
  } catch (error) {
    const message = error instanceof ManagementError || error instanceof UsageError || error instanceof Error ? error.message : String(error)
    process.stderr.write(JSON.stringify({ error: message }) + '\n')
    runtime?.storage.close()
    process.exit(1)
  }
}
