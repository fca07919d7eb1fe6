/**
 * The workspace: its settings (allowlist, steering message, body capture), its members (who gets
 * batch e-mails) and its management keys (created with the secret shown once; read-only or not).
 */
import { useState } from 'preact/hooks'
import { api, type Session } from '../api'
import { Checkbox, ErrorLine, SaveButton, SecretNotice, Table, useAction, useLoad, useServerForm, when } from '../ui'

interface Overview {
  settings: { id: string; name: string; allowed_ips: string[]; steering_message: string | null; capture_bodies: boolean; suspended: boolean }
  members: { id: string; email: string; created_at: string }[]
  management_keys: { id: string; prefix: string; read_only: boolean; created_at: string }[]
}

export function WorkspacePage({ session, refreshSession }: { session: Session; path: string; refreshSession: () => void }) {
  const overview = useLoad(() => api<Overview>('/dashboard/api/workspace'), [])
  const writable = !session.read_only
  if (overview.error) return <ErrorLine error={overview.error} />
  if (!overview.data) return <p class="muted">Loading…</p>
  return (
    <>
      <h2>Workspace</h2>
      <p class="muted">
        {overview.data.settings.name} · <code>{overview.data.settings.id}</code>
        {overview.data.settings.suspended ? ' · suspended (inference is refused)' : ''}
      </p>
      <Settings settings={overview.data.settings} writable={writable} onSaved={overview.reload} />
      <Members members={overview.data.members} writable={writable} onSaved={overview.reload} />
      <ManagementKeys
        keys={overview.data.management_keys}
        writable={writable}
        onSaved={() => {
          overview.reload()
          // The signed-in key may be the one made read-only.
          refreshSession()
        }}
      />
    </>
  )
}

function Settings({ settings, writable, onSaved }: { settings: Overview['settings']; writable: boolean; onSaved: () => void }) {
  const initial = () => ({ allowed_ips: settings.allowed_ips.join('\n'), steering_message: settings.steering_message ?? '', capture_bodies: settings.capture_bodies })
  const [form, setForm, savedAs] = useServerForm(settings, initial)
  const [saved, setSaved] = useState(false)
  const action = useAction()
  const submit = async (event: Event) => {
    event.preventDefault()
    if (await action.run(() => api('/dashboard/api/workspace', { method: 'PATCH', body: form }).then(savedAs))) {
      setSaved(true)
      onSaved()
    }
  }
  return (
    <form onSubmit={submit} aria-label="Workspace settings">
      <h3>Settings</h3>
      <fieldset disabled={!writable} class="toolbar" style="border:0;padding:0">
        <label>
          Allowed IPs for every key (one per line; empty: any)
          <textarea name="allowed_ips" rows={3} value={form.allowed_ips} onInput={(event) => (setSaved(false), setForm({ ...form, allowed_ips: event.currentTarget.value }))} />
        </label>
        <label>
          Steering message
          <textarea name="steering_message" rows={3} maxLength={2000} value={form.steering_message} onInput={(event) => (setSaved(false), setForm({ ...form, steering_message: event.currentTarget.value }))} />
        </label>
        <Checkbox name="capture_bodies" checked={form.capture_bodies} onChange={(checked) => (setSaved(false), setForm({ ...form, capture_bodies: checked }))}>
          Capture request bodies (shown in the request explorer)
        </Checkbox>
        <SaveButton label="Save settings" writable={writable} busy={action.busy} saved={saved} />
      </fieldset>
      <ErrorLine error={action.error} />
    </form>
  )
}

function Members({ members, writable, onSaved }: { members: Overview['members']; writable: boolean; onSaved: () => void }) {
  const [email, setEmail] = useState('')
  const action = useAction()
  const add = async (event: Event) => {
    event.preventDefault()
    if (await action.run(() => api('/dashboard/api/workspace/members', { method: 'POST', body: { email } }))) {
      setEmail('')
      onSaved()
    }
  }
  return (
    <section aria-label="Members">
      <h3>Members</h3>
      <Table rows={members} empty="No members yet." columns={[{ title: 'e-mail', cell: (member) => member.email }, { title: 'added', cell: (member) => when(member.created_at) }]} />
      {writable ? (
        <form class="inline" onSubmit={add} aria-label="Add a member">
          <label>
            E-mail
            <input name="email" type="email" value={email} onInput={(event) => setEmail(event.currentTarget.value)} required />
          </label>
          <button type="submit" disabled={action.busy}>
            Add member
          </button>
        </form>
      ) : null}
      <ErrorLine error={action.error} />
    </section>
  )
}

function ManagementKeys({ keys, writable, onSaved }: { keys: Overview['management_keys']; writable: boolean; onSaved: () => void }) {
  const [readOnly, setReadOnly] = useState(true)
  const [secret, setSecret] = useState<string>()
  const action = useAction()
  const create = async (event: Event) => {
    event.preventDefault()
    let created: { key: string } | undefined
    if (await action.run(async () => (created = await api('/dashboard/api/workspace/management-keys', { method: 'POST', body: { read_only: readOnly } })))) {
      setSecret(created!.key)
      onSaved()
    }
  }
  const toggle = (id: string, value: boolean) => action.run(() => api(`/dashboard/api/workspace/management-keys/${id}`, { method: 'PATCH', body: { read_only: value } })).then(onSaved)
  return (
    <section aria-label="Management keys">
      <h3>Management keys</h3>
      {secret ? <SecretNotice title="Management key created" secret={secret} onDismiss={() => setSecret(undefined)} /> : null}
      <Table
        rows={keys}
        empty="None."
        columns={[
          { title: 'key', cell: (key) => <code>{key.prefix}…</code> },
          { title: 'created', cell: (key) => when(key.created_at) },
          { title: 'access', cell: (key) => (key.read_only ? <span class="badge">read-only</span> : <span class="badge good">read and write</span>) },
          ...(writable
            ? [
                {
                  title: '',
                  cell: (key: Overview['management_keys'][number]) => (
                    <button type="button" disabled={action.busy} onClick={() => toggle(key.id, !key.read_only)}>
                      {key.read_only ? 'Allow writes' : 'Make read-only'}
                    </button>
                  ),
                },
              ]
            : []),
        ]}
      />
      {writable ? (
        <form class="inline" onSubmit={create} aria-label="Create a management key">
          <label style="flex-direction:row;align-items:center;color:inherit">
            <input type="checkbox" name="read_only" checked={readOnly} onChange={(event) => setReadOnly(event.currentTarget.checked)} /> Read-only
          </label>
          <button type="submit" disabled={action.busy}>
            Create management key
          </button>
        </form>
      ) : null}
      <ErrorLine error={action.error} />
    </section>
  )
}
