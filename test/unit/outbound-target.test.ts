/**
 * The outbound target rule shared by batch webhooks and MCP servers (SPEC "Batch notifications"):
 * which addresses are refused, every resolved address checked, and the connection made to the
 * address that was checked, with the name kept for Host, SNI and certificate verification.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ManagementError } from '../../src/management/errors'
import { checkOutboundUrl, fetchOutboundTarget, nonPublicKind, OutboundTargetRefused, resolveOutboundTarget, type HostResolver } from '../../src/net/outbound-target'

/** A resolver from a fixed table; a name not in it does not resolve. */
function resolverOf(table: Record<string, string[]>): HostResolver & { asked: string[] } {
  const asked: string[] = []
  const resolve = async (hostname: string) => {
    asked.push(hostname)
    const addresses = table[hostname]
    if (!addresses) throw new Error(`ENOTFOUND ${hostname}`)
    return addresses
  }
  return Object.assign(resolve, { asked })
}

describe('nonPublicKind', () => {
  const refused: [string, RegExp][] = [
    ['169.254.169.254', /link-local/],
    ['127.0.0.1', /loopback/],
    ['127.8.9.10', /loopback/],
    ['::1', /loopback/],
    ['10.1.2.3', /private/],
    ['172.16.0.1', /private/],
    ['192.168.1.1', /private/],
    ['fd00::1', /unique-local/],
    ['fd00:ec2::254', /unique-local/],
    ['fe80::1', /link-local/],
    ['100.100.100.200', /carrier-grade NAT/],
    ['0.0.0.0', /unspecified/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /loopback/],
    ['::ffff:169.254.169.254', /link-local/],
    ['64:ff9b::7f00:1', /non-public/],
    ['2002:7f00:1::', /non-public/],
    ['224.0.0.1', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['198.18.0.1', /non-public/],
    ['not an address', /not an IP address/],
  ]
  for (const [address, kind] of refused) {
    test(`${address} is refused`, () => {
      expect(nonPublicKind(address)).toMatch(kind)
    })
  }
  for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700::1111', '::ffff:93.184.215.14']) {
    test(`${address} is public`, () => {
      expect(nonPublicKind(address)).toBeUndefined()
    })
  }
})

describe('IPv4 addresses written as IPv6 (issue 37 item 5)', () => {
  // IPv4-compatible (::/96, deprecated): refused, named after the address it embeds when that is
  // not public, and as deprecated when it is. A resolver answers in the hex form, a URL is written
  // in the hex form by the URL parser, and the dotted form is what ipaddr.js misreads as mapped.
  const refused: [string, RegExp][] = [
    ['::7f00:1', /^a loopback address, 127\.0\.0\.1 written as an IPv4-compatible IPv6 address$/],
    ['::127.0.0.1', /loopback/],
    ['0:0:0:0:0:0:127.0.0.1', /loopback/],
    ['::a00:1', /private/],
    ['::10.0.0.1', /private/],
    ['::c0a8:101', /private/],
    ['::a9fe:a9fe', /link-local/],
    ['::169.254.169.254', /link-local/],
    ['::6464:64c8', /carrier-grade NAT/],
    ['::808:808', /deprecated IPv4-compatible/],
    ['::8.8.8.8', /deprecated IPv4-compatible/],
    // IPv4-mapped is judged as the IPv4 address, in either spelling.
    ['::ffff:7f00:1', /loopback/],
    ['::ffff:a9fe:a9fe', /link-local/],
    ['::ffff:10.0.0.1', /private/],
    // IPv4-translated (SIIT) and NAT64, whatever they embed, and 6to4 and Teredo.
    ['::ffff:0:7f00:1', /non-public/],
    ['64:ff9b::a00:1', /non-public/],
    ['64:ff9b::808:808', /non-public/],
    ['64:ff9b:1::a00:1', /non-public/],
    ['2002:a00:1::', /non-public/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /non-public/],
    // Outside global unicast (2000::/3): no public host has such an address.
    ['4000::1', /outside global unicast/],
  ]
  for (const [address, kind] of refused) {
    test(`${address} is refused`, () => {
      expect(nonPublicKind(address)).toMatch(kind)
    })
  }

  test('::ffff:8.8.8.8 is 8.8.8.8, a public address', () => {
    expect(nonPublicKind('::ffff:808:808')).toBeUndefined()
    expect(nonPublicKind('::ffff:8.8.8.8')).toBeUndefined()
  })

  const resolver = resolverOf({ 'compat.example.test': ['93.184.215.14', '::7f00:1'], 'metadata6.example.test': ['::a9fe:a9fe'] })
  const refusals: [string, RegExp][] = [
    ['https://[::7f00:1]/hook', /names ::7f00:1, a loopback address/],
    // The URL parser writes the dotted form in hex before any check.
    ['https://[::127.0.0.1]/hook', /names ::7f00:1, a loopback address/],
    ['https://[::a9fe:a9fe]/latest/meta-data', /link-local/],
    ['https://[::10.0.0.1]:8443/', /private address/],
    ['https://[::ffff:127.0.0.1]/', /loopback/],
    ['https://[64:ff9b::7f00:1]/', /non-public/],
    ['https://compat.example.test/', /'compat\.example\.test' resolves to ::7f00:1, a loopback address/],
    ['https://metadata6.example.test/', /resolves to ::a9fe:a9fe, a link-local address/],
  ]
  for (const [url, reason] of refusals) {
    test(`${url} is refused: ${reason.source}`, async () => {
      const refused = await resolveOutboundTarget(url, false, 'Webhook', resolver).catch((error: unknown) => error)
      expect(refused).toBeInstanceOf(OutboundTargetRefused)
      expect((refused as Error).message).toMatch(reason)
    })
  }
})

