/**
 * The guardrail detectors and custom patterns (CONTRACT §17, issue 41 "Detectors with few false
 * positives"): per detector, realistic positives found with their exact offsets and near-miss
 * negatives not found, as tables; custom patterns refused when they cannot be bounded, linear in
 * time, offsets in UTF-16.
 */
import { describe, expect, test } from 'bun:test'
import { compileGuardrailPattern, type GuardrailPattern } from '../../src/domain/guardrail-pattern'
import { detect, detectorLabel, type DetectorName } from '../../src/pipeline/stages/guardrails/detectors'

/** A positive: the text, and the matched values in it (their offsets are where they first occur after the previous one). */
type Positive = [text: string, values: string[]]

/** The spans the values occupy in the text, in order. */
function spansOf(text: string, values: string[]): { start: number; end: number }[] {
  const spans: { start: number; end: number }[] = []
  let from = 0
  for (const value of values) {
    const start = text.indexOf(value, from)
    if (start < 0) throw new Error(`test table error: ${JSON.stringify(value)} is not in ${JSON.stringify(text)}`)
    spans.push({ start, end: start + value.length })
    from = start + value.length
  }
  return spans
}

function table(detector: DetectorName, positives: Positive[], negatives: string[]): void {
  describe(`${detector} (${detectorLabel(detector)})`, () => {
    for (const [text, values] of positives) {
      test(`finds ${values.map((value) => JSON.stringify(value.length > 40 ? value.slice(0, 37) + '…' : value)).join(', ')}`, () => {
        expect(detect(detector, text)).toEqual(spansOf(text, values))
      })
    }
    for (const text of negatives) {
      test(`finds nothing in ${JSON.stringify(text.length > 60 ? text.slice(0, 57) + '…' : text)}`, () => {
        expect(detect(detector, text)).toEqual([])
      })
    }
  })
}

// Deterministic "random" token bodies, built at run time so no key-shaped literal sits in the source.
function randomBody(length: number, alphabet: string, seed: number): string {
  let state = seed
  let out = ''
  for (let i = 0; i < length; i++) {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    out += alphabet[(state >>> 16) % alphabet.length]
  }
  return out
}
const base62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const base64url = base62 + '-_'
const hex = '0123456789abcdef'
const upperDigits = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

describe('detector labels', () => {
  test('each detector and custom patterns have their placeholder label', () => {
    const names: (DetectorName | 'regex')[] = ['email', 'phone', 'credit_card', 'iban', 'us_ssn', 'ip_address', 'secret', 'regex']
    expect(names.map(detectorLabel)).toEqual(['EMAIL', 'PHONE', 'CREDIT_CARD', 'IBAN', 'US_SSN', 'IP_ADDRESS', 'SECRET', 'REGEX'])
  })
  test('an empty text has nothing', () => {
    for (const name of ['email', 'phone', 'credit_card', 'iban', 'us_ssn', 'ip_address', 'secret'] as const) expect(detect(name, '')).toEqual([])
  })
})

table(
  'email',
  [
    ['Contact john.doe@example.com for details.', ['john.doe@example.com']],
    ['Write to Jane+news@mail.example.co.uk, or ops_team@sub.domain.io.', ['Jane+news@mail.example.co.uk', 'ops_team@sub.domain.io']],
    ['<mailto:SUPPORT@ACME-CORP.COM>', ['SUPPORT@ACME-CORP.COM']],
    ['"email": "maria.garcia-lopez@empresa.es"', ['maria.garcia-lopez@empresa.es']],
    ['reply to ...dots@example.org please', ['dots@example.org']],
    ['😀🎉 é-mail: zoë.k@example.de', ['k@example.de']],
  ],
  [
    'ssh into user@localhost and check',
    'thanks @mention and @team-leads for the review',
    'a@b',
    'a@b.c is too short a TLD',
    'use icon@2x.png on retina screens',
    'install lodash@4.17.21 and react@18.2.0',
    'npm i @types/node',
    'no at sign in this text at all',
    'trailing dot user.@example.com',
  ],
)

