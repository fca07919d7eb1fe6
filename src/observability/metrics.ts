/**
 * Prometheus text-format metrics (CONTRACT §8). Counters and histograms are plain numbers and
 * arrays so that recording on the hot path is a few additions, never an allocation per request.
 * Names follow the Prometheus conventions `promtool check metrics` enforces: base units (latency
 * in seconds, `_seconds`), counters ending in `_total`, HELP and TYPE for every family.
 */

/** Bucket bounds in milliseconds (what callers measure), rendered as `le` in seconds. */
const latencyBucketsMs = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000]
/** The `le` label of each bucket, in seconds, written out once (0.1 ms is `0.0001`). */
const latencyBucketLabels = latencyBucketsMs.map((bound) => String(bound / 1000))

/** A latency histogram: observed in milliseconds, exposed in seconds. */
class Histogram {
  readonly counts = new Float64Array(latencyBucketsMs.length + 1)
  /** Sum of observations, milliseconds (divided once when rendered). */
  sumMs = 0
  count = 0
  observe(milliseconds: number) {
    let index = 0
    while (index < latencyBucketsMs.length && milliseconds > latencyBucketsMs[index]!) index++
    this.counts[index]!++
    this.sumMs += milliseconds
    this.count++
  }
  render(name: string, labels: string, lines: string[]) {
    let cumulative = 0
    for (let index = 0; index < latencyBucketsMs.length; index++) {
      cumulative += this.counts[index]!
      lines.push(`${name}_bucket{${labels}${labels ? ',' : ''}le="${latencyBucketLabels[index]}"} ${cumulative}`)
    }
    lines.push(`${name}_bucket{${labels}${labels ? ',' : ''}le="+Inf"} ${this.count}`)
    lines.push(`${name}_sum${labels ? `{${labels}}` : ''} ${this.sumMs / 1000}`)
    lines.push(`${name}_count${labels ? `{${labels}}` : ''} ${this.count}`)
  }
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/**
 * A counter with two labels, kept as nested maps: recording looks the labels up as they are, with no
 * per-request key string to build and hash.
 */
class LabelledCounter<Second extends string | number> {
  private readonly values = new Map<string, Map<Second, number>>()
  add(first: string, second: Second) {
    let inner = this.values.get(first)
    if (!inner) this.values.set(first, (inner = new Map()))
    inner.set(second, (inner.get(second) ?? 0) + 1)
  }
  *entries(): Generator<[string, Second, number]> {
    for (const [first, inner] of this.values) for (const [second, value] of inner) yield [first, second, value]
  }
}

/**
 * Prompt and completion tokens by gateway, then model: one two-slot array per pair, allocated when
 * the pair is first seen, so recording a request is two map look-ups and two additions.
 */
class TokenCounter {
  private readonly values = new Map<string, Map<string, Float64Array>>()
  add(gateway: string, model: string, prompt: number, completion: number) {
    let byModel = this.values.get(gateway)
    if (!byModel) this.values.set(gateway, (byModel = new Map()))
    let counts = byModel.get(model)
    if (!counts) byModel.set(model, (counts = new Float64Array(2)))
    counts[0]! += prompt
    counts[1]! += completion
  }
  *entries(): Generator<[string, string, Float64Array]> {
    for (const [gateway, byModel] of this.values) for (const [model, counts] of byModel) yield [gateway, model, counts]
  }
}

export class Metrics {
  /** requests by endpoint, then status */
  private readonly requests = new LabelledCounter<number>()
  /** upstream attempts by gateway, then outcome */
  private readonly attempts = new LabelledCounter<string>()
  private readonly failovers = new LabelledCounter<string>()
  /** enrichment stage outcomes (companion ads, keyterm links) by stage, then outcome */
  private readonly enrichment = new LabelledCounter<string>()
  private readonly upstreamLatency = new Map<string, Histogram>()
  private readonly addedLatency = new Histogram()
  private readonly tokens = new TokenCounter()
  inFlightStreams = 0
  /** Set by the request-log queue. */
  logQueueDepth: () => number = () => 0
  logRowsWritten = 0
  logRowsDropped = 0
  /** Log flushes put off by a few milliseconds because another connection held the write lock. */
  logFlushesDeferred = 0
  /** Set by the background checkpointer (storage/client.ts). */
  walCheckpoints = 0
  walCheckpointPages = 0
  /** Set by the snapshot store. */
  snapshotBuilds: () => number = () => 0
  snapshotRequestWaits: () => number = () => 0
  /** The writer seam and the log shipper (cluster/): a replica's side of CONTRACT §10. */
  isReplica: () => boolean = () => false
  writesReplayed = 0
  logRowsSpooled = 0
  logRowsShipped = 0
  logShipFailures = 0
  logRowsRejected = 0
  spoolDepth: () => number = () => 0
  /** Settled limit tickets that left a key's ledger without their row showing (pipeline/limits/ledger.ts). */
  limitTicketsExpired = 0
  /** The node's response cache store (storage/cache-store.ts stats()), set by the runtime when it has one. */
  cacheStats: () => { entries: number; bytes: number; evictions: number } = () => ({ entries: 0, bytes: 0, evictions: 0 })
  /** The cache stage's outcomes by result (hit, semantic-hit, coalesced, miss, bypass: CONTRACT §15). */
  private readonly cacheRequests = new Map<string, number>()
  /** Guardrail findings by detector, side and action (CONTRACT §17). */
  private readonly guardrailFindings = new Map<string, number>()
  /** Broken streams of keys with continuation, by what became of them (CONTRACT §16). */
  private readonly continuations = new Map<string, number>()

