/**
 * One inference key: its settings (name, allowlist, steering, timeouts, ads and keyterms), its limits
 * (spend caps and rate limits, with what counts against them now: key-detail-limits.tsx), its
 * response cache (key-detail-cache.tsx), its mid-stream continuation (key-detail-continuation.tsx),
 * its guardrails (key-detail-guardrails.tsx), its routing rule as an editor (priority or split with
 * weights, per-target ttfb_ms, model remaps with percentages, the decisioner), its webhook (the signing secret shown once, rotate, clear), e-mail
 * notifications and MCP servers. Every save goes to the API, which checks it.
 */
import { useState } from 'preact/hooks'
import { api, type InferenceKey, type KeyLimits, type LimitState, type Provider, type Rule, type Session } from '../api'
import { Checkbox, ErrorLine, SaveButton, SecretNotice, Table, useAction, useLoad, useServerForm, when } from '../ui'
import { KeyCache, type CacheSetting } from './key-detail-cache'
import { KeyContinuation, type ContinuationSetting } from './key-detail-continuation'
import { KeyGuardrails, type GuardrailsSetting } from './key-detail-guardrails'
import { Limits } from './key-detail-limits'

interface KeyDetailView extends InferenceKey {
  companion_ads: boolean
  keyterms: boolean
  allowed_ips: string[]
  steering_message: string | null
  failover_ttfb_ms: number | null
  upstream_timeout_ms: number | null
  effective_timeouts: { failover_ttfb_ms: number; upstream_timeout_ms: number }
  limits: KeyLimits
  limit_state: LimitState
  cache: CacheSetting | null
  continuation: ContinuationSetting | null
  guardrails: GuardrailsSetting | null
}

interface Extras {
  webhook_url: string | null
  notify_email: boolean
  mcp_servers: { id: string; name: string | null; url: string; created_at: string }[]
}

export function KeyDetail({ id, session }: { id: string; session: Session }) {
  const key = useLoad(() => api<KeyDetailView>(`/api/v1/keys/${id}`), [id])
  const providers = useLoad(() => api<Provider[]>('/api/v1/providers'), [])
  const extras = useLoad(() => api<Extras>(`/dashboard/api/keys/${id}/extras`), [id])
  const writable = !session.read_only
  if (key.error) return <ErrorLine error={key.error} />
  if (!key.data) return <p class="muted">Loading…</p>
  const view = key.data
  return (
    <>
      <p>
        <a href="#/keys">← Inference keys</a>
      </p>
      <h2>{view.label ?? view.key_prefix}</h2>
      <p class="muted">
        <code>{view.key_prefix}…</code> · {view.api_shape} · created {when(view.created_at)} · {view.revoked_at ? 'revoked' : 'live'}
      </p>
      <Settings view={view} writable={writable} onSaved={key.reload} />
      <Limits view={view} writable={writable} onSaved={key.reload} />
      <KeyCache id={id} cache={view.cache} providers={providers.data ?? []} writable={writable} onSaved={key.reload} />
      <KeyContinuation id={id} continuation={view.continuation} writable={writable} onSaved={key.reload} />
      <KeyGuardrails id={id} guardrails={view.guardrails} providers={providers.data ?? []} writable={writable} onSaved={key.reload} />
      <RoutingEditor id={id} rule={view.routing} providers={providers.data ?? []} writable={writable} onSaved={key.reload} />
      {extras.data ? <Notifications id={id} extras={extras.data} writable={writable} onSaved={extras.reload} /> : <ErrorLine error={extras.error} />}
      {extras.data ? <McpServers id={id} servers={extras.data.mcp_servers} writable={writable} onSaved={extras.reload} /> : null}
    </>
  )
}

/** A whole number field: null when empty; a value that is not a whole number is refused, naming the field. */
function wholeOrNull(text: string, field: string): number | null {
  if (text.trim() === '') return null
  const value = Number(text.trim())
  if (!Number.isInteger(value)) throw new Error(`${field}: expected a whole number, got '${text.trim()}'.`)
  return value
}

