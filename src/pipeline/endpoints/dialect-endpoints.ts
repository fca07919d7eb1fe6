/**
 * The client dialects that pivot on chat (pipeline/answer/answer.ts runs them): POST /chat/completions
 * and POST /embeddings (their own dialects: bytes pass through), POST /messages and POST
 * /models/{model}:generateContent (translated to chat and back); and POST /messages/count_tokens,
 * which routes nothing.
 */
import { RouterError } from '../../errors/router-error'
import { messagesToChat, validateMessagesBody } from '../../dialects/messages/convert-request'
import { writeMessage } from '../../dialects/messages/convert-response'
import { encodeMessagesStream } from '../../dialects/messages/encode-stream'
import { estimateInputTokens } from '../../dialects/messages/count-tokens'
import { contentToChat, validateContentBody } from '../../dialects/content/convert-request'
import { writeGenerateContentResponse } from '../../dialects/content/convert-response'
import { writeChatCompletion } from '../../dialects/chat/convert-response'
import { encodeChatStream } from '../../dialects/chat/encode-stream'
import { finishJson } from '../answer/finish'
import type { EndpointHandler } from '../types'
import type { AuthenticatedContext } from '../request/context'
import { applySteering, requireModel, siblingsOf, stripRouterFields, validateChatBody } from '../request/prepare-chat'
import { isObject, parseJsonBody, readBodyBytes, readJsonBody } from '../../http/read-body'
import { upstreamCall } from '../routing/routed-call'
import type { ClientDialect, ParsedRequest, StageSiblings } from '../answer/dialect'
import { reenvelopedError } from '../answer/relay'

/** The key's steering message, as its compiled pipeline resolved it (the key's, else its workspace's). */
const steeringOf = (context: AuthenticatedContext) => context.key.pipeline.steering

/** A chat request: its `raw` bytes are kept while they can go upstream unchanged (nothing added or removed). */
type ChatRequest = ParsedRequest

export const chatDialect: ClientDialect<ChatRequest> = {
  name: 'chat',
  replyKind: 'chat',
  relaysBytes: true,
  enriched: true,
  attachesToStream: false,
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
  // Reached for a reply in another kind (the responses-only gateway kind), or one the stages changed.
  writeReply: (_context, _deps, reply, _parsed, served) =>
    writeChatCompletion(served.replyKind === 'response' ? { ...reply, id: reply.id ? `chatcmpl-${reply.id}` : `chatcmpl-${crypto.randomUUID()}`, model: reply.model || served.step?.model || '' } : reply),
  encodeStream: (context, _deps, parsed) => encodeChatStream({ id: `chatcmpl-${context.requestId}`, model: parsed.model }, !context.hideUsageChunk),
}

const noSiblings: StageSiblings = Object.freeze({ adRequest: undefined, linkRequest: undefined })

interface EmbeddingsRequest extends ParsedRequest {
  raw: Uint8Array<ArrayBuffer>
}

/** POST /embeddings: routed like chat and relayed as the gateway's bytes; no stage acts on it. */
export const embeddingsDialect: ClientDialect<EmbeddingsRequest> = {
  name: 'embeddings',
  replyKind: 'embeddings',
  relaysBytes: true,
  enriched: false,
  attachesToStream: false,
  async parse(context, request) {
    const { bytes, text, value } = await readJsonBody(request)
    if (!isObject(value)) throw new RouterError('invalid_request', 'The request body must be a JSON object.')
    const model = requireModel(value.model)
    if (value.input === undefined || value.input === null) throw new RouterError('invalid_request', 'The request body needs `input`.')
    context.requestBody = text
    context.model = model
    return { model, stream: false, operation: 'embeddings', upstreamBody: value, raw: bytes, siblings: noSiblings }
  },
  toUpstream: (step, parsed) => upstreamCall('/embeddings', step, parsed.upstreamBody, parsed.raw),
}

interface MessagesRequest extends ParsedRequest {
  stopSequences: string[] | undefined
  /** A stream's prompt tokens as count_tokens estimates them, for its `message_start`. */
  inputEstimate: number
  /** `thinking.display: 'omitted'`: thinking blocks without their text. */
  omitThinking: boolean
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
    const inputEstimate = context.stream ? estimateInputTokens(body, steeringOf(context)) : 0
    const omitThinking = isObject(body.thinking) && body.thinking.display === 'omitted'
    return { model: body.model, stream: context.stream, operation: 'chat', upstreamBody: chat, stopSequences: body.stop_sequences as string[] | undefined, inputEstimate, omitThinking, siblings: siblingsOf(body) }
  },
  replyKind: undefined,
  relaysBytes: false,
  enriched: true,
  attachesToStream: false,
  toUpstream: (step, parsed) => upstreamCall('/chat/completions', step, parsed.upstreamBody),
  errorEnvelope: (context, deps, result) => reenvelopedError(context, deps, result),
  writeReply: (_context, _deps, reply, parsed) => writeMessage(reply, parsed.model, parsed.stopSequences, parsed.omitThinking),
  encodeStream: (_context, _deps, parsed) => encodeMessagesStream(parsed.model, parsed.stopSequences, undefined, parsed.inputEstimate, parsed.omitThinking),
}

interface ContentRequest extends ParsedRequest {
  /** `thinkingConfig.includeThoughts: false`: no thought parts in the answer. */
  hideThoughts: boolean
}

export const contentDialect: ClientDialect<ContentRequest> = {
  name: 'content',
  async parse(context, request, route) {
    const model = requireModel((route.parameter ?? '').replace(/^models\//, ''), 'The model in the path')
    const { text, value } = await readJsonBody(request)
    const body = validateContentBody(value)
    context.requestBody = text
    context.model = model
    const chat = applySteering(contentToChat(body, model), steeringOf(context))
    const hideThoughts = isObject(body.generationConfig) && isObject(body.generationConfig.thinkingConfig) && body.generationConfig.thinkingConfig.includeThoughts === false
    return { model, stream: false, operation: 'chat', upstreamBody: chat, hideThoughts, siblings: siblingsOf(body) }
  },
  replyKind: undefined,
  relaysBytes: false,
  enriched: true,
  attachesToStream: false,
  toUpstream: (step, parsed) => upstreamCall('/chat/completions', step, parsed.upstreamBody),
  errorEnvelope: (context, deps, result) => reenvelopedError(context, deps, result),
  writeReply: (_context, _deps, reply, parsed) => writeGenerateContentResponse(reply, parsed.model, parsed.hideThoughts),
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
  return finishJson(context, deps, 200, { input_tokens: estimateInputTokens(body, steeringOf(context)) })
}

export const handleStreamGenerateContent: EndpointHandler = async () => {
  throw new RouterError('stream_unsupported', 'Streaming is not supported: use :generateContent.')
}
