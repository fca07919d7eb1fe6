/**
 * The `--help` of the service's two starts: `./scripts/start` in a checkout and `router serve` of the
 * one-file program. What the service does once started, and the environment table (config/env.ts),
 * are one text shared by both; each start says only how it gets going.
 */
import { defaultDataDir, environmentVariables } from './config/env'

/** Which start is asked: the script of a checkout, or the one-file program (`bun run build`). */
export type StartProgram = 'script' | 'binary'

/** The command line each start is run with. */
export const startCommand: Record<StartProgram, string> = { script: './scripts/start', binary: 'router serve' }

/** `text`'s words in lines of at most `width` characters (a longer word has a line of its own). */
function wrapWords(text: string, width: number): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  lines.push(line)
  return lines
}

/** The environment table: names in a column, meanings wrapped to 100 characters. */
export function environmentHelp(): string {
  const width = 24
  const indent = ' '.repeat(width + 3)
  return environmentVariables
    .map(([name, meaning]) => {
      const lines = wrapWords(meaning, 100 - indent.length)
      const head = name.length <= width ? `  ${name.padEnd(width)} ` : `  ${name}\n${indent}`
      return head + lines.join(`\n${indent}`)
    })
    .join('\n')
}

/**
 * How each start gets going, before the service itself. `standalone`: `router serve` is the compiled
 * one file (`bun run build`), else the package's `router` bin run by Bun from a checkout or install.
 */
function howItStarts(program: StartProgram, standalone: boolean): string {
  if (program === 'script') {
    return `Gets Bun when it is not on PATH (from the npm registry into .tools/), installs the production
dependencies (bun install --frozen-lockfile --production), applies the database migrations and
serves the router in one process. It takes no other arguments: environment variables configure it.`
  }
  const carried = standalone
    ? 'Serves the router in one process from this one file: the Bun runtime, the dependencies, the database migrations and the dashboard are inside it, so nothing is downloaded or installed.'
    : "Serves the router in one process: the package's `router` bin, run by Bun with the dependencies installed beside it (a compiled ./router carries them all)."
  const dataDirectory = standalone ? './data of the current directory' : `${defaultDataDir}, the repository's data/`
  return [
    `${carried} It takes no other arguments: environment variables configure it. \`router cli <command>\` is the operator CLI on the same database (\`router cli --help\`).`,
    `The database is RT_DB_PATH, by default router.db in RT_DATA_DIR (${dataDirectory}; made when missing, with master.key beside it when RT_MASTER_KEY is unset). Every start applies the migrations the database lacks before it listens.`,
    'Bun reads BUN_CONFIG_MAX_HTTP_REQUESTS only when the program starts, and caps concurrent upstream requests at 256 without it: set BUN_CONFIG_MAX_HTTP_REQUESTS=65535 in its environment (and a high open-file limit, two descriptors per open stream), as ./scripts/start does for a checkout.',
  ]
    .map((paragraph) => wrapWords(paragraph, 100).join('\n'))
    .join('\n\n')
}

/** What the service does once started, whichever way. */
const onceStarted = `The first start on an empty database creates the workspace "default" and writes its full-access
management key once, to stderr, on a line of its own: "management key: rt_mgmt_…".
Stdout carries one JSON log line per event; when the service is ready, the "listening" line's
message says "listening on <url> (role <role>)". A port already in use is an error (exit 1).
SIGTERM or SIGINT: stop accepting, let requests in flight finish (up to 30 s), exit 0.`

/** Settings only a start reads, not the service. */
const startSettings: Record<StartProgram, string> = {
  script: `
Set-up (scripts only):
  RT_SKIP_INSTALL=1        skip the dependency install
`,
  binary: '',
}

/** The `--help` text of a start (`standalone`: see howItStarts; this process's own kind unless given). */
export function startHelp(program: StartProgram, standalone: boolean = Bun.isStandaloneExecutable): string {
  return `usage: ${startCommand[program]} [--help]

${howItStarts(program, standalone)}

${onceStarted}

Environment:
${environmentHelp()}
${startSettings[program]}`
}
