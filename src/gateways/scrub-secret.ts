/**
 * Keeps a provider secret out of everything the service relays or logs from an upstream (issue 11
 * item 8): a gateway that echoes the key it was sent, whole, in part or in the masked form several
 * gateways print ("Incorrect API key provided: sk-proj-****…wxyz"), has it replaced by `[redacted]`.
 *
 * The rule: every run of at least 8 characters of the secret that appears verbatim is redacted
 * (a shorter secret: wherever it appears whole), and so is every masked token (3 or more `*`, `•`,
 * `.` or `…` between word characters) whose visible start is a start of the secret or whose
 * visible end is an end of it (2 characters or more). A fragment of fewer than 8 characters
 * outside a masked token is left: that much of a random secret is also what ordinary text contains.
 */

export const redacted = '[redacted]'

/** The shortest run of the secret redacted on its own. */
const minimumRun = 8
/** The shortest visible part of a masked token that ties it to the secret. */
const minimumMaskedPart = 2

const maskedToken = /([\w-]*)(?:\*{3,}|•{3,}|\.{3,}|…+)([\w-]*)/g
const mayHoldMaskedToken = /\*\*\*|•••|\.\.\.|…/

/** Adds [start, end) ranges where `needle` occurs in `text`. */
function addOccurrences(ranges: number[], text: string, needle: string) {
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) ranges.push(at, at + needle.length)
}

/** The ranges of `text` that are runs of `secret` (as flat start, end pairs). */
function runRanges(ranges: number[], text: string, secret: string) {
  const run = Math.min(minimumRun, secret.length)
  if (text.length < run) return
  if (secret.length <= run) return addOccurrences(ranges, text, secret)
  // Each window of `run` characters found verbatim is redacted; overlapping windows merge into the
  // whole run. Search from the shorter side: a short header value checks its own windows against
  // the secret, a long body looks for each window of the secret.
  if (text.length <= secret.length) {
    for (let start = 0; start + run <= text.length; start++) {
      if (secret.includes(text.slice(start, start + run))) ranges.push(start, start + run)
    }
  } else {
    for (let start = 0; start + run <= secret.length; start++) addOccurrences(ranges, text, secret.slice(start, start + run))
  }
}

function maskedRanges(ranges: number[], text: string, secret: string) {
  if (!mayHoldMaskedToken.test(text)) return
  for (const match of text.matchAll(maskedToken)) {
    const visibleStart = match[1]!
    const visibleEnd = match[2]!
    const tied =
      (visibleStart.length >= minimumMaskedPart && secret.startsWith(visibleStart)) || (visibleEnd.length >= minimumMaskedPart && secret.endsWith(visibleEnd))
    if (tied) ranges.push(match.index!, match.index! + match[0].length)
  }
}

/** `text` with every trace of `secret` (see the rule above) replaced by `[redacted]`. */
export function scrubSecret(text: string, secret: string | undefined): string {
  if (!text || !secret) return text
  const ranges: number[] = []
  runRanges(ranges, text, secret)
  // A secret with quotes, backslashes or control characters appears escaped in a JSON body.
  const escaped = JSON.stringify(secret).slice(1, -1)
  if (escaped !== secret) runRanges(ranges, text, escaped)
  maskedRanges(ranges, text, secret)
  if (ranges.length === 0) return text
  const order: number[] = []
  for (let index = 0; index < ranges.length; index += 2) order.push(index)
  order.sort((left, right) => ranges[left]! - ranges[right]!)
  let scrubbed = ''
  let copiedTo = 0
  let open = -1
  let openEnd = -1
  for (const index of order) {
    const start = ranges[index]!
    const end = ranges[index + 1]!
    if (open !== -1 && start <= openEnd) {
      if (end > openEnd) openEnd = end
      continue
    }
    if (open !== -1) {
      scrubbed += text.slice(copiedTo, open) + redacted
      copiedTo = openEnd
    }
    open = start
    openEnd = end
  }
  scrubbed += text.slice(copiedTo, open) + redacted + text.slice(openEnd)
  return scrubbed
}

/**
 * A parsed JSON value with `scrubSecret` applied to every string in it (names and values): for a
 * part of an answer read raw, because the router keeps other parts of it, that is then relayed or
 * stored to be shown (a batch's results, its error). The value itself is not changed; what holds no
 * trace of the secret is returned as it is.
 */
export function scrubSecretInValue<T>(value: T, secret: string | undefined): T {
  if (!secret) return value
  return scrubValue(value, secret) as T
}

function scrubValue(value: unknown, secret: string): unknown {
  if (typeof value === 'string') return scrubSecret(value, secret)
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    for (let index = 0; index < value.length; index++) {
      const item = value[index]
      const scrubbed = scrubValue(item, secret)
      if (scrubbed !== item) (copy ??= value.slice())[index] = scrubbed
    }
    return copy ?? value
  }
  let copy: Record<string, unknown> | undefined
  const entries = Object.entries(value as Record<string, unknown>)
  for (const [name, item] of entries) {
    const scrubbedName = scrubSecret(name, secret)
    const scrubbed = scrubValue(item, secret)
    if (scrubbedName === name && scrubbed === item) continue
    copy ??= { ...(value as Record<string, unknown>) }
    if (scrubbedName !== name) delete copy[name]
    copy[scrubbedName] = scrubbed
  }
  return copy ?? value
}
