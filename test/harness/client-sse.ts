/**
 * Reading the router's SSE output as a client does, and the Responses stream grammar (SPEC
 * "POST /responses": one response.created, one terminal event, continuous sequence_number and
 * output_index, every opened item closed).
 */
import { expect } from 'bun:test'

export interface ClientEvent {
  event?: string
  data: any
}

/** Parses our encoders' output strictly: records `[event: X\n]data: Y\n\n`, nothing else. */
export function parseClientSse(text: string): ClientEvent[] {
  expect(text.endsWith('\n\n') || text === '').toBe(true)
  const records = text.split('\n\n')
  expect(records.pop()).toBe('')
  return records.map((record) => {
    const lines = record.split('\n')
    let event: string | undefined
    if (lines[0]!.startsWith('event: ')) event = lines.shift()!.slice('event: '.length)
    expect(lines).toHaveLength(1)
    expect(lines[0]!.startsWith('data: ')).toBe(true)
    const payload = lines[0]!.slice('data: '.length)
    return { ...(event !== undefined ? { event } : {}), data: payload === '[DONE]' ? '[DONE]' : JSON.parse(payload) }
  })
}

const terminalTypes = ['response.completed', 'response.incomplete', 'response.failed']

/**
 * The Responses stream grammar, event by event: exactly one terminal event, last; a mid-stream
 * failure is an `error` event right before the terminal `response.failed`, as the real API sends it.
 */
export function expectResponsesGrammar(events: ClientEvent[]) {
  const types = events.map((event) => event.data.type as string)
  for (const event of events) expect(event.event).toBe(event.data.type)
  expect(types[0]).toBe('response.created')
  expect(types.filter((type) => type === 'response.created')).toHaveLength(1)
  expect(types.filter((type) => terminalTypes.includes(type))).toHaveLength(1)
  expect(terminalTypes).toContain(types.at(-1)!)
  const errorAt = types.indexOf('error')
  if (errorAt !== -1) {
    expect(types.filter((type) => type === 'error')).toHaveLength(1)
    expect(types.slice(errorAt + 1)).toEqual(['response.failed'])
    expect(events[errorAt]!.data.error).toEqual({ type: expect.any(String), code: expect.any(String), message: expect.any(String), param: null })
    expect(events.at(-1)!.data.response.error).toEqual({ code: events[errorAt]!.data.error.code, message: events[errorAt]!.data.error.message })
  }
  expect(events.map((event) => event.data.sequence_number)).toEqual(events.map((_, index) => index))
  let open = -1
  const openItems = new Set<number>()
  for (const { data } of events) {
    if (data.type === 'response.output_item.added') {
      expect(data.output_index).toBe(open + 1)
      open = data.output_index
      openItems.add(open)
    } else if (typeof data.output_index === 'number') {
      expect(data.output_index).toBe(open)
      if (data.type === 'response.output_item.done') openItems.delete(open)
    }
  }
  const terminal = events.at(-1)!.data
  // A failed response may end with an item unfinished; it is in the output, marked incomplete.
  if (terminal.type !== 'response.failed') expect([...openItems]).toEqual([])
  else for (const index of openItems) expect(terminal.response.output[index]?.status ?? 'incomplete').toBe('incomplete')
  expect(terminal.response.output.length).toBe(open + 1)
}
