/**
 * The adapter of the gateway kind that serves only the Responses endpoint (SPEC "POST
 * /chat/completions"): a chat request is sent as a Responses request, and the answer comes back as
 * a chat completion or a chat SSE stream (with `[DONE]`), so routing above never sees the difference.
 */
import { chatToResponses } from '../dialects/responses/convert-request'
import { readResponseObject } from '../dialects/responses/convert-response'
import { decodeResponsesStream } from '../dialects/responses/decode-stream'
import { writeChatCompletion } from '../dialects/chat/convert-response'
import { encodeChatStream } from '../dialects/chat/encode-stream'
import { breakSafe } from '../dialects/stream-parts'
import { UntranslatableReply } from '../dialects/assistant-result'
import { checkReply, UnusableReply } from '../dialects/reply-shape'
import { startUpstreamBody, type StreamIdleWatch } from '../dialects/upstream-body'

/**
 * Sends a chat request as a Responses request and answers as chat. An upstream answer that cannot
 * be used (not a Response, not an event stream, a first event that is not JSON) throws
 * UnusableReply, so the attempt fails over like any unusable 2xx; the stream's raw bytes stamp the
 * idle watch (the translation may sit on bytes that make no chat chunk, such as keep-alives).
 */
export async function chatViaResponses(
  send: (suffix: string, body: Record<string, unknown>) => Promise<Response>,
  chatBody: Record<string, unknown>,
  watch: StreamIdleWatch | undefined,
): Promise<Response> {
  const upstream = await send('/responses', chatToResponses(chatBody))
  if (!upstream.ok) return upstream
  const model = String(chatBody.model ?? '')
  if (chatBody.stream === true) {
    const started = await startUpstreamBody(upstream, watch)
    if (typeof started === 'string') throw new UnusableReply(started)
    const body = breakSafe(started)
      .pipeThrough(decodeResponsesStream())
      .pipeThrough(encodeChatStream({ id: `chatcmpl-${crypto.randomUUID()}`, model }))
    return new Response(body, { status: upstream.status, headers: withContentType(upstream.headers, 'text/event-stream') })
  }
  const text = await upstream.text()
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new UnusableReply(text === '' ? 'the body is empty' : 'the body is not JSON (cut short, malformed or a page)')
  }
  checkReply('response', value)
  let converted: unknown
  try {
    const result = readResponseObject(value)
    converted = writeChatCompletion({ ...result, id: result.id ? `chatcmpl-${result.id}` : `chatcmpl-${crypto.randomUUID()}`, model: result.model || model })
  } catch (error) {
    if (error instanceof UntranslatableReply) throw new UnusableReply(`the reply could not be translated: ${error.message}`)
    throw error
  }
  return new Response(JSON.stringify(converted), { status: upstream.status, headers: withContentType(upstream.headers, 'application/json') })
}

function withContentType(headers: Headers, contentType: string): Headers {
  const copy = new Headers()
  for (const [name, value] of headers) if (name.startsWith('x-ratelimit-') || name === 'retry-after') copy.set(name, value)
  copy.set('content-type', contentType)
  return copy
}
