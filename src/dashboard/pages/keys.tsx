/** Inference keys: the list; create (the new key shown once, with a copy button), revoke, restore and rotate. */
import { useState } from 'preact/hooks'
import { api, type InferenceKey, type Provider, type Session } from '../api'
import { ErrorLine, SecretNotice, Table, useAction, useLoad, when } from '../ui'
import { KeyDetail } from './key-detail'

const shapes = ['chat', 'chat_router', 'messages', 'content', 'decisions']

/** `#/keys` lists; `#/keys/<id>` opens one key. */
export function KeysPage({ session, path }: { session: Session; path: string; refreshSession: () => void }) {
  const id = /^#\/keys\/([0-9a-f-]{36})$/i.exec(path)?.[1]
  return id ? <KeyDetail id={id} session={session} /> : <KeyList session={session} />
}

function KeyList({ session }: { session: Session }) {
  const keys = useLoad(() => api<InferenceKey[]>('/api/v1/keys'), [])
  const providers = useLoad(() => api<Provider[]>('/api/v1/providers'), [])
  const action = useAction()
  const [secret, setSecret] = useState<{ title: string; secret: string; note?: string }>()
  const writable = !session.read_only

  const revoke = (key: InferenceKey) =>
    confirm(`Revoke ${key.label ?? key.key_prefix}? It stops working at once.`) && action.run(() => api(`/api/v1/keys/${key.id}`, { method: 'DELETE' })).then(keys.reload)
  const restore = (key: InferenceKey) => action.run(() => api(`/api/v1/keys/${key.id}`, { method: 'PATCH', body: { revoked: false } })).then(keys.reload)
  const rotate = async (key: InferenceKey) => {
    if (!confirm(`Rotate ${key.label ?? key.key_prefix}? The old secret keeps working for a day.`)) return
    let rotated: { key: string; grace_until: string } | undefined
    if (await action.run(async () => (rotated = await api(`/dashboard/api/keys/${key.id}/rotate`, { method: 'POST', body: {} })))) {
      setSecret({ title: `New secret for ${key.label ?? key.key_prefix}`, secret: rotated!.key, note: `The old secret works until ${when(rotated!.grace_until)}.` })
      keys.reload()
    }
  }

  return (
    <>
      <h2>Inference keys</h2>
      {secret ? <SecretNotice {...secret} onDismiss={() => setSecret(undefined)} /> : null}
      {writable ? (
        <CreateKey
          providers={(providers.data ?? []).filter((provider) => !provider.disabled_at)}
          onCreated={(created) => {
            setSecret({ title: `Key ${created.label ?? created.key_prefix} created`, secret: created.key! })
            keys.reload()
          }}
        />
      ) : null}
      <ErrorLine error={keys.error ?? action.error} />
      <Table
        rows={keys.data ?? []}
        empty={keys.loading ? 'Loading…' : 'No inference keys yet.'}
        columns={[
          { title: 'name', cell: (key) => <a href={`#/keys/${key.id}`}>{key.label ?? key.key_prefix}</a> },
          { title: 'key', cell: (key) => <code>{key.key_prefix}…</code> },
          { title: 'shape', cell: (key) => key.api_shape },
          {
            title: 'routing',
            wrap: true,
            cell: (key) => (key.routing.targets.length ? `${key.routing.strategy}: ${key.routing.targets.map((target) => target.gateway).join(' > ')}` : <span class="muted">no targets (answers 402)</span>),
          },
          { title: 'last used', cell: (key) => when(key.last_used_at) },
          { title: 'state', cell: (key) => (key.revoked_at ? <span class="badge bad">revoked</span> : <span class="badge good">live</span>) },
          ...(writable
            ? [
                {
                  title: 'actions',
                  cell: (key: InferenceKey) => (
                    <div class="actions">
                      {key.revoked_at ? (
                        <button type="button" onClick={() => restore(key)} disabled={action.busy}>
                          Restore
                        </button>
                      ) : (
                        <>
                          <button type="button" onClick={() => rotate(key)} disabled={action.busy}>
                            Rotate
                          </button>
                          <button type="button" class="danger" onClick={() => revoke(key)} disabled={action.busy}>
                            Revoke
                          </button>
                        </>
                      )}
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

/** The create form: a name, a shape and the provider keys to route to, in failover order. */
function CreateKey({ providers, onCreated }: { providers: Provider[]; onCreated: (key: InferenceKey) => void }) {
  const [name, setName] = useState('')
  const [shape, setShape] = useState('chat')
  const [targets, setTargets] = useState<string[]>([])
  const action = useAction()
  const toggle = (id: string, on: boolean) => setTargets((list) => (on ? [...list, id] : list.filter((entry) => entry !== id)))
  const submit = async (event: Event) => {
    event.preventDefault()
    let created: InferenceKey | undefined
    const body = { name: name || undefined, api_shape: shape, ...(targets.length ? { routing: { strategy: 'priority', targets: targets.map((id) => ({ provider_key_id: id })) } } : {}) }
    if (await action.run(async () => (created = await api<InferenceKey>('/api/v1/keys', { method: 'POST', body })))) {
      setName('')
      setTargets([])
      onCreated(created!)
    }
  }
  return (
    <form class="inline" onSubmit={submit} aria-label="Create an inference key">
      <label>
        Name
        <input name="name" value={name} onInput={(event) => setName(event.currentTarget.value)} placeholder="my app" maxLength={120} />
      </label>
      <label>
        Shape
        <select name="api_shape" value={shape} onChange={(event) => setShape(event.currentTarget.value)}>
          {shapes.map((value) => (
            <option value={value}>{value}</option>
          ))}
        </select>
      </label>
      <fieldset class="actions" style="border:0;padding:0;margin:0">
        <legend class="muted" style="font-size:12px">Route to (in failover order)</legend>
        {providers.length === 0 ? <span class="muted">Add a provider key first.</span> : null}
        {providers.map((provider) => (
          <label style="flex-direction:row;align-items:center;color:inherit">
            <input type="checkbox" name="target" value={provider.id} checked={targets.includes(provider.id)} onChange={(event) => toggle(provider.id, event.currentTarget.checked)} />
            {provider.label || provider.gateway} <span class="muted">({provider.gateway})</span>
          </label>
        ))}
      </fieldset>
      <button class="primary" type="submit" disabled={action.busy}>
        Create key
      </button>
      <ErrorLine error={action.error} />
    </form>
  )
}
