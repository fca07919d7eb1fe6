/** Provider keys: the list; add (the secret is write-only), rename, notes (dashboard-only), disable or enable, and delete. */
import { useState } from 'preact/hooks'
import { api, type Gateway, type Provider, type Session } from '../api'
import { ErrorLine, Table, useAction, useLoad, when } from '../ui'

export function ProvidersPage({ session }: { session: Session; path: string; refreshSession: () => void }) {
  const providers = useLoad(() => api<Provider[]>('/api/v1/providers'), [])
  const gateways = useLoad(() => api<Gateway[]>('/api/v1/gateways'), [])
  const notes = useLoad(() => api<Record<string, string>>('/dashboard/api/providers/notes'), [])
  const action = useAction()
  const writable = !session.read_only
  const names = new Map((gateways.data ?? []).map((gateway) => [gateway.id, gateway.name]))

  const rename = (provider: Provider) => {
    const label = prompt('New name', provider.label)
    if (label !== null) action.run(() => api(`/api/v1/providers/${provider.id}`, { method: 'PATCH', body: { label } })).then(providers.reload)
  }
  const editNotes = (provider: Provider) => {
    const text = prompt(`Notes for ${provider.label || provider.gateway}`, notes.data?.[provider.id] ?? '')
    if (text !== null) action.run(() => api(`/dashboard/api/providers/${provider.id}/notes`, { method: 'PUT', body: { notes: text } })).then(notes.reload)
  }
  const setDisabled = (provider: Provider, disabled: boolean) => action.run(() => api(`/api/v1/providers/${provider.id}`, { method: 'PATCH', body: { disabled } })).then(providers.reload)
  const remove = (provider: Provider) =>
    confirm(`Delete ${provider.label || provider.gateway}? It is taken out of every routing rule.`) &&
    action.run(() => api(`/api/v1/providers/${provider.id}`, { method: 'DELETE' })).then(providers.reload)

  return (
    <>
      <h2>Provider keys</h2>
      {writable ? <AddProvider gateways={gateways.data ?? []} onAdded={providers.reload} /> : null}
      <ErrorLine error={providers.error ?? gateways.error ?? notes.error ?? action.error} />
      <Table
        rows={providers.data ?? []}
        empty={providers.loading ? 'Loading…' : 'No provider keys yet.'}
        columns={[
          { title: 'name', cell: (provider) => provider.label || <span class="muted">–</span> },
          { title: 'gateway', cell: (provider) => names.get(provider.gateway) ?? provider.gateway },
          { title: 'secret', cell: (provider) => <code>…{provider.key_last4}</code> },
          { title: 'added', cell: (provider) => when(provider.created_at) },
          { title: 'notes', wrap: true, cell: (provider) => notes.data?.[provider.id] ?? <span class="muted">–</span> },
          { title: 'state', cell: (provider) => (provider.disabled_at ? <span class="badge bad">disabled</span> : <span class="badge good">enabled</span>) },
          ...(writable
            ? [
                {
                  title: 'actions',
                  cell: (provider: Provider) => (
                    <div class="actions">
                      <button type="button" onClick={() => rename(provider)} disabled={action.busy}>
                        Rename
                      </button>
                      <button type="button" onClick={() => editNotes(provider)} disabled={action.busy}>
                        Notes
                      </button>
                      <button type="button" onClick={() => setDisabled(provider, !provider.disabled_at)} disabled={action.busy}>
                        {provider.disabled_at ? 'Enable' : 'Disable'}
                      </button>
                      <button type="button" class="danger" onClick={() => remove(provider)} disabled={action.busy}>
                        Delete
                      </button>
                    </div>
                  ),
                },
              ]
            : []),
        ]}
      />
    </>
  )
}

/** The add form: a gateway, a name, the secret (never shown again) and the gateway's own fields. */
function AddProvider({ gateways, onAdded }: { gateways: Gateway[]; onAdded: () => void }) {
  const [gateway, setGateway] = useState('')
  const [label, setLabel] = useState('')
  const [secret, setSecret] = useState('')
  const [config, setConfig] = useState<Record<string, string>>({})
  const action = useAction()
  const chosen = gateways.find((entry) => entry.id === gateway)
  const submit = async (event: Event) => {
    event.preventDefault()
    const fields = Object.fromEntries(Object.entries(config).filter(([, value]) => value !== ''))
    const body = { gateway, key: secret, ...(label ? { label } : {}), ...(Object.keys(fields).length ? { config: fields } : {}) }
    if (await action.run(() => api('/api/v1/providers', { method: 'POST', body }))) {
      setSecret('')
      setLabel('')
      setConfig({})
      onAdded()
    }
  }
  return (
    <form class="inline" onSubmit={submit} aria-label="Add a provider key">
      <label>
        Gateway
        <select name="gateway" value={gateway} onChange={(event) => setGateway(event.currentTarget.value)} required>
          <option value="">choose…</option>
          {gateways.map((entry) => (
            <option value={entry.id}>{entry.name}</option>
          ))}
        </select>
      </label>
      <label>
        Name
        <input name="label" value={label} onInput={(event) => setLabel(event.currentTarget.value)} maxLength={120} />
      </label>
      <label>
        Secret
        <input name="secret" type="password" autocomplete="off" value={secret} onInput={(event) => setSecret(event.currentTarget.value)} required />
      </label>
      {(chosen?.config_fields ?? []).map((field) => (
        <label>
          {field.name}
          <input
            name={`config.${field.name}`}
            value={config[field.name] ?? ''}
            placeholder={field.default}
            required={field.required}
            onInput={(event) => setConfig((current) => ({ ...current, [field.name]: event.currentTarget.value }))}
          />
        </label>
      ))}
      <button class="primary" type="submit" disabled={action.busy}>
        Add provider key
      </button>
      <ErrorLine error={action.error} />
    </form>
  )
}
