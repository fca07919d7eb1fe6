/**
 * POST /responses and GET /responses/{id} on chat keys (SPEC "POST /responses"): native pass-through
 * where the gateway serves /responses (ids rewritten to `resp_rt_…`), translation to chat for the
 * kind that lacks it, chaining pinned to the provider that holds the state, and retrieval.
 */
import { RouterError } from '../errors/router-error'
import { responsesToChat } from '../dialects/responses/convert-request'
import { readResponseObject, writeResponseObject, type ResponseShell } from '../dialects/responses/convert-response'
import { encodeResponsesStream } from '../dialects/responses/encode-stream'
import { decodeSse, parseJson } from '../dialects/sse/decode'
import type { EventSourceMessage } from 'eventsource-parser'
import { sseEvent } from '../dialects/sse/encode'
import { breakSafe } from '../dialects/stream-parts'
import { upstreamHeaders, upstreamUrl } from '../gateways/upstream'
import type { ProviderEntry } from '../storage/snapshot'
import type { RequestContext } from './context'
import { failWith, finishWith, recordServingAttempt, trackStream } from './finish'
import { isObject, readJsonBody } from './read-body'
import { requireModel } from './prepare-chat'
import { setRoutingHeaders } from './respond'
import { issueResponseId, readResponseId, responseIdLifetimeMs, type ResponseIdClaims } from './response-ids'
import { answerChatDialect, runRoutedCall } from './routed-call'
import type { RunResult } from './run-attempts'
import { answerTranslated } from './translated-call'
import type { EndpointHandler, InferenceDeps } from './types'
import type { PlannedAttempt } from './plan-route'

type Json = Record<string, any>

const isNative = (provider: ProviderEntry) => provider.gateway.capabilities.responses !== 'translated'

/** Checks a chained id against the key (SPEC "Responses-chaining codes"); returns the pinned provider. */
function resolveChain(context: RequestContext, deps: InferenceDeps, id: unknown, purpose: 'chain' | 'retrieve'): { claims: ResponseIdClaims; provider: ProviderEntry } {
  const claims = readResponseId(id, deps.sign)
  if (!claims) throw new RouterError('invalid_previous_response_id', purpose === 'retrieve' ? 'This is not a response id this service issued.' : undefined)
  const key = context.key!
  if (claims.keyId !== key.id) throw new RouterError('response_chain_wrong_key')
  if (Date.now() - claims.createdAt * 1000 > responseIdLifetimeMs) throw new RouterError('response_chain_expired')
  const provider = (context.snapshot ?? deps.snapshots.current()).providers.get(claims.providerKeyId)
  const onKey = key.rule.targets.some((target) => target.providerKeyId === claims.providerKeyId)
  if (!provider || provider.disabled || !onKey) throw new RouterError('response_chain_target_unavailable')
  if (purpose === 'retrieve') {
    if (!provider.gateway.capabilities.retrieve || !claims.upstreamId) {
      throw new RouterError('responses_retrieve_unsupported', `The gateway ${provider.gateway.id} does not serve response retrieval.`)
    }
  } else if (!provider.gateway.capabilities.chain || !claims.upstreamId) {
    throw new RouterError('response_chain_unsupported_target', `The gateway ${provider.gateway.id} does not store responses; this response cannot be chained.`)
  }
  return { claims, provider }
}

function appendSteering(body: Json, steering: string | null | undefined): Json {
  if (!steering) return body
  const instructions = typeof body.instructions === 'string' && body.instructions ? `${body.instructions}\n\n${steering}` : steering
  return { ...body, instructions }
}

/** Rewrites the `id` of a Response object (and of `response` inside stream events). */
function rewriteResponse(value: Json, id: string): Json {
  return { ...value, id }
}

