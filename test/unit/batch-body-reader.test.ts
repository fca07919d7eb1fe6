/**
 * The streaming batch-submit reader (src/batch/body-reader.ts): whatever the chunking, the same head
 * and items come out, each exactly as JSON.parse reads it; field order and JSON faults are found as
 * the bytes arrive, including across chunk boundaries.
 */
import { describe, expect, test } from 'bun:test'
import { BatchBodyReader } from '../../src/batch/body-reader'
import { RouterError } from '../../src/errors/router-error'

const encoder = new TextEncoder()
const body = JSON.stringify({
  endpoint: '/v1/chat/completions',
  model: 'openai/gpt-4o-mini',
  provider: { only: ['openai'] },
  completion_window: '24h',
  requests: [
    { custom_id: 'a', body: { messages: [{ role: 'user', content: 'quotes \\" \\\\ "nested" {braces} [brackets], colons: ünïcødé 🦊' }], temperature: 0.5, n: 1, stop: null, stream: false } },
    { custom_id: 'b', body: { messages: [], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }] } },
    { custom_id: 'c\\u0041', body: { input: [1, -2.5e3, true, false, null] } },
  ],
})

function readAll(text: string, sizes: (index: number) => number) {
  const bytes = encoder.encode(text)
  const reader = new BatchBodyReader()
  let head: unknown
  const items: unknown[] = []
  for (let offset = 0, index = 0; offset < bytes.byteLength; index++) {
    const size = Math.max(1, sizes(index))
    const events = reader.feed(bytes.slice(offset, offset + size))
    if (events.head) head = events.head
    for (const item of events.items) {
      expect(JSON.parse(new TextDecoder().decode(item.raw))).toEqual(item.value)
      items.push(item.value)
    }
    offset += size
  }
  reader.finish()
  return { head, items }
}

function refusal(text: string, chunk = 7): string {
  try {
    readAll(text, () => chunk)
  } catch (error) {
    expect(error).toBeInstanceOf(RouterError)
    return (error as RouterError).code
  }
  return 'accepted'
}

describe('BatchBodyReader', () => {
  test('one byte at a time, in random chunks and whole: the same head and items as JSON.parse', () => {
    const parsed = JSON.parse(body)
    const { requests, ...head } = parsed
    for (const sizes of [() => 1, () => 1 + Math.floor(Math.random() * 40), () => body.length * 4]) {
      const result = readAll(body, sizes)
      expect(result.head).toEqual(head)
      expect(result.items).toEqual(requests)
    }
  })

  test('field order, empty requests, trailing fields, cut-short bodies and bad items are refused with their codes', () => {
    expect(refusal('{"requests":[{"custom_id":"a","body":{}}],"endpoint":"/v1/embeddings","model":"m"}')).toBe('invalid_batch_body')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[{"custom_id":"a","body":{}}],"model":"n"}')).toBe('invalid_batch_body')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","metadata":{},"requests":[]}')).toBe('invalid_batch_body')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","endpoint":"/v1/embeddings","requests":[]}')).toBe('invalid_json')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[ ]}')).toBe('empty_requests')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[{"custom_id":"a","body":{}}]} x')).toBe('invalid_json')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[{"custom_id":"a","body":{}}')).toBe('invalid_json')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[{"custom_id":"a","body":{"x":tru}}]}')).toBe('invalid_json')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[{"custom_id":"a"}]}')).toBe('invalid_request')
    expect(refusal('{"endpoint":"/v1/embeddings","model":"m","requests":[7]}')).toBe('invalid_batch_body')
    expect(refusal('')).toBe('invalid_json')
    for (let cut = 1; cut < body.length; cut += 13) expect(refusal(body.slice(0, cut), 5)).not.toBe('accepted')
  })
})
