/**
 * An inference key's guardrails on its page (CONTRACT §17): on or off, enforce or monitor, and a small
 * editor of the rules run on what the request sends (input) and on the answer (output) — each a
 * detector with its action (mask or block), a pattern for a regex rule, a provider key and categories
 * for a moderation rule (input only, block only), and an optional name. Saves go to the operation
 * keys.set_guardrails, which replaces the whole setting and checks it, naming the field it refuses.
 */
import { useState } from 'preact/hooks'
import { api, type Provider } from '../api'
import { Checkbox, ErrorLine, SaveButton, Table, useAction, useServerForm } from '../ui'

type Detector = 'email' | 'phone' | 'credit_card' | 'iban' | 'us_ssn' | 'ip_address' | 'secret' | 'regex' | 'moderation'
type Action = 'mask' | 'block'
type Mode = 'enforce' | 'monitor'
type Side = 'input' | 'output'

/** One rule of the key object's `guardrails` (its name filled in: the detector's unless one was given). */
export interface GuardrailRuleSetting {
  name: string
  detector: Detector
  action: Action
  pattern?: string
  provider_key_id?: string
  categories?: string[]
}

/** The key object's `guardrails`: null when off. */
export interface GuardrailsSetting {
  mode: Mode
  input: GuardrailRuleSetting[]
  output: GuardrailRuleSetting[]
}

/** A rule as edited: every field as text (a name equal to the detector's shows empty). */
interface RuleRow {
  name: string
  detector: Detector
  action: Action
  pattern: string
  provider_key_id: string
  categories: string
}

const detectors: readonly { id: Detector; label: string }[] = [
  { id: 'email', label: 'e-mail address' },
  { id: 'phone', label: 'phone number' },
  { id: 'credit_card', label: 'credit card number' },
  { id: 'iban', label: 'IBAN' },
  { id: 'us_ssn', label: 'US social security number' },
  { id: 'ip_address', label: 'IP address' },
  { id: 'secret', label: 'secret (API key, private key, JWT)' },
  { id: 'regex', label: 'pattern (regex)' },
  { id: 'moderation', label: 'moderation (input only)' },
]
const defaultCategories = 'hate, harassment, self-harm, sexual, violence, illicit'
const maxRules = 32

const sideTitle: Record<Side, string> = { input: 'Input rules (what the request sends)', output: 'Output rules (what the answer says)' }
const sideWord: Record<Side, string> = { input: 'Input', output: 'Output' }

const rowOf = (rule: GuardrailRuleSetting): RuleRow => ({
  name: rule.name === rule.detector ? '' : rule.name,
  detector: rule.detector,
  action: rule.action,
  pattern: rule.pattern ?? '',
  provider_key_id: rule.provider_key_id ?? '',
  categories: (rule.categories ?? []).join(', '),
})

const newRow = (): RuleRow => ({ name: '', detector: 'email', action: 'mask', pattern: '', provider_key_id: '', categories: '' })

/** A rule as the API takes it: only the fields its detector takes; an empty name is the detector's. */
function ruleOf(row: RuleRow): Record<string, unknown> {
  const rule: Record<string, unknown> = { detector: row.detector, action: row.action }
  if (row.name.trim() !== '') rule.name = row.name.trim()
  if (row.detector === 'regex') rule.pattern = row.pattern
  if (row.detector === 'moderation') {
    rule.provider_key_id = row.provider_key_id
    rule.categories = row.categories
      .split(/[\s,]+/)
      .map((category) => category.trim())
      .filter(Boolean)
  }
  return rule
}

/** What a rule does, for reading. */
function ruleText(rule: GuardrailRuleSetting, providers: Provider[]): string {
  const what = detectors.find((detector) => detector.id === rule.detector)?.label ?? rule.detector
  let text = `${rule.action} ${what}`
  if (rule.pattern !== undefined) text += ` /${rule.pattern}/`
  if (rule.provider_key_id !== undefined) {
    const provider = providers.find((candidate) => candidate.id === rule.provider_key_id)
    text += ` in ${(rule.categories ?? []).join(', ')} via ${provider ? `${provider.label || provider.gateway} (${provider.gateway})` : rule.provider_key_id}`
  }
  return rule.name === rule.detector ? text : `${rule.name}: ${text}`
}

function summary(guardrails: GuardrailsSetting | null): string {
  if (!guardrails) return ' Now: off.'
  const count = (rules: unknown[]) => `${rules.length} rule${rules.length === 1 ? '' : 's'}`
  return ` Now: on (${guardrails.mode}), ${count(guardrails.input)} on input, ${count(guardrails.output)} on output.`
}

