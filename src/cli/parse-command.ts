/** Turns the CLI's argv into a command to run or a help text to print (node:util parseArgs per command). */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { commands, startsWith, UsageError, type CommandInput, type CommandSpec } from './commands'
import { commandHelp, groupHelp, program } from './help'

export type ParsedCommand = { kind: 'help'; text: string } | { kind: 'run'; command: CommandSpec; input: CommandInput }

const helpFlags = new Set(['--help', '-h'])

export function parseCommand(argv: readonly string[]): ParsedCommand {
  // Commands are words first, then flags: the leading words pick the command, whose flags then
  // decide how the rest parses.
  const firstFlag = argv.findIndex((argument) => argument.startsWith('-'))
  const words = firstFlag === -1 ? [...argv] : argv.slice(0, firstFlag)
  const rest = firstFlag === -1 ? [] : argv.slice(firstFlag)
  const wantsHelp = rest.some((argument) => helpFlags.has(argument))

  const command = commands.filter((spec) => startsWith(words, spec.words)).sort((left, right) => right.words.length - left.words.length)[0]
  if (!command) {
    // No whole command: either a group of commands (`key`, `key mcp`, or nothing at all) or a typo.
    const group = words
    const members = commands.filter((spec) => startsWith(spec.words, group))
    if (members.length === 0) throw new UsageError(`unknown command '${words.join(' ')}': ${program} --help lists the commands`)
    if (wantsHelp) return { kind: 'help', text: groupHelp(group) }
    if (group.length === 0) throw new UsageError(`no command given: ${program} --help lists the commands`)
    throw new UsageError(`incomplete command '${group.join(' ')}': it needs one of the sub-commands below`, groupHelp(group))
  }
  if (wantsHelp) return { kind: 'help', text: commandHelp(command) }

  const extraWords = words.slice(command.words.length)
  const name = command.words.join(' ')
  let argument: string | undefined
  if (command.argument) {
    if (extraWords.length === 0) throw new UsageError(`${name} needs ${command.argument.placeholder}, one of ${command.argument.choices.join(', ')}`)
    argument = extraWords.shift()
  }
  if (extraWords.length > 0) throw new UsageError(`unknown command '${words.join(' ')}': ${program} ${command.words[0]} --help lists the commands`)
  return { kind: 'run', command, input: parseFlags(command, rest, argument) }
}

function parseFlags(command: CommandSpec, rest: readonly string[], argument: string | undefined): CommandInput {
  const name = command.words.join(' ')
  const options: NonNullable<ParseArgsConfig['options']> = {}
  for (const [flag, spec] of Object.entries(command.options)) options[flag] = { type: spec.kind === 'switch' ? 'boolean' : 'string' }
  // A switch also takes `--flag=true/false`; parseArgs refuses a value on a boolean option.
  const args = rest.flatMap((token) => {
    const match = /^--([^=]+)=(true|false)$/.exec(token)
    return match && command.options[match[1]!]?.kind === 'switch' ? [`--${match[1]}`, match[2]!] : [token]
  })
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: true, tokens: true })
  } catch (error) {
    const code = (error as { code?: string }).code
    const detail = error instanceof Error ? error.message.split('\n')[0]! : String(error)
    const flag = /'(-[^ ']+)/.exec(detail)?.[1] ?? 'a flag'
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown flag '${flag}' for '${name}': ${program} ${name} --help lists its flags`)
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && /argument missing/.test(detail)) throw new UsageError(`${flag} needs a value`)
    throw new UsageError(`${detail} (${name})`)
  }

  // `--switch true/false`: the word after a switch is its value.
  const values = parsed.values as Record<string, string | boolean | undefined>
  const consumed = new Set<number>()
  const tokens = parsed.tokens ?? []
  for (const [index, token] of tokens.entries()) {
    if (token.kind !== 'option' || command.options[token.name]?.kind !== 'switch') continue
    const next = tokens[index + 1]
    if (next?.kind === 'positional' && (next.value === 'true' || next.value === 'false')) {
      values[token.name] = next.value === 'true'
      consumed.add(next.index)
    }
  }
  const stray = tokens.find((token) => token.kind === 'positional' && !consumed.has(token.index))
  if (stray?.kind === 'positional') throw new UsageError(`unexpected argument '${stray.value}' for '${name}': ${program} ${name} --help lists its flags`)

  const flag = (flagName: string): boolean | undefined => {
    const value = values[flagName]
    if (value === undefined || typeof value === 'boolean') return value
    if (value === 'true') return true
    if (value === 'false') return false
    throw new UsageError(`--${flagName} must be true or false`)
  }
  for (const [flagName, spec] of Object.entries(command.options)) {
    if (spec.kind === 'boolean') flag(flagName)
    if (!spec.required || values[flagName] !== undefined) continue
    throw new UsageError(spec.kind === 'boolean' ? `--${flagName} true/false is required` : `--${flagName} is required`)
  }
  return {
    text: (flagName) => {
      const value = values[flagName]
      return typeof value === 'string' ? value : undefined
    },
    flag,
    argument,
  }
}