/** The settings as the server holds them (what the settings form is seeded from). */
const storedSettings = (view: KeyDetailView) => ({
  label: view.label,
  allowed_ips: view.allowed_ips,
  steering_message: view.steering_message,
  failover_ttfb_ms: view.failover_ttfb_ms,
  upstream_timeout_ms: view.upstream_timeout_ms,
  companion_ads: view.companion_ads,
  keyterms: view.keyterms,
})

function Settings({ view, writable, onSaved }: { view: KeyDetailView; writable: boolean; onSaved: () => void }) {
  const initial = () => ({
    name: view.label ?? '',
    allowed_ips: view.allowed_ips.join('\n'),
    steering_message: view.steering_message ?? '',
    failover_ttfb_ms: view.failover_ttfb_ms?.toString() ?? '',
    upstream_timeout_ms: view.upstream_timeout_ms?.toString() ?? '',
    companion_ads: view.companion_ads,
    keyterms: view.keyterms,
  })
  const [form, setForm, savedAs] = useServerForm(storedSettings(view), initial)
  const action = useAction()
  const [saved, setSaved] = useState(false)
  const set = (patch: Partial<ReturnType<typeof initial>>) => (setSaved(false), setForm((current) => ({ ...current, ...patch })))
  const submit = async (event: Event) => {
    event.preventDefault()
    const save = () => {
      const body = {
        name: form.name || null,
        allowed_ips: form.allowed_ips,
        steering_message: form.steering_message,
        failover_ttfb_ms: wholeOrNull(form.failover_ttfb_ms, 'Failover after no first byte'),
        upstream_timeout_ms: wholeOrNull(form.upstream_timeout_ms, 'Upstream timeout'),
        companion_ads: form.companion_ads,
        keyterms: form.keyterms,
      }
      return api<KeyDetailView>(`/api/v1/keys/${view.id}`, { method: 'PATCH', body }).then((answer) => savedAs(storedSettings(answer)))
    }
    if (await action.run(save)) {
      setSaved(true)
      onSaved()
    }
  }
  return (
    <form onSubmit={submit} aria-label="Key settings">
      <h3>Settings</h3>
      <fieldset disabled={!writable} class="toolbar" style="border:0;padding:0">
        <label>
          Name
          <input name="name" value={form.name} maxLength={120} onInput={(event) => set({ name: event.currentTarget.value })} />
        </label>
        <label>
          Failover after no first byte (ms)
          <input name="failover_ttfb_ms" inputMode="numeric" value={form.failover_ttfb_ms} placeholder={String(view.effective_timeouts.failover_ttfb_ms)} onInput={(event) => set({ failover_ttfb_ms: event.currentTarget.value })} />
        </label>
        <label>
          Upstream timeout (ms)
          <input name="upstream_timeout_ms" inputMode="numeric" value={form.upstream_timeout_ms} placeholder={String(view.effective_timeouts.upstream_timeout_ms)} onInput={(event) => set({ upstream_timeout_ms: event.currentTarget.value })} />
        </label>
        <label>
          Allowed IPs (one per line; empty: any)
          <textarea name="allowed_ips" rows={3} value={form.allowed_ips} onInput={(event) => set({ allowed_ips: event.currentTarget.value })} />
        </label>
        <label>
          Steering message
          <textarea name="steering_message" rows={3} maxLength={2000} value={form.steering_message} onInput={(event) => set({ steering_message: event.currentTarget.value })} />
        </label>
        <Checkbox name="companion_ads" checked={form.companion_ads} onChange={(checked) => set({ companion_ads: checked })}>
          Companion ads
        </Checkbox>
        <Checkbox name="keyterms" checked={form.keyterms} onChange={(checked) => set({ keyterms: checked })}>
          Keyterm links
        </Checkbox>
        <SaveButton label="Save settings" writable={writable} busy={action.busy} saved={saved} />
      </fieldset>
      <ErrorLine error={action.error} />
    </form>
  )
}

type TargetRow = { provider_key_id: string; weight: string; ttfb_ms: string }
type RemapRow = { match: string; percent: string; provider_key_id: string; upstream_model: string; enabled: boolean }

