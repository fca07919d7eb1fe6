/**
 * An inference key's response cache on its page (CONTRACT §15): on or off, how long an answer is
 * served again, whether the key shares its entries with its workspace, the semantic lookup as set
 * (changed through the API or MCP), and a purge of its entries. Saves go to the operation
 * keys.set_cache, which replaces the whole setting: a save here keeps the semantic lookup as it is.
 */
import { useState } from 'preact/hooks'
import { api, type Provider } from '../api'
import { Checkbox, ErrorLine, SaveButton, useAction, useServerForm } from '../ui'

/** The key object's `cache`: null when off. */
export interface CacheSetting {
  ttl_seconds: number
  scope: 'key' | 'workspace'
  semantic: { threshold: number; provider_key_id: string; model: string } | null
}

const defaultTtlSeconds = 3600

/** A TTL as typed: a whole number (the API checks its range), naming the field otherwise. */
function ttlOf(text: string): number {
  const trimmed = text.trim()
  if (trimmed === '') return defaultTtlSeconds
  const value = Number(trimmed)
  if (!Number.isInteger(value)) throw new Error(`Keep answers for (seconds): expected a whole number, got '${trimmed}'.`)
  return value
}

/** "1 h", "30 min", "45 s": how long a TTL is, for reading. */
function duration(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400} d`
  if (seconds % 3600 === 0) return `${seconds / 3600} h`
  if (seconds % 60 === 0) return `${seconds / 60} min`
  return `${seconds} s`
}

function SemanticLine({ semantic, providers }: { semantic: CacheSetting['semantic']; providers: Provider[] }) {
  if (!semantic) return <p class="muted">Semantic lookup: off (exact matches only).</p>
  const provider = providers.find((candidate) => candidate.id === semantic.provider_key_id)
  return (
    <p class="muted" aria-label="Semantic lookup">
      Semantic lookup: a question at least {semantic.threshold} similar to an earlier one gets its answer, embedded with <code>{semantic.model}</code> on{' '}
      {provider ? `${provider.label || provider.gateway} (${provider.gateway})` : <code>{semantic.provider_key_id}</code>}. Set or clear it with PATCH /api/v1/keys/{'{id}'} or the MCP tool set_key_cache.
    </p>
  )
}

export function KeyCache({ id, cache, providers, writable, onSaved }: { id: string; cache: CacheSetting | null; providers: Provider[]; writable: boolean; onSaved: () => void }) {
  const fromCache = () => ({ on: cache !== null, ttl_seconds: String(cache?.ttl_seconds ?? defaultTtlSeconds), scope: cache?.scope ?? 'key' })
  const [form, setForm, savedAs] = useServerForm(cache, fromCache)
  const action = useAction()
  const [status, setStatus] = useState<string>()
  const set = (patch: Partial<ReturnType<typeof fromCache>>) => (setStatus(undefined), setForm((current) => ({ ...current, ...patch })))
  const submit = async (event: Event) => {
    event.preventDefault()
    setStatus(undefined)
    const save = () => {
      const body = { cache: form.on ? { ttl_seconds: ttlOf(form.ttl_seconds), scope: form.scope, semantic: cache?.semantic ?? null } : null }
      return api<{ cache: CacheSetting | null }>(`/dashboard/api/keys/${id}/cache`, { method: 'PUT', body }).then((answer) => savedAs(answer.cache))
    }
    if (await action.run(save)) {
      setStatus('Saved.')
      onSaved()
    }
  }
  const purge = async () => {
    setStatus(undefined)
    let answer: { purged: number } | undefined
    if (await action.run(async () => (answer = await api<{ purged: number }>(`/dashboard/api/keys/${id}/cache`, { method: 'DELETE' })))) {
      setStatus(`Purged ${answer!.purged} cached answer${answer!.purged === 1 ? '' : 's'}.`)
    }
  }
  const intro = (
    <p class="muted">
      Completed answers are kept on each node and served again to identical requests, without a gateway call.
      {cache ? ` Now: on, answers kept ${duration(cache.ttl_seconds)}, ${cache.scope === 'workspace' ? "shared with the workspace's workspace-scoped keys" : "this key's own"}.` : ' Now: off.'}
    </p>
  )
  if (!writable) {
    return (
      <section aria-label="Response cache">
        <h3>Response cache</h3>
        {intro}
        {cache ? <SemanticLine semantic={cache.semantic} providers={providers} /> : null}
      </section>
    )
  }
  return (
    <form onSubmit={submit} aria-label="Response cache">
      <h3>Response cache</h3>
      {intro}
      <fieldset class="toolbar" style="border:0;padding:0">
        <Checkbox name="cache_on" checked={form.on} onChange={(checked) => set({ on: checked })}>
          Cache answers
        </Checkbox>
        <label>
          Keep answers for (seconds)
          <input name="cache_ttl_seconds" inputMode="numeric" value={form.ttl_seconds} placeholder={String(defaultTtlSeconds)} disabled={!form.on} onInput={(event) => set({ ttl_seconds: event.currentTarget.value })} />
        </label>
        <label>
          Shared by
          <select name="cache_scope" value={form.scope} disabled={!form.on} onChange={(event) => set({ scope: event.currentTarget.value as CacheSetting['scope'] })}>
            <option value="key">this key only</option>
            <option value="workspace">the workspace's workspace-scoped keys</option>
          </select>
        </label>
        <SaveButton label="Save cache" writable={writable} busy={action.busy} saved={false} />
        <button type="button" class="danger" disabled={action.busy} onClick={purge}>
          Purge cached answers
        </button>
        {status ? <span role="status">{status}</span> : null}
      </fieldset>
      {cache ? <SemanticLine semantic={cache.semantic} providers={providers} /> : null}
      <ErrorLine error={action.error} />
    </form>
  )
}
