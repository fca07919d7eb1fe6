/** The presented key (SPEC "Authentication" 1): which header carries it and how `Bearer` is read (inference and management keys alike). */
import { describe, expect, test } from 'bun:test'
import { bearerToken } from '../../src/http/bearer-token'
import { presentedKey } from '../../src/pipeline/request/authenticate'

describe('bearerToken', () => {
  test('reads the token after the scheme, in any case, with surrounding blanks', () => {
    expect(bearerToken('Bearer rt_live_abc')).toBe('rt_live_abc')
    expect(bearerToken('bearer rt_live_abc')).toBe('rt_live_abc')
    expect(bearerToken('BEARER \t rt_live_abc \t')).toBe('rt_live_abc')
  })

  test('refuses a missing token, a missing separator, two tokens and other schemes', () => {
    for (const value of ['Bearer', 'Bearer ', 'Bearer   ', 'Bearerrt_live_abc', 'Bearer a b', 'Basic rt_live_abc', 'xBearer rt_live_abc', '', null, undefined]) {
      expect(bearerToken(value)).toBeUndefined()
    }
  })
})

describe('presentedKey', () => {
  test('a Bearer key wins; otherwise x-api-key, x-goog-api-key, x-content-api-key, then ?key=', () => {
    expect(presentedKey(new Headers({ authorization: 'Bearer a', 'x-api-key': 'b' }), 'q')).toBe('a')
    expect(presentedKey(new Headers({ authorization: 'Basic zzz', 'x-api-key': 'b' }), 'q')).toBe('b')
    expect(presentedKey(new Headers({ 'x-goog-api-key': 'c' }), 'q')).toBe('c')
    expect(presentedKey(new Headers({ 'x-content-api-key': 'd' }), 'q')).toBe('d')
    expect(presentedKey(new Headers(), 'q')).toBe('q')
    expect(presentedKey(new Headers(), null)).toBeUndefined()
  })
})