table(
  'phone',
  [
    ['Call +14155552671 today', ['+14155552671']],
    ['The London office: +44 20 7946 0958.', ['+44 20 7946 0958']],
    ['Reach me at (415) 555-2671 after 5pm', ['(415) 555-2671']],
    ['cell 415-555-2671, desk 415.555.2671', ['415-555-2671', '415.555.2671']],
    ['Paris: +33 1 42 68 53 00', ['+33 1 42 68 53 00']],
    ['Call +1 (415) 555-2671 now; toll free 1-800-275-2273.', ['+1 (415) 555-2671', '1-800-275-2273']],
    ['desk 415 555 2671, bare 4155552671, with the 1 14155552671', ['415 555 2671', '4155552671', '14155552671']],
    ['office (415) 555-2671 ext. 123, Tokyo +81 3-1234-5678', ['(415) 555-2671 ext. 123', '+81 3-1234-5678']],
    ['📞 +14155552671', ['+14155552671']],
    ['desk (415) 555-2671 x12, fax 415-555-2671; Extension 7, cell 415 555 2671 EXT.9', ['(415) 555-2671 x12', '415-555-2671; Extension 7', '415 555 2671 EXT.9']],
    ['London +44 20 7946 0958 ext 4411 or 415-555-2671 extra', ['+44 20 7946 0958 ext 4411', '415-555-2671']],
  ],
  [
    'The code is 123456 and expires soon',
    'Released on 2024-01-15 at noon',
    'Upgrade to version 1.2.3 or 10.4.22',
    'Revenue was 1,234,567 dollars in 2023',
    'Your order ORD-20240115-0042 has shipped',
    'pi is 3.14159265358979',
    'between 1999 and 2024, 12 of 40 passed',
    'invoice 1234567 total 89.99',
    'ids 1234567890 and 0123456789 and 5551234567',
    'timestamp 2024-03-09 14:22:31 and 2024/03/09',
  ],
)

table(
  'credit_card',
  [
    ['Visa 4111 1111 1111 1111 exp 12/29', ['4111 1111 1111 1111']],
    ['card: 4111-1111-1111-1111.', ['4111-1111-1111-1111']],
    ['MC 5555555555554444 and Amex 3782 822463 10005', ['5555555555554444', '3782 822463 10005']],
    ['Discover 6011111111111117; 2-series 2223003122003222', ['6011111111111117', '2223003122003222']],
    ['JCB 3530111333300000, Diners 36227206271667, Visa-13 4222222222222', ['3530111333300000', '36227206271667', '4222222222222']],
    ['{"pan":"4012888888881881"}', ['4012888888881881']],
    ['Mastercard 2221 0000 0000 0009, Visa-19 4111 1111 1111 1111 003', ['2221 0000 0000 0009', '4111 1111 1111 1111 003']],
  ],
  [
    'Visa-looking 4111 1111 1111 1112 fails Luhn',
    'sequence 1234 5678 9012 3456',
    'twenty digits 41111111111111111111 is not a card',
    'epoch millis 1700000000000 and 1712345678901',
    'uuid 123e4567-e89b-12d3-a456-426614174000',
    'md5 d41d8cd98f00b204e9800998ecf8427e',
    'glued ID4111111111111111 and X-4111111111111111',
    'decimal 0.4111111111111111',
    'all zeros 0000 0000 0000 0000',
    'phone +1 415 555 2671 and order 10293847',
    'grouped in threes 411 111 111 111 111 1',
    'a Mastercard number in groups no card is printed in: 2221 000 0000 0000 9',
  ],
)

table(
  'iban',
  [
    ['Pay to DE89 3704 0044 0532 0130 00 by Friday', ['DE89 3704 0044 0532 0130 00']],
    ['IBAN: GB29NWBK60161331926819.', ['GB29NWBK60161331926819']],
    ['NL91ABNA0417164300 and FR14 2004 1010 0505 0001 3M02 606', ['NL91ABNA0417164300', 'FR14 2004 1010 0505 0001 3M02 606']],
  ],
  [
    'bad checksum DE89 3704 0044 0532 0130 01',
    'bad checksum GB28NWBK60161331926819',
    'too short DE89 3704 0044 0532 0130',
    'too long DE89370400440532013000123',
    'no such country XX12 3456 7890 1234 56',
    'glued ADE89370400440532013000',
    'model numbers AB12 and CD34 5678',
  ],
)

