/**
 * The audit log (CONTRACT §12): every management write of the workspace, newest first — when, who
 * (a management key by its prefix, or the operator CLI), through which door, the operation, its
 * object and what it changed (secrets are "[redacted]" by the server). Filtered by operation; older
 * pages load below.
 */
import { useState } from 'preact/hooks'
import { api, type AuditEvent, type AuditPage, type Session } from '../api'
import { ErrorLine, Table, messageOf, when } from '../ui'

const actions = [
  'keys.create',
  'keys.update',
  'keys.set_limits',
  'keys.set_cache',
  'cache.purge',
  'keys.set_continuation',
  'keys.set_guardrails',
  'keys.revoke',
  'keys.rotate',
  'routing.set',
  'providers.create',
  'providers.update',
  'providers.delete',
  'providers.notes.set',
  'keys.webhook.set',
  'keys.webhook.rotate',
  'keys.webhook.clear',
  'keys.notify_email.set',
  'keys.mcp_servers.add',
  'keys.mcp_servers.remove',
  'workspace.set',
  'members.add',
  'management_keys.create',
  'management_keys.set',
]

const actorText = (event: AuditEvent) => (event.actor.kind === 'cli' ? 'operator CLI' : `key ${event.actor.prefix ?? event.actor.id ?? '?'}`)

export function AuditPage(_props: { session: Session; path: string; refreshSession: () => void }) {
  const [action, setAction] = useState('')
  const [events, setEvents] = useState<AuditEvent[]>([])
  const [more, setMore] = useState<string | null>(null)
  const [error, setError] = useState<string>()
  const [loading, setLoading] = useState(true)
  const [loadedFor, setLoadedFor] = useState<string>()
  const load = async (after: string | null, filter: string) => {
    setLoading(true)
    try {
      const query = new URLSearchParams({ limit: '50', ...(after ? { after } : {}), ...(filter ? { action: filter } : {}) }).toString()
      const page = await api<AuditPage>(`/dashboard/api/audit?${query}`)
      setEvents((previous) => (after ? [...previous, ...page.data] : page.data))
      setMore(page.has_more ? page.last_id : null)
      setError(undefined)
    } catch (failure) {
      setError(messageOf(failure))
    } finally {
      setLoading(false)
    }
  }
  if (loadedFor !== action) {
    setLoadedFor(action)
    void load(null, action)
  }
  return (
    <>
      <h2>Audit log</h2>
      <p class="muted">Every change to this workspace's keys, providers, routing and settings, through the API, MCP, the CLI or this dashboard. Secrets are never shown.</p>
      <div class="toolbar">
        <label>
          Operation
          <select value={action} onChange={(event) => setAction(event.currentTarget.value)}>
            <option value="">any</option>
            {actions.map((name) => (
              <option value={name}>{name}</option>
            ))}
          </select>
        </label>
        <button type="button" onClick={() => void load(null, action)}>
          Refresh
        </button>
      </div>
      <ErrorLine error={error} />
      <Table
        rows={events}
        empty={loading ? 'Loading…' : 'No changes yet.'}
        rowLabel={(event) => `Audit event ${event.id}`}
        columns={[
          { title: 'time', cell: (event) => when(event.time) },
          { title: 'who', cell: (event) => actorText(event) },
          { title: 'via', cell: (event) => event.via },
          { title: 'operation', cell: (event) => <code>{event.action}</code> },
          { title: 'object', cell: (event) => <code>{`${event.target.type} ${event.target.id}`}</code>, wrap: true },
          { title: 'changes', cell: (event) => <code>{JSON.stringify(event.changes)}</code>, wrap: true },
          { title: 'from', cell: (event) => event.caller_ip ?? '–' },
        ]}
      />
      {more ? (
        <p>
          <button type="button" disabled={loading} onClick={() => void load(more, action)}>
            Older
          </button>
        </p>
      ) : null}
    </>
  )
}
