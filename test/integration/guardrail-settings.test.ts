/**
 * Guardrails' key setting (CONTRACT §17): `guardrails` set whole through PATCH (and POST), MCP
 * set_key_guardrails, the CLI's `key guardrails` and the dashboard's call, every bad value refused
 * naming the field with nothing changed (the same 400 envelope as a bad `cache`), the key object,
 * the stored column and the key's read-model entry showing it (a regex rule's pattern compiled); the
 * audit event keys.set_guardrails. The guardrails' behaviour itself is not tested here.
 */
import { describe, expect, test } from 'bun:test'
import { compileGuardrailPattern } from '../../src/domain/guardrail-pattern'
import { createManagementKey, createWorkspace } from '../../src/management/workspaces'
import { createInferenceKey, storeProvider } from '../harness/api'
import { startTestServer, type TestServer } from '../harness/server'
import { baseEnvironment, repoRoot } from '../harness/service-process'
import { runCli } from '../harness/cli'
import { withMcp, type ToolResult } from '../harness/mcp-client'

const defaults = { mode: 'enforce', input: [], output: [] }
const email = { detector: 'email', action: 'mask' }
const emailView = { name: 'email', detector: 'email', action: 'mask' }
const detectorMessage = 'Invalid guardrails.input[0].detector: required, one of email, phone, credit_card, iban, us_ssn, ip_address, secret, regex, moderation.'
const nameMessage = (at: string) => `Invalid ${at}.name: expected 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'.`
const ruleFieldsText = 'name, detector, action, pattern, provider_key_id or categories'

/** What the pattern compiler says of a pattern it refuses, as the rule reports it. */
function patternProblem(pattern: string): string {
  const compiled = compileGuardrailPattern(pattern)
  if (!('problem' in compiled)) throw new Error(`the pattern ${pattern} compiled`)
  return compiled.problem.charAt(0).toLowerCase() + compiled.problem.slice(1)
}

const entryOf = async (server: TestServer, prefix: string) => (await server.runtime.snapshots.fresh()).keysByPrefix.get(prefix)![0]!

