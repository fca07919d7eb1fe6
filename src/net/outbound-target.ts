/**
 * Where the service may connect on a key's behalf: batch webhooks and MCP servers, under the one
 * rule of SPEC "Batch notifications": an `https` URL without credentials whose host resolves only to
 * public addresses, checked when the URL is saved and again at every connection.
 * RT_WEBHOOK_ALLOW_PRIVATE=1 lifts the https and address checks, for tests and closed networks
 * (CONTRACT §4).
 *
 * A caller connects with fetchOutboundTarget(await resolveOutboundTarget(url, allowPrivate)): the
 * addresses are checked once and the connection goes to the checked address, so a DNS answer that
 * changes between the check and the connection (rebinding) cannot reach a private address.
 */
import { lookup } from 'node:dns/promises'
import ipaddr from 'ipaddr.js'
import { badRequest } from '../errors/management-error'

/** What a refused target is called in messages: 'Webhook', 'MCP server'. */
export type OutboundSubject = 'Webhook' | 'MCP server'

/** The addresses a host name resolves to, every one of them. */
export type HostResolver = (hostname: string) => Promise<string[]>

export const resolveHostWithDns: HostResolver = async (hostname) => (await lookup(hostname, { all: true })).map((entry) => entry.address)

/** A target that passed the rule: its URL as saved, and the address checked to connect to. */
export interface OutboundTarget {
  url: URL
  address: string
}

/** A target the rule refuses; the message says why, naming the subject. */
export class OutboundTargetRefused extends Error {}

const rangeNames: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  linkLocal: 'a link-local address (cloud metadata services live there)',
  uniqueLocal: 'a unique-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'the unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
}

/** IPv6's global unicast space (RFC 4291 §2.4; IANA): every public IPv6 address is in it. */
const globalUnicast = ipaddr.parseCIDR('2000::/3')

/** `::a.b.c.d`: the dotted form of an IPv4-compatible address, which ipaddr.js reads as IPv4-mapped. */
const dottedCompatible = /^::(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(%.*)?$/

/**
 * The kind of an IPv4-compatible IPv6 address (`::/96`, deprecated by RFC 4291 §2.5.5.1; `::` and
 * `::1` are ranges of their own): named after the IPv4 address it embeds when that one is not
 * public (`::7f00:1` is 127.0.0.1), and refused as deprecated when it is, since no public host has
 * one and a stack that still maps them would reach the IPv4 address.
 */
function compatibleKind(embedded: ipaddr.IPv4): string {
  const range = embedded.range()
  const named = range === 'unicast' ? undefined : (rangeNames[range] ?? `a non-public address (${range})`)
  return named ? `${named}, ${embedded.toString()} written as an IPv4-compatible IPv6 address` : `a deprecated IPv4-compatible IPv6 address (::/96, embedding ${embedded.toString()})`
}

/**
 * Undefined for a public unicast address, else the kind of address it is (loopback, private,
 * link-local, unique-local, metadata, reserved and every other special range). An IPv4 address
 * written as IPv6 (::ffff:127.0.0.1) is judged as IPv4; an IPv4-compatible one (::7f00:1,
 * ::127.0.0.1) is refused, named after the address it embeds; an IPv6 address outside global
 * unicast (2000::/3) is not public, NAT64's 64:ff9b::/96 among them; text that is no address is
 * refused too.
 */
export function nonPublicKind(text: string): string | undefined {
  const dotted = dottedCompatible.exec(text)
  if (dotted && ipaddr.IPv4.isValidFourPartDecimal(dotted[1]!)) return compatibleKind(ipaddr.IPv4.parse(dotted[1]!))
  let address: ipaddr.IPv4 | ipaddr.IPv6
  try {
    address = ipaddr.parse(text)
  } catch {
    return 'not an IP address'
  }
  if (address.kind() === 'ipv6') {
    const ipv6 = address as ipaddr.IPv6
    if (ipv6.isIPv4MappedAddress()) address = ipv6.toIPv4Address()
    else {
      const range = ipv6.range()
      const parts = ipv6.parts
      if (range === 'unicast' && parts.slice(0, 6).every((part) => part === 0)) {
        return compatibleKind(ipaddr.IPv4.parse(`${parts[6]! >> 8}.${parts[6]! & 255}.${parts[7]! >> 8}.${parts[7]! & 255}`))
      }
      if (range === 'unicast' && !ipv6.match(globalUnicast)) return 'an IPv6 address outside global unicast (2000::/3)'
    }
  }
  const range = address.range()
  if (range === 'unicast') return undefined
  return rangeNames[range] ?? `a non-public address (${range})`
}

export function isNonPublicAddress(text: string): boolean {
  return nonPublicKind(text) !== undefined
}

/** The URL's host as an address or a name: IPv6 literals lose their brackets. */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '')
}