function RoutingEditor({ id, rule, providers, writable, onSaved }: { id: string; rule: Rule; providers: Provider[]; writable: boolean; onSaved: () => void }) {
  const fromRule = () => ({
    strategy: rule.strategy,
    targets: rule.targets.map((target): TargetRow => ({ provider_key_id: target.provider_key_id, weight: target.weight?.toString() ?? '', ttfb_ms: target.ttfb_ms?.toString() ?? '' })),
    remaps: rule.model_remaps.map((remap): RemapRow => ({ ...remap, percent: String(remap.percent) })),
    decisioner: rule.decisioner ? JSON.stringify(rule.decisioner, null, 2) : '',
  })
  const [form, setForm, savedAs] = useServerForm(rule, fromRule)
  const action = useAction()
  const [saved, setSaved] = useState(false)
  const update = (patch: Partial<ReturnType<typeof fromRule>>) => (setSaved(false), setForm((current) => ({ ...current, ...patch })))
  const setTarget = (index: number, patch: Partial<TargetRow>) => update({ targets: form.targets.map((row, at) => (at === index ? { ...row, ...patch } : row)) })
  const setRemap = (index: number, patch: Partial<RemapRow>) => update({ remaps: form.remaps.map((row, at) => (at === index ? { ...row, ...patch } : row)) })
  const move = (index: number, by: number) => {
    const targets = [...form.targets]
    const [row] = targets.splice(index, 1)
    targets.splice(index + by, 0, row!)
    update({ targets })
  }
  const submit = async (event: Event) => {
    event.preventDefault()
    const save = () => {
      let decisioner: unknown = null
      if (form.decisioner.trim()) {
        try {
          decisioner = JSON.parse(form.decisioner)
        } catch {
          throw new Error('The decisioner is not valid JSON.')
        }
      }
      const body = {
        strategy: form.strategy,
        // An empty ttfb_ms clears the target's own limit (the key's applies); an empty weight is 1, an empty percent 100.
        targets: form.targets.map((row, index) => ({
          provider_key_id: row.provider_key_id,
          ...(form.strategy === 'split' ? { weight: wholeOrNull(row.weight, `Target ${index + 1} weight`) ?? 1 } : {}),
          ttfb_ms: wholeOrNull(row.ttfb_ms, `Target ${index + 1} ttfb_ms`),
        })),
        model_remaps: form.remaps.map((row, index) => ({
          match: row.match,
          percent: wholeOrNull(row.percent, `Remap ${index + 1} percent`) ?? 100,
          provider_key_id: row.provider_key_id,
          upstream_model: row.upstream_model,
          enabled: row.enabled,
        })),
        decisioner,
      }
      return api<Rule>(`/api/v1/keys/${id}/routing`, { method: 'PUT', body }).then(savedAs)
    }
    if (await action.run(save)) {
      setSaved(true)
      onSaved()
    }
  }
  const providerSelect = (value: string, onChange: (value: string) => void, label: string) => (
    <select aria-label={label} value={value} onChange={(event) => onChange(event.currentTarget.value)} required>
      <option value="">choose…</option>
      {providers.map((provider) => (
        <option value={provider.id}>
          {provider.label || provider.gateway} ({provider.gateway})
        </option>
      ))}
    </select>
  )
  return (
    <form onSubmit={submit} aria-label="Routing rule">
      <h3>Routing</h3>
      <fieldset disabled={!writable} style="border:0;padding:0;margin:0">
        <div class="toolbar">
          <label>
            Strategy
            <select name="strategy" value={form.strategy} onChange={(event) => update({ strategy: event.currentTarget.value as Rule['strategy'] })}>
              <option value="priority">priority (list order is failover order)</option>
              <option value="split">split (by weight)</option>
            </select>
          </label>
        </div>
        <Table
          rows={form.targets.map((row, index) => ({ row, index }))}
          empty="No targets: the key answers 402 until one is added."
          columns={[
            { title: '#', cell: ({ index }) => index + 1 },
            { title: 'provider key', cell: ({ row, index }) => providerSelect(row.provider_key_id, (value) => setTarget(index, { provider_key_id: value }), `Target ${index + 1} provider key`) },
            ...(form.strategy === 'split'
              ? [{ title: 'weight', cell: ({ row, index }: { row: TargetRow; index: number }) => <input aria-label={`Target ${index + 1} weight`} inputMode="numeric" size={6} value={row.weight} onInput={(event) => setTarget(index, { weight: event.currentTarget.value })} /> }]
              : []),
            { title: 'ttfb_ms', cell: ({ row, index }) => <input aria-label={`Target ${index + 1} ttfb_ms`} inputMode="numeric" size={6} placeholder="key's" value={row.ttfb_ms} onInput={(event) => setTarget(index, { ttfb_ms: event.currentTarget.value })} /> },
            ...(writable
              ? [
                  {
                    title: '',
                    cell: ({ index }: { index: number }) => (
                      <div class="actions">
                        <button type="button" aria-label={`Move target ${index + 1} up`} disabled={index === 0} onClick={() => move(index, -1)}>
                          ↑
                        </button>
                        <button type="button" aria-label={`Move target ${index + 1} down`} disabled={index === form.targets.length - 1} onClick={() => move(index, 1)}>
                          ↓
                        </button>
                        <button type="button" class="danger" aria-label={`Remove target ${index + 1}`} onClick={() => update({ targets: form.targets.filter((_, at) => at !== index) })}>
                          ✕
                        </button>
                      </div>
                    ),
                  },
                ]
              : []),
          ]}
        />
        {writable ? (
          <p>
            <button type="button" onClick={() => update({ targets: [...form.targets, { provider_key_id: '', weight: '', ttfb_ms: '' }] })}>
              Add target
            </button>
          </p>
        ) : null}
        <h3>Model remaps</h3>
        <Table
          rows={form.remaps.map((row, index) => ({ row, index }))}
          empty="No remaps."
          columns={[
            { title: 'match', cell: ({ row, index }) => <input aria-label={`Remap ${index + 1} match`} value={row.match} placeholder="model id or *" onInput={(event) => setRemap(index, { match: event.currentTarget.value })} /> },
            { title: '%', cell: ({ row, index }) => <input aria-label={`Remap ${index + 1} percent`} inputMode="numeric" size={4} value={row.percent} onInput={(event) => setRemap(index, { percent: event.currentTarget.value })} /> },
            { title: 'provider key', cell: ({ row, index }) => providerSelect(row.provider_key_id, (value) => setRemap(index, { provider_key_id: value }), `Remap ${index + 1} provider key`) },
            { title: 'upstream model', cell: ({ row, index }) => <input aria-label={`Remap ${index + 1} upstream model`} value={row.upstream_model} onInput={(event) => setRemap(index, { upstream_model: event.currentTarget.value })} /> },
            { title: 'on', cell: ({ row, index }) => <input type="checkbox" aria-label={`Remap ${index + 1} enabled`} checked={row.enabled} onChange={(event) => setRemap(index, { enabled: event.currentTarget.checked })} /> },
            ...(writable
              ? [
                  {
                    title: '',
                    cell: ({ index }: { index: number }) => (
                      <button type="button" class="danger" aria-label={`Remove remap ${index + 1}`} onClick={() => update({ remaps: form.remaps.filter((_, at) => at !== index) })}>
                        ✕
                      </button>
                    ),
                  },
                ]
              : []),
          ]}
        />
        {writable ? (
          <p>
            <button type="button" onClick={() => update({ remaps: [...form.remaps, { match: '', percent: '100', provider_key_id: '', upstream_model: '', enabled: true }] })}>
              Add remap
            </button>
          </p>
        ) : null}
        <label>
          Decisioner (JSON: provider_key_id, objective, allow_model_override, max_usd_m, notes, models; empty: off)
          <textarea name="decisioner" rows={4} value={form.decisioner} onInput={(event) => update({ decisioner: event.currentTarget.value })} />
        </label>
        {writable ? (
          <p>
            <button class="primary" type="submit" disabled={action.busy}>
              Save routing
            </button>{' '}
            {saved ? <span role="status">Saved.</span> : null}
          </p>
        ) : null}
      </fieldset>
      <ErrorLine error={action.error} />
    </form>
  )
}

