/**
 * The process-wide cap on concurrent upstream requests. Bun's fetch holds at most
 * BUN_CONFIG_MAX_HTTP_REQUESTS requests in flight (256 by default) and queues the rest, so with 256
 * slow streams open every other tenant's request would wait behind them. SPEC "What the service
 * does" 6: the service imposes no rate limit of its own. Bun reads the variable once, when the
 * process starts, so scripts/start and the Dockerfile set it; this module only says what it is.
 *
 * The cap costs nothing by itself: memory goes with each request actually open, about 22 KB of RSS
 * per open stream through the router, client and upstream sockets included (9,900 open streams:
 * 285 MB against 70 MB idle; docs/OPERATING.md). The real bound is the open-file limit, two
 * descriptors per stream, which scripts/start raises to the hard limit.
 */
export const wantedUpstreamConcurrency = 65_535

/** Bun's value when nothing sets it. */
const bunDefault = 256

/** The cap in force for this process, from the variable Bun read at start. */
export function upstreamConcurrency(environment: Record<string, string | undefined> = process.env): number {
  const value = Number(environment.BUN_CONFIG_MAX_HTTP_REQUESTS)
  return Number.isInteger(value) && value > 0 ? value : bunDefault
}
