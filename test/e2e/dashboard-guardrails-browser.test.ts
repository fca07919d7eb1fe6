/**
 * The guardrails section of a key's page in a real browser (CONTRACT §17): turned on with rules
 * added in the editor (a masked e-mail and a regex on input, a moderation rule with its provider key
 * and categories, a blocked card number on output), saved as the API holds it and kept over a
 * reload; a refused rule says why and changes nothing; a rule removed; turned off again; a read-only
 * key sees the rules and no control. Skipped, with one printed line, where there is no Chromium.
 */
import { describe, expect, test } from 'bun:test'
import { requireBrowser, saveScreenshot, useKeyPages } from '../harness/browser'
import type { TestServer } from '../harness/server'
import { createInferenceKey, storeProvider } from '../harness/api'
import { createManagementKey } from '../../src/management/workspaces'

const chromiumPath = requireBrowser('the dashboard guardrails browser tests')

describe.skipIf(!chromiumPath)("a key's guardrails in the dashboard", () => {
  let server: TestServer
  const keyPage = useKeyPages(chromiumPath, (started) => void (server = started))
  const stored = async (id: string) => (await server.call('GET', `/api/v1/keys/${id}`)).body.data.guardrails

  test('rules added in the editor are saved and kept over a reload; a refused rule changes nothing; a rule removed; off; read-only sees them', async () => {
    const openai = await storeProvider(server, { gateway: 'openai', label: 'moderator', key: 'sk-guardrails-browser-0123456789' })
    const key = await createInferenceKey(server, { name: 'guarded app' })
    const { page, errors, blocked } = await keyPage(server.managementKey, key.id, 'guarded app')
    let section = page.getByRole('form', { name: 'Guardrails' })
    await section.getByText('Now: off.', { exact: false }).waitFor()
    expect(await section.getByLabel('Mode').isEnabled()).toBe(false)

    await section.getByLabel('Run guardrails').check()
    await section.getByLabel('Mode').selectOption('monitor')
    await section.getByRole('button', { name: 'Add input rule' }).click()
    await section.getByRole('button', { name: 'Add input rule' }).click()
    await section.getByRole('button', { name: 'Add input rule' }).click()
    await section.getByLabel('Input rule 2 detector').selectOption('regex')
    await section.getByLabel('Input rule 2 pattern').fill('ORD-[0-9]{6}')
    await section.getByLabel('Input rule 2 action').selectOption('block')
    await section.getByLabel('Input rule 2 name').fill('order')
    await section.getByLabel('Input rule 3 detector').selectOption('moderation')
    expect(await section.getByLabel('Input rule 3 action').isEnabled()).toBe(false)
    await section.getByLabel('Input rule 3 provider key').selectOption(openai.id)
    await section.getByLabel('Input rule 3 categories').fill('hate, self-harm/intent')
    await section.getByRole('button', { name: 'Add output rule' }).click()
    await section.getByLabel('Output rule 1 detector').selectOption('credit_card')
    await section.getByLabel('Output rule 1 action').selectOption('block')
    await section.getByRole('button', { name: 'Save guardrails' }).click()
    await expect(section.getByRole('status').textContent()).resolves.toBe('Saved.')
    await section.scrollIntoViewIfNeeded()
    await saveScreenshot(page, 'dashboard-key-guardrails-desktop')
    const saved = {
      mode: 'monitor',
      input: [
        { name: 'email', detector: 'email', action: 'mask' },
        { name: 'order', detector: 'regex', action: 'block', pattern: 'ORD-[0-9]{6}' },
        { name: 'moderation', detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['hate', 'self-harm/intent'] },
      ],
      output: [{ name: 'credit_card', detector: 'credit_card', action: 'block' }],
    }
    expect(await stored(key.id)).toEqual(saved)

    await page.reload()
    section = page.getByRole('form', { name: 'Guardrails' })
    await section.getByText('Now: on (monitor), 3 rules on input, 1 rule on output.', { exact: false }).waitFor()
    expect(await section.getByLabel('Input rule 2 pattern').inputValue()).toBe('ORD-[0-9]{6}')
    expect(await section.getByLabel('Input rule 2 name').inputValue()).toBe('order')
    expect(await section.getByLabel('Input rule 3 categories').inputValue()).toBe('hate, self-harm/intent')

    // A refused pattern: the API's reason shown, nothing changed.
    await section.getByLabel('Input rule 2 pattern').fill('(a)\\1')
    await section.getByRole('button', { name: 'Save guardrails' }).click()
    await section.getByText('Invalid guardrails.input[1].pattern:', { exact: false }).waitFor()
    expect(await stored(key.id)).toEqual(saved)

    await section.getByLabel('Input rule 2 pattern').fill('ORD-[0-9]{6}')
    await section.getByRole('button', { name: 'Remove input rule 1' }).click()
    await section.getByRole('button', { name: 'Save guardrails' }).click()
    await expect(section.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect((await stored(key.id)).input.map((rule: { name: string }) => rule.name)).toEqual(['order', 'moderation'])

    await section.getByLabel('Run guardrails').uncheck()
    await section.getByRole('button', { name: 'Save guardrails' }).click()
    await expect(section.getByRole('status').textContent()).resolves.toBe('Saved.')
    expect(await stored(key.id)).toBeNull()
    const actions = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data.map((event: { action: string; via: string }) => `${event.action} ${event.via}`)
    expect(actions).toEqual(['keys.set_guardrails dashboard', 'keys.set_guardrails dashboard', 'keys.set_guardrails dashboard', 'keys.create rest'])
    // The one console line is the browser's own report of the refused value's 400.
    expect(errors).toEqual([expect.stringMatching(/status of 400 .*\/dashboard\/api\/keys\/[0-9a-f-]+\/guardrails\)$/)])
    expect(blocked).toEqual([])

    const shown = await createInferenceKey(server, { name: 'read guardrails', guardrails: { input: [{ detector: 'phone', action: 'mask', name: 'phones' }] } })
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true)
    const opened = await keyPage(readOnly.key, shown.id, 'read guardrails')
    const region = opened.page.getByRole('region', { name: 'Guardrails' })
    await region.getByText('Now: on (enforce), 1 rule on input, 0 rules on output.', { exact: false }).waitFor()
    await region.getByText('Input: phones: mask phone number').waitFor()
    expect(await region.getByRole('button').count()).toBe(0)
  }, 90_000)
})