  countRequest(endpoint: string, status: number) {
    this.requests.add(endpoint, status)
  }
  countAttempt(gateway: string, outcome: string) {
    this.attempts.add(gateway, outcome)
  }
  countFailover(gateway: string, reason: string) {
    this.failovers.add(gateway, reason)
  }
  /** An enrichment stage's outcome on an answer (`fill`, `no_fill`, `ok` or its error code). */
  countEnrichment(stage: string, outcome: string) {
    this.enrichment.add(stage, outcome)
  }
  /** A request of a key with a response cache, by its `X-Router-Cache` result. */
  countCacheRequest(result: string) {
    this.cacheRequests.set(result, (this.cacheRequests.get(result) ?? 0) + 1)
  }
  /** Guardrail findings of a request: `count` matches of a rule with this detector, side and action. */
  countGuardrailFinding(detector: string, where: string, action: string, count: number) {
    const key = `${detector}\u0000${where}\u0000${action}`
    this.guardrailFindings.set(key, (this.guardrailFindings.get(key) ?? 0) + count)
  }
  /**
   * A broken stream of a key with continuation: `continued`, or why not (`not_text`, `max_hops`,
   * `deadline`, `refused`, `failed`).
   */
  countContinuation(result: string) {
    this.continuations.set(result, (this.continuations.get(result) ?? 0) + 1)
  }
  observeUpstreamLatency(gateway: string, milliseconds: number) {
    let histogram = this.upstreamLatency.get(gateway)
    if (!histogram) this.upstreamLatency.set(gateway, (histogram = new Histogram()))
    histogram.observe(milliseconds)
  }
  observeAddedLatency(milliseconds: number) {
    this.addedLatency.observe(milliseconds)
  }
  /** Tokens of a finished request, as the serving gateway reported them. */
  countTokens(gateway: string, model: string, prompt: number, completion: number) {
    this.tokens.add(gateway, model, prompt, completion)
  }