function nativeStream(context: RequestContext, deps: InferenceDeps, result: Extract<RunResult, { kind: 'success' }>, ourId: (upstreamId: string) => string): ReadableStream<Uint8Array> {
  const end = trackStream(context, deps)
  let terminal = false
  let sequence = 0
  let output!: TransformStreamDefaultController<Uint8Array>
  const onEvent = (event: EventSourceMessage) => {
    if (event.data === '[DONE]') return
    const data = parseJson(event.data) as Json | undefined
    if (!data || typeof data !== 'object') return
    if (typeof data.sequence_number === 'number') sequence = data.sequence_number + 1
    if (isObject(data.response) && typeof data.response.id === 'string') data.response = rewriteResponse(data.response, ourId(data.response.id))
    const type = String(data.type ?? event.event ?? 'message')
    if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed' || type === 'error') {
      terminal = true
      const usage = data.response?.usage
      if (usage) {
        context.inputTokens = usage.input_tokens
        context.outputTokens = usage.output_tokens
      }
    }
    output.enqueue(sseEvent(type, data))
  }
  const abortRecord = (message: string) => sseEvent('error', { type: 'error', sequence_number: sequence++, code: 'stream_aborted', message, param: null })
  return breakSafe(result.response.body!, () => {
    result.controller.abort('client-closed')
    end(499, 'client_closed')
  }).pipeThrough(
    decodeSse<Uint8Array>({
      start(controller) {
        output = controller
      },
      event: onEvent,
      broke() {
        if (terminal) return
        output.enqueue(abortRecord('The upstream stream broke off.'))
        terminal = true
        end(200, 'stream_aborted')
      },
      end() {
        if (!terminal) {
          output.enqueue(abortRecord('The upstream stream ended before it was complete.'))
          end(200, 'stream_aborted')
        } else end(200, undefined)
      },
    }),
  )
}

export const handleResponses: EndpointHandler = async (context, request, _route, deps) => {
  const { text, value } = await readJsonBody(request)
  if (!isObject(value)) throw new RouterError('invalid_request', 'The request body must be a JSON object.')
  const model = requireModel(value.model)
  if (value.input === undefined || value.input === null || (typeof value.input !== 'string' && !Array.isArray(value.input))) {
    throw new RouterError('invalid_request', 'input: required, a string or an array of input items.')
  }
  if (value.conversation !== undefined && value.conversation !== null) throw new RouterError('stateful_responses_unsupported')
  context.requestBody = text
  context.model = model
  context.stream = value.stream === true
  const key = context.key!
  const chain = value.previous_response_id !== undefined && value.previous_response_id !== null ? resolveChain(context, deps, value.previous_response_id, 'chain') : undefined
  const body = appendSteering(value, key.steeringMessage ?? context.workspace?.steeringMessage)
  // Translated once, up front, when a target may need it: a body the translation refuses is a 400
  // before anything is sent (rather than a failed attempt).
  const providers = (context.snapshot ?? deps.snapshots.current()).providers
  const mayTranslate =
    !chain &&
    [...key.rule.targets.map((target) => target.providerKeyId), ...key.rule.remaps.map((remap) => remap.providerKeyId)].some(
      (id) => providers.get(id)?.gateway.capabilities.responses === 'translated',
    )
  const translated = mayTranslate ? responsesToChat(body).chat : undefined
  context.mark('body')

  const requestFor = (step: PlannedAttempt) => {
    if (isNative(step.provider)) {
      return { suffix: '/responses', body: { ...body, model: step.model, ...(chain ? { previous_response_id: chain.claims.upstreamId } : {}) } }
    }
    return { suffix: '/chat/completions', body: { ...(translated ?? responsesToChat(body).chat), model: step.model } }
  }
  const result = await runRoutedCall(context, deps, {
    operation: 'responses',
    requestFor,
    model,
    stream: context.stream,
    incomingHeaders: request.headers,
    clientSignal: request.signal,
    pinnedProviderKeyId: chain?.provider.id,
  })

  if (result.kind === 'failed' || result.kind === 'relay') {
    // Failures and relayed upstream errors keep the chat envelope of chat keys.
    if (result.kind === 'relay') context.headers['x-router-responses-mode'] = isNative(result.step.provider) ? 'native' : 'translated'
    // A chained turn whose state the gateway does not know: relayed as response_not_found.
    if (chain && result.kind === 'relay' && (result.status === 404 || result.status === 400) && /not\s*found|no response/i.test(result.body)) {
      setRoutingHeaders(context, result.step.gateway, result.failures, result.headers)
      return failWith(context, deps, new RouterError('response_not_found', `The gateway ${result.step.gateway} does not know this response.`))
    }
    if (result.kind === 'relay') {
      context.gateway = result.step.gateway
      context.providerKeyId = result.step.provider.id
      setRoutingHeaders(context, result.step.gateway, result.failures, result.headers)
      context.headers['content-type'] = result.headers.get('content-type') ?? 'application/json'
      return finishWith(context, deps, new Response(result.body, { status: result.status, headers: context.responseHeaders() }), `upstream_${result.status}`)
    }
    return answerChatDialect(context, deps, result)
  }

  const provider = result.step.provider
  const createdAt = Math.floor(Date.now() / 1000)
  if (!isNative(provider)) {
    context.headers['x-router-responses-mode'] = 'translated'
    const shell: ResponseShell = {
      id: issueResponseId({ providerKeyId: provider.id, keyId: key.id, createdAt, upstreamId: '' }, deps.sign),
      model,
      createdAt,
      request: body,
    }
    return answerTranslated(context, deps, result, {
      buffered: (reply) => writeResponseObject(reply, shell),
      encode: () => encodeResponsesStream(shell),
    })
  }

  context.headers['x-router-responses-mode'] = 'native'
  recordServingAttempt(context, result)
  const ourId = (upstreamId: string) => issueResponseId({ providerKeyId: provider.id, keyId: key.id, createdAt, upstreamId }, deps.sign)
  if (context.stream && result.response.body) {
    context.headers['content-type'] = 'text/event-stream; charset=utf-8'
    context.headers['cache-control'] = 'no-cache'
    return new Response(nativeStream(context, deps, result, ourId), { status: 200, headers: context.responseHeaders() })
  }
  let parsed: Json
  try {
    parsed = JSON.parse(new TextDecoder().decode(result.body ?? new ArrayBuffer(0)))
    if (!isObject(parsed)) throw new SyntaxError('not an object')
    readResponseObject(parsed)
  } catch (error) {
    return failWith(context, deps, new RouterError('upstream_unreadable', `The reply from ${result.step.gateway} is not a Response object: ${(error as Error).message}`))
  }
  if (isObject(parsed.usage)) {
    context.inputTokens = Number(parsed.usage.input_tokens) || 0
    context.outputTokens = Number(parsed.usage.output_tokens) || 0
  }
  context.headers['content-type'] = 'application/json'
  return finishWith(context, deps, new Response(JSON.stringify(rewriteResponse(parsed, ourId(String(parsed.id ?? '')))), { status: 200, headers: context.responseHeaders() }))
}

