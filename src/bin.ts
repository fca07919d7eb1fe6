#!/usr/bin/env bun
/**
 * The one-file program (`bun run build` → `./router`, or the package's `router` bin):
 * `router serve` starts the service as ./scripts/start does, `router cli <command> …` is the operator
 * CLI of ./scripts/cli. Environment variables configure both (`router serve --help`).
 */
export {}

const usage = `usage: router serve [--help]       start the service (environment variables configure it)
       router cli <command> [flags] the operator CLI (router cli --help lists the commands)
`

const [command, ...rest] = process.argv.slice(2)
if (command === 'serve') {
  const { serve } = await import('./main')
  // Its --help says how the one file starts, not how ./scripts/start gets Bun and dependencies.
  await serve(rest, 'binary')
} else if (command === 'cli') {
  const { runCli } = await import('./cli/index')
  process.exit(await runCli(rest))
} else if (command === '--help' || command === '-h' || command === 'help') {
  process.stdout.write(usage)
} else {
  process.stderr.write(`${command === undefined ? 'a command is needed' : `unknown command '${command}'`}\n${usage}`)
  process.exit(1)
}
