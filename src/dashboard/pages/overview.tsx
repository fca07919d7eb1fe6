/** Usage: the summary, the series as a chart (24h, 7d, 30d, all keys or one) and the breakdowns by model and gateway. */
import { useMemo, useState } from 'preact/hooks'
import { api, type InferenceKey, type SeriesItem, type Session, type Summary } from '../api'
import { TimeChart } from '../chart'
import { ErrorLine, KeySelect, RangeSelect, Table, useLoad } from '../ui'
import { usd } from './format-usd'

/** The summary with what the response cache adds (CONTRACT §15): its answers, and the known costs they saved. */
type UsageSummary = Summary & { cache_hits: number; saved_usd: number }

type Breakdown = { name: string; requests: number }[]
interface Costs {
  rows: { model: string | null; gateway: string | null; requests: number; input_tokens: number; output_tokens: number; cost_usd: number | null }[]
  totals: { input_tokens: number; output_tokens: number; cost_usd: number; unpriced_requests: number }
}

export function OverviewPage(_props: { session: Session; path: string; refreshSession: () => void }) {
  const [range, setRange] = useState('24h')
  const [keyId, setKeyId] = useState('')
  const keys = useLoad(() => api<InferenceKey[]>('/api/v1/keys'), [])
  const query = `range=${range}${keyId ? `&api_key_id=${keyId}` : ''}`
  const usage = useLoad(
    async () => {
      const [summary, series, byModel, byGateway, costs] = await Promise.all([
        api<UsageSummary>(`/api/v1/usage/summary?${query}`),
        api<SeriesItem[]>(`/api/v1/usage/series?${query}`),
        api<Breakdown>(`/api/v1/usage/breakdown?by=model&${query}`),
        api<Breakdown>(`/api/v1/usage/breakdown?by=gateway&${query}`),
        api<Costs>(`/dashboard/api/usage/costs?${query}`),
      ])
      return { summary, series, byModel, byGateway, costs }
    },
    [query],
  )
  const chart = useMemo(() => {
    const series = usage.data?.series ?? []
    return {
      times: series.map((item) => Date.parse(item.bucket) / 1000),
      lines: [
        { label: 'requests', color: '#0a58ca', values: series.map((item) => item.requests) },
        { label: 'errors', color: '#b00020', values: series.map((item) => item.errors) },
      ],
    }
  }, [usage.data])
  const summary = usage.data?.summary
  return (
    <>
      <h2>Usage</h2>
      <div class="toolbar">
        <RangeSelect value={range} onChange={setRange} />
        <KeySelect keys={keys.data ?? []} value={keyId} onChange={setKeyId} />
      </div>
      <ErrorLine error={usage.error ?? keys.error} />
      {summary ? (
        <div class="cards" data-testid="summary">
          <Card label="requests" value={summary.requests} />
          <Card label="errors" value={summary.errors} />
          <Card label="error rate" value={`${summary.errorRate}%`} />
          <Card label="average latency" value={`${summary.avgLatency} ms`} />
          <Card label="average router overhead" value={`${summary.avgOverhead} ms`} />
          <Card label="models" value={summary.models} />
          {usage.data?.costs ? (
            <>
              <Card label="input tokens" value={usage.data.costs.totals.input_tokens.toLocaleString()} />
              <Card label="output tokens" value={usage.data.costs.totals.output_tokens.toLocaleString()} />
              <CostCard costs={usage.data.costs} />
            </>
          ) : null}
          <Card label="cache hits" value={summary.cache_hits.toLocaleString()} />
          <Card label="saved by the cache" value={usd(summary.saved_usd)} />
        </div>
      ) : null}
      <h3>Requests over time</h3>
      {usage.data ? <TimeChart title={range === '24h' ? 'Requests per hour' : 'Requests per day'} times={chart.times} series={chart.lines} /> : <p class="muted">Loading…</p>}
      <div class="cards">
        <div>
          <h3>By model</h3>
          <Table rows={usage.data?.byModel ?? []} empty="No requests in this range." columns={[{ title: 'model', cell: (row) => row.name }, { title: 'requests', cell: (row) => row.requests }]} />
        </div>
        <div>
          <h3>By gateway</h3>
          <Table rows={usage.data?.byGateway ?? []} empty="No requests in this range." columns={[{ title: 'gateway', cell: (row) => row.name }, { title: 'requests', cell: (row) => row.requests }]} />
        </div>
      </div>
      <h3>Tokens and cost</h3>
      <p class="muted">Cost is estimated from the prices the gateway's catalog lists for the model; "unknown" where it lists none.</p>
      <Table
        rows={usage.data?.costs.rows ?? []}
        empty="No requests in this range."
        columns={[
          { title: 'model', cell: (row) => row.model ?? '–' },
          { title: 'gateway', cell: (row) => row.gateway ?? '–' },
          { title: 'requests', cell: (row) => row.requests },
          { title: 'input tokens', cell: (row) => row.input_tokens.toLocaleString() },
          { title: 'output tokens', cell: (row) => row.output_tokens.toLocaleString() },
          { title: 'cost', cell: (row) => (row.cost_usd === null ? <span class="muted">unknown</span> : usd(row.cost_usd)) },
        ]}
      />
    </>
  )
}

/** The recorded cost: unknown, not $0, when no request of the range has a listed price. */
function CostCard({ costs }: { costs: Costs }) {
  const priced = costs.rows.some((row) => row.cost_usd !== null && row.requests > 0)
  if (!priced && costs.totals.unpriced_requests > 0) return <Card label="cost (no listed prices)" value="unknown" />
  return <Card label={costs.totals.unpriced_requests ? 'cost (requests with listed prices)' : 'cost'} value={usd(costs.totals.cost_usd)} />
}

function Card({ label, value }: { label: string; value: string | number }) {
  return (
    <div class="card">
      <div class="value">{value}</div>
      <div class="label">{label}</div>
    </div>
  )
}