export const handleRetrieveResponse: EndpointHandler = async (context, request, route, deps) => {
  const { claims, provider } = resolveChain(context, deps, route.parameter, 'retrieve')
  const started = performance.now()
  context.attempts = 1
  context.gateway = provider.gateway.id
  context.providerKeyId = provider.id
  const timeoutMs = Math.min(context.key!.upstreamTimeoutMs ?? 60_000, deps.config.deadlineMs)
  let upstream: Response
  let text: string
  try {
    upstream = await deps.fetch(upstreamUrl(provider, `/responses/${encodeURIComponent(claims.upstreamId)}`), {
      headers: upstreamHeaders(provider, [], false),
      signal: AbortSignal.any([request.signal, AbortSignal.timeout(timeoutMs)]),
    })
    text = await upstream.text()
  } catch {
    context.upstreamWaitMs += performance.now() - started
    throw new RouterError('all_targets_failed', `The gateway ${provider.gateway.id} could not be reached.`)
  }
  context.upstreamWaitMs += performance.now() - started
  setRoutingHeaders(context, provider.gateway.id, [], upstream.headers)
  context.headers['content-type'] = 'application/json'
  if (!upstream.ok) return finishWith(context, deps, new Response(text, { status: upstream.status, headers: context.responseHeaders() }), `upstream_${upstream.status}`)
  let parsed: Json
  try {
    parsed = JSON.parse(text) as Json
    if (!isObject(parsed)) throw new SyntaxError('not an object')
  } catch {
    throw new RouterError('upstream_unreadable', `The gateway ${provider.gateway.id} answered with something that is not a Response object.`)
  }
  const id = issueResponseId({ ...claims }, deps.sign)
  return finishWith(context, deps, new Response(JSON.stringify(rewriteResponse(parsed, id)), { status: 200, headers: context.responseHeaders() }))
}
