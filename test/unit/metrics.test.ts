/**
 * Prometheus text of the counters and histograms (CONTRACT §8 "GET /metrics"), held to the naming
 * conventions: base units (`_seconds`), `_total` on counters, HELP and TYPE on every family.
 */
import { describe, expect, test } from 'bun:test'
import { Metrics } from '../../src/observability/metrics'
import { parseExposition, promtoolFindings } from '../harness/prometheus'

/** A Metrics with something recorded in every family, so every family renders samples. */
function busyMetrics(): Metrics {
  const metrics = new Metrics()
  metrics.countRequest('chat', 200)
  metrics.countRequest('messages', 502)
  metrics.countAttempt('openai', 'ok')
  metrics.countAttempt('groq', 'server-error')
  metrics.countFailover('groq', 'server-error')
  metrics.observeUpstreamLatency('openai', 12.5)
  metrics.observeUpstreamLatency('groq', 0.05)
  metrics.observeUpstreamLatency('groq', 45_000)
  metrics.observeAddedLatency(0.3)
  metrics.countTokens('openai', 'gpt-4o-mini', 11, 7)
  metrics.countTokens('groq', 'llama-3.1-8b-instant', 5, 0)
  metrics.inFlightStreams = 2
  metrics.logRowsWritten = 3
  return metrics
}

