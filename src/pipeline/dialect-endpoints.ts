/**
 * The client dialects that pivot on chat (pipeline/answer.ts runs them): POST /chat/completions
 * (its own dialect: bytes pass through), POST /messages and POST /models/{model}:generateContent
 * (translated to chat and back); and POST /messages/count_tokens, which routes nothing.
 */
import { RouterError } from '../errors/router-error'
import { messagesToChat, validateMessagesBody } from '../dialects/messages/convert-request'
import { writeMessage } from '../dialects/messages/convert-response'
import { encodeMessagesStream } from '../dialects/messages/encode-stream'
import { estimateInputTokens } from '../dialects/messages/count-tokens'
import { contentToChat, validateContentBody } from '../dialects/content/convert-request'
import { writeGenerateContentResponse } from '../dialects/content/convert-response'
import { writeChatCompletion } from '../dialects/chat/convert-response'
import { encodeChatStream } from '../dialects/chat/encode-stream'
import { finishWith } from './finish'
import type { EndpointHandler } from './types'
import type { RequestContext } from './context'
import { applySteering, requireModel, siblingsOf, stripRouterFields, validateChatBody } from './prepare-chat'
import { parseJsonBody, readBodyBytes, readJsonBody } from './read-body'
import { passChatThrough, relayUpstreamError, upstreamCall } from './routed-call'
import { reenvelopedError, type ClientDialect, type ParsedRequest } from './answer'

function steeringOf(context: RequestContext) {
  return context.key!.steeringMessage ?? context.workspace?.steeringMessage
}

interface ChatRequest extends ParsedRequest {
  /** The client's bytes, when they can go upstream unchanged (nothing added or removed). */
  raw: Uint8Array<ArrayBuffer> | undefined
}

export const chatDialect: ClientDialect<ChatRequest> = {
  name: 'chat',
  async parse(context, request) {
    const { bytes, text, value } = parseJsonBody(await readBodyBytes(request))
    const body = validateChatBody(value)
    context.requestBody = text
    context.model = body.model
    context.stream = body.stream === true
    const prepared = applySteering(stripRouterFields(body), steeringOf(context))
    return { model: body.model, stream: context.stream, operation: 'chat', upstreamBody: prepared, raw: prepared === body ? bytes : undefined, siblings: siblingsOf(body) }
  },
  toUpstream: (step, parsed) => upstreamCall('/chat/completions', step, parsed.upstreamBody, parsed.raw),
  relaysReply: true,
  errorEnvelope: (context, deps, result) => relayUpstreamError(context, deps, result),
  // The responses-only gateway kind answers chat too (gateways/responses-only.ts): always the client's dialect.
  // A relayed chat stream is passed on record by record as checked: it has no place to hold its last
  // chunk for attached fields, so such a stream is decoded and encoded instead (undefined).
  passThrough: (context, deps, result, _parsed, _hidden, extras, attach) => (attach ? undefined : passChatThrough(context, deps, result, extras)),
  writeReply: (_context, _deps, reply) => writeChatCompletion(reply),
  encodeStream: (context, _deps, parsed) => encodeChatStream({ id: `chatcmpl-${context.requestId}`, model: parsed.model }),
}

interface MessagesRequest extends ParsedRequest {
  stopSequences: string[] | undefined
}

export const messagesDialect: ClientDialect<MessagesRequest> = {
  name: 'messages',
  async parse(context, request) {
    const { text, value } = await readJsonBody(request)
    const body = validateMessagesBody(value)
    context.requestBody = text
    context.model = body.model
    context.stream = body.stream === true
    const chat = applySteering(messagesToChat(body), steeringOf(context))
    return { model: body.model, stream: context.stream, operation: 'chat', upstreamBody: chat, stopSequences: body.stop_sequences as string[] | undefined, siblings: siblingsOf(body) }
  },
  toUpstream: (step, parsed) => upstreamCall('/chat/completions', step, parsed.upstreamBody),
  relaysReply: false,
  errorEnvelope: (context, deps, result) => reenvelopedError(context, deps, result),
  writeReply: (_context, _deps, reply, parsed) => writeMessage(reply, parsed.model, parsed.stopSequences),
  encodeStream: (_context, _deps, parsed) => encodeMessagesStream(parsed.model, parsed.stopSequences),
}

export const contentDialect: ClientDialect = {
  name: 'content',
  async parse(context, request, route) {
    const model = requireModel((route.parameter ?? '').replace(/^models\//, ''), 'The model in the path')
    const { text, value } = await readJsonBody(request)
    const body = validateContentBody(value)
    context.requestBody = text
    context.model = model
    const chat = applySteering(contentToChat(body, model), steeringOf(context))
    return { model, stream: false, operation: 'chat', upstreamBody: chat, siblings: siblingsOf(body) }
  },
  toUpstream: (step, parsed) => upstreamCall('/chat/completions', step, parsed.upstreamBody),
  relaysReply: false,
  errorEnvelope: (context, deps, result) => reenvelopedError(context, deps, result),
  writeReply: (_context, _deps, reply, parsed) => writeGenerateContentResponse(reply, parsed.model),
  // The content shape has no streaming (SPEC): :streamGenerateContent is refused before any call.
  encodeStream: () => {
    throw new RouterError('stream_unsupported')
  },
}

export const handleCountTokens: EndpointHandler = async (context, request, _route, deps) => {
  const { value } = await readJsonBody(request)
  const body = validateMessagesBody(value)
  context.model = body.model
  context.headers['x-router-count-tokens'] = 'estimate'
  context.headers['content-type'] = 'application/json'
  const inputTokens = estimateInputTokens(body, steeringOf(context))
  return finishWith(context, deps, new Response(JSON.stringify({ input_tokens: inputTokens }), { status: 200, headers: context.responseHeaders() }))
}

export const handleStreamGenerateContent: EndpointHandler = async () => {
  throw new RouterError('stream_unsupported', 'Streaming is not supported: use :generateContent.')
}
