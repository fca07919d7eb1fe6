/**
 * The guardrail detector of secrets: provider API keys, our own keys, private key blocks, JWTs
 * and cloud access keys.
 */
import { type Found, isDigit, isAlnum, isWord, at, disjoint } from './detect-text'

// secret: tokens whose prefix names their issuer (each a distinctive format; no generic
// "high-entropy string" rule, which would flag hashes and ids), PEM private key blocks, JWTs and an
// AWS secret access key written next to its name. Each token is whole: not glued to a longer token
// of [A-Za-z0-9_-] on either side (`risk-based` holds no `sk-` key).
//
// Gateways in the catalog whose keys have no prefix of their own (Mistral, DeepInfra, SambaNova,
// Portkey, Cloudflare, Not Diamond, Martian, Together's older 64-hex keys) cannot be told from a
// hash by their form and are not detected.

interface TokenRule {
  /** The token's pattern, prefix included (no flags; made sticky). */
  pattern: string
  /** A further check of the whole token, when the prefix alone is not distinctive enough. */
  check?: (token: string) => boolean
}

/** At least `digits` digits and a run of 16+ characters without `-`/`_`: random, not words. */
function looksRandom(token: string, digits = 2): boolean {
  let seen = 0
  let run = 0
  let longest = 0
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i)
    if (isDigit(code)) seen++
    if (code === 45 || code === 95) run = 0
    else if (++run > longest) longest = run
  }
  return seen >= digits && longest >= 16
}

/** Whether a base64url segment decodes to a JSON object. */
function isJsonObjectSegment(segment: string): boolean {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'))
    return typeof value === 'object' && value !== null && !Array.isArray(value)
  } catch {
    return false
  }
}

/**
 * The prefixed tokens, by the word and separator that open them (`sk-`, `gsk_`): a text is scanned
 * for `-` and `_` with indexOf and only the word before each is looked up, far cheaper than one
 * regex of every alternative over the whole text. Within a prefix the rules are tried in order.
 */
const prefixedTokens: Record<string, TokenRule[]> = {
  'sk-': [
    // Anthropic (sk-ant-api03-…, sk-ant-admin01-…, OAuth sk-ant-oat01-…)
    { pattern: 'sk-ant-[a-z]{2,6}\\d{2}-[A-Za-z0-9_-]{32,}' },
    // OpenRouter
    { pattern: 'sk-or-v1-[0-9a-f]{64}' },
    // OpenAI project, service-account and admin keys
    { pattern: 'sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}' },
    // Helicone (sk- for reads, pk- for the proxy; groups of 7)
    { pattern: 'sk-helicone-(?:[a-z]{2}-)?[a-z0-9]{7}(?:-[a-z0-9]{7}){3}' },
    // Any other sk- key (OpenAI legacy sk-…48, DeepSeek sk-…32 hex, LiteLLM and Requesty virtual
    // keys): random-looking bodies only.
    { pattern: 'sk-[A-Za-z0-9_-]{20,}', check: (token) => looksRandom(token) },
  ],
  'pk-': [{ pattern: 'pk-helicone-(?:[a-z]{2}-)?[a-z0-9]{7}(?:-[a-z0-9]{7}){3}' }],
  // Stripe secret and restricted keys
  'sk_': [{ pattern: 'sk_(?:live|test)_[A-Za-z0-9]{16,}' }],
  'rk_': [{ pattern: 'rk_(?:live|test)_[A-Za-z0-9]{16,}' }],
  // Stripe's and our own webhook signing secrets
  'whsec_': [{ pattern: 'whsec_[A-Za-z0-9+/=]{24,}' }],
  // The router's own inference and management keys (storage/crypto.ts generateSecret: 40 base62)
  'rt_': [{ pattern: 'rt_(?:live|mgmt)_[A-Za-z0-9]{32,}' }],
  // Groq, xAI, Perplexity, Cerebras, Vercel AI Gateway, Together (tgp_v1_), Fireworks
  'gsk_': [{ pattern: 'gsk_[A-Za-z0-9]{48,}' }],
  'xai-': [{ pattern: 'xai-[A-Za-z0-9]{64,}' }],
  'pplx-': [{ pattern: 'pplx-[A-Za-z0-9]{40,}' }],
  'csk-': [{ pattern: 'csk-[A-Za-z0-9]{32,}', check: (token) => looksRandom(token) }],
  'vck_': [{ pattern: 'vck_[A-Za-z0-9]{40,}' }],
  'tgp_': [{ pattern: 'tgp_v1_[A-Za-z0-9_-]{30,}' }],
  'fw_': [{ pattern: 'fw_[A-Za-z0-9]{20,}', check: (token) => looksRandom(token) }],
  // Hugging Face (not a catalog gateway, but an AI key as commonly pasted)
  'hf_': [{ pattern: 'hf_[A-Za-z0-9]{30,}', check: (token) => looksRandom(token) }],
  // GitHub, GitLab, npm, Slack
  ...Object.fromEntries(['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_'].map((prefix) => [prefix, [{ pattern: `${prefix}[A-Za-z0-9]{36,}` }]])),
  'github_': [{ pattern: 'github_pat_[A-Za-z0-9_]{60,}' }],
  'glpat-': [{ pattern: 'glpat-[A-Za-z0-9_-]{20,}' }],
  'npm_': [{ pattern: 'npm_[A-Za-z0-9]{36}' }],
  ...Object.fromEntries(['xoxa-', 'xoxb-', 'xoxp-', 'xoxo-', 'xoxs-', 'xoxr-', 'xoxe-'].map((prefix) => [prefix, [{ pattern: `${prefix}[0-9]{6,}-[A-Za-z0-9-]{8,}` }]])),
}

