/**
 * The caller's address under RT_TRUST_PROXY=1 (CONTRACT §4, docs/DEPLOYING.md): `Fly-Client-IP`, else
 * the first `X-Forwarded-For` entry, believed only from a socket peer that can be the proxy (loopback,
 * the private IPv4 networks; fly's proxy connects over IPv4 from 172.16.0.0/12). A machine of the
 * organisation's private network (IPv6, fdaa::/16) that connects directly and sets the headers is
 * taken at its own address; so is any public peer.
 */
import { describe, expect, test } from 'bun:test'
import { callerAddress } from '../../src/pipeline/request/authenticate'
import { isProxyPeer } from '../../src/net/ip-allowlist'

const spoofed = new Headers({ 'fly-client-ip': '198.51.100.7', 'x-forwarded-for': '198.51.100.8, 10.0.0.1' })
const forwardedOnly = new Headers({ 'x-forwarded-for': '198.51.100.8, 10.0.0.1' })

describe('the caller address behind a proxy', () => {
  test.each([
    ['172.16.3.98', true],
    ['172.19.12.1', true],
    ['::ffff:172.16.3.98', true],
    ['10.0.4.2', true],
    ['192.168.1.20', true],
    ['127.0.0.1', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
  ])('from a peer that can be the proxy (%s) the headers are believed', (peer, trusted) => {
    expect(isProxyPeer(peer)).toBe(trusted)
    expect(callerAddress(spoofed, () => peer, true)).toBe('198.51.100.7')
    expect(callerAddress(forwardedOnly, () => peer, true)).toBe('198.51.100.8')
  })

  test.each([
    // fly's private network (6PN): another machine of the organisation, connecting directly.
    'fdaa:0:3b99:a7b:1b7:4ab3:9c0d:2',
    'fd00::2',
    '2001:db8::5',
    '203.0.113.9',
    '100.64.0.1',
    '::7f00:1',
    'not-an-address',
  ])('from %s the headers are ignored: the peer is the caller', (peer) => {
    expect(isProxyPeer(peer)).toBe(false)
    expect(callerAddress(spoofed, () => peer, true)).toBe(peer)
    expect(callerAddress(forwardedOnly, () => peer, true)).toBe(peer)
  })

  test('without RT_TRUST_PROXY the headers count for nothing, whoever sends them', () => {
    expect(callerAddress(spoofed, () => '172.16.3.98', false)).toBe('172.16.3.98')
    expect(callerAddress(new Headers(), () => '172.16.3.98', true)).toBe('172.16.3.98')
  })
})
