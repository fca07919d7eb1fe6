/**
 * Reading inference bodies (SPEC "Limits", "Errors"): the byte count cut at the limit whatever the
 * framing, and the top-level duplicate-key scan, checked against hand-written cases and against
 * generated bodies whose duplicates are known by construction.
 */
import { describe, expect, test } from 'bun:test'
import { RouterError } from '../../src/errors/router-error'
import { parseJsonBody, readBodyBytes, readBodyWithin, repeatedTopLevelKey } from '../../src/http/read-body'

const encoder = new TextEncoder()

describe('repeatedTopLevelKey', () => {
  const cases: [string, string, string | undefined][] = [
    ['an empty object', '{}', undefined],
    ['an empty object with spaces', ' { \n\t} ', undefined],
    ['distinct keys', '{"model":"a","messages":[],"stream":true}', undefined],
    ['a top-level array', '[{"model":1},{"model":2}]', undefined],
    ['a top-level string', '"{\\"model\\":1,\\"model\\":2}"', undefined],
    ['a top-level number', '42', undefined],
    ['model twice', '{"model":"a","messages":[],"model":"b"}', 'model'],
    ['the second duplicate named first', '{"b":1,"a":1,"a":2,"b":2}', 'a'],
    ['whitespace everywhere', '\n{ "model" : "a" ,\r\n\t"model"\t:\n"b" }\n', 'model'],
    ['a key spelled in a string value is not a key', '{"a":"x\\"model\\":1","model":1}', undefined],
    ['an escaped quote then a real key', '{"a":"say \\"hi\\"","a":2}', 'a'],
    ['an even run of backslashes ends the string', '{"a":"x\\\\","model":1,"model":2}', 'model'],
    ['an odd run of backslashes escapes the quote', '{"a":"x\\\\\\",\\"model\\":1","model":2}', undefined],
    ['a key ending in a backslash', '{"a\\\\":1,"a\\\\":2}', 'a\\'],
    ['a key holding an escaped quote', '{"a\\"b":1,"a\\"b":2}', 'a"b'],
    ['nested objects repeat top-level names', '{"model":"a","messages":[{"role":"user","model":"b"}],"meta":{"model":{"model":1}}}', undefined],
    ['duplicates inside a nested object are not top-level', '{"meta":{"a":1,"a":2},"b":3}', undefined],
    ['brackets inside nested strings', '{"a":{"b":"}]{[\\"","c":["]","}"]},"a":1}', 'a'],
    ['a unicode escape spelling the same key', '{"model":"a","mod\\u0065l":"b"}', 'model'],
    ['escapes on both spellings', '{"\\u006dodel":"a","mo\\u0064el":"b"}', 'model'],
    ['an upper-case unicode escape', '{"model":"a","MODEL":1,"mod\\u0045l":2,"mod\\u0065l":3}', 'model'],
    ['an escaped solidus', '{"a/b":1,"a\\/b":2}', 'a/b'],
    ['a surrogate pair escape', '{"😀":1,"\\ud83d\\ude00":2}', '😀'],
    ['non-ASCII keys that differ', '{"é":1,"e\\u0301":2}', undefined],
    ['numbers, literals and exponents', '{"a":-1.5e+10,"b":true,"c":null,"d":0,"e":1E-3,"f":false,"a":false}', 'a'],
    ['__proto__ twice', '{"__proto__":1,"__proto__":2}', '__proto__'],
    ['the empty key twice', '{"":1,"":2}', ''],
    ['deeply nested arrays', `{"a":${'['.repeat(200)}${']'.repeat(200)},"b":1,"a":2}`, 'a'],
  ]
  for (const [label, text, expected] of cases) {
    test(label, () => {
      // Every case is JSON that JSON.parse accepts: the scanner runs after it.
      expect(() => JSON.parse(text)).not.toThrow()
      expect(repeatedTopLevelKey(text)).toBe(expected)
    })
  }

  test('never throws on text JSON.parse refuses: every prefix of a body, and junk', () => {
    const body = '{"model":"a\\"}{[","messages":[{"role":"user","content":"x\\\\"}],"mod\\u0065l":1}'
    expect(repeatedTopLevelKey(body)).toBe('model')
    for (let end = 0; end < body.length; end++) expect(() => repeatedTopLevelKey(body.slice(0, end))).not.toThrow()
    for (const junk of ['{', '{"', '{"a"', '{"a":', '{"a":1', '{"a":1,', '{"a":1,}', '{"a" 1}', '{a:1}', '{"a":}', '{"\\u00zz":1,"\\u00zz":2}', '{"a":1 "a":2}', '']) {
      expect(() => repeatedTopLevelKey(junk)).not.toThrow()
    }
  })

  test('agrees with generated bodies whose duplicates are known', () => {
    // A seeded generator, so a failure reproduces.
    let seed = 0x2545f491
    const random = () => {
      seed ^= seed << 13
      seed ^= seed >>> 17
      seed ^= seed << 5
      return (seed >>> 0) / 0x1_0000_0000
    }
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
    const names = ['model', 'messages', 'stream', 'a', 'a"b', 'back\\slash', 'ünï', '😀', '', 'x y']
    const awkward = ['"', '\\', '\\"', '{', '}', '[', ']', ':', ',', 'model', '\u0000', '\n', 'é']
    const spaces = ['', ' ', '\n', '\t ', '\r\n']
    const space = () => pick(spaces)
    /** A name as JSON text: as JSON.stringify writes it, or with some UTF-16 units as \u escapes. */
    const spell = (name: string): string => {
      if (random() < 0.4) return JSON.stringify(name)
      const units = name.split('').map((unit) => (random() < 0.5 ? `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}` : JSON.stringify(unit).slice(1, -1)))
      return `"${units.join('')}"`
    }
    const value = (depth: number): string => {
      const kind = depth > 3 ? Math.floor(random() * 3) : Math.floor(random() * 5)
      if (kind === 0) return JSON.stringify(Array.from({ length: Math.floor(random() * 4) }, () => pick(awkward)).join(''))
      if (kind === 1) return pick(['0', '-1.5e+3', 'true', 'false', 'null', '12'])
      if (kind === 2) return JSON.stringify(pick(awkward) + pick(names))
      if (kind === 3) return `[${space()}${Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1)).join(`${space()},${space()}`)}${space()}]`
      // A nested object, free to repeat its own names: only the top level counts.
      return `{${space()}${Array.from({ length: Math.floor(random() * 3) }, () => `${spell(pick(names))}${space()}:${space()}${value(depth + 1)}`).join(`${space()},`)}${space()}}`
    }
    for (let round = 0; round < 3000; round++) {
      const chosen = Array.from({ length: Math.floor(random() * 6) }, () => pick(names))
      const seen = new Set<string>()
      let expected: string | undefined
      for (const name of chosen) {
        if (expected === undefined && seen.has(name)) expected = name
        seen.add(name)
      }
      const text = `${space()}{${space()}${chosen.map((name) => `${spell(name)}${space()}:${space()}${value(0)}`).join(`${space()},${space()}`)}${space()}}${space()}`
      expect(() => JSON.parse(text)).not.toThrow()
      if (repeatedTopLevelKey(text) !== expected) throw new Error(`expected ${JSON.stringify(expected)} for ${text}`)
    }
  })
})