describe('resolveOutboundTarget', () => {
  const resolver = resolverOf({
    'mcp.example.test': ['93.184.215.14'],
    'dual.example.test': ['2606:4700::1111', '93.184.215.14'],
    'mixed.example.test': ['93.184.215.14', '10.0.0.7'],
    'metadata.example.test': ['169.254.169.254'],
    'localhost.example.test': ['127.0.0.1', '::1'],
    'empty.example.test': [],
  })

  test('a public name: the first resolved address is the one to connect to', async () => {
    const target = await resolveOutboundTarget('https://mcp.example.test/mcp', false, 'MCP server', resolver)
    expect(target.url.href).toBe('https://mcp.example.test/mcp')
    expect(target.address).toBe('93.184.215.14')
    expect((await resolveOutboundTarget('https://dual.example.test/', false, 'MCP server', resolver)).address).toBe('2606:4700::1111')
  })

  test('a public address literal needs no DNS', async () => {
    const before = resolver.asked.length
    expect((await resolveOutboundTarget('https://93.184.215.14:8443/hook', false, 'Webhook', resolver)).address).toBe('93.184.215.14')
    expect((await resolveOutboundTarget('https://[2606:4700::1111]/hook', false, 'Webhook', resolver)).address).toBe('2606:4700::1111')
    expect(resolver.asked.length).toBe(before)
  })

  const refusals: [string, RegExp][] = [
    ['https://mixed.example.test/', /'mixed\.example\.test' resolves to 10\.0\.0\.7, a private address/],
    ['https://metadata.example.test/', /resolves to 169\.254\.169\.254, a link-local address/],
    ['https://localhost.example.test/', /resolves to 127\.0\.0\.1, a loopback address/],
    ['https://empty.example.test/', /could not be resolved/],
    ['https://unknown.example.test/', /could not be resolved/],
    ['https://127.0.0.1:6379/', /names 127\.0\.0\.1, a loopback address/],
    ['https://[::1]/', /names ::1, a loopback address/],
    ['https://[::ffff:127.0.0.1]/', /loopback/],
    // The URL parser writes these as 127.0.0.1 before any check.
    ['https://2130706433/', /names 127\.0\.0\.1/],
    ['https://0x7f.1/', /names 127\.0\.0\.1/],
    ['https://[fd00::1]/', /unique-local/],
    ['http://93.184.215.14/', /must use https/],
    ['ftp://93.184.215.14/', /must use https/],
    ['https://user:secret@93.184.215.14/', /must not carry credentials/],
    ['https://:secret@93.184.215.14/', /must not carry credentials/],
    ['not a url', /not a valid URL/],
  ]
  for (const [url, reason] of refusals) {
    test(`${url} is refused: ${reason.source}`, async () => {
      const refused = await resolveOutboundTarget(url, false, 'MCP server', resolver).catch((error: unknown) => error)
      expect(refused).toBeInstanceOf(OutboundTargetRefused)
      expect((refused as Error).message).toMatch(reason)
      expect((refused as Error).message.startsWith('MCP server ')).toBe(true)
    })
  }

  test('allowPrivate (RT_WEBHOOK_ALLOW_PRIVATE=1) lifts https and the address check, not the credentials rule', async () => {
    expect(await resolveOutboundTarget('http://127.0.0.1:6379/', true, 'MCP server', resolver)).toEqual({ url: new URL('http://127.0.0.1:6379/'), address: '127.0.0.1' })
    expect((await resolveOutboundTarget('https://localhost.example.test/', true, 'MCP server', resolver)).address).toBe('127.0.0.1')
    await expect(resolveOutboundTarget('https://user:secret@127.0.0.1/', true, 'MCP server', resolver)).rejects.toThrow(/credentials/)
    await expect(resolveOutboundTarget('ftp://127.0.0.1/', true, 'MCP server', resolver)).rejects.toThrow(/must use https \(or http/)
  })

  test('a DNS answer that changes after the check does not move the connection', async () => {
    let answers = 0
    const rebinding: HostResolver = async () => (answers++ === 0 ? ['93.184.215.14'] : ['127.0.0.1'])
    const target = await resolveOutboundTarget('https://rebind.example.test:8443/mcp?session=1', false, 'MCP server', rebinding)
    expect(target.address).toBe('93.184.215.14')
    const calls: { url: string; init: BunFetchRequestInit }[] = []
    const recording = (async (url: string | URL | Request, init?: BunFetchRequestInit) => {
      calls.push({ url: String(url), init: init! })
      return new Response('ok')
    }) as typeof fetch
    await fetchOutboundTarget(target, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }, recording)
    // Connected to the checked address, whatever the resolver would answer now.
    expect(calls[0]!.url).toBe('https://93.184.215.14:8443/mcp?session=1')
    const headers = new Headers(calls[0]!.init.headers)
    expect(headers.get('host')).toBe('rebind.example.test:8443')
    expect(headers.get('content-type')).toBe('application/json')
    expect(calls[0]!.init.tls?.serverName).toBe('rebind.example.test')
    expect(calls[0]!.init.redirect).toBe('manual')
    expect(answers).toBe(1)
  })

  test('an IPv6 address is bracketed in the connection URL; an address URL gets no SNI', async () => {
    const calls: { url: string; init: BunFetchRequestInit }[] = []
    const recording = (async (url: string | URL | Request, init?: BunFetchRequestInit) => {
      calls.push({ url: String(url), init: init! })
      return new Response('ok')
    }) as typeof fetch
    await fetchOutboundTarget(await resolveOutboundTarget('https://dual.example.test/x', false, 'Webhook', resolver), {}, recording)
    expect(calls[0]!.url).toBe('https://[2606:4700::1111]/x')
    await fetchOutboundTarget(await resolveOutboundTarget('https://93.184.215.14/x', false, 'Webhook', resolver), {}, recording)
    expect(calls[1]!.url).toBe('https://93.184.215.14/x')
    expect(calls[1]!.init.tls?.serverName).toBeUndefined()
  })
})