table(
  'us_ssn',
  [
    ['SSN: 536-90-4812', ['536-90-4812']],
    ['ssn 536 90 4812, dob 1990-04-12', ['536 90 4812']],
    ['the sample number 123-45-6789 is taken too', ['123-45-6789']],
  ],
  [
    'area 000-12-3456 is never issued',
    'area 666-12-3456 is never issued',
    'area 912-34-5678 is an ITIN range',
    'group 536-00-4812 is never issued',
    'serial 536-90-0000 is never issued',
    'bare nine digits 536904812',
    'phone 415-555-2671',
    'mixed separators 536-90 4812',
    'ISBN 978-3-16-148410-0 and date 2024-01-15',
    'glued 1536-90-4812 and 536-90-48123 and X536-90-4812',
  ],
)

table(
  'ip_address',
  [
    ['ping 192.168.1.1 then 10.0.0.255.', ['192.168.1.1', '10.0.0.255']],
    ['http://172.16.254.1:8080/health', ['172.16.254.1']],
    ['v6 2001:db8::8a2e:370:7334 and ::1', ['2001:db8::8a2e:370:7334', '::1']],
    ['full 2001:0db8:85a3:0000:0000:8a2e:0370:7334, link fe80::1ff:fe23:4567:890a', ['2001:0db8:85a3:0000:0000:8a2e:0370:7334', 'fe80::1ff:fe23:4567:890a']],
    ['mapped ::ffff:192.0.2.128 here', ['::ffff:192.0.2.128']],
  ],
  [
    'a dotted version 1.2.3.4.5',
    'tag v1.2.3.4 released',
    'version 1.2.3.4 is out',
    'octet out of range 256.1.1.1 and 1.2.3.999',
    'leading zero 192.168.01.1',
    'at 12:30:45 and 09:15',
    'C++ std::vector and Ruby A::B',
    'MAC 00:1A:2B:3C:4D:5E',
    'three parts 3.14.15 and 1.2.3',
    'ratio 16:9 and 4:3',
  ],
)