export function KeyGuardrails({ id, guardrails, providers, writable, onSaved }: { id: string; guardrails: GuardrailsSetting | null; providers: Provider[]; writable: boolean; onSaved: () => void }) {
  const fromSetting = () => ({
    on: guardrails !== null,
    mode: guardrails?.mode ?? ('enforce' as Mode),
    input: (guardrails?.input ?? []).map(rowOf),
    output: (guardrails?.output ?? []).map(rowOf),
  })
  const [form, setForm, savedAs] = useServerForm(guardrails, fromSetting)
  const action = useAction()
  const [status, setStatus] = useState<string>()
  const set = (patch: Partial<ReturnType<typeof fromSetting>>) => (setStatus(undefined), setForm((current) => ({ ...current, ...patch })))
  const setSide = (side: Side, rows: RuleRow[]) => set(side === 'input' ? { input: rows } : { output: rows })
  const setRule = (side: Side, index: number, patch: Partial<RuleRow>) =>
    setSide(
      side,
      form[side].map((row, at) => {
        if (at !== index) return row
        const next = { ...row, ...patch }
        // A moderation rule only blocks.
        if (patch.detector === 'moderation') next.action = 'block'
        if (patch.detector === 'moderation' && next.categories === '') next.categories = defaultCategories
        return next
      }),
    )
  const submit = async (event: Event) => {
    event.preventDefault()
    setStatus(undefined)
    const body = { guardrails: form.on ? { mode: form.mode, input: form.input.map(ruleOf), output: form.output.map(ruleOf) } : null }
    const save = () => api<{ guardrails: GuardrailsSetting | null }>(`/dashboard/api/keys/${id}/guardrails`, { method: 'PUT', body }).then((answer) => savedAs(answer.guardrails))
    if (await action.run(save)) {
      setStatus('Saved.')
      onSaved()
    }
  }
  const intro = (
    <p class="muted">
      Rules on what the request sends and on what the answer says: matches masked or the request or answer blocked; in monitor mode findings are only counted. Matched text is never logged.
      {summary(guardrails)}
    </p>
  )
  if (!writable) {
    return (
      <section aria-label="Guardrails">
        <h3>Guardrails</h3>
        {intro}
        {guardrails
          ? (['input', 'output'] as const).map((side) => (
              <ul aria-label={`${sideWord[side]} rules`}>
                {guardrails[side].map((rule) => (
                  <li>
                    {sideWord[side]}: {ruleText(rule, providers)}
                  </li>
                ))}
              </ul>
            ))
          : null}
      </section>
    )
  }
  const providerSelect = (side: Side, index: number, row: RuleRow) => (
    <select aria-label={`${sideWord[side]} rule ${index + 1} provider key`} value={row.provider_key_id} onChange={(event) => setRule(side, index, { provider_key_id: event.currentTarget.value })}>
      <option value="">choose… (its gateway must serve /moderations)</option>
      {providers
        .filter((provider) => !provider.disabled_at)
        .map((provider) => (
          <option value={provider.id}>
            {provider.label || provider.gateway} ({provider.gateway})
          </option>
        ))}
    </select>
  )
  const rules = (side: Side) => (
    <>
      <h4>{sideTitle[side]}</h4>
      <Table
        rows={form[side].map((row, index) => ({ row, index }))}
        empty={`No ${side} rules.`}
        columns={[
          { title: '#', cell: ({ index }) => index + 1 },
          {
            title: 'detector',
            cell: ({ row, index }) => (
              <select aria-label={`${sideWord[side]} rule ${index + 1} detector`} value={row.detector} onChange={(event) => setRule(side, index, { detector: event.currentTarget.value as Detector })}>
                {detectors
                  .filter((detector) => side === 'input' || detector.id !== 'moderation')
                  .map((detector) => (
                    <option value={detector.id}>{detector.label}</option>
                  ))}
              </select>
            ),
          },
          {
            title: 'action',
            cell: ({ row, index }) => (
              <select aria-label={`${sideWord[side]} rule ${index + 1} action`} value={row.action} disabled={row.detector === 'moderation'} onChange={(event) => setRule(side, index, { action: event.currentTarget.value as Action })}>
                <option value="mask">mask</option>
                <option value="block">block</option>
              </select>
            ),
          },
          {
            title: 'pattern / moderation',
            wrap: true,
            cell: ({ row, index }) =>
              row.detector === 'regex' ? (
                <input aria-label={`${sideWord[side]} rule ${index + 1} pattern`} value={row.pattern} placeholder="e.g. ORD-[0-9]{6}" onInput={(event) => setRule(side, index, { pattern: event.currentTarget.value })} />
              ) : row.detector === 'moderation' ? (
                <>
                  {providerSelect(side, index, row)}{' '}
                  <input aria-label={`${sideWord[side]} rule ${index + 1} categories`} value={row.categories} placeholder={defaultCategories} onInput={(event) => setRule(side, index, { categories: event.currentTarget.value })} />
                </>
              ) : (
                <span class="muted">–</span>
              ),
          },
          {
            title: 'name',
            cell: ({ row, index }) => (
              <input aria-label={`${sideWord[side]} rule ${index + 1} name`} size={12} maxLength={64} value={row.name} placeholder={row.detector} onInput={(event) => setRule(side, index, { name: event.currentTarget.value })} />
            ),
          },
          {
            title: '',
            cell: ({ index }) => (
              <button type="button" class="danger" aria-label={`Remove ${side} rule ${index + 1}`} onClick={() => setSide(side, form[side].filter((_, at) => at !== index))}>
                ✕
              </button>
            ),
          },
        ]}
      />
      <p>
        <button type="button" disabled={!form.on || form[side].length >= maxRules} onClick={() => setSide(side, [...form[side], newRow()])}>
          Add {side} rule
        </button>
      </p>
    </>
  )
  return (
    <form onSubmit={submit} aria-label="Guardrails">
      <h3>Guardrails</h3>
      {intro}
      <fieldset class="toolbar" style="border:0;padding:0">
        <Checkbox name="guardrails_on" checked={form.on} onChange={(checked) => set({ on: checked })}>
          Run guardrails
        </Checkbox>
        <label>
          Mode
          <select name="guardrails_mode" value={form.mode} disabled={!form.on} onChange={(event) => set({ mode: event.currentTarget.value as Mode })}>
            <option value="enforce">enforce (mask and block)</option>
            <option value="monitor">monitor (only count findings)</option>
          </select>
        </label>
      </fieldset>
      <fieldset disabled={!form.on} style="border:0;padding:0;margin:0">
        {rules('input')}
        {rules('output')}
      </fieldset>
      <p>
        <SaveButton label="Save guardrails" writable={writable} busy={action.busy} saved={false} />{' '}
        {status ? <span role="status">{status}</span> : null}
      </p>
      <ErrorLine error={action.error} />
    </form>
  )
}