function Notifications({ id, extras, writable, onSaved }: { id: string; extras: Extras; writable: boolean; onSaved: () => void }) {
  const [url, setUrl] = useState(extras.webhook_url ?? '')
  const [secret, setSecret] = useState<string>()
  const action = useAction()
  const withSecret = async (call: () => Promise<{ signing_secret: string | null }>) => {
    let answer: { signing_secret: string | null } | undefined
    if (!(await action.run(async () => (answer = await call())))) return false
    setSecret(answer!.signing_secret ?? undefined)
    onSaved()
    return true
  }
  return (
    <section aria-label="Notifications">
      <h3>Batch notifications</h3>
      {secret ? <SecretNotice title="Webhook signing secret" secret={secret} note="Deliveries are signed with it." onDismiss={() => setSecret(undefined)} /> : null}
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault()
          withSecret(() => api(`/dashboard/api/keys/${id}/webhook`, { method: 'PUT', body: { url } }))
        }}
      >
        <fieldset disabled={!writable} class="toolbar" style="border:0;padding:0;margin:0">
          <label>
            Webhook URL (https)
            <input name="webhook_url" type="url" size={40} value={url} placeholder="https://example.com/hooks/router" onInput={(event) => setUrl(event.currentTarget.value)} required />
          </label>
          {writable ? (
            <>
              <button class="primary" type="submit" disabled={action.busy}>
                Save webhook
              </button>
              {extras.webhook_url ? (
                <>
                  <button type="button" disabled={action.busy} onClick={() => withSecret(() => api(`/dashboard/api/keys/${id}/webhook/rotate`, { method: 'POST' }))}>
                    Rotate signing secret
                  </button>
                  <button type="button" class="danger" disabled={action.busy} onClick={() => withSecret(() => api(`/dashboard/api/keys/${id}/webhook`, { method: 'DELETE' })).then((removed) => removed && setUrl(''))}>
                    Remove webhook
                  </button>
                </>
              ) : null}
            </>
          ) : null}
          <label style="flex-direction:row;align-items:center;color:inherit">
            <input
              type="checkbox"
              name="notify_email"
              checked={extras.notify_email}
              onChange={async (event) => {
                const box = event.currentTarget
                // A refused change puts the box back as stored.
                if (!(await action.run(() => api(`/dashboard/api/keys/${id}/notify-email`, { method: 'PUT', body: { on: box.checked } })))) box.checked = extras.notify_email
                onSaved()
              }}
            />
            E-mail the workspace's members when a batch ends
          </label>
        </fieldset>
      </form>
      <ErrorLine error={action.error} />
    </section>
  )
}

