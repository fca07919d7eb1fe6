/**
 * The shape of a compiled IP allowlist (a key's or a workspace's `allowed_ips`): what the read model
 * holds and authentication asks. net/ip-allowlist.ts compiles one.
 */
import type ipaddr from 'ipaddr.js'

/** A caller's address, parsed once per request. */
export type ParsedAddress = ipaddr.IPv4 | ipaddr.IPv6

export interface CompiledAllowlist {
  readonly empty: boolean
  allows(address: ParsedAddress | undefined): boolean
}