/** Tokens without a separator in their prefix, found by indexOf of their opening. */
const anchoredTokens: Record<string, TokenRule[]> = {
  // JWT: header and payload base64url JSON objects (so `eyJ`), any signature (empty for alg none).
  eyJ: [
    {
      pattern: 'eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]*',
      check: (token) => {
        const [header, payload] = token.split('.')
        return isJsonObjectSegment(header!) && isJsonObjectSegment(payload!)
      },
    },
  ],
  // AWS access key ids; Google API keys (Gemini included)
  ...Object.fromEntries(['AKIA', 'ASIA', 'ABIA', 'ACCA'].map((prefix) => [prefix, [{ pattern: `${prefix}[A-Z0-9]{16}` }]])),
  AIza: [{ pattern: 'AIza[0-9A-Za-z_-]{35}' }],
}

interface CompiledRule {
  regex: RegExp
  check?: (token: string) => boolean
}
const compileRules = (rules: Record<string, TokenRule[]>) =>
  new Map(Object.entries(rules).map(([prefix, list]) => [prefix, list.map((rule): CompiledRule => ({ regex: new RegExp(rule.pattern, 'y'), check: rule.check }))]))
const prefixedRules = compileRules(prefixedTokens)
const anchoredRules = compileRules(anchoredTokens)
/** The longest word before a separator in a prefix (`github`). */
const longestPrefixWord = Math.max(...Object.keys(prefixedTokens).map((prefix) => prefix.length - 1))
/** Each prefix's first character and length, to rule most words out without a slice. */
const prefixShapes = new Set(Object.keys(prefixedTokens).map((prefix) => prefix.charCodeAt(0) * 64 + prefix.length))

const isTokenChar = (code: number) => isWord(code) || code === 45

