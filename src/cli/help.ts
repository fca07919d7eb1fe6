/** Human help for the operator CLI: the whole command list, a group's sub-commands, one command's flags. */
import { defaultDataDir } from '../config/env'
import { commands, startsWith, type CommandSpec, type OptionSpec } from './commands'

export const program = './scripts/cli'

function optionUsage(flag: string, spec: OptionSpec): string {
  if (spec.kind === 'switch') return `--${flag}`
  return `--${flag} ${spec.kind === 'boolean' ? 'true/false' : (spec.placeholder ?? 'VALUE')}`
}

/** `workspace set --workspace ID [--allowed-ips LIST] …`: the command's words and flags. */
export function commandUsage(command: CommandSpec): string {
  const parts = [...command.words]
  if (command.argument) parts.push(command.argument.choices.length > 0 ? command.argument.choices.join('|') : command.argument.placeholder)
  if (command.synopsis) parts.push(command.synopsis)
  else {
    for (const [flag, spec] of Object.entries(command.options)) parts.push(spec.required ? optionUsage(flag, spec) : `[${optionUsage(flag, spec)}]`)
  }
  return parts.join(' ')
}

/** The commands under a group (all of them for the empty group), one usage line and summary each. */
export function subCommandList(group: readonly string[]): string {
  const lines: string[] = []
  for (const command of commands.filter((spec) => startsWith(spec.words, group))) {
    lines.push(`  ${commandUsage(command)}`, `      ${command.summary}`)
  }
  return lines.join('\n') + '\n'
}

export function groupHelp(group: readonly string[]): string {
  if (group.length === 0) {
    return `usage: ${program} <command> [flags]

The operator CLI. It works on the service's database directly, whether or not the server runs,
and prints one JSON object on stdout (exit 0), or {"error": "..."} on stderr (exit 1).
The database and master key are those of the server: $RT_DATA_DIR (default ${defaultDataDir}),
$RT_DB_PATH, $RT_MASTER_KEY; a relative path resolves from the current directory.

Commands:
${subCommandList(group)}
${program} <command> --help shows one command's flags.
`
  }
  return `usage: ${program} ${group.join(' ')} <sub-command> [flags]

Sub-commands:
${subCommandList(group)}
${program} ${group.join(' ')} <sub-command> --help shows one sub-command's flags.
`
}

export function commandHelp(command: CommandSpec): string {
  const flags = Object.entries(command.options)
  const width = Math.max(0, ...flags.map(([flag, spec]) => optionUsage(flag, spec).length))
  const flagLines = flags.map(([flag, spec]) => `  ${optionUsage(flag, spec).padEnd(width)}  ${spec.required ? '(required) ' : ''}${spec.description}`)
  return `usage: ${program} ${commandUsage(command)}

${command.summary}
${flagLines.length > 0 ? `\nFlags:\n${flagLines.join('\n')}\n` : ''}`
}
