/**
 * The buffered-answer check of the relayed chat path (src/dialects/reply-shape.ts scanReply): a 2xx
 * body is accepted only when it is a whole JSON object of the expected kind, judged without parsing.
 * Whatever JSON.parse accepts as a chat completion, the scan accepts; every cut-short prefix, an HTML
 * page, a bare word, trailing bytes and the wrong kind are refused.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readReply, scanReply, UnusableReply, type ReplyKind } from '../../src/dialects/reply-shape'

const fixtures = join(import.meta.dir, '..', 'fixtures')
const recorded = join(import.meta.dir, '..', '..', '..', 'shared', 'fixtures', 'upstream', 'openai-chat')
const bytesOf = (text: string) => new TextEncoder().encode(text).buffer as ArrayBuffer

function refusal(kind: ReplyKind, text: string): string | undefined {
  try {
    scanReply(kind, bytesOf(text))
    return undefined
  } catch (error) {
    expect(error).toBeInstanceOf(UnusableReply)
    return (error as Error).message
  }
}

const chatBodies = [
  readFileSync(join(fixtures, 'chat', 'text.upstream.json'), 'utf8'),
  readFileSync(join(fixtures, 'chat', 'tool-calls.upstream.json'), 'utf8'),
  readFileSync(join(fixtures, 'chat', 'reasoning.upstream.json'), 'utf8'),
  JSON.stringify({ id: 'c', choices: [{ message: { content: 'quotes \\" and \\\\ and "nested" {braces} [brackets], colons: commas,' } }], usage: { prompt_tokens: 1e3, completion_tokens: -0.5e-2 } }),
  JSON.stringify({ choices: [], note: 'ünïcødé 🦊 \u2028 \u0000', flags: [true, false, null] }),
  ...(existsSync(recorded) ? readdirSync(recorded).filter((file) => file.startsWith('chat-completion')).map((file) => readFileSync(join(recorded, file), 'utf8')) : []),
]

describe('scanReply', () => {
  test('every chat completion JSON.parse accepts is accepted, with any whitespace around it', () => {
    for (const body of chatBodies) {
      expect(() => readReply('chat', bytesOf(body))).not.toThrow()
      expect(refusal('chat', body)).toBeUndefined()
      expect(refusal('chat', `\n  ${body}\r\n`)).toBeUndefined()
    }
  })

  test('every cut-short prefix of a body is refused', () => {
    for (const body of chatBodies) {
      const trimmed = body.trimEnd()
      for (let cut = 0; cut < trimmed.length; cut++) expect(refusal('chat', trimmed.slice(0, cut))).toBeString()
    }
  })

  test('a page, a bare word, trailing bytes, an array and an empty body are refused as not JSON or not an object', () => {
    const notJson = 'the body is not JSON (cut short, malformed or a page)'
    expect(refusal('chat', '<!doctype html><html><body>Bad gateway</body></html>')).toBe(notJson)
    expect(refusal('chat', '{"id": "x", "choices": [ {"message": oops } ]}')).toBe(notJson)
    expect(refusal('chat', '{"choices": [nul]}')).toBe(notJson)
    expect(refusal('chat', '{"choices": []} trailing')).toBe(notJson)
    expect(refusal('chat', '{"choices": []}}')).toBe(notJson)
    expect(refusal('chat', '[{"choices": []}]')).toBe('the body is not a JSON object (a chat completion was expected)')
    expect(refusal('chat', '')).toBe('the body is empty')
    expect(refusal('chat', '  \n')).toBe('the body is empty')
  })

  test('the kind is the list field at the top level: not nested, not a string, not another kind', () => {
    expect(refusal('chat', '{"error": {"message": "quota", "choices": []}}')).toBe('the body is not a chat completion: it has no `choices` array')
    expect(refusal('chat', '{"choices": "none"}')).toBe('the body is not a chat completion: it has no `choices` array')
    expect(refusal('chat', '{"note": "\\"choices\\": [", "x": 1}')).toBe('the body is not a chat completion: it has no `choices` array')
    expect(refusal('embeddings', '{"choices": []}')).toBe('the body is not an embeddings list: it has no `data` array')
    expect(refusal('embeddings', '{"object": "list", "data": [{"embedding": [0.1, -2e-3]}], "usage": {"prompt_tokens": 2}}')).toBeUndefined()
    expect(refusal('response', '{"id": "resp_1", "output": [], "status": "completed"}')).toBeUndefined()
  })
})
