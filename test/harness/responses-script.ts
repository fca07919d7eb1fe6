/**
 * Scripted Responses answers for the mock gateway (the native Responses path, where the router
 * sends the body upstream to `…/responses`): one turn (text and/or function calls) as a Response
 * object, or, when the request streams, as the real API's SSE events (`event:` and `data:` lines,
 * sequence numbers, the item lifecycle), shaped like ../shared/fixtures/upstream/openai-responses.
 */
import type { MockGateway, MockReply, RecordedRequest } from './mock-gateway'

export interface ResponsesTurn {
  text?: string
  calls?: { id: string; name: string; args: Record<string, unknown> }[]
  usage: { input: number; output: number }
}

/** Splits a string into two pieces (so streams carry fragments). */
const halves = (text: string): string[] => (text.length < 2 ? [text] : [text.slice(0, Math.ceil(text.length / 2)), text.slice(Math.ceil(text.length / 2))])

/** A turn as a Response object; `tag` names its ids (`resp_up_<tag>`, `msg_<tag>`, `fc_<tag>_<n>`). */
export function responseObject(body: any, turn: ResponsesTurn, tag = 'script') {
  const output: any[] = []
  if (turn.text) output.push({ id: `msg_${tag}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: turn.text, annotations: [] }] })
  turn.calls?.forEach((call, index) =>
    output.push({ id: `fc_${tag}_${index}`, type: 'function_call', status: 'completed', call_id: call.id, name: call.name, arguments: JSON.stringify(call.args) }),
  )
  return {
    id: `resp_up_${tag}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    error: null,
    incomplete_details: null,
    model: String(body?.model ?? 'unknown'),
    output,
    usage: {
      input_tokens: turn.usage.input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: turn.usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: turn.usage.input + turn.usage.output,
    },
  }
}

export function responseEvents(body: any, turn: ResponsesTurn, tag = 'script'): Record<string, unknown>[] {
  const final = responseObject(body, turn, tag)
  const pending = { ...final, status: 'in_progress', output: [], usage: null }
  const events: Record<string, unknown>[] = [
    { type: 'response.created', response: pending },
    { type: 'response.in_progress', response: pending },
  ]
  final.output.forEach((item: any, outputIndex: number) => {
    if (item.type === 'message') {
      const text: string = item.content[0].text
      events.push({ type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', content: [] } })
      events.push({ type: 'response.content_part.added', item_id: item.id, output_index: outputIndex, content_index: 0, part: { type: 'output_text', annotations: [], text: '' } })
      for (const delta of halves(text)) events.push({ type: 'response.output_text.delta', item_id: item.id, output_index: outputIndex, content_index: 0, delta, logprobs: [] })
      events.push({ type: 'response.output_text.done', item_id: item.id, output_index: outputIndex, content_index: 0, text })
      events.push({ type: 'response.content_part.done', item_id: item.id, output_index: outputIndex, content_index: 0, part: { type: 'output_text', annotations: [], text } })
      events.push({ type: 'response.output_item.done', output_index: outputIndex, item })
    } else {
      events.push({ type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } })
      for (const delta of halves(item.arguments)) events.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: outputIndex, delta })
      events.push({ type: 'response.function_call_arguments.done', item_id: item.id, output_index: outputIndex, arguments: item.arguments })
      events.push({ type: 'response.output_item.done', output_index: outputIndex, item })
    }
  })
  events.push({ type: 'response.completed', response: final })
  return events.map((event, index) => ({ ...event, sequence_number: index }))
}

/** One turn, buffered or streamed as the request asks. */
export function responsesTurn(request: RecordedRequest, turn: ResponsesTurn, tag?: string): MockReply | Response {
  if (!request.body?.stream) return { json: responseObject(request.body, turn, tag) }
  return responsesSse(responseEvents(request.body, turn, tag))
}

/** Responses SSE as the real API writes it: `event:` and `data:` lines. */
export function responsesSse(events: Record<string, unknown>[]): Response {
  const text = events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join('')
  return new Response(text, { headers: { 'content-type': 'text/event-stream' } })
}

/** Answers POST …/responses with `answer`; anything else gets the mock's defaults. */
export function scriptResponses(mock: MockGateway, answer: (request: RecordedRequest) => MockReply | Response) {
  mock.handle((request) => (request.path.endsWith('/responses') ? answer(request) : undefined))
}

/** `function_call_output` items of a Responses body's input. */
export const functionCallOutputs = (body: any): any[] => (Array.isArray(body?.input) ? body.input.filter((item: any) => item?.type === 'function_call_output') : [])

/** A tool loop: `first` until a `function_call_output` comes back in the input, then `final`. */
export function responsesToolLoop(first: ResponsesTurn, final: ResponsesTurn) {
  return (request: RecordedRequest) => (functionCallOutputs(request.body).length > 0 ? responsesTurn(request, final, 'final') : responsesTurn(request, first, 'first'))
}
