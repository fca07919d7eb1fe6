/**
 * The messages and content shapes: POST /messages, POST /messages/count_tokens and
 * POST /models/{model}:generateContent, each translated to chat and routed exactly like chat.
 */
import { RouterError } from '../errors/router-error'
import { messagesToChat, validateMessagesBody } from '../dialects/messages/convert-request'
import { writeMessage } from '../dialects/messages/convert-response'
import { encodeMessagesStream } from '../dialects/messages/encode-stream'
import { estimateInputTokens } from '../dialects/messages/count-tokens'
import { contentToChat, validateContentBody } from '../dialects/content/convert-request'
import { writeGenerateContentResponse } from '../dialects/content/convert-response'
import { finishWith } from './finish'
import type { EndpointHandler } from './types'
import { applySteering, requireModel } from './prepare-chat'
import { readJsonBody } from './read-body'
import { runRoutedCall, sameBody } from './routed-call'
import { answerTranslated } from './translated-call'

function steeringOf(context: Parameters<EndpointHandler>[0]) {
  return context.key!.steeringMessage ?? context.workspace?.steeringMessage
}

export const handleMessages: EndpointHandler = async (context, request, _route, deps) => {
  const { text, value } = await readJsonBody(request)
  const body = validateMessagesBody(value)
  context.requestBody = text
  context.model = body.model
  context.stream = body.stream === true
  const chat = applySteering(messagesToChat(body), steeringOf(context))
  context.mark('body')
  const result = await runRoutedCall(context, deps, {
    operation: 'chat',
    requestFor: sameBody('/chat/completions', chat),
    model: body.model,
    stream: context.stream,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
  })
  const stopSequences = body.stop_sequences as string[] | undefined
  return answerTranslated(context, deps, result, {
    buffered: (reply) => writeMessage(reply, body.model, stopSequences),
    encode: () => encodeMessagesStream(body.model, stopSequences),
  })
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

export const handleGenerateContent: EndpointHandler = async (context, request, route, deps) => {
  const model = requireModel((route.parameter ?? '').replace(/^models\//, ''), 'The model in the path')
  const { text, value } = await readJsonBody(request)
  const body = validateContentBody(value)
  context.requestBody = text
  context.model = model
  const chat = applySteering(contentToChat(body, model), steeringOf(context))
  context.mark('body')
  const result = await runRoutedCall(context, deps, {
    operation: 'chat',
    requestFor: sameBody('/chat/completions', chat),
    model,
    stream: false,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
  })
  return answerTranslated(context, deps, result, {
    buffered: (reply) => writeGenerateContentResponse(reply, model),
    encode: () => {
      throw new RouterError('stream_unsupported')
    },
  })
}

export const handleStreamGenerateContent: EndpointHandler = async () => {
  throw new RouterError('stream_unsupported', 'Streaming is not supported: use :generateContent.')
}