const openAiProject = 'sk-' + 'proj-' + randomBody(156, base64url, 1)
const anthropicKey = 'sk-' + 'ant-api03-' + randomBody(93, base64url, 2) + 'AA'
const openRouterKey = 'sk-' + 'or-v1-' + randomBody(64, hex, 3)
const legacyOpenAi = 'sk-' + randomBody(20, base62, 4) + 'T3BlbkFJ' + randomBody(20, base62, 5)
const deepSeekKey = 'sk-' + randomBody(32, hex, 6)
const groqKey = 'gsk' + '_' + randomBody(52, base62, 7)
const xaiKey = 'xai' + '-' + randomBody(80, base62, 8)
const perplexityKey = 'pplx' + '-' + randomBody(48, base62, 9)
const cerebrasKey = 'csk' + '-' + randomBody(48, 'abcdefghijklmnopqrstuvwxyz0123456789', 10)
const vercelKey = 'vck' + '_' + randomBody(56, base62, 11)
const heliconeKey = 'sk' + '-helicone-' + [12, 13, 14, 15].map((seed) => randomBody(7, 'abcdefghijklmnopqrstuvwxyz0123456789', seed)).join('-')
const routerKey = 'rt' + '_live_' + randomBody(40, base62, 16)
const routerManagementKey = 'rt' + '_mgmt_' + randomBody(40, base62, 17)
const awsKeyId = 'AK' + 'IA' + randomBody(16, upperDigits, 18)
const googleKey = 'AI' + 'za' + randomBody(35, base64url, 19)
const githubToken = 'gh' + 'p_' + randomBody(36, base62, 20)
const githubFineGrained = 'github' + '_pat_' + randomBody(22, base62, 21) + '_' + randomBody(59, base62, 22)
const slackToken = 'xo' + 'xb-' + '1234567890123-1234567890123-' + randomBody(24, base62, 23)
const stripeKey = 'sk' + '_live_' + randomBody(24, base62, 24)
const awsSecretValue = randomBody(40, base62 + '/+', 25)
const jwt = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: '1234567890', name: 'John Doe', iat: 1516239022 })}.${randomBody(43, base64url, 26)}`
const pemBody = Array.from({ length: 5 }, (_, line) => randomBody(64, base62 + '+/', 30 + line)).join('\n')
const pemBlock = `-----BEGIN RSA PRIVATE KEY-----\n${pemBody}\n-----END RSA PRIVATE KEY-----`
const openSshBlock = `-----BEGIN OPENSSH PRIVATE KEY-----\n${pemBody}\n-----END OPENSSH PRIVATE KEY-----`

table(
  'secret',
  [
    [`OPENAI_API_KEY=${openAiProject}`, [openAiProject]],
    [`export ANTHROPIC_API_KEY="${anthropicKey}"`, [anthropicKey]],
    [`keys: ${openRouterKey}, ${legacyOpenAi} and ${deepSeekKey}.`, [openRouterKey, legacyOpenAi, deepSeekKey]],
    [`groq ${groqKey} xai ${xaiKey}`, [groqKey, xaiKey]],
    [`perplexity=${perplexityKey}; cerebras=${cerebrasKey}; vercel=${vercelKey}`, [perplexityKey, cerebrasKey, vercelKey]],
    [`Helicone-Auth: Bearer ${heliconeKey}`, [heliconeKey]],
    [`router keys ${routerKey} and ${routerManagementKey}`, [routerKey, routerManagementKey]],
    [`aws_access_key_id = ${awsKeyId}\naws_secret_access_key = ${awsSecretValue}`, [awsKeyId, awsSecretValue]],
    [`GOOGLE_API_KEY=${googleKey} GH_TOKEN=${githubToken}`, [googleKey, githubToken]],
    [`token: ${githubFineGrained}`, [githubFineGrained]],
    [`SLACK_BOT_TOKEN=${slackToken} STRIPE=${stripeKey}`, [slackToken, stripeKey]],
    [`Authorization: Bearer ${jwt}`, [jwt]],
    [`Here is my key:\n${pemBlock}\nthanks`, [pemBlock]],
    [`${openSshBlock}`, [openSshBlock]],
    [`truncated:\n-----BEGIN PRIVATE KEY-----\n${pemBody}\nplease fix`, [`-----BEGIN PRIVATE KEY-----\n${pemBody}`]],
    [`{"arguments":"{\\"key\\":\\"${openAiProject}\\"}"}`, [openAiProject]],
  ],
  [
    'a risk-based approach to task-management with sk-learn',
    'the disk-backed cache and ask-me-anything threads',
    'uuid 123e4567-e89b-12d3-a456-426614174000',
    `sha256 ${randomBody(64, hex, 40)}`,
    `base64 ${Buffer.from('just some bytes that are long enough to look like something').toString('base64')}`,
    'a lone JWT header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 is not a token',
    `not JSON: eyJ${randomBody(20, base62, 41)}.eyJ${randomBody(20, base62, 42)}.${randomBody(20, base62, 43)}`,
    'too short: sk-abc123, gsk_short, AKIA1234, ghp_abc',
    'sk-this-is-just-a-hyphenated-phrase-without-numbers',
    `glued: x${'sk-' + randomBody(40, base62, 44)}`,
    '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----',
    'AKIA is the prefix AWS uses for access key ids',
  ],
)

describe('every detector stays linear on adversarial texts', () => {
  const texts = [
    '5'.repeat(100_000),
    '555 '.repeat(25_000),
    '1 '.repeat(50_000),
    '1.'.repeat(50_000),
    ':'.repeat(100_000),
    'a@'.repeat(50_000),
    ('a'.repeat(70) + '@').repeat(1_500),
    'x@' + 'a.'.repeat(50_000) + '1',
    '-'.repeat(100_000),
    'sk-'.repeat(30_000),
    'eyJ'.repeat(30_000),
    'A'.repeat(100_000),
    'DE89 '.repeat(20_000),
    '-----BEGIN PRIVATE KEY-----'.repeat(4_000),
  ]
  for (const name of ['email', 'phone', 'credit_card', 'iban', 'us_ssn', 'ip_address', 'secret'] as const) {
    test(`${name}: 100 KB of each in well under a second`, () => {
      const started = performance.now()
      for (const text of texts) detect(name, text)
      expect(performance.now() - started).toBeLessThan(1_000)
    })
  }
})

describe('custom patterns (compileGuardrailPattern)', () => {
  const compile = (pattern: string): GuardrailPattern => {
    const compiled = compileGuardrailPattern(pattern)
    if ('problem' in compiled) throw new Error(compiled.problem)
    return compiled
  }

  const refused: [pattern: string, mentions: RegExp][] = [
    ['(a)\\1', /backreference/],
    ['(?<word>a)\\k<word>', /backreference/],
    ['password(?=:)', /lookahead/],
    ['(?!foo)bar', /lookahead/],
    ['(?<=key=)\\w+', /lookbehind/],
    ['(?<!x)y', /lookbehind/],
    ['', /empty/],
    ['a'.repeat(1001), /1001 characters.*1000/],
    ['a*', /empty string/],
    ['x|', /empty string/],
    ['\\b', /empty string/],
    ['(unclosed', /not a valid RE2/],
    ['a{2,1001}', /not a valid RE2/],
  ]
  for (const [pattern, mentions] of refused) {
    test(`refuses ${JSON.stringify(pattern.length > 30 ? pattern.slice(0, 27) + '…' : pattern)} with a problem`, () => {
      const compiled = compileGuardrailPattern(pattern)
      expect('problem' in compiled).toBe(true)
      if ('problem' in compiled) expect(compiled.problem).toMatch(mentions)
    })
  }

  test('escaped parentheses and classes are not mistaken for lookaround or backreferences', () => {
    expect(compile('\\(\\?=\\d\\)').matches('x (?=1) y')).toEqual([{ start: 2, end: 7 }])
    expect(compile('[(?<=]{4}x').matches('a (?<=x b')).toEqual([{ start: 2, end: 7 }])
  })

  test('finds every match with its offsets', () => {
    const pattern = compile('ACME-\\d{4}')
    expect(pattern.source).toBe('ACME-\\d{4}')
    expect(pattern.matches('ids ACME-1234 and ACME-5678, not ACME-12')).toEqual([
      { start: 4, end: 13 },
      { start: 18, end: 27 },
    ])
    expect(pattern.matches('')).toEqual([])
  })

  test('inline flags: (?i) for case-insensitive', () => {
    expect(compile('(?i)project\\s+falcon').matches('About PROJECT  Falcon.')).toEqual([{ start: 6, end: 21 }])
  })

  test('offsets are UTF-16 indexes even with emoji and accents before the match', () => {
    const text = '😀é😀 then secret-42 and 🎉secret-7'
    const found = compile('secret-\\d+').matches(text)
    expect(found).toEqual([
      { start: 11, end: 20 },
      { start: 27, end: 35 },
    ])
    expect(found.map(({ start, end }) => text.slice(start, end))).toEqual(['secret-42', 'secret-7'])
  })

  test('(a+)+$ over 50,000 a and a ! is linear: well under 100 ms', () => {
    const pattern = compile('(a+)+$')
    const text = 'a'.repeat(50_000) + '!'
    pattern.matches('warm up aaa') // compile-time work out of the measurement
    const started = performance.now()
    expect(pattern.matches(text)).toEqual([])
    expect(performance.now() - started).toBeLessThan(100)
  })

  test('(x+x+)+y over 100,000 x is linear too', () => {
    const pattern = compile('(x+x+)+y')
    const started = performance.now()
    expect(pattern.matches('x'.repeat(100_000))).toEqual([])
    expect(performance.now() - started).toBeLessThan(200)
  })
})
