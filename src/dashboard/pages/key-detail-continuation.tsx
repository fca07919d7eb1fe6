/**
 * An inference key's mid-stream continuation on its page (CONTRACT §16): on or off, and how many
 * times one streamed answer may be continued by the next target after its stream broke (1 to 3).
 * Saves go to the operation keys.set_continuation, which replaces the whole setting.
 */
import { useState } from 'preact/hooks'
import { api } from '../api'
import { Checkbox, ErrorLine, SaveButton, useAction, useServerForm } from '../ui'

/** The key object's `continuation`: null when off. */
export interface ContinuationSetting {
  max_hops: number
}

const defaultMaxHops = 1
const hopChoices = [1, 2, 3] as const

const hopsText = (hops: number) => `${hops} continuation${hops === 1 ? '' : 's'}`

export function KeyContinuation({ id, continuation, writable, onSaved }: { id: string; continuation: ContinuationSetting | null; writable: boolean; onSaved: () => void }) {
  const fromSetting = () => ({ on: continuation !== null, max_hops: continuation?.max_hops ?? defaultMaxHops })
  const [form, setForm, savedAs] = useServerForm(continuation, fromSetting)
  const action = useAction()
  const [status, setStatus] = useState<string>()
  const set = (patch: Partial<ReturnType<typeof fromSetting>>) => (setStatus(undefined), setForm((current) => ({ ...current, ...patch })))
  const submit = async (event: Event) => {
    event.preventDefault()
    setStatus(undefined)
    const body = { continuation: form.on ? { max_hops: form.max_hops } : null }
    const save = () => api<{ continuation: ContinuationSetting | null }>(`/dashboard/api/keys/${id}/continuation`, { method: 'PUT', body }).then((answer) => savedAs(answer.continuation))
    if (await action.run(save)) {
      setStatus('Saved.')
      onSaved()
    }
  }
  const intro = (
    <p class="muted">
      A streamed answer whose stream breaks after text was sent is continued by the next target of the plan, in the same stream; off, the stream ends with an error.
      {continuation ? ` Now: on, at most ${hopsText(continuation.max_hops)} per answer.` : ' Now: off.'}
    </p>
  )
  if (!writable) {
    return (
      <section aria-label="Mid-stream continuation">
        <h3>Mid-stream continuation</h3>
        {intro}
      </section>
    )
  }
  return (
    <form onSubmit={submit} aria-label="Mid-stream continuation">
      <h3>Mid-stream continuation</h3>
      {intro}
      <fieldset class="toolbar" style="border:0;padding:0">
        <Checkbox name="continuation_on" checked={form.on} onChange={(checked) => set({ on: checked })}>
          Continue broken streams
        </Checkbox>
        <label>
          At most
          <select name="continuation_max_hops" value={String(form.max_hops)} disabled={!form.on} onChange={(event) => set({ max_hops: Number(event.currentTarget.value) })}>
            {hopChoices.map((hops) => (
              <option value={String(hops)}>{hopsText(hops)}</option>
            ))}
          </select>
        </label>
        <SaveButton label="Save continuation" writable={writable} busy={action.busy} saved={false} />
        {status ? <span role="status">{status}</span> : null}
      </fieldset>
      <ErrorLine error={action.error} />
    </form>
  )
}
