/** Prometheus text of the counters and histograms (CONTRACT "GET /metrics"). */
import { describe, expect, test } from 'bun:test'
import { Metrics } from '../../src/observability/metrics'

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

  test('latency histograms are cumulative with a +Inf bucket, a sum and a count', () => {
    const metrics = new Metrics()
    metrics.observeAddedLatency(0.05)
    metrics.observeAddedLatency(0.3)
    metrics.observeAddedLatency(70_000)
    const text = metrics.render()
    expect(text).toContain('router_added_latency_ms_bucket{le="0.1"} 1')
    expect(text).toContain('router_added_latency_ms_bucket{le="0.5"} 2')
    expect(text).toContain('router_added_latency_ms_bucket{le="60000"} 2')
    expect(text).toContain('router_added_latency_ms_bucket{le="+Inf"} 3')
    expect(text).toContain('router_added_latency_ms_count 3')
  })
})