/** The URL and scheme rules, which need no DNS. */
function parseTarget(target: string | URL, allowPrivate: boolean, subject: OutboundSubject): URL {
  let url: URL
  try {
    url = new URL(target)
  } catch {
    throw new OutboundTargetRefused(`${subject} URL is not a valid URL: '${String(target).slice(0, 200)}'.`)
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    throw new OutboundTargetRefused(`${subject} URL must use https${allowPrivate ? ' (or http, with RT_WEBHOOK_ALLOW_PRIVATE=1)' : ''}.`)
  }
  if (url.username || url.password) throw new OutboundTargetRefused(`${subject} URL must not carry credentials.`)
  return url
}

async function addressesOf(url: URL, subject: OutboundSubject, resolve: HostResolver): Promise<string[]> {
  const host = bareHost(url)
  if (ipaddr.isValid(host)) return [host]
  let addresses: string[]
  try {
    addresses = await resolve(host)
  } catch {
    addresses = []
  }
  if (addresses.length === 0) throw new OutboundTargetRefused(`${subject} host '${host.slice(0, 200)}' could not be resolved.`)
  return addresses
}

/**
 * The check at every connection: the URL rules, then the host resolved and every address it has
 * checked (one private address among public ones is enough to refuse: a client may pick any).
 * Returns the address to connect to; throws OutboundTargetRefused. With `allowPrivate` the
 * addresses are not checked, but one is still returned.
 */
export async function resolveOutboundTarget(target: string | URL, allowPrivate: boolean, subject: OutboundSubject, resolve: HostResolver = resolveHostWithDns): Promise<OutboundTarget> {
  const url = parseTarget(target, allowPrivate, subject)
  const addresses = await addressesOf(url, subject, resolve)
  if (!allowPrivate) {
    for (const address of addresses) {
      const kind = nonPublicKind(address)
      if (kind === undefined) continue
      const host = bareHost(url)
      const where = address === host ? `${subject} URL names ${address}` : `${subject} host '${host.slice(0, 200)}' resolves to ${address}`
      throw new OutboundTargetRefused(`${where}, ${kind}: only public addresses are allowed (RT_WEBHOOK_ALLOW_PRIVATE=1 lifts this for tests and closed networks).`)
    }
  }
  return { url, address: addresses[0]! }
}

/**
 * The check when a URL is saved (management, CLI): the same rule, refusals as 400s. With
 * `allowPrivate` the host is not resolved, so a test may save a name that only resolves later.
 */
export async function checkOutboundUrl(rawUrl: string, allowPrivate: boolean, subject: OutboundSubject, resolve: HostResolver = resolveHostWithDns): Promise<URL> {
  try {
    if (allowPrivate) return parseTarget(rawUrl, allowPrivate, subject)
    return (await resolveOutboundTarget(rawUrl, allowPrivate, subject, resolve)).url
  } catch (error) {
    if (error instanceof OutboundTargetRefused) throw badRequest(error.message)
    throw error
  }
}

/**
 * fetch() to the checked address, never to a fresh DNS answer. The URL's host becomes the address;
 * the Host header keeps the name; for https, `tls.serverName` sends the name as SNI and is the name
 * the certificate is verified against (Bun's fetch, checked in test/unit/outbound-target.test.ts:
 * a certificate for the name is accepted over a connection to the address, one for another name is
 * not, and pooled connections are not shared across server names). An address written in the URL
 * gets no SNI (RFC 6066 §3) and is verified as written. Redirects are not followed: a Location is
 * a new target, to be checked again (SPEC: a webhook redirect is a failed delivery).
 */
export function fetchOutboundTarget(target: OutboundTarget, init: BunFetchRequestInit = {}, fetchImplementation: typeof fetch = fetch): Promise<Response> {
  const connectUrl = new URL(target.url)
  connectUrl.hostname = target.address.includes(':') ? `[${target.address}]` : target.address
  const headers = new Headers(init.headers)
  headers.set('host', target.url.host)
  const byName = !ipaddr.isValid(bareHost(target.url))
  const tls = target.url.protocol === 'https:' && byName ? { ...init.tls, serverName: target.url.hostname } : init.tls
  return fetchImplementation(connectUrl, { ...init, headers, redirect: 'manual', tls })
}