function McpServers({ id, servers, writable, onSaved }: { id: string; servers: Extras['mcp_servers']; writable: boolean; onSaved: () => void }) {
  const [url, setUrl] = useState('')
  const [name, setName] = useState('')
  const action = useAction()
  const add = async (event: Event) => {
    event.preventDefault()
    if (await action.run(() => api(`/dashboard/api/keys/${id}/mcp-servers`, { method: 'POST', body: { url, ...(name ? { name } : {}) } }))) {
      setUrl('')
      setName('')
      onSaved()
    }
  }
  return (
    <section aria-label="MCP servers">
      <h3>MCP servers</h3>
      <p class="muted">Their tools are offered to the model on this key's requests, and run by the router.</p>
      <Table
        rows={servers}
        empty="None attached."
        columns={[
          { title: 'name', cell: (server) => server.name ?? '–' },
          { title: 'url', cell: (server) => <code>{server.url}</code> },
          { title: 'added', cell: (server) => when(server.created_at) },
          ...(writable
            ? [
                {
                  title: '',
                  cell: (server: Extras['mcp_servers'][number]) => (
                    <button type="button" class="danger" disabled={action.busy} onClick={() => action.run(() => api(`/dashboard/api/keys/${id}/mcp-servers/${server.id}`, { method: 'DELETE' })).then(onSaved)}>
                      Remove
                    </button>
                  ),
                },
              ]
            : []),
        ]}
      />
      {writable ? (
        <form class="inline" onSubmit={add} aria-label="Attach an MCP server">
          <label>
            URL
            <input name="mcp_url" type="url" size={36} value={url} onInput={(event) => setUrl(event.currentTarget.value)} required />
          </label>
          <label>
            Name
            <input name="mcp_name" value={name} onInput={(event) => setName(event.currentTarget.value)} />
          </label>
          <button type="submit" disabled={action.busy}>
            Attach
          </button>
        </form>
      ) : null}
      <ErrorLine error={action.error} />
    </section>
  )
}
