/**
 * An inference key's spend caps and rate limits on its page (CONTRACT §11): one field each, beside
 * what counts against it now, read again while the page is in view. Every save goes to the API.
 */
import { useEffect, useState } from 'preact/hooks'
import { api, type KeyLimits, type LimitState } from '../api'
import { ErrorLine, useAction, useServerForm } from '../ui'

/** The part of the key this section reads (GET and PATCH /api/v1/keys/{id}). */
export interface KeyWithLimits {
  id: string
  limits: KeyLimits
  limit_state: LimitState
}

type LimitField = keyof KeyLimits

const usd = (value: number) => `$${value === 0 ? '0' : value < 0.01 ? value.toPrecision(2) : value.toFixed(2)}`
const count = (value: number) => value.toLocaleString()

/** The four limits: the field's label and keyboard, what counts against it now, and how that reads. */
const limitFields: { field: LimitField; label: string; inputMode: 'numeric' | 'decimal'; show: (value: number) => string; used: (state: LimitState) => number; now: (used: number, limit: number | null) => string }[] = [
  {
    field: 'requests_per_minute',
    label: 'Requests per minute',
    inputMode: 'numeric',
    show: count,
    used: (state) => state.requests_last_minute,
    now: (used, limit) => (limit === null ? `${count(used)} request${used === 1 ? '' : 's'} in the last minute (no limit)` : `${count(used)} of ${count(limit)} requests in the last minute`),
  },
  {
    field: 'tokens_per_minute',
    label: 'Tokens per minute',
    inputMode: 'numeric',
    show: count,
    used: (state) => state.tokens_last_minute,
    now: (used, limit) => (limit === null ? `${count(used)} token${used === 1 ? '' : 's'} in the last minute (no limit)` : `${count(used)} of ${count(limit)} tokens in the last minute`),
  },
  {
    field: 'usd_per_day',
    label: 'USD per day',
    inputMode: 'decimal',
    show: usd,
    used: (state) => state.usd_today,
    now: (used, limit) => (limit === null ? `${usd(used)} today, UTC (no limit)` : `${usd(used)} of ${usd(limit)} today, UTC`),
  },
  {
    field: 'usd_per_month',
    label: 'USD per month',
    inputMode: 'decimal',
    show: usd,
    used: (state) => state.usd_this_month,
    now: (used, limit) => (limit === null ? `${usd(used)} this month, UTC (no limit)` : `${usd(used)} of ${usd(limit)} this month, UTC`),
  },
]

/** What the limits' "now" lines show is read again this often while the page is in view. */
const limitStateRefreshMs = 10_000

/** A number field: null when empty; text that is not a number is refused, naming the field (the API checks the rest). */
function numberOrNull(text: string, field: string): number | null {
  const trimmed = text.trim()
  if (trimmed === '') return null
  const value = Number(trimmed)
  if (!Number.isFinite(value)) throw new Error(`${field}: expected a number, got '${trimmed}'.`)
  return value
}

/**
 * The key's spend caps and rate limits (CONTRACT §11): one field each, empty for no limit, beside
 * what counts against it now. Save sends only the fields changed (an emptied one as null).
 */
export function Limits({ view, writable, onSaved }: { view: KeyWithLimits; writable: boolean; onSaved: () => void }) {
  const fromLimits = (limits: KeyLimits) => Object.fromEntries(limitFields.map(({ field }) => [field, limits[field]?.toString() ?? ''])) as Record<LimitField, string>
  const [form, setForm, savedAs] = useServerForm(view.limits, () => fromLimits(view.limits))
  const [stored, setStored] = useState(view.limits)
  const [state, setState] = useState(view.limit_state)
  const action = useAction()
  const [status, setStatus] = useState<string>()
  // The page's copy of the key, read again (after a save elsewhere on the page), is the newest.
  useEffect(() => setStored(view.limits), [JSON.stringify(view.limits)])
  useEffect(() => setState(view.limit_state), [JSON.stringify(view.limit_state)])
  // What counts now moves with every request: read again while the page is in view.
  useEffect(() => {
    let live = true
    const timer = setInterval(() => {
      if (document.visibilityState !== 'visible') return
      api<KeyWithLimits>(`/api/v1/keys/${view.id}`).then(
        (answer) => live && setState(answer.limit_state),
        () => {}, // The next read tries again; the page's own load shows a lasting error.
      )
    }, limitStateRefreshMs)
    return () => {
      live = false
      clearInterval(timer)
    }
  }, [view.id])
  const submit = async (event: Event) => {
    event.preventDefault()
    setStatus(undefined)
    let changed: Partial<KeyLimits> = {}
    const save = async () => {
      for (const { field, label } of limitFields) {
        const value = numberOrNull(form[field], label)
        if (value !== stored[field]) changed[field] = value
      }
      if (Object.keys(changed).length === 0) return
      const answer = await api<KeyWithLimits>(`/api/v1/keys/${view.id}`, { method: 'PATCH', body: { limits: changed } })
      savedAs(answer.limits)
      setStored(answer.limits)
      setState(answer.limit_state)
      setForm(fromLimits(answer.limits))
    }
    if (await action.run(save)) {
      if (Object.keys(changed).length === 0) return setStatus('Nothing changed.')
      setStatus('Saved.')
      onSaved()
    }
  }
  const cards = limitFields.map(({ field, label, inputMode, show, used, now }) => {
    const limit = stored[field]
    const nowId = `limit-now-${field}`
    const usage = (
      <>
        <p class="muted now" id={nowId}>
          {now(used(state), limit)}
        </p>
        {/* The bar repeats the line above it, which is what assistive technology reads. */}
        {limit === null ? null : <meter aria-hidden="true" min={0} max={limit} low={limit * 0.8} high={limit * 0.95} optimum={0} value={Math.min(used(state), limit)} />}
      </>
    )
    return writable ? (
      <div class="limit">
        <label>
          {label}
          <input
            name={field}
            inputMode={inputMode}
            placeholder="no limit"
            value={form[field]}
            aria-describedby={nowId}
            onInput={(event) => {
              const text = event.currentTarget.value
              setStatus(undefined)
              setForm((current) => ({ ...current, [field]: text }))
            }}
          />
        </label>
        {usage}
      </div>
    ) : (
      <div class="limit">
        <span class="limit-name">{label}</span>
        <strong class="limit-value">{limit === null ? 'no limit' : show(limit)}</strong>
        {usage}
      </div>
    )
  })
  const intro = <p class="muted">A request beyond a limit is refused before it reaches a gateway.{writable ? ' Empty: no limit.' : ''} What counts now is read again every 10 s.</p>
  return writable ? (
    <form onSubmit={submit} aria-label="Limits">
      <h3>Limits</h3>
      {intro}
      <div class="limits">{cards}</div>
      <p>
        <button class="primary" type="submit" disabled={action.busy}>
          Save limits
        </button>{' '}
        {status ? <span role="status">{status}</span> : null}
      </p>
      <ErrorLine error={action.error} />
    </form>
  ) : (
    <section aria-label="Limits">
      <h3>Limits</h3>
      {intro}
      <div class="limits">{cards}</div>
    </section>
  )
}
