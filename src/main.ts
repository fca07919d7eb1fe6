/** The service process: config → storage (+migrate, master key check) → app → role duties (cluster/node.ts) → listen → first-start workspace; SIGTERM drains. */
import { parseArgs } from 'node:util'
import { loadConfig } from './config/env'
import { upstreamConcurrency, wantedUpstreamConcurrency } from './gateways/concurrency'
import { requestJournalDirectory } from './storage/request-journal'
import { startCommand, startHelp, type StartProgram } from './start-help'

class StartupError extends Error {}

function isAddressInUse(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'EADDRINUSE'
}

async function main(args: readonly string[], program: StartProgram) {
  let help: boolean | undefined
  try {
    help = parseArgs({ args: [...args], options: { help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }).values.help
  } catch (error) {
    throw new StartupError(`${error instanceof Error ? error.message : String(error)}: the service takes no arguments but --help; environment variables configure it (${startCommand[program]} --help)`)
  }
  if (help) {
    process.stdout.write(startHelp(program))
    return
  }
  const config = loadConfig()
  // Loaded after the argument check, so `--help` answers before the dependencies are installed.
  const [{ createRuntime, enableTracing }, { buildApp, createErrorHandler, createFetchHandler }, { dashboardPageRoutes }, { createWorkspace }, { ClusterNode, waitForDatabase }, { startingRole }, { createLogger }] = await Promise.all([
    import('./runtime'),
    import('./app'),
    import('./api/dashboard'),
    import('./management/workspaces'),
    import('./cluster/node'),
    import('./cluster/role'),
    import('./observability/logger'),
  ])
  const logger = createLogger(config.logLevel)
  const role = await startingRole(config)
  if (role.kind === 'replica') await waitForDatabase(logger, config.dbPath, config.litefsDir)
  const runtime = createRuntime(config, { logger, role })
  await enableTracing(runtime)
  const concurrency = upstreamConcurrency()
  if (concurrency < wantedUpstreamConcurrency) {
    logger.warn('upstream_concurrency_limited', {
      limit: concurrency,
      message:
        program === 'binary'
          ? `At most ${concurrency} upstream requests can be open at once (BUN_CONFIG_MAX_HTTP_REQUESTS): more wait in a queue. Set BUN_CONFIG_MAX_HTTP_REQUESTS=${wantedUpstreamConcurrency} in the environment router serve starts in.`
          : `At most ${concurrency} upstream requests can be open at once (BUN_CONFIG_MAX_HTTP_REQUESTS): more wait in a queue. Start the service with ./scripts/start, or set BUN_CONFIG_MAX_HTTP_REQUESTS=${wantedUpstreamConcurrency} before Bun starts.`,
    })
  }
  if (runtime.masterKeyCreated) {
    logger.warn('master_key_created', { message: 'RT_MASTER_KEY is unset: a random master key was written to the data directory (mode 0600). Back it up: provider secrets cannot be read without it.' })
  }

  // Before the listener opens: rows that a process killed on this data directory had journaled but
  // not yet written to the database go in first (a clean stop leaves none).
  const replay = runtime.logQueue.openJournal(requestJournalDirectory(config.dataDir))
  if (replay.segments > 0 || replay.pending > 0) {
    logger.warn('request_journal_replayed', {
      ...replay,
      message: `Replayed ${replay.rows} request-log rows left in the journal by a process that did not stop cleanly (${replay.inserted} were not yet in the database).`,
    })
  }

  const app = buildApp(runtime)
  runtime.logQueue.start()
  const tls = config.tlsCert && config.tlsKey ? { cert: Bun.file(config.tlsCert), key: Bun.file(config.tlsKey) } : undefined
  let server: ReturnType<typeof Bun.serve>
  try {
    server = Bun.serve({
      hostname: config.host,
      port: config.port,
      tls,
      // Bun turns reusePort on when development is off: a second start on a busy port would then
      // share it, and requests would land on the old and the new process at random.
      reusePort: false,
      // No framework-wide cap: every route counts its own limit as it reads (10 MB inference, 1 MB
      // management and MCP, 100 MB batch submits), so an oversized body gets the route's own error
      // in its envelope instead of Bun's empty 413, whatever the framing.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // Seconds a client connection may stay silent. It must outlast the 95 s request deadline (a
      // buffered request sends nothing until the answer) and is enforced on streams through
      // RT_STREAM_IDLE_MS first, so a stalled upstream ends with the dialect's failure record; and a
      // stalled batch upload (two minutes, RT_BATCH_UPLOAD_IDLE_MS) gets its 408 before Bun closes.
      idleTimeout: 130,
      development: false,
      // The dashboard's page and its bundled assets (src/dashboard/), on the app role.
      routes: dashboardPageRoutes(config),
      fetch: createFetchHandler(app, runtime),
      error: createErrorHandler(runtime),
    })
  } catch (error) {
    if (isAddressInUse(error)) {
      throw new StartupError(`${config.host}:${config.port} is in use (EADDRINUSE): another process listens there. Stop it, or set PORT (or HOST) to a free one.`)
    }
    throw error
  }

  // After the listener is up, so a start that cannot listen never spends the one-time key. On the
  // primary only: a replica's database is the primary's.
  if (!runtime.writer.replica && runtime.repositories.workspaces.count() === 0) {
    const created = createWorkspace(runtime, 'default')
    // Printed once, on a line of its own (CONTRACT §1), on stderr: stdout is JSON log lines only,
    // and a secret has no place in the log stream. Later starts print no secret.
    process.stderr.write(`management key: ${created.management_key}\n`)
    logger.info('workspace_created', { workspace_id: created.workspace.id, name: 'default' })
  }
  // The role's duties: checkpoints and jobs on the primary, log shipping on a replica; and from now
  // on, a change of role (CONTRACT §10).
  const node = new ClusterNode(runtime)
  await node.start()
  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info('shutting_down', { signal })
    // Stop accepting; requests in flight get up to 30 s to finish (CONTRACT §2).
    await Promise.race([server.stop(false), Bun.sleep(30_000)])
    // Rows of the last requests go where the role sends them (the database, or the spool) before
    // the node's last shipping pass.
    runtime.logQueue.stop()
    runtime.limiter.stop()
    // The last spans go to the collector (bounded by the exporter's own timeout).
    await runtime.tracing?.shutdown().catch(() => undefined)
    await node.stop()
    runtime.mcpServers.close()
    runtime.snapshots.close()
    runtime.reads.close()
    // The cache's queued entries are committed and its writer thread ended (it never throws).
    await runtime.cache?.close()
    runtime.storage.close()
    process.exit(0)
  }
  // Before the ready line: a SIGTERM sent as soon as it is read must find the handler.
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))

  // An IPv6 address is written in brackets in a URL (`HOST=::` on fly.io).
  const host = server.hostname?.includes(':') ? `[${server.hostname}]` : server.hostname
  const url = `${tls ? 'https' : 'http'}://${host}:${server.port}`
  // The ready line of CONTRACT §2, a log line like the others but written whatever RT_LOG_LEVEL says.
  const listening = { time: new Date().toISOString(), level: 'info', event: 'listening', message: `listening on ${url} (role ${config.role})`, url, role: config.role }
  process.stdout.write(JSON.stringify(listening) + '\n')
}

/**
 * Starts the service (`./scripts/start`, or `router serve` of the one-file program: `program` says
 * which, for its --help); a start that fails writes `startup_failed` and exits 1.
 */
export function serve(args: readonly string[], program: StartProgram = 'script'): Promise<void> {
  return main(args, program).catch((error) => {
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'error', event: 'startup_failed', message }) + '\n')
    process.exit(1)
  })
}

if (import.meta.main) await serve(process.argv.slice(2))