  render(): string {
    const lines: string[] = []
    const counterFamily = (name: string, help: string, counter: LabelledCounter<string | number>, labelNames: [string, string]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`)
      for (const [first, second, value] of counter.entries()) {
        lines.push(`${name}{${labelNames[0]}="${escapeLabel(first)}",${labelNames[1]}="${escapeLabel(String(second))}"} ${value}`)
      }
    }
    counterFamily('router_requests_total', 'Inference requests answered, by endpoint and status.', this.requests, ['endpoint', 'status'])
    counterFamily('router_upstream_attempts_total', 'Upstream attempts, by gateway and outcome.', this.attempts, ['gateway', 'outcome'])
    counterFamily('router_failovers_total', 'Failovers away from a gateway, by reason.', this.failovers, ['gateway', 'reason'])
    counterFamily('router_enrichment_outcomes_total', 'Companion-ad and keyterm outcomes attached to answers, by stage and outcome.', this.enrichment, ['stage', 'outcome'])
    lines.push('# HELP router_tokens_total Tokens of finished requests, by gateway, model (as sent upstream) and direction.', '# TYPE router_tokens_total counter')
    for (const [gateway, model, counts] of this.tokens.entries()) {
      const labels = `gateway="${escapeLabel(gateway)}",model="${escapeLabel(model)}"`
      lines.push(`router_tokens_total{${labels},direction="prompt"} ${counts[0]}`, `router_tokens_total{${labels},direction="completion"} ${counts[1]}`)
    }
    lines.push('# HELP router_upstream_latency_seconds Upstream time to response headers, seconds.', '# TYPE router_upstream_latency_seconds histogram')
    for (const [gateway, histogram] of this.upstreamLatency) histogram.render('router_upstream_latency_seconds', `gateway="${escapeLabel(gateway)}"`, lines)
    lines.push('# HELP router_added_latency_seconds Time the router added to a request, seconds.', '# TYPE router_added_latency_seconds histogram')
    this.addedLatency.render('router_added_latency_seconds', '', lines)
    lines.push('# HELP router_inflight_streams Streams being relayed now.', '# TYPE router_inflight_streams gauge', `router_inflight_streams ${this.inFlightStreams}`)
    lines.push('# HELP router_log_queue_depth Request-log rows waiting to be written.', '# TYPE router_log_queue_depth gauge', `router_log_queue_depth ${this.logQueueDepth()}`)
    lines.push('# HELP router_log_rows_written_total Request-log rows written.', '# TYPE router_log_rows_written_total counter', `router_log_rows_written_total ${this.logRowsWritten}`)
    lines.push('# HELP router_log_rows_dropped_total Request-log rows that could not be written.', '# TYPE router_log_rows_dropped_total counter', `router_log_rows_dropped_total ${this.logRowsDropped}`)
    lines.push('# HELP router_log_flushes_deferred_total Request-log flushes put off a few milliseconds because another connection held the database write lock (the serving thread does not wait for it).', '# TYPE router_log_flushes_deferred_total counter', `router_log_flushes_deferred_total ${this.logFlushesDeferred}`)
    lines.push('# HELP router_wal_checkpoints_total WAL checkpoints that copied pages, run off the serving thread.', '# TYPE router_wal_checkpoints_total counter', `router_wal_checkpoints_total ${this.walCheckpoints}`)
    lines.push('# HELP router_wal_checkpoint_pages_total Pages copied from the WAL into the database file.', '# TYPE router_wal_checkpoint_pages_total counter', `router_wal_checkpoint_pages_total ${this.walCheckpointPages}`)
    lines.push('# HELP router_snapshot_builds_total Rebuilds of the in-memory configuration snapshot.', '# TYPE router_snapshot_builds_total counter', `router_snapshot_builds_total ${this.snapshotBuilds()}`)
    lines.push('# HELP router_snapshot_request_waits_total Requests that waited for a snapshot rebuild (a change they must see was still being read).', '# TYPE router_snapshot_request_waits_total counter', `router_snapshot_request_waits_total ${this.snapshotRequestWaits()}`)
    lines.push('# HELP router_node_replica 1 while this node is a LiteFS replica, 0 on the primary.', '# TYPE router_node_replica gauge', `router_node_replica ${this.isReplica() ? 1 : 0}`)
    lines.push('# HELP router_writes_replayed_total Write requests answered 409 with fly-replay on a replica.', '# TYPE router_writes_replayed_total counter', `router_writes_replayed_total ${this.writesReplayed}`)
    lines.push('# HELP router_log_rows_spooled_total Request-log rows a replica put in its spool.', '# TYPE router_log_rows_spooled_total counter', `router_log_rows_spooled_total ${this.logRowsSpooled}`)
    lines.push('# HELP router_log_rows_shipped_total Spooled rows the primary acknowledged.', '# TYPE router_log_rows_shipped_total counter', `router_log_rows_shipped_total ${this.logRowsShipped}`)
    lines.push('# HELP router_log_ship_failures_total Batches the primary did not acknowledge (kept and sent again).', '# TYPE router_log_ship_failures_total counter', `router_log_ship_failures_total ${this.logShipFailures}`)
    lines.push('# HELP router_log_rows_rejected_total Spooled rows the primary refused as malformed, set aside and logged.', '# TYPE router_log_rows_rejected_total counter', `router_log_rows_rejected_total ${this.logRowsRejected}`)
    lines.push('# HELP router_log_spool_rows Rows in the spool waiting for the primary.', '# TYPE router_log_spool_rows gauge', `router_log_spool_rows ${this.spoolDepth()}`)
    lines.push('# HELP router_limit_tickets_expired_total Settled requests of limited keys that left the ledger because their request-log row did not show within 5 minutes (rows not reaching the database).', '# TYPE router_limit_tickets_expired_total counter', `router_limit_tickets_expired_total ${this.limitTicketsExpired}`)
    lines.push('# HELP router_cache_requests_total Requests of keys with a response cache, by result (hit, semantic-hit, coalesced, miss, bypass).', '# TYPE router_cache_requests_total counter')
    for (const [result, value] of this.cacheRequests) lines.push(`router_cache_requests_total{result="${escapeLabel(result)}"} ${value}`)
    lines.push('# HELP router_guardrail_findings_total Matches of keys\' guardrail rules, by detector, side (input, output) and action (mask, block; counted in monitor mode too).', '# TYPE router_guardrail_findings_total counter')
    for (const [key, value] of this.guardrailFindings) {
      const [detector, where, action] = key.split('\u0000')
      lines.push(`router_guardrail_findings_total{detector="${escapeLabel(detector!)}",where="${escapeLabel(where!)}",action="${escapeLabel(action!)}"} ${value}`)
    }
    lines.push('# HELP router_stream_continuations_total Streams of keys with continuation that broke after their first byte, by result (continued; or not: not_text, max_hops, deadline, refused, failed).', '# TYPE router_stream_continuations_total counter')
    for (const [result, value] of this.continuations) lines.push(`router_stream_continuations_total{result="${escapeLabel(result)}"} ${value}`)
    const cache = this.cacheStats()
    lines.push("# HELP router_cache_entries Entries in this node's response cache file.", '# TYPE router_cache_entries gauge', `router_cache_entries ${cache.entries}`)
    lines.push("# HELP router_cache_bytes Bytes of this node's response cache entries, as counted against RT_CACHE_MAX_MB.", '# TYPE router_cache_bytes gauge', `router_cache_bytes ${cache.bytes}`)
    lines.push("# HELP router_cache_evictions_total Least recently used entries deleted to keep this node's response cache under RT_CACHE_MAX_MB.", '# TYPE router_cache_evictions_total counter', `router_cache_evictions_total ${cache.evictions}`)
    const memory = process.memoryUsage()
    lines.push('# HELP process_resident_memory_bytes Resident memory size in bytes.', '# TYPE process_resident_memory_bytes gauge', `process_resident_memory_bytes ${memory.rss}`)
    return lines.join('\n') + '\n'
  }
}