const slackWebhook = /https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]{6,}\/B[A-Z0-9]{6,}\/[A-Za-z0-9]{16,}/g
const awsSecret = /aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])/gi
const pemHeader = /-----BEGIN[A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----/y
const pemFooter = /-----END[A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----/y
/** The base64 lines after a header whose footer is missing (newlines real or JSON-escaped). */
const pemBody = /(?:(?:\r?\n|\\r\\n|\\n)+[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+: [^\r\n\\]*)[ \t]*(?=\r?\n|\\[rn]|$))*/y
/** How far a footer is looked for: a 4096-bit RSA key is about 3.3 KB. */
const pemMaxLength = 16_384

export function detectSecrets(text: string): Found[] {
  // Each search is for a character or string rare in prose (single characters and strings opening
  // with an uncommon one are what indexOf is fastest at).
  const found: Found[] = []
  if (text.includes('-----BEGIN')) findPrivateKeys(text, found)
  findPrefixedTokens(text, '-', found)
  const awsNamed = findPrefixedTokens(text, '_', found)
  findAnchoredTokens(text, 'J', 2, found) // eyJ
  findAnchoredTokens(text, 'A', 0, found) // AKIA, ASIA, ABIA, ACCA, AIza
  if (text.includes('//hooks.slack.com')) {
    slackWebhook.lastIndex = 0
    for (let m = slackWebhook.exec(text); m; m = slackWebhook.exec(text)) found.push({ start: m.index, end: m.index + m[0].length })
  }
  if (awsNamed || text.includes('SecretAccessKey') || text.includes('secretaccesskey')) findAwsSecrets(text, found)
  return disjoint(found)
}

/** Tokens opening with one of the anchored prefixes, found by a character at `offset` in it. */
function findAnchoredTokens(text: string, char: string, offset: number, found: Found[]): void {
  for (let i = text.indexOf(char, offset); i >= 0; ) {
    const start = i - offset
    const rules = anchoredRules.get(text.slice(start, start + 4)) ?? anchoredRules.get(text.slice(start, start + 3))
    const end = rules ? matchToken(text, start, rules) : -1
    if (end > 0) found.push({ start, end })
    i = text.indexOf(char, end > 0 ? end + offset : i + 1)
  }
}

/** An AWS secret access key written after its name (`aws_secret_access_key = …`): only the value. */
function findAwsSecrets(text: string, found: Found[]): void {
  awsSecret.lastIndex = 0
  for (let m = awsSecret.exec(text); m; m = awsSecret.exec(text)) {
    const end = m.index + m[0].length
    found.push({ start: end - m[1]!.length, end })
  }
}

/** The tokens whose prefix ends with this separator: each separator's word looked up. Whether an `aws_` word was seen. */
function findPrefixedTokens(text: string, separator: string, found: Found[]): boolean {
  let awsNamed = false
  let separatorAt = text.indexOf(separator)
  while (separatorAt >= 0) {
    let start = separatorAt
    while (start > 0 && separatorAt - start < longestPrefixWord && isAlnum(at(text, start - 1))) start--
    const shaped = start < separatorAt && prefixShapes.has(at(text, start) * 64 + separatorAt + 1 - start)
    const prefix = shaped && !isTokenChar(at(text, start - 1)) ? text.slice(start, separatorAt + 1) : ''
    if (separatorAt - start === 3 && (at(text, start) | 32) === 97 && text.slice(start, separatorAt + 1).toLowerCase() === 'aws_') awsNamed = true
    const rules = prefix ? prefixedRules.get(prefix) : undefined
    const end = rules ? matchToken(text, start, rules) : -1
    if (end > 0) found.push({ start, end })
    separatorAt = text.indexOf(separator, end > 0 ? end : separatorAt + 1)
  }
  return awsNamed
}

/** Where the first rule that matches a whole token at `start` ends, or -1. */
function matchToken(text: string, start: number, rules: readonly CompiledRule[]): number {
  if (isTokenChar(at(text, start - 1))) return -1
  for (const rule of rules) {
    rule.regex.lastIndex = start
    const m = rule.regex.exec(text)
    if (!m) continue
    const end = start + m[0].length
    // Glued to a longer token on the right: not this token (nor, being greedy, any shorter one).
    if (isTokenChar(at(text, end))) continue
    if (rule.check && !rule.check(m[0])) continue
    return end
  }
  return -1
}

/** PEM private key blocks, BEGIN line to END line; without an END line, the header and its base64 lines. */
function findPrivateKeys(text: string, found: Found[]): void {
  let begin = text.indexOf('-----BEGIN')
  while (begin >= 0) {
    pemHeader.lastIndex = begin
    if (!pemHeader.test(text)) {
      begin = text.indexOf('-----BEGIN', begin + 10)
      continue
    }
    const headerEnd = pemHeader.lastIndex
    let end = -1
    let footer = text.indexOf('-----END', headerEnd)
    while (footer >= 0 && footer - begin <= pemMaxLength) {
      pemFooter.lastIndex = footer
      if (pemFooter.test(text)) {
        end = pemFooter.lastIndex
        break
      }
      footer = text.indexOf('-----END', footer + 8)
    }
    if (end < 0) {
      pemBody.lastIndex = headerEnd
      pemBody.test(text)
      end = Math.max(headerEnd, pemBody.lastIndex)
    }
    found.push({ start: begin, end })
    begin = text.indexOf('-----BEGIN', end)
  }
}