describe('parseJsonBody', () => {
  test('a duplicated top-level key is 400 invalid_json naming the key', () => {
    const bytes = encoder.encode('{"model":"cheap","messages":[{"role":"user","content":"hi"}],"model":"expensive"}')
    let caught: unknown
    try {
      parseJsonBody(bytes)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(RouterError)
    expect((caught as RouterError).code).toBe('invalid_json')
    expect((caught as RouterError).status).toBe(400)
    expect((caught as RouterError).message).toContain('`model`')
  })

  test('a body without duplicates parses, its bytes kept as sent', () => {
    const bytes = encoder.encode('{"model":"m","messages":[{"model":"nested is fine","model":"twice"}]}')
    const parsed = parseJsonBody(bytes)
    expect(parsed.bytes).toBe(bytes)
    expect(parsed.value).toEqual({ model: 'm', messages: [{ model: 'twice' }] })
  })

  test('a long repeated key is cut in the message', () => {
    const name = 'k'.repeat(5000)
    let message = ''
    try {
      parseJsonBody(encoder.encode(`{"${name}":1,"${name}":2}`))
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).toContain('k'.repeat(100))
    expect(message.length).toBeLessThan(300)
  })
})

describe('readBodyWithin / readBodyBytes', () => {
  /** A chunked body generated on the fly; `pulled()` says how many bytes the reader asked for. */
  function generated(totalBytes: number, chunkBytes = 64 * 1024) {
    let sent = 0
    let cancelled = false
    const chunk = new Uint8Array(chunkBytes).fill(0x20)
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= totalBytes) return controller.close()
        const size = Math.min(chunkBytes, totalBytes - sent)
        sent += size
        controller.enqueue(chunk.subarray(0, size))
      },
      cancel() {
        cancelled = true
      },
    })
    return { stream, pulled: () => sent, cancelled: () => cancelled }
  }

  const chunkedRequest = (stream: ReadableStream<Uint8Array>) => new Request('http://127.0.0.1/v1/chat/completions', { method: 'POST', body: stream, duplex: 'half' } as RequestInit)

  test('a chunked body within the limit is read whole, chunks joined in order', async () => {
    const parts = ['{"model":', '"m",', '"messages":[]}']
    let index = 0
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (index === parts.length) return controller.close()
        controller.enqueue(encoder.encode(parts[index++]!))
      },
    })
    const request = chunkedRequest(stream)
    expect(request.headers.get('content-length')).toBeNull()
    const bytes = await readBodyWithin(request, 1024)
    expect(new TextDecoder().decode(bytes)).toBe(parts.join(''))
  })

  test('a chunked body is cut at the first byte over the limit and the rest cancelled', async () => {
    const limit = 1024 * 1024
    const body = generated(100 * 1024 * 1024)
    expect(await readBodyWithin(chunkedRequest(body.stream), limit)).toBeUndefined()
    expect(body.pulled()).toBeLessThan(limit + 4 * 64 * 1024)
    await Bun.sleep(0)
    expect(body.cancelled()).toBe(true)
  })

  test('exactly the limit is accepted, one byte more is refused', async () => {
    expect((await readBodyWithin(chunkedRequest(generated(1000, 100).stream), 1000))?.byteLength).toBe(1000)
    expect(await readBodyWithin(chunkedRequest(generated(1001, 100).stream), 1000)).toBeUndefined()
  })

  test('a declared length over the limit is refused without reading', async () => {
    const body = generated(10 * 1024 * 1024)
    const request = new Request('http://127.0.0.1/v1/chat/completions', { method: 'POST', body: body.stream, duplex: 'half', headers: { 'content-length': String(10 * 1024 * 1024) } } as RequestInit)
    expect(await readBodyWithin(request, 1024)).toBeUndefined()
    // A stream fills its queue (one chunk) when it is made; nothing more is asked for.
    expect(body.pulled()).toBeLessThanOrEqual(64 * 1024)
  })

  test('no body reads as empty; readBodyBytes turns over-limit into 413 request_too_large', async () => {
    expect((await readBodyWithin(new Request('http://127.0.0.1/', { method: 'POST' }), 10))?.byteLength).toBe(0)
    const refused = await readBodyBytes(chunkedRequest(generated(2048).stream), 1024).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(RouterError)
    expect((refused as RouterError).code).toBe('request_too_large')
    expect((refused as RouterError).status).toBe(413)
  })
})
