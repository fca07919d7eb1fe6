/** The dashboard's shared pieces: loading data, error lines, tables, the secret shown once. */
import type { ComponentChildren } from 'preact'
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, type InferenceKey } from './api'

/**
 * Loads with `load` whenever `deps` change; `reload` loads again (after a write). Only the latest
 * load's answer is kept: a slow earlier one (a 30-day range) never replaces a newer one.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true })
  const latest = useRef(0)
  const run = useCallback(() => {
    const turn = ++latest.current
    setState((previous) => ({ ...previous, loading: true }))
    load().then(
      (data) => turn === latest.current && setState({ data, loading: false }),
      (error: unknown) => turn === latest.current && setState({ error: messageOf(error), loading: false }),
    )
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps)
  useEffect(run, [run])
  return { ...state, reload: run }
}

export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return `${error.message} (${error.status})`
  return error instanceof Error ? error.message : String(error)
}

/** Runs a write and reports its error; answers whether it succeeded. */
export function useAction() {
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const run = async (action: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true)
    setError(undefined)
    try {
      await action()
      return true
    } catch (failure) {
      setError(messageOf(failure))
      return false
    } finally {
      setBusy(false)
    }
  }
  return { error, busy, run, clear: () => setError(undefined) }
}

export function ErrorLine({ error }: { error?: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null
}

export interface Column<Row> {
  title: string
  cell: (row: Row) => ComponentChildren
  wrap?: boolean
}

export function Table<Row>({ rows, columns, empty, onRow, rowLabel }: { rows: Row[]; columns: Column<Row>[]; empty: string; onRow?: (row: Row) => void; rowLabel?: (row: Row) => string }) {
  if (rows.length === 0) return <p class="muted">{empty}</p>
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            {columns.map((column) => (
              <th scope="col">{column.title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr
              class={onRow ? 'clickable' : undefined}
              tabIndex={onRow ? 0 : undefined}
              aria-label={onRow && rowLabel ? rowLabel(row) : undefined}
              onClick={onRow ? () => onRow(row) : undefined}
              onKeyDown={onRow ? (event) => (event.key === 'Enter' || event.key === ' ') && (event.preventDefault(), onRow(row)) : undefined}
            >
              {columns.map((column) => (
                <td class={column.wrap ? 'wrap' : undefined}>{column.cell(row)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** A secret the server shows once (a new key, a rotated key): shown with a copy button until dismissed. */
export function SecretNotice({ title, secret, note, onDismiss }: { title: string; secret: string; note?: string; onDismiss: () => void }) {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    await navigator.clipboard.writeText(secret).then(
      () => setCopied(true),
      () => setCopied(false),
    )
  }
  return (
    <div class="notice" role="status">
      <strong>{title}</strong> <span class="muted">Shown once: store it now.</span>
      <div class="secret">
        <code data-testid="secret">{secret}</code>
        <button type="button" onClick={copy}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" onClick={onDismiss}>
          Done
        </button>
      </div>
      {note ? <p class="muted">{note}</p> : null}
    </div>
  )
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '–')

/** The usage ranges of the API (SPEC "Usage filters"). */
export function RangeSelect({ value, onChange }: { value: string; onChange: (value: string) => void }) {
  return (
    <label>
      Range
      <select value={value} onChange={(event) => onChange(event.currentTarget.value)}>
        <option value="24h">last 24 hours</option>
        <option value="7d">last 7 days</option>
        <option value="30d">last 30 days</option>
      </select>
    </label>
  )
}

/** One key of the workspace, or all. */
export function KeySelect({ keys, value, onChange }: { keys: InferenceKey[]; value: string; onChange: (value: string) => void }) {
  return (
    <label>
      Key
      <select value={value} onChange={(event) => onChange(event.currentTarget.value)}>
        <option value="">all keys</option>
        {keys.map((key) => (
          <option value={key.id}>{key.label ?? key.key_prefix}</option>
        ))}
      </select>
    </label>
  )
}

/** A checkbox with its label beside it. */
export function Checkbox({ name, checked, onChange, children }: { name: string; checked: boolean; onChange: (checked: boolean) => void; children: ComponentChildren }) {
  return (
    <label style="flex-direction:row;align-items:center;color:inherit">
      <input type="checkbox" name={name} checked={checked} onChange={(event) => onChange(event.currentTarget.checked)} /> {children}
    </label>
  )
}

/** A form's save button (for a key that may write) and its "Saved." once saved. */
export function SaveButton({ label, writable, busy, saved }: { label: string; writable: boolean; busy: boolean; saved: boolean }) {
  return (
    <>
      {writable ? (
        <button class="primary" type="submit" disabled={busy}>
          {label}
        </button>
      ) : null}
      {saved ? <span role="status">Saved.</span> : null}
    </>
  )
}

/**
 * A form's state seeded from the server's copy (`stored`), and seeded again only when that copy
 * changes to something this form did not save itself: a save elsewhere on the page reloads the data,
 * and must not wipe what is being typed here. `savedAs` takes the server's answer to this form's save.
 */
export function useServerForm<F>(stored: unknown, toForm: () => F) {
  const [form, setForm] = useState(toForm)
  const text = JSON.stringify(stored)
  const basis = useRef(text)
  useEffect(() => {
    if (text === basis.current) return
    basis.current = text
    setForm(toForm())
  }, [text])
  const savedAs = (answer: unknown) => {
    basis.current = JSON.stringify(answer)
  }
  return [form, setForm, savedAs] as const
}
