/**
 * The built-in guardrail detectors (CONTRACT §17): pure functions from a text to the spans of what
 * each finds (UTF-16 offsets, sorted, non-overlapping). Few false positives is the aim: every
 * candidate a cheap scan finds is then checked the way the thing itself is (a card's Luhn digit and
 * issuer, an IBAN's country length and mod-97, a phone number against its country's numbering plan,
 * an IPv6 address by ipaddr.js, a JWT's segments decoded as JSON), and a candidate glued to a longer
 * token (a digit run, a dotted version, a word) is not taken.
 *
 * Cost: these run on the serving thread over every text of a request (the personal-data set has a
 * budget of 20 µs per KB of prompt), so no detector scans the whole text with a regular expression. The
 * numeric ones (phone, card, IBAN, SSN, IPv4) start from the text's digit runs, found in one pass
 * shared by all of them (detect-text.ts digitRuns); the others from an indexOf of a character rare
 * in prose (`@`, `:`, `-`, `_`), which skips text at memchr speed. Candidates are read by hand-written
 * code over char codes: besides being cheaper, it keeps its speed across garbage collections, after
 * which a regular expression's next run cost 4-7 µs a pattern (measured; its compiled code is
 * dropped), which was most of the set's cost on a loaded server. The costly checks (the phone library
 * above all) only see the few candidates that survive cheap ones. Every scan is linear in the text,
 * adversarial texts included.
 */
import { detectEmails, detectPhones } from './detect-contact'
import { detectCards, detectIbans, detectSsns } from './detect-finance'
import { detectIpAddresses } from './detect-network'
import { detectSecrets } from './detect-secret'
import type { Found } from './detect-text'

export type { Found } from './detect-text'

export type DetectorName = 'email' | 'phone' | 'credit_card' | 'iban' | 'us_ssn' | 'ip_address' | 'secret'

/** Every match of the detector in the text, sorted by start, non-overlapping (UTF-16 offsets). */
export function detect(detector: DetectorName, text: string): Found[] {
  if (text.length === 0) return []
  switch (detector) {
    case 'email':
      return detectEmails(text)
    case 'phone':
      return detectPhones(text)
    case 'credit_card':
      return detectCards(text)
    case 'iban':
      return detectIbans(text)
    case 'us_ssn':
      return detectSsns(text)
    case 'ip_address':
      return detectIpAddresses(text)
    case 'secret':
      return detectSecrets(text)
  }
  return []
}

const labels: Record<DetectorName | 'regex', string> = {
  email: 'EMAIL',
  phone: 'PHONE',
  credit_card: 'CREDIT_CARD',
  iban: 'IBAN',
  us_ssn: 'US_SSN',
  ip_address: 'IP_ADDRESS',
  secret: 'SECRET',
  regex: 'REGEX',
}

/** The placeholder / redaction label of a detector: EMAIL, PHONE, CREDIT_CARD, IBAN, US_SSN, IP_ADDRESS, SECRET (REGEX for custom patterns). */
export function detectorLabel(detector: DetectorName | 'regex'): string {
  return labels[detector]
}
