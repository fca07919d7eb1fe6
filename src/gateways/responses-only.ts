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

export async function chatViaResponses(
  send: (suffix: string, body: Record<string, unknown>) => Promise<Response>,
  chatBody: Record<string, unknown>,
): Promise<Response> {
  const upstream = await send('/responses', chatToResponses(chatBody))
  if (!upstream.ok) return upstream
  const model = String(chatBody.model ?? '')
  if (chatBody.stream === true && upstream.body) {
    const body = breakSafe(upstream.body)
      .pipeThrough(decodeResponsesStream())
      .pipeThrough(encodeChatStream({ id: `chatcmpl-${crypto.randomUUID()}`, model }))
    return new Response(body, { status: upstream.status, headers: withContentType(upstream.headers, 'text/event-stream') })
  }
  let converted: unknown
  try {
    const result = readResponseObject(await upstream.json())
    converted = writeChatCompletion({ ...result, id: result.id ? `chatcmpl-${result.id}` : `chatcmpl-${crypto.randomUUID()}`, model: result.model || model })
  } catch (error) {
    if (error instanceof UntranslatableReply || error instanceof SyntaxError) {
      return new Response(JSON.stringify({ error: { message: `The gateway reply could not be translated: ${error.message}`, type: 'api_error' } }), {
        status: 502,
        headers: { 'content-type': 'application/json' },
      })
    }
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