describe('checkOutboundUrl (save time)', () => {
  test('refusals are management 400s; allowPrivate saves without resolving', async () => {
    const resolver = resolverOf({ 'localhost.example.test': ['127.0.0.1'] })
    const refused = await checkOutboundUrl('https://localhost.example.test/mcp', false, 'MCP server', resolver).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(ManagementError)
    expect((refused as ManagementError).status).toBe(400)
    expect((refused as Error).message).toContain("MCP server host 'localhost.example.test' resolves to 127.0.0.1, a loopback address")
    const asked = resolver.asked.length
    expect((await checkOutboundUrl('http://not-resolvable.example.test/mcp', true, 'MCP server', resolver)).href).toBe('http://not-resolvable.example.test/mcp')
    expect(resolver.asked.length).toBe(asked)
  })
})

/**
 * Bun's fetch against a real TLS server on 127.0.0.1 holding two certificates chosen by SNI, the
 * first (other.example.test) the default. Test-only keys and certificates, valid 2020–2120.
 */
describe('fetchOutboundTarget over TLS (what Bun supports)', () => {
  const testCa = `-----BEGIN CERTIFICATE-----
MIIBZjCCAQygAwIBAgICEAAwCgYIKoZIzj0EAwIwGTEXMBUGA1UEAwwOUm91dGVy
IHRlc3QgQ0EwIBcNMjAwMTAxMDAwMDAwWhgPMjEyMDAxMDEwMDAwMDBaMBkxFzAV
BgNVBAMMDlJvdXRlciB0ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
1u3QUMJCn36xtGuK6jGMbVstAYjNpqKMDAJG2cMk2TMB1Jm1HWxv6v1Mmiox6LRc
Rcaop3+Qw631aokE407ImaNCMEAwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8E
BAMCAgQwHQYDVR0OBBYEFFn+lt1y7iqm+mnfp6IyygKnWx19MAoGCCqGSM49BAMC
A0gAMEUCIED+lcZumbLZei17d3cEPGcgqYDaLE4zF5jHCsrSYl2YAiEAm+zXPhdg
tHMmbg73p+M4wkTldjyFR7eYQMBaE7GFI/I=
-----END CERTIFICATE-----`
  const mcpCertificate = `-----BEGIN CERTIFICATE-----
MIIBpjCCAUugAwIBAgICEAEwCgYIKoZIzj0EAwIwGTEXMBUGA1UEAwwOUm91dGVy
IHRlc3QgQ0EwIBcNMjAwMTAxMDAwMDAwWhgPMjEyMDAxMDEwMDAwMDBaMBsxGTAX
BgNVBAMMEG1jcC5leGFtcGxlLnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAS29slDGlzrI9ifcs5iQ8p42QgCkSE/oKUrvQpgs28gYOS2cA2IQyUavxC1Gg7C
Xoo6eliADiE7uvRQpqt0iwIuo38wfTAJBgNVHRMEAjAAMBMGA1UdJQQMMAoGCCsG
AQUFBwMBMBsGA1UdEQQUMBKCEG1jcC5leGFtcGxlLnRlc3QwHQYDVR0OBBYEFEdE
o13N1/VnWanVAKLSmMnVvk2pMB8GA1UdIwQYMBaAFFn+lt1y7iqm+mnfp6IyygKn
Wx19MAoGCCqGSM49BAMCA0kAMEYCIQCBCqkJ7mvyZ4M9DYvrPvBx/R0CntXmiuU5
Xlj9A7323AIhANqzKPd+3oE6BUZgOp2+LAghro2IcMNbvFqUHSIzPBUf
-----END CERTIFICATE-----`
  const mcpKey = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgvFb2fEFPxjPCiW5+
E5rgmdWeFCbnTcL+/D4/CbyWB8qhRANCAAS29slDGlzrI9ifcs5iQ8p42QgCkSE/
oKUrvQpgs28gYOS2cA2IQyUavxC1Gg7CXoo6eliADiE7uvRQpqt0iwIu
-----END PRIVATE KEY-----`
  const otherCertificate = `-----BEGIN CERTIFICATE-----
MIIBqzCCAVCgAwIBAgICEAIwCgYIKoZIzj0EAwIwGTEXMBUGA1UEAwwOUm91dGVy
IHRlc3QgQ0EwIBcNMjAwMTAxMDAwMDAwWhgPMjEyMDAxMDEwMDAwMDBaMB0xGzAZ
BgNVBAMMEm90aGVyLmV4YW1wbGUudGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABKbw+3vl8y7JN4VjE6AnExxseYQqr7bMJq43MacZLo+2/YJhLh8e8iHHCXDc
pj8uzhHTLEyPMemCAbrH32BvGWmjgYEwfzAJBgNVHRMEAjAAMBMGA1UdJQQMMAoG
CCsGAQUFBwMBMB0GA1UdEQQWMBSCEm90aGVyLmV4YW1wbGUudGVzdDAdBgNVHQ4E
FgQUC7hAK+pmZhXluAd58MM/tu2QHj4wHwYDVR0jBBgwFoAUWf6W3XLuKqb6ad+n
ojLKAqdbHX0wCgYIKoZIzj0EAwIDSQAwRgIhAO2EFbZJifiUwSIYB/nDU1Fl5oxB
GJDEb8NdApItAMM6AiEA/YlLnu3gxYR0UfBohiwKRRkgfu0XzIBzj+fciT3z9Lg=
-----END CERTIFICATE-----`
  const otherKey = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/CuP75C3ZszhoTdl
EV/4JJceOer+BWmBB/zX0d8WbV2hRANCAASm8Pt75fMuyTeFYxOgJxMcbHmEKq+2
zCauNzGnGS6Ptv2CYS4fHvIhxwlw3KY/Ls4R0yxMjzHpggG6x99gbxlp
-----END PRIVATE KEY-----`
  let server: ReturnType<typeof Bun.serve>

  beforeAll(() => {
    server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: [
        { cert: otherCertificate, key: otherKey, serverName: 'other.example.test' },
        { cert: mcpCertificate, key: mcpKey, serverName: 'mcp.example.test' },
      ],
      fetch: (request) => Response.json({ host: request.headers.get('host'), path: new URL(request.url).pathname }),
    })
  })
  afterAll(() => server.stop(true))

  const pointAt = (name: string) => resolverOf({ [name]: ['127.0.0.1'] })

  test('connects to the checked address with the name as Host and SNI, and verifies the certificate for the name', async () => {
    // allowPrivate: the test server is on loopback.
    const target = await resolveOutboundTarget(`https://mcp.example.test:${server.port}/mcp`, true, 'MCP server', pointAt('mcp.example.test'))
    expect(target.address).toBe('127.0.0.1')
    const response = await fetchOutboundTarget(target, { tls: { ca: testCa } })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ host: `mcp.example.test:${server.port}`, path: '/mcp' })

    // SNI picks the certificate: the default one would not verify for this name.
    const other = await resolveOutboundTarget(`https://other.example.test:${server.port}/hook`, true, 'Webhook', pointAt('other.example.test'))
    expect(await (await fetchOutboundTarget(other, { tls: { ca: testCa } })).json()).toEqual({ host: `other.example.test:${server.port}`, path: '/hook' })
  })

  test('a certificate for another name is refused, reusing no pooled connection', async () => {
    const good = await resolveOutboundTarget(`https://mcp.example.test:${server.port}/`, true, 'MCP server', pointAt('mcp.example.test'))
    expect((await fetchOutboundTarget(good, { tls: { ca: testCa } })).status).toBe(200)
    const wrongName = await resolveOutboundTarget(`https://evil.example.test:${server.port}/`, true, 'MCP server', pointAt('evil.example.test'))
    await expect(fetchOutboundTarget(wrongName, { tls: { ca: testCa } })).rejects.toThrow(/ALTNAME|certificate/i)
  })

  test('without serverName, plain fetch to the address checks the certificate against the address and fails', async () => {
    await expect(fetch(`https://127.0.0.1:${server.port}/`, { headers: { host: 'mcp.example.test' }, tls: { ca: testCa } })).rejects.toThrow(/ALTNAME|certificate/i)
  })
})
