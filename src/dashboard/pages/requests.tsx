/**
 * The request explorer: recent requests with status, latency and the attempt path
 * (`groq:server-error > openai:ok`), a badge where the cache answered, a stream was continued or a
 * guardrail found something, filtered by key, status and model; a row opens its stage timings,
 * tokens, those outcomes and, when the workspace captures bodies, the request body.
 */
import { useState } from 'preact/hooks'
import { api, type InferenceKey, type Session } from '../api'
import { ErrorLine, KeySelect, RangeSelect, Table, useLoad, when } from '../ui'
import { OutcomeBadges, OutcomeDetail, type ExplorerRow as RequestRow } from './request-outcome'

/**
 * The attempt path as stored (`groq:server-error>openai:ok`), spaced for reading. After an attempt
 * whose stream broke and was continued (reason `mid_stream_…`, CONTRACT §16) the separator is ` ⤳ `.
 */
function AttemptPath({ path }: { path: string | null }) {
  if (!path) return <code>–</code>
  const entries = path.split('>')
  return (
    <code>
      {entries.map((entry, index) => {
        if (index === 0) return entry
        const seam = entries[index - 1]!.split(':')[1]?.startsWith('mid_stream_')
        return seam ? (
          <>
            <span title="continued after the stream broke"> ⤳ </span>
            {entry}
          </>
        ) : (
          ` > ${entry}`
        )
      })}
    </code>
  )
}

export function RequestsPage(_props: { session: Session; path: string; refreshSession: () => void }) {
  const [range, setRange] = useState('24h')
  const [keyId, setKeyId] = useState('')
  const [status, setStatus] = useState('')
  const [model, setModel] = useState('')
  const [applied, setApplied] = useState('')
  const [open, setOpen] = useState<RequestRow>()
  const keys = useLoad(() => api<InferenceKey[]>('/api/v1/keys'), [])
  const query = new URLSearchParams({ range, ...(keyId ? { api_key_id: keyId } : {}), ...(status ? { status } : {}), ...(applied ? { model: applied } : {}) }).toString()
  const requests = useLoad(() => api<RequestRow[]>(`/dashboard/api/requests?${query}`), [query])
  const keyName = new Map((keys.data ?? []).map((key) => [key.id, key.label ?? key.key_prefix]))
  return (
    <>
      <h2>Requests</h2>
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault()
          setApplied(model.trim())
        }}
      >
        <RangeSelect value={range} onChange={setRange} />
        <KeySelect keys={keys.data ?? []} value={keyId} onChange={setKeyId} />
        <label>
          Status
          <select value={status} onChange={(event) => setStatus(event.currentTarget.value)}>
            <option value="">any</option>
            <option value="ok">succeeded</option>
            <option value="error">errors (4xx, 5xx)</option>
          </select>
        </label>
        <label>
          Model
          <input name="model" value={model} placeholder="openai/gpt-4o-mini" onInput={(event) => setModel(event.currentTarget.value)} />
        </label>
        <button type="submit">Filter</button>
        <button type="button" onClick={requests.reload}>
          Refresh
        </button>
      </form>
      <ErrorLine error={requests.error} />
      {open ? <Detail row={open} keyName={keyName.get(open.api_key_id ?? '')} onClose={() => setOpen(undefined)} /> : null}
      <Table
        rows={requests.data ?? []}
        empty={requests.loading ? 'Loading…' : 'No requests match.'}
        onRow={setOpen}
        rowLabel={(row) => `Request ${row.id}`}
        columns={[
          { title: 'time', cell: (row) => when(row.created_at) },
          { title: 'key', cell: (row) => keyName.get(row.api_key_id ?? '') ?? <span class="muted">–</span> },
          { title: 'endpoint', cell: (row) => row.endpoint },
          { title: 'model', cell: (row) => row.model ?? '–' },
          { title: 'status', cell: (row) => <span class={`badge ${row.status >= 200 && row.status < 300 ? 'good' : 'bad'}`}>{row.status}</span> },
          { title: 'outcome', cell: (row) => <OutcomeBadges row={row} /> },
          { title: 'latency', cell: (row) => `${row.latency_ms.toFixed(1)} ms` },
          { title: 'attempts', cell: (row) => <AttemptPath path={row.attempt_path} />, wrap: true },
        ]}
      />
    </>
  )
}

function Detail({ row, keyName, onClose }: { row: RequestRow; keyName?: string; onClose: () => void }) {
  const stages = row.stage_timings ? Object.entries(row.stage_timings) : []
  return (
    <section class="detail" aria-label="Request detail">
      <div class="toolbar" style="justify-content:space-between;margin:0">
        <strong>
          Request <code>{row.id}</code>
        </strong>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <dl>
        <dt>time</dt>
        <dd>{when(row.created_at)}</dd>
        <dt>key</dt>
        <dd>{keyName ?? row.api_key_id ?? '–'}</dd>
        <dt>endpoint</dt>
        <dd>
          {row.endpoint}
          {row.stream ? ' (stream)' : ''}
        </dd>
        <dt>model</dt>
        <dd>
          {row.model ?? '–'}
          {row.upstream_model && row.upstream_model !== row.model ? ` → ${row.upstream_model}` : ''}
        </dd>
        <dt>gateway</dt>
        <dd>{row.gateway ?? '–'}</dd>
        <dt>status</dt>
        <dd>
          {row.status}
          {row.error_code ? ` ${row.error_code}` : ''}
        </dd>
        <dt>attempt path</dt>
        <dd>
          <AttemptPath path={row.attempt_path} /> ({row.attempts} attempt{row.attempts === 1 ? '' : 's'})
        </dd>
        <dt>latency</dt>
        <dd>
          {row.latency_ms.toFixed(1)} ms{row.ttfb_ms !== null ? `, first byte ${row.ttfb_ms.toFixed(1)} ms` : ''}
          {row.overhead_ms !== null ? `, router overhead ${row.overhead_ms.toFixed(2)} ms` : ''}
        </dd>
        <dt>stage timings</dt>
        <dd>{stages.length ? stages.map(([stage, ms]) => `${stage} ${Number(ms).toFixed(2)} ms`).join(' · ') : '–'}</dd>
        <dt>tokens</dt>
        <dd>{row.input_tokens !== null || row.output_tokens !== null ? `${row.input_tokens ?? '?'} in, ${row.output_tokens ?? '?'} out` : 'not reported'}</dd>
        <OutcomeDetail row={row} />
      </dl>
      <h3>Request body</h3>
      {row.request_body !== null ? <pre>{row.request_body}</pre> : <p class="muted">Not captured (body capture is off in the workspace settings).</p>}
    </section>
  )
}
