/** The service process: config → storage (+migrate) → first-start workspace → app → listen; SIGTERM drains. */
import { ConfigError, loadConfig } from './config/env'
import { createRuntime } from './runtime'
import { buildApp, createErrorHandler, createFetchHandler } from './app'
import { createWorkspace } from './management/workspaces'
import { startScheduler } from './scheduler/scheduler'

async function main() {
  const config = loadConfig()
  const runtime = createRuntime(config)
  const { logger } = runtime
  if (runtime.masterKeyCreated) {
    logger.warn('master_key_created', { message: 'RT_MASTER_KEY is unset: a random master key was written to the data directory (mode 0600). Back it up: provider secrets cannot be read without it.' })
  }
  if (runtime.repositories.workspaces.count() === 0) {
    const created = createWorkspace(runtime, 'default')
    // Printed once, on a line of its own (CONTRACT §1); later starts print no secret.
    process.stdout.write(`management key: ${created.management_key}\n`)
    logger.info('workspace_created', { workspace_id: created.workspace.id, name: 'default' })
  }

  const app = buildApp(runtime)
  runtime.logQueue.start()
  const checkpoints = await runtime.storage.startBackgroundCheckpoints({
    onCheckpoint: (pages) => {
      runtime.metrics.walCheckpoints++
      runtime.metrics.walCheckpointPages += pages
    },
    onError: (message) => logger.error('wal_checkpoint_failed', { error: message }),
  })
  const stopScheduler = startScheduler(runtime)
  const tls = config.tlsCert && config.tlsKey ? { cert: Bun.file(config.tlsCert), key: Bun.file(config.tlsKey) } : undefined
  const server = Bun.serve({
    hostname: config.host,
    port: config.port,
    tls,
    // Batch submits may approach 100 MB; per-route limits are enforced by the routes.
    maxRequestBodySize: 110 * 1024 * 1024,
    idleTimeout: 120,
    development: false,
    fetch: createFetchHandler(app, runtime),
    error: createErrorHandler(runtime),
  })
  const scheme = tls ? 'https' : 'http'
  logger.info('listening', { url: `${scheme}://${server.hostname}:${server.port}`, role: config.role })
  process.stdout.write(`listening on ${scheme}://${server.hostname}:${server.port} (role ${config.role})\n`)

  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info('shutting_down', { signal })
    // Stop accepting; requests in flight get up to 30 s to finish (CONTRACT §2).
    await Promise.race([server.stop(false), Bun.sleep(30_000)])
    stopScheduler()
    runtime.logQueue.stop()
    await checkpoints.stop()
    runtime.storage.close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
}

main().catch((error) => {
  const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error)
  process.stderr.write(JSON.stringify({ level: 'error', event: 'startup_failed', message }) + '\n')
  process.exit(1)
})