describe('the key setting `guardrails`', () => {
  test('PATCH sets the whole setting (defaults filled in, each rule named), null turns it off; GET, the list, the stored column and the read-model entry show it, patterns compiled', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-guardrails-0123456789' })
    const mistral = await storeProvider(server, { gateway: 'mistral', key: 'mistral-guardrails-0123456789' })
    const key = await createInferenceKey(server, { name: 'guarded' })
    expect(key.guardrails).toBeNull()
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toBeNull()
    expect((await entryOf(server, key.key_prefix)).guardrails).toBeUndefined()

    // `{}`: every default; with no rule the key's requests pay nothing (no entry setting).
    const empty = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: {} })
    expect(empty.status).toBe(200)
    expect(empty.body.data.guardrails).toEqual(defaults)
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.guardrails).toBe(JSON.stringify(defaults))
    expect((await entryOf(server, key.key_prefix)).guardrails).toBeUndefined()

    const setting = {
      mode: 'monitor',
      input: [
        email,
        { detector: 'regex', action: 'block', pattern: '(?i)ORD-[0-9]{6}', name: 'order.id' },
        { detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['hate', 'self-harm/intent'] },
        { detector: 'secret', action: 'block', name: 'no-secrets_1' },
      ],
      output: [{ detector: 'credit_card', action: 'mask' }, { detector: 'regex', action: 'mask', pattern: 'internal-[a-z]+' }, { name: 'ip', action: 'block', detector: 'ip_address' }],
    }
    const view = {
      mode: 'monitor',
      input: [
        emailView,
        { name: 'order.id', detector: 'regex', action: 'block', pattern: '(?i)ORD-[0-9]{6}' },
        { name: 'moderation', detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['hate', 'self-harm/intent'] },
        { name: 'no-secrets_1', detector: 'secret', action: 'block' },
      ],
      output: [
        { name: 'credit_card', detector: 'credit_card', action: 'mask' },
        { name: 'regex', detector: 'regex', action: 'mask', pattern: 'internal-[a-z]+' },
        { name: 'ip', detector: 'ip_address', action: 'block' },
      ],
    }
    const on = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: setting })
    expect(on.status).toBe(200)
    expect(on.body.data.guardrails).toEqual(view)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toEqual(view)
    expect((await server.call('GET', '/api/v1/keys')).body.data.find((listed: { id: string }) => listed.id === key.id).guardrails).toEqual(view)
    // Stored as the key object shows it.
    expect(JSON.parse(server.runtime.repositories.inferenceKeys.getById(key.id)!.guardrails!)).toEqual(view)

    // The key's entry carries it for the pipeline: camelCase, frozen, each regex pattern compiled.
    const guardrails = (await entryOf(server, key.key_prefix)).guardrails!
    expect(guardrails.mode).toBe('monitor')
    expect(Object.isFrozen(guardrails)).toBe(true)
    expect(Object.isFrozen(guardrails.input)).toBe(true)
    expect(Object.isFrozen(guardrails.input[0])).toBe(true)
    expect(guardrails.input.map((rule) => [rule.name, rule.detector, rule.action])).toEqual([
      ['email', 'email', 'mask'],
      ['order.id', 'regex', 'block'],
      ['moderation', 'moderation', 'block'],
      ['no-secrets_1', 'secret', 'block'],
    ])
    expect(guardrails.input[0]).toEqual({ name: 'email', detector: 'email', action: 'mask' })
    expect(guardrails.input[2]).toEqual({ name: 'moderation', detector: 'moderation', action: 'block', providerKeyId: openai.id, categories: ['hate', 'self-harm/intent'] })
    const order = guardrails.input[1]!.pattern!
    expect(order.source).toBe('(?i)ORD-[0-9]{6}')
    expect(order.matches('ref ord-123456 and ORD-654321, not ORD-12')).toEqual([
      { start: 4, end: 14 },
      { start: 19, end: 29 },
    ])
    expect(guardrails.output.map((rule) => rule.name)).toEqual(['credit_card', 'regex', 'ip'])
    expect(guardrails.output[1]!.pattern!.matches('see internal-wiki')).toEqual([{ start: 4, end: 17 }])
    for (const rule of [...guardrails.input, ...guardrails.output]) expect(rule.pattern === undefined).toBe(rule.detector !== 'regex')

    // A change replaces the whole setting: what is not named is the default again.
    const replaced = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: { output: [email] } })
    expect(replaced.body.data.guardrails).toEqual({ mode: 'enforce', input: [], output: [emailView] })
    expect((await entryOf(server, key.key_prefix)).guardrails).toEqual({ mode: 'enforce', input: [], output: [{ name: 'email', detector: 'email', action: 'mask' }] })
    // A mistral provider key serves moderations too.
    const withMistral = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: { input: [{ detector: 'moderation', action: 'block', provider_key_id: mistral.id, categories: ['violence'] }] } })
    expect(withMistral.status).toBe(200)
    expect(withMistral.body.data.guardrails.input[0].provider_key_id).toBe(mistral.id)

    const off = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: null })
    expect(off.body.data.guardrails).toBeNull()
    expect(server.runtime.repositories.inferenceKeys.getById(key.id)!.guardrails).toBeNull()
    expect((await entryOf(server, key.key_prefix)).guardrails).toBeUndefined()

    // POST /keys takes it too, as it takes the cache.
    const created = await createInferenceKey(server, { guardrails: { input: [email] } })
    expect(created.guardrails).toEqual({ mode: 'enforce', input: [emailView], output: [] })
  })

  test('every bad value is refused with 400 naming the field, in the envelope a bad cache gets, and nothing of the request is kept', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-guardrails-0123456789' })
    const groq = await storeProvider(server, { gateway: 'groq', key: 'gsk-guardrails-0123456789' })
    const disabled = await storeProvider(server, { gateway: 'openai', key: 'sk-guardrails-disabled-0123456789' })
    expect((await server.call('PATCH', `/api/v1/providers/${disabled.id}`, { disabled: true })).status).toBe(200)
    const other = createWorkspace(server.runtime, 'other')
    const othersProvider = await storeProvider(server, { gateway: 'openai', key: 'sk-guardrails-other-0123456789' }, other.management_key)
    const key = await createInferenceKey(server)
    const stored = { mode: 'enforce', input: [emailView], output: [] }
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: { input: [email] } })).status).toBe(200)

    const moderation = (fields: Record<string, unknown> = {}) => ({ detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['hate'], ...fields })
    const inputs = (...rules: unknown[]) => ({ input: rules })
    const cases: [unknown, string][] = [
      ['yes', 'Invalid guardrails: must be an object or null.'],
      [[email], 'Invalid guardrails: must be an object or null.'],
      [{ rules: [email] }, 'Invalid guardrails.rules: unknown field; expected mode, input or output.'],
      [{ mode: 'block' }, "Invalid guardrails.mode: expected 'enforce' or 'monitor'."],
      [{ mode: 1 }, 'Invalid guardrails.mode: expected string.'],
      [{ input: email }, 'Invalid guardrails.input: expected array.'],
      [inputs('email'), 'Invalid guardrails.input[0]: expected object.'],
      // An unknown detector, action or field.
      [inputs({ detector: 'passport', action: 'mask' }), detectorMessage],
      [inputs({ action: 'mask' }), detectorMessage],
      [{ output: [email, { detector: 'email', action: 'redact' }] }, "Invalid guardrails.output[1].action: required, 'mask' or 'block'."],
      [inputs({ detector: 'email' }), "Invalid guardrails.input[0].action: required, 'mask' or 'block'."],
      [inputs({ detectr: 'email', action: 'mask' }), `Invalid guardrails.input[0].detectr: unknown field; expected ${ruleFieldsText}.`],
      [inputs(email, { ...email, colour: 'blue' }), `Invalid guardrails.input[1].colour: unknown field; expected ${ruleFieldsText}.`],
      // Patterns: a regex rule's only, required there, compiled.
      [inputs({ detector: 'regex', action: 'mask' }), 'Invalid guardrails.input[0].pattern: required for a regex rule, a pattern (RE2 syntax) of 1 to 1000 characters.'],
      [inputs({ detector: 'regex', action: 'mask', pattern: '' }), 'Invalid guardrails.input[0].pattern: required for a regex rule, a pattern (RE2 syntax) of 1 to 1000 characters.'],
      [inputs({ detector: 'regex', action: 'mask', pattern: '(a+)\\1' }), `Invalid guardrails.input[0].pattern: ${patternProblem('(a+)\\1')}`],
      [inputs({ detector: 'regex', action: 'mask', pattern: 'a(?=b)' }), `Invalid guardrails.input[0].pattern: ${patternProblem('a(?=b)')}`],
      [inputs({ detector: 'regex', action: 'mask', pattern: '([a-z]' }), `Invalid guardrails.input[0].pattern: ${patternProblem('([a-z]')}`],
      [inputs({ detector: 'regex', action: 'mask', pattern: 'x*' }), `Invalid guardrails.input[0].pattern: ${patternProblem('x*')}`],
      [inputs({ detector: 'regex', action: 'mask', pattern: 'x'.repeat(1001) }), `Invalid guardrails.input[0].pattern: ${patternProblem('x'.repeat(1001))}`],
      [inputs({ ...email, pattern: '[a-z]+' }), 'Invalid guardrails.input[0].pattern: only a regex rule takes a pattern.'],
      [inputs({ ...email, provider_key_id: openai.id }), 'Invalid guardrails.input[0].provider_key_id: only a moderation rule takes provider_key_id.'],
      [inputs({ ...email, categories: ['hate'] }), 'Invalid guardrails.input[0].categories: only a moderation rule takes categories.'],
      // Moderation: input only, block only, a provider key of this workspace whose gateway serves moderations, categories.
      [{ output: [moderation()] }, 'Invalid guardrails.output[0].detector: moderation is an input rule only (the answer is not sent for moderation).'],
      [inputs(moderation({ action: 'mask' })), 'Invalid guardrails.input[0].action: a moderation rule only blocks (a flagged request is refused; there is nothing to mask).'],
      [inputs(moderation({ provider_key_id: undefined })), 'Invalid guardrails.input[0].provider_key_id: required for a moderation rule, a provider key UUID of this workspace whose gateway serves moderations.'],
      [inputs(email, moderation({ provider_key_id: groq.id })), "Invalid guardrails.input[1].provider_key_id: gateway 'groq' does not serve moderations."],
      [inputs(moderation({ provider_key_id: othersProvider.id })), `Invalid guardrails.input[0].provider_key_id: provider key ${othersProvider.id} does not exist in this workspace.`],
      [inputs(moderation({ provider_key_id: disabled.id })), `Invalid guardrails.input[0].provider_key_id: provider key ${disabled.id} is disabled.`],
      [inputs(moderation({ provider_key_id: 'not-a-uuid' })), 'Invalid guardrails.input[0].provider_key_id: provider key not-a-uuid does not exist in this workspace.'],
      [inputs(moderation({ categories: [] })), 'Invalid guardrails.input[0].categories: required for a moderation rule, a list of 1 to 32 category names (hate, harassment, self-harm, sexual, violence, illicit, self-harm/intent, …).'],
      [inputs(moderation({ categories: undefined })), 'Invalid guardrails.input[0].categories: required for a moderation rule, a list of 1 to 32 category names (hate, harassment, self-harm, sexual, violence, illicit, self-harm/intent, …).'],
      [inputs(moderation({ categories: ['hate', 'Hate Speech'] })), "Invalid guardrails.input[0].categories[1]: expected a category name of 1 to 64 characters of a-z, '/' and '-' (such as hate or self-harm/intent)."],
      [inputs(moderation({ categories: 'hate' })), 'Invalid guardrails.input[0].categories: expected array.'],
      // At most 32 rules a side.
      [inputs(...Array.from({ length: 33 }, () => email)), 'Invalid guardrails.input: at most 32 rules (got 33).'],
      [{ output: Array.from({ length: 33 }, () => email) }, 'Invalid guardrails.output: at most 32 rules (got 33).'],
      // Names.
      [inputs({ ...email, name: 'has space' }), nameMessage('guardrails.input[0]')],
      [inputs({ ...email, name: '' }), nameMessage('guardrails.input[0]')],
      [inputs({ ...email, name: 'n'.repeat(65) }), nameMessage('guardrails.input[0]')],
      [{ output: [{ ...email, name: 'ünï' }] }, nameMessage('guardrails.output[0]')],
      [inputs({ ...email, name: 7 }), 'Invalid guardrails.input[0].name: expected string.'],
    ]
    for (const [guardrails, message] of cases) {
      const refused = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails, label: 'not kept' })
      expect([JSON.stringify(guardrails).slice(0, 200), refused.status, refused.body.error]).toEqual([JSON.stringify(guardrails).slice(0, 200), 400, message])
    }
    // POST /keys refuses them the same way, and creates no key.
    const keysBefore = (await server.call('GET', '/api/v1/keys')).body.data.length
    const refusedCreate = await server.call('POST', '/api/v1/keys', { guardrails: { output: [moderation()] } })
    expect([refusedCreate.status, refusedCreate.body.error]).toEqual([400, 'Invalid guardrails.output[0].detector: moderation is an input rule only (the answer is not sent for moderation).'])
    expect((await server.call('GET', '/api/v1/keys')).body.data).toHaveLength(keysBefore)
    // The same envelope (fields, no code) as a bad value of the other key settings.
    const badCache = await server.call('PATCH', `/api/v1/keys/${key.id}`, { cache: { ttl_seconds: 0 } })
    const badGuardrails = await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: { mode: 'strict' } })
    expect(badGuardrails.status).toBe(badCache.status)
    expect(Object.keys(badGuardrails.body).sort()).toEqual(Object.keys(badCache.body).sort())
    expect(badGuardrails.body.code).toBe(badCache.body.code)

    const unchanged = (await server.call('GET', `/api/v1/keys/${key.id}`)).body.data
    expect(unchanged.guardrails).toEqual(stored)
    expect(unchanged.label).toBeNull()
    expect(JSON.parse(server.runtime.repositories.inferenceKeys.getById(key.id)!.guardrails!)).toEqual(stored)

    // Refused writes leave no audit event; the one accepted PATCH set only guardrails: keys.set_guardrails (CONTRACT §17).
    const events = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(events.map((event: { action: string }) => event.action)).toEqual(['keys.set_guardrails', 'keys.create'])
    expect(events[0].changes).toEqual({ guardrails: stored })
    // `{}` is audited as it now stands, the defaults filled in; null as null.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: {} })).status).toBe(200)
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: null })).status).toBe(200)
    const narrow = (await server.call('GET', `/api/v1/audit?action=keys.set_guardrails&target_id=${key.id}`)).body.data
    expect(narrow.map((event: { via: string; changes: unknown }) => [event.via, event.changes])).toEqual([
      ['rest', { guardrails: null }],
      ['rest', { guardrails: defaults }],
      ['rest', { guardrails: stored }],
    ])
    // A PATCH of guardrails beside other fields is a key update that names them all.
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: { mode: 'monitor' }, label: 'both' })).status).toBe(200)
    const both = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data[0]
    expect([both.action, both.changes]).toEqual(['keys.update', { guardrails: { mode: 'monitor' }, label: 'both' }])
    // A read-only management key changes nothing.
    const readOnly = createManagementKey(server.runtime, server.workspaceId, true).key
    expect((await server.call('PATCH', `/api/v1/keys/${key.id}`, { guardrails: null }, readOnly)).status).toBe(403)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toEqual({ ...defaults, mode: 'monitor' })
  })

  test('MCP set_key_guardrails replaces the setting and is audited as keys.set_guardrails; a bad value is an error naming the field', async () => {
    await using server = await startTestServer()
    const groq = await storeProvider(server, { gateway: 'groq', key: 'gsk-guardrails-0123456789' })
    const key = await createInferenceKey(server)
    await withMcp(server, async (client) => {
      const tool = (await client.listTools()).tools.find((candidate) => candidate.name === 'set_key_guardrails')
      expect(tool?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true })
      expect(tool?.inputSchema.required).toEqual(['key_id', 'guardrails'])
      const set = (await client.callTool({ name: 'set_key_guardrails', arguments: { key_id: key.id, guardrails: { input: [email], output: [{ detector: 'phone', action: 'block' }] } } })) as ToolResult
      expect(set.isError).toBeFalsy()
      expect(JSON.parse(set.content[0]!.text).guardrails).toEqual({ mode: 'enforce', input: [emailView], output: [{ name: 'phone', detector: 'phone', action: 'block' }] })
      for (const [guardrails, message] of [
        [{ input: [{ detectr: 'email', action: 'mask' }] }, `Invalid guardrails.input[0].detectr: unknown field; expected ${ruleFieldsText}.`],
        [{ input: [{ detector: 'moderation', action: 'block', provider_key_id: groq.id, categories: ['hate'] }] }, "Invalid guardrails.input[0].provider_key_id: gateway 'groq' does not serve moderations."],
        [{ input: [{ detector: 'regex', action: 'mask', pattern: '(a)\\1' }] }, `Invalid guardrails.input[0].pattern: ${patternProblem('(a)\\1')}`],
      ] as const) {
        const bad = (await client.callTool({ name: 'set_key_guardrails', arguments: { key_id: key.id, guardrails } })) as ToolResult
        expect(bad.isError).toBe(true)
        expect(bad.content[0]!.text).toContain(message)
      }
      const missing = (await client.callTool({ name: 'set_key_guardrails', arguments: { key_id: key.id } })) as ToolResult
      expect(missing.isError).toBe(true)
      expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails.input).toEqual([emailView])
      const defaultsSet = (await client.callTool({ name: 'set_key_guardrails', arguments: { key_id: key.id, guardrails: {} } })) as ToolResult
      expect(JSON.parse(defaultsSet.content[0]!.text).guardrails).toEqual(defaults)
      const off = (await client.callTool({ name: 'set_key_guardrails', arguments: { key_id: key.id, guardrails: null } })) as ToolResult
      expect(JSON.parse(off.content[0]!.text).guardrails).toBeNull()
    })
    const audit = (await server.call('GET', `/api/v1/audit?action=keys.set_guardrails&target_id=${key.id}`)).body.data
    expect(audit).toHaveLength(3)
    expect(audit[0]).toMatchObject({ via: 'mcp', action: 'keys.set_guardrails', target: { type: 'inference_key', id: key.id }, changes: { guardrails: null } })
    expect(audit.map((event: { changes: unknown }) => event.changes)).toEqual([
      { guardrails: null },
      { guardrails: defaults },
      { guardrails: { mode: 'enforce', input: [emailView], output: [{ name: 'phone', detector: 'phone', action: 'block' }] } },
    ])
  })

  test("the dashboard's call sets it as keys.set_guardrails (via dashboard); a bad value is refused naming the field", async () => {
    await using server = await startTestServer()
    const key = await createInferenceKey(server)
    const setting = { mode: 'monitor', input: [{ detector: 'iban', action: 'mask' }], output: [{ detector: 'us_ssn', action: 'block', name: 'ssn' }] }
    const view = { mode: 'monitor', input: [{ name: 'iban', detector: 'iban', action: 'mask' }], output: [{ name: 'ssn', detector: 'us_ssn', action: 'block' }] }
    const set = await server.call('PUT', `/dashboard/api/keys/${key.id}/guardrails`, { guardrails: setting })
    expect(set.status).toBe(200)
    expect(set.body.data.guardrails).toEqual(view)
    const refused = await server.call('PUT', `/dashboard/api/keys/${key.id}/guardrails`, { guardrails: { output: [{ detector: 'regex', action: 'mask' }] } })
    expect([refused.status, refused.body.error]).toEqual([400, 'Invalid guardrails.output[0].pattern: required for a regex rule, a pattern (RE2 syntax) of 1 to 1000 characters.'])
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toEqual(view)
    const off = await server.call('PUT', `/dashboard/api/keys/${key.id}/guardrails`, { guardrails: null })
    expect(off.body.data.guardrails).toBeNull()
    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    expect(audit.map((event: { action: string; via: string; changes: unknown }) => [event.action, event.via, event.changes])).toEqual([
      ['keys.set_guardrails', 'dashboard', { guardrails: null }],
      ['keys.set_guardrails', 'dashboard', { guardrails: view }],
      ['keys.create', 'rest', expect.anything()],
    ])
  })
})

