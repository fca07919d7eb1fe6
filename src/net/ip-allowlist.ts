/**
 * IP allowlist entries (SPEC "Authentication" 5): parsing, normalizing for storage, and matching
 * a caller address, with IPv4-mapped IPv6 callers matching IPv4 entries.
 */
import ipaddr from 'ipaddr.js'
import { badRequest } from '../errors/management-error'
import type { CompiledAllowlist, ParsedAddress } from '../domain/allowlist'

export const maxAllowlistEntries = 100
export const maxAllowlistEntryLength = 64

function isPlainIpv4(text: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(text)
}

/** Returns the stored form of one entry, or undefined when it is not an address or CIDR range. */
export function normalizeAllowlistEntry(entry: string): string | undefined {
  const slash = entry.indexOf('/')
  if (slash === -1) {
    if (isPlainIpv4(entry) || ipaddr.IPv6.isValid(entry)) return entry
    return undefined
  }
  const address = entry.slice(0, slash)
  const bitsText = entry.slice(slash + 1)
  if (!/^\d{1,3}$/.test(bitsText)) return undefined
  const bits = Number(bitsText)
  if (isPlainIpv4(address)) {
    if (bits > 32) return undefined
    return `${ipaddr.IPv4.networkAddressFromCIDR(`${address}/${bits}`).toString()}/${bits}`
  }
  if (ipaddr.IPv6.isValid(address)) {
    if (bits > 128) return undefined
    return `${ipaddr.IPv6.networkAddressFromCIDR(`${address}/${bits}`).toString()}/${bits}`
  }
  return undefined
}

/**
 * Parses an `allowed_ips` input (array, or a string separated by commas or newlines) into the
 * stored list; throws a 400 naming the first invalid entry. `field` names the input in messages.
 */
export function parseAllowlist(input: string | string[], field = 'allowed_ips'): string[] {
  const raw = Array.isArray(input) ? input : input.split(/[,\n\r]+/)
  const entries = raw.map((entry) => (typeof entry === 'string' ? entry.trim() : entry)).filter((entry) => entry !== '')
  if (entries.length > maxAllowlistEntries) throw badRequest(`Invalid ${field}: at most ${maxAllowlistEntries} entries are allowed, got ${entries.length}.`)
  const stored: string[] = []
  for (const entry of entries) {
    if (typeof entry !== 'string') throw badRequest(`Invalid ${field}: every entry must be a string.`)
    if (entry.length > maxAllowlistEntryLength) {
      throw badRequest(`Invalid ${field}: entry '${entry.slice(0, 80)}' is longer than ${maxAllowlistEntryLength} characters.`)
    }
    const normalized = normalizeAllowlistEntry(entry)
    if (normalized === undefined) throw badRequest(`Invalid ${field}: '${entry}' is not an IPv4/IPv6 address or CIDR range.`)
    stored.push(normalized)
  }
  return stored
}

/** Compiles stored entries once (snapshot time) so a request only runs range matches. */
export function compileAllowlist(entries: readonly string[]): CompiledAllowlist {
  const ranges: [ParsedAddress, number][] = []
  for (const entry of entries) {
    try {
      if (entry.includes('/')) ranges.push(ipaddr.parseCIDR(entry))
      else {
        const address = ipaddr.parse(entry)
        ranges.push([address, address.kind() === 'ipv4' ? 32 : 128])
      }
    } catch {
      // Entries are validated on write; an unreadable stored entry matches nothing.
    }
  }
  return {
    empty: entries.length === 0,
    allows(address) {
      if (entries.length === 0) return true
      if (!address) return false
      for (const [network, bits] of ranges) {
        if (address.kind() === network.kind() && address.match(network, bits)) return true
      }
      return false
    },
  }
}

/** Parses a caller address; IPv4-mapped IPv6 (`::ffff:a.b.c.d`) becomes the IPv4 address. */
export function parseCallerAddress(text: string | undefined): ParsedAddress | undefined {
  if (!text) return undefined
  try {
    const address = ipaddr.parse(text.trim())
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) return (address as ipaddr.IPv6).toIPv4Address()
    return address
  } catch {
    return undefined
  }
}

/**
 * Whether a socket peer may be a reverse proxy whose forwarding headers (`Fly-Client-IP`,
 * `X-Forwarded-For`) are believed under RT_TRUST_PROXY=1: loopback, or an address of the private IPv4
 * networks (10/8, 172.16/12, 192.168/16), where proxies sit beside a service. Never an IPv6 peer
 * but loopback: on fly.io its proxy connects to a machine over the machine's IPv4 interface (from
 * 172.16.0.0/12; an app must listen on 0.0.0.0 to be reachable by fly-proxy), while the
 * organisation's private network, whose machines can connect to it directly, is IPv6 (6PN,
 * fdaa::/16): such a machine cannot pass for the proxy and set the caller's address.
 */
export function isProxyPeer(address: string | undefined): boolean {
  if (!address) return false
  let parsed: ParsedAddress
  try {
    parsed = ipaddr.parse(address)
  } catch {
    return false
  }
  if (parsed.kind() === 'ipv6') {
    const ipv6 = parsed as ipaddr.IPv6
    if (!ipv6.isIPv4MappedAddress()) return ipv6.range() === 'loopback'
    parsed = ipv6.toIPv4Address()
  }
  const range = parsed.range()
  return range === 'loopback' || range === 'private'
}