describe('Metrics.render', () => {
  test('counts requests, attempts and failovers per label pair', () => {
    const metrics = new Metrics()
    metrics.countRequest('chat', 200)
    metrics.countRequest('chat', 200)
    metrics.countRequest('chat', 502)
    metrics.countRequest('messages', 200)
    metrics.countAttempt('openai', 'ok')
    metrics.countAttempt('openai', 'server-error')
    metrics.countFailover('openai', 'server-error')
    metrics.countFailover('groq', 'ttfb-timeout')
    metrics.countFailover('groq', 'ttfb-timeout')
    const lines = metrics.render().split('\n')
    expect(lines).toContain('router_requests_total{endpoint="chat",status="200"} 2')
    expect(lines).toContain('router_requests_total{endpoint="chat",status="502"} 1')
    expect(lines).toContain('router_requests_total{endpoint="messages",status="200"} 1')
    expect(lines).toContain('router_upstream_attempts_total{gateway="openai",outcome="ok"} 1')
    expect(lines).toContain('router_upstream_attempts_total{gateway="openai",outcome="server-error"} 1')
    expect(lines).toContain('router_failovers_total{gateway="openai",reason="server-error"} 1')
    expect(lines).toContain('router_failovers_total{gateway="groq",reason="ttfb-timeout"} 2')
    expect(lines.filter((line) => line.startsWith('router_requests_total{'))).toHaveLength(3)
  })

  test('escapes label values', () => {
    const metrics = new Metrics()
    metrics.countAttempt('a"b\\c', 'ok')
    expect(metrics.render()).toContain('router_upstream_attempts_total{gateway="a\\"b\\\\c",outcome="ok"} 1')
  })

  test('latency histograms are in seconds: cumulative buckets with `le` in seconds, a +Inf bucket, a sum and a count', () => {
    const metrics = new Metrics()
    // Recorded in milliseconds (what the pipeline measures), exposed in seconds.
    metrics.observeAddedLatency(0.05)
    metrics.observeAddedLatency(0.3)
    metrics.observeAddedLatency(70_000)
    const lines = metrics.render().split('\n')
    expect(lines).toContain('router_added_latency_seconds_bucket{le="0.0001"} 1')
    expect(lines).toContain('router_added_latency_seconds_bucket{le="0.0005"} 2')
    expect(lines).toContain('router_added_latency_seconds_bucket{le="1"} 2')
    expect(lines).toContain('router_added_latency_seconds_bucket{le="60"} 2')
    expect(lines).toContain('router_added_latency_seconds_bucket{le="+Inf"} 3')
    expect(lines).toContain('router_added_latency_seconds_count 3')
    const sum = lines.find((line) => line.startsWith('router_added_latency_seconds_sum '))!
    expect(Number(sum.split(' ')[1])).toBeCloseTo(70.00035, 9)
    expect(lines.some((line) => /_ms[_{ ]/.test(line))).toBe(false)

    metrics.observeUpstreamLatency('openai', 250)
    expect(metrics.render()).toContain('router_upstream_latency_seconds_bucket{gateway="openai",le="0.25"} 1')
    expect(metrics.render()).toContain('router_upstream_latency_seconds_sum{gateway="openai"} 0.25')
  })

  test('router_tokens_total counts prompt and completion tokens by gateway and model', () => {
    const metrics = new Metrics()
    metrics.countTokens('openai', 'gpt-4o-mini', 11, 7)
    metrics.countTokens('openai', 'gpt-4o-mini', 4, 3)
    metrics.countTokens('openai', 'gpt-4.1', 1, 2)
    metrics.countTokens('groq', 'gpt-4o-mini', 5, 0)
    metrics.countTokens('to"gether', 'a\\b', 1, 1)
    const lines = metrics.render().split('\n')
    expect(lines).toContain('# TYPE router_tokens_total counter')
    expect(lines).toContain('router_tokens_total{gateway="openai",model="gpt-4o-mini",direction="prompt"} 15')
    expect(lines).toContain('router_tokens_total{gateway="openai",model="gpt-4o-mini",direction="completion"} 10')
    expect(lines).toContain('router_tokens_total{gateway="openai",model="gpt-4.1",direction="prompt"} 1')
    expect(lines).toContain('router_tokens_total{gateway="openai",model="gpt-4.1",direction="completion"} 2')
    expect(lines).toContain('router_tokens_total{gateway="groq",model="gpt-4o-mini",direction="prompt"} 5')
    expect(lines).toContain('router_tokens_total{gateway="groq",model="gpt-4o-mini",direction="completion"} 0')
    expect(lines).toContain('router_tokens_total{gateway="to\\"gether",model="a\\\\b",direction="prompt"} 1')
    expect(lines.filter((line) => line.startsWith('router_tokens_total{'))).toHaveLength(8)
  })
})

describe('Prometheus conventions', () => {
  test('every family has HELP and TYPE once, base units, _total on counters, cumulative histograms with `le` in seconds', () => {
    for (const metrics of [new Metrics(), busyMetrics()]) {
      const text = metrics.render()
      const { families, problems } = parseExposition(text)
      expect(problems).toEqual([])
      const names = [...families.keys()]
      expect(new Set(names).size).toBe(names.length)
      for (const family of families.values()) {
        expect(family.name).toStartWith(family.name.startsWith('process_') ? 'process_' : 'router_')
        if (family.type === 'histogram') {
          expect(family.name).toEndWith('_seconds')
          // Seconds, not milliseconds: the largest finite bound is a minute, the smallest 100 µs.
          const bounds = family.samples.filter((sample) => sample.name.endsWith('_bucket') && sample.labels.le !== '+Inf').map((sample) => Number(sample.labels.le))
          if (bounds.length > 0) {
            expect(Math.max(...bounds)).toBe(60)
            expect(Math.min(...bounds)).toBe(0.0001)
          }
        }
      }
      expect(names).toEqual(
        expect.arrayContaining([
          'router_requests_total',
          'router_upstream_attempts_total',
          'router_failovers_total',
          'router_tokens_total',
          'router_upstream_latency_seconds',
          'router_added_latency_seconds',
          'router_inflight_streams',
          'router_log_queue_depth',
        ]),
      )
    }
  })

  test('the checker itself catches the mistakes it looks for', () => {
    const broken = [
      '# HELP app_latency_ms Latency.',
      '# TYPE app_latency_ms histogram',
      'app_latency_ms_bucket{le="1"} 2',
      'app_latency_ms_bucket{le="0.5"} 1',
      'app_latency_ms_bucket{le="+Inf"} 3',
      'app_latency_ms_sum 1',
      'app_latency_ms_count 4',
      '# TYPE app_requests counter',
      'app_requests 1',
      'app_orphan 1',
      '# HELP app_requests Again.',
      '# TYPE app_up gauge',
      'app_up 1',
      '',
    ].join('\n')
    const problems = parseExposition(broken).problems.join('\n')
    expect(problems).toContain('app_latency_ms uses a non-base or abbreviated unit')
    expect(problems).toContain('does not increase')
    expect(problems).toContain('+Inf bucket differs from _count')
    expect(problems).toContain('counter app_requests does not end in _total')
    expect(problems).toContain('app_orphan is not under its own HELP/TYPE block')
    expect(problems).toContain('family app_requests appears in more than one block')
    expect(problems).toContain('no HELP for app_up')
  })

  test('`promtool check metrics` finds nothing (skipped with a note when promtool is not installed)', async () => {
    for (const metrics of [new Metrics(), busyMetrics()]) {
      const findings = await promtoolFindings(metrics.render())
      if (!findings) return
      expect(findings.output).toBe('')
      expect(findings.exitCode).toBe(0)
    }
  })
})