describe('the CLI', () => {
  const cli = runCli

  test('key guardrails sets the whole setting from --json, --off turns it off; bad values refused naming the field; audited via cli', async () => {
    await using server = await startTestServer()
    const openai = await storeProvider(server, { gateway: 'openai', key: 'sk-guardrails-0123456789' })
    const key = await createInferenceKey(server)

    const setting = { input: [email, { detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['violence'] }], output: [{ detector: 'regex', action: 'mask', pattern: 'acct-[0-9]+', name: 'account' }] }
    const view = {
      mode: 'enforce',
      input: [emailView, { name: 'moderation', detector: 'moderation', action: 'block', provider_key_id: openai.id, categories: ['violence'] }],
      output: [{ name: 'account', detector: 'regex', action: 'mask', pattern: 'acct-[0-9]+' }],
    }
    const on = await cli(server, ['key', 'guardrails', '--id', key.id, '--json', JSON.stringify(setting)])
    expect(on.exitCode).toBe(0)
    expect(on.out.id).toBe(key.id)
    expect(on.out.guardrails).toEqual(view)

    for (const [args, message] of [
      [['--json', '{"input":[{"detector":"email","action":"hide"}]}'], "Invalid guardrails.input[0].action: required, 'mask' or 'block'."],
      [['--json', '{"output":[{"detector":"moderation","action":"block"}]}'], 'Invalid guardrails.output[0].detector: moderation is an input rule only (the answer is not sent for moderation).'],
      [['--json', '[1]'], 'Invalid guardrails: must be an object or null.'],
      [['--json', '{not json'], 'key guardrails --json: not valid JSON'],
      [['--json', 'null'], 'key guardrails --json takes an object; --off turns guardrails off'],
      [['--off', '--json', '{}'], 'key guardrails --off takes no --json'],
      [[], 'key guardrails needs --json OBJECT (the whole setting) or --off'],
    ] as const) {
      const refused = await cli(server, ['key', 'guardrails', '--id', key.id, ...args])
      expect([args, refused.exitCode, refused.error]).toEqual([args, 1, message])
    }
    expect((await cli(server, ['key', 'guardrails', '--id', crypto.randomUUID(), '--json', '{}'])).exitCode).toBe(1)
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toEqual(view)

    const defaultsSet = await cli(server, ['key', 'guardrails', '--id', key.id, '--json', '{}'])
    expect(defaultsSet.out.guardrails).toEqual(defaults)
    const off = await cli(server, ['key', 'guardrails', '--id', key.id, '--off'])
    expect([off.exitCode, off.out.guardrails]).toEqual([0, null])
    expect((await server.call('GET', `/api/v1/keys/${key.id}`)).body.data.guardrails).toBeNull()

    const audit = (await server.call('GET', `/api/v1/audit?target_id=${key.id}`)).body.data
    const byCli = audit.filter((event: { via: string }) => event.via === 'cli')
    expect(byCli.map((event: { action: string; changes: unknown }) => [event.action, event.changes])).toEqual([
      ['keys.set_guardrails', { guardrails: null }],
      ['keys.set_guardrails', { guardrails: defaults }],
      ['keys.set_guardrails', { guardrails: view }],
    ])
    for (const event of byCli) expect(event.workspace_id).toBe(server.workspaceId)

    const help = await new Response(Bun.spawn(['bun', 'run', 'src/cli/index.ts', 'key', 'guardrails', '--help'], { cwd: repoRoot, env: baseEnvironment(), stdout: 'pipe' }).stdout).text()
    expect(help).toContain('key guardrails --id KEY_ID (--json OBJECT | --off)')
  }, 60_000)
})
