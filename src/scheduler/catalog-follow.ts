/**
 * Catalogs that follow keys: when a gateway kind gets an enabled provider key (a new one, or one
 * switched back on) and has no catalog, or one older than a day (the daily crawl missed it), that
 * kind is crawled at once, not at the next daily crawl. Without it, canonical ids such as
 * `openai/gpt-4o-mini` would reach a new install's gateway unspelled for up to a day (SPEC "Model ids":
 * a model no catalog knows is forwarded untouched).
 *
 * It runs on the scheduler's thread. The thread looks when a configuration write is made in this
 * process (a message from the serving thread), when the configuration counter has moved (a write
 * by another process: the CLI, another role), and once a minute. The crawl runs under the
 * `catalog-crawl` lease, narrowed to the kinds found, and leaves the daily schedule as it was. So the
 * write that added the key is never delayed by it. A kind whose crawl fails is tried again after 1,
 * 2, 4 … up to 60 minutes.
 */
import { findGateway } from '../gateways/catalog'
import type { Repositories } from '../storage/repositories'
import { crawlCatalogs } from './jobs/catalog-crawl'
import type { Job } from './job-deps'

/** A catalog older than this is crawled again when a key of its kind is there (the daily crawl's interval). */
export const followStaleAfterMs = 24 * 3_600_000
const firstRetryMs = 60_000
const longestRetryMs = 60 * 60_000

export class CatalogFollower {
  /** Per gateway kind: failed crawls in a row, and when it may be tried next. */
  private readonly retries = new Map<string, { failures: number; notBefore: number }>()

  /** The routable kinds with an enabled provider key whose catalog is missing or older than a day, and not waiting for a retry. */
  due(deps: { repositories: Pick<Repositories, 'gatewayCatalogs' | 'providerKeys'> }, now: number): string[] {
    const fetched = new Map(deps.repositories.gatewayCatalogs.listCatalogs().map((row) => [row.gateway, row.fetchedAt]))
    return deps.repositories.providerKeys.enabledGateways().filter((gateway) => {
      if (!findGateway(gateway)?.routable) return false
      const fetchedAt = fetched.get(gateway)
      if (fetchedAt !== undefined && now - fetchedAt < followStaleAfterMs) {
        this.retries.delete(gateway)
        return false
      }
      return (this.retries.get(gateway)?.notBefore ?? 0) <= now
    })
  }

  /** The crawl of `gateways`, recording which failed (retried later, each time twice as late). */
  job(gateways: readonly string[]): Job {
    return async (deps, progress) => {
      const result = await crawlCatalogs(deps, progress, new Set(gateways))
      const now = deps.now().getTime()
      const outcomes = (result.gateways ?? {}) as Record<string, { error?: string }>
      for (const gateway of gateways) {
        if (outcomes[gateway] && !outcomes[gateway].error) {
          this.retries.delete(gateway)
          continue
        }
        const failures = (this.retries.get(gateway)?.failures ?? 0) + 1
        this.retries.set(gateway, { failures, notBefore: now + Math.min(longestRetryMs, firstRetryMs * 2 ** (failures - 1)) })
      }
      return { trigger: 'provider key', ...result }
    }
  }
}
