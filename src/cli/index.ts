/**
 * The operator CLI (CONTRACT §5): `./scripts/cli <command> [flags]`. One JSON object on stdout and
 * exit 0, or `{"error": "..."}` on stderr and exit 1. Works on the server's database directly.
 * `--help` (or `-h`) after any command or group prints human help on stdout and exits 0.
 */
import { loadConfig } from '../config/env'
import { UsageError } from './commands'
import { parseCommand } from './parse-command'
import { isIoError, isReadonlyDatabaseError, ReplicaWriteError } from '../cluster/writer'

function fail(error: unknown): number {
  const message = error instanceof Error ? error.message : String(error)
  process.stderr.write(JSON.stringify({ error: message }) + '\n')
  // A usage error may say more for a person: an incomplete command lists its sub-commands.
  if (error instanceof UsageError && error.details) process.stderr.write('\n' + error.details)
  return 1
}

/** A write refused on a LiteFS replica says how to run it on this machine after all. */
function cliWriteError(error: unknown): unknown {
  const underHaltLock = 'run it under `litefs run -with-halt-lock-on $RT_DB_PATH -- env RT_LITEFS_HALT_LOCK=1 ./scripts/cli …`'
  // With no primary known (a failover under way) there is no write lock to hold: retry shortly.
  if (error instanceof ReplicaWriteError) return error.primaryHost ? new Error(`${error.message}, or ${underHaltLock} on this machine`) : error
  // A write LiteFS refused without the lock: read-only, or an I/O or open error from its mount.
  const code = String((error as { code?: unknown } | null)?.code ?? '')
  if ((isReadonlyDatabaseError(error) || isIoError(error) || code.startsWith('SQLITE_CANTOPEN')) && loadConfig().litefsHaltLock) {
    return new Error(`the database refused the write here (${code}): no LiteFS halt lock is held; ${underHaltLock}`)
  }
  return error
}

export async function runCli(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCommand>
  try {
    parsed = parseCommand(argv)
  } catch (error) {
    return fail(error)
  }
  if (parsed.kind === 'help') {
    process.stdout.write(parsed.text)
    return 0
  }
  // Loaded only to run a command: parsing and help touch neither the dependencies nor the database.
  const [{ createRuntime }, { silentLogger }, { startingRole }] = await Promise.all([import('../runtime'), import('../observability/logger'), import('../cluster/role')])
  let runtime: Awaited<ReturnType<typeof createRuntime>> | undefined
  try {
    const config = loadConfig()
    // On LiteFS, its `/info` says whether this machine is the primary (a replica that lost its
    // primary has no `.primary` either, and must not be taken for one). Under `litefs run
    // -with-halt-lock-on` (RT_LITEFS_HALT_LOCK=1) LiteFS lets this one command write on a replica.
    const role = config.litefsDir && config.litefsHaltLock ? ({ kind: 'primary' } as const) : await startingRole(config)
    runtime = createRuntime(config, { logger: silentLogger, role })
    const command = parsed.command
    let result: unknown
    if (command.operation) {
      // A management operation: the same rule and audit log as every other door, as the operator.
      const [{ operationNamed }, { perform }] = await Promise.all([import('../management/operations'), import('../management/perform')])
      const operation = operationNamed(command.operation)
      if (!operation) throw new Error(`The command runs the operation ${command.operation}, which does not exist.`)
      // A LiteFS replica's database is read-only: a command that writes says where to run it (CONTRACT §10).
      if (operation.access === 'write') runtime.writer.assertPrimary()
      const workspaceId = command.workspaceFlag ? (parsed.input.text(command.workspaceFlag) ?? '') : ''
      result = await perform(runtime, { actor: { workspaceId, readOnly: false, kind: 'cli' }, via: 'cli', ip: undefined, requestId: undefined }, operation, command.input!(parsed.input))
    } else {
      if (!command.reads) runtime.writer.assertPrimary()
      result = await command.run!(runtime, parsed.input)
    }
    process.stdout.write(JSON.stringify(result) + '\n')
    return 0
  } catch (error) {
    return fail(cliWriteError(error))
  } finally {
    // The response cache file, if a command opened it (cache purge, jobs run cache-prune): what it queued is committed.
    await runtime?.cache.close()
    runtime?.snapshots.close()
    runtime?.reads.close()
    runtime?.storage.close()
  }
}

if (import.meta.main) process.exit(await runCli(process.argv.slice(2)))
