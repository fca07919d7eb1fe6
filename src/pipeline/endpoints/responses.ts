/**
 * POST /responses and GET /responses/{id} on chat keys (SPEC "POST /responses"): native pass-through
 * where the gateway serves /responses (ids rewritten to `resp_rt_…`), translation to chat for the
 * kind that lacks it, chaining pinned to the provider that holds the state, and retrieval.
 */
import { RouterError } from '../../errors/router-error'
import { responsesToChat } from '../../dialects/responses/convert-request'
import { readResponseObject, responseEnvelope, writeResponseObject, type ResponseShell } from '../../dialects/responses/convert-response'
import { encodeResponsesStream, failedResponseEvent, streamErrorEvent } from '../../dialects/responses/encode-stream'
import { decodeSse, parseJson } from '../../dialects/sse/decode'
import type { EventSourceMessage } from 'eventsource-parser'
import { sseEvent } from '../../dialects/sse/encode'
import { breakSafe, UpstreamEnding } from '../../dialects/stream-parts'
import type { ProviderEntry } from '../read-model/entries'
import type { AuthenticatedContext } from '../request/context'
import { failWith, finishJson, finishStream, recordServingAttempt, type StreamEnded } from '../answer/finish'
import { isObject, readJsonBody } from '../../http/read-body'
import { requireModel, siblingsOf, stripRouterFields } from '../request/prepare-chat'
import { noteResponseModel, readUsage, setRoutingHeaders } from '../answer/respond'
import { isUnixSeconds, issueNativeResponseId, keptResponsePrefix, issueTranslatedResponseId, readResponseId, responseCreatedAt, responseIdLifetimeMs, type ResponseIdClaims } from './response-ids'
import { defaultUpstreamTimeoutMs } from '../routing/plan-route'
import type { Attach, ClientDialect, ParsedRequest, Served, SuccessResult, ToolNames } from '../answer/dialect'
import { relayUpstreamError } from '../answer/relay'
import type { InferenceDeps } from '../types'

type Json = Record<string, any>

const isNative = (provider: ProviderEntry) => provider.gateway.capabilities.responses !== 'translated'

/** Checks a chained id against the key (SPEC "Responses-chaining codes"); returns the pinned provider. */
function resolveChain(context: AuthenticatedContext, deps: InferenceDeps, id: unknown, purpose: 'chain'): { claims: ResponseIdClaims; provider: ProviderEntry }
function resolveChain(context: AuthenticatedContext, deps: InferenceDeps, id: unknown, purpose: 'retrieve'): { claims: ResponseIdClaims; provider: ProviderEntry | undefined }
function resolveChain(context: AuthenticatedContext, deps: InferenceDeps, id: unknown, purpose: 'chain' | 'retrieve'): { claims: ResponseIdClaims; provider: ProviderEntry | undefined } {
  const claims = readResponseId(id, deps.sign)
  if (!claims) throw new RouterError('invalid_previous_response_id', purpose === 'retrieve' ? 'This is not a response id this service issued.' : undefined)
  const key = context.key
  if (claims.keyId !== key.id) throw new RouterError('response_chain_wrong_key')
  if (Date.now() - claims.createdAt * 1000 > responseIdLifetimeMs) throw new RouterError('response_chain_expired')
  // An answer the response cache gave (CONTRACT §15): kept by this service, held by no gateway.
  if (claims.upstreamId.startsWith(keptResponsePrefix)) {
    if (purpose === 'chain') throw new RouterError('response_chain_unsupported_target', 'This response was served from the response cache: no gateway holds its state, so it cannot be chained.')
    if (!key.cache) throw new RouterError('response_not_found', 'This response was served from the response cache, which is off for this key now: it is no longer kept.')
    return { claims, provider: undefined }
  }
  const provider = (context.snapshot ?? deps.snapshots.current()).providers.get(claims.providerKeyId)
  const onKey = key.rule.targets.some((target) => target.providerKeyId === claims.providerKeyId)
  if (!provider || provider.disabled || !onKey) throw new RouterError('response_chain_target_unavailable')
  if (purpose === 'retrieve') {
    if (!provider.gateway.capabilities.retrieve || !claims.upstreamId) {
      throw new RouterError('responses_retrieve_unsupported', `The gateway ${provider.gateway.id} does not serve response retrieval.`)
    }
  } else if (!provider.gateway.capabilities.chain) {
    throw new RouterError('response_chain_unsupported_target', `The gateway ${provider.gateway.id} does not store responses; this response cannot be chained.`)
  } else if (!claims.upstreamId) {
    throw new RouterError('response_chain_unsupported_target', 'This response was written by the service (a streamed answer on a key with MCP tools), so no gateway holds its state; it cannot be chained.')
  }
  return { claims, provider }
}

export function appendSteering(body: Json, steering: string | null | undefined): Json {
  if (!steering) return body
  const instructions = typeof body.instructions === 'string' && body.instructions ? `${body.instructions}\n\n${steering}` : steering
  return { ...body, instructions }
}

/** Our id for a gateway's response; a response without a gateway id gets a fresh, unchainable one. */
type IssueId = (upstreamId: unknown, upstreamCreatedAt: unknown) => string

function idIssuer(deps: InferenceDeps, providerKeyId: string, keyId: string): IssueId {
  let last: { upstreamId: string; createdAt: number; id: string } | undefined
  return (upstreamId, upstreamCreatedAt) => {
    const createdAt = responseCreatedAt(upstreamCreatedAt, Date.now())
    if (typeof upstreamId !== 'string' || !upstreamId) return issueTranslatedResponseId({ providerKeyId, keyId, createdAt }, deps.sign)
    // Stream events repeat the response object; its id is signed once.
    if (last?.upstreamId !== upstreamId || last.createdAt !== createdAt) last = { upstreamId, createdAt, id: issueNativeResponseId({ providerKeyId, keyId, createdAt, upstreamId }, deps.sign) }
    return last.id
  }
}

/**
 * A gateway's Response object with every id field the client sees in our form (SPEC "Chaining": the
 * gateway's own ids stay on the upstream wire): `id`, and `previous_response_id` as the id the client
 * chained from. A previous id we cannot name is not passed on.
 */
function rewriteResponse(value: Json, id: string, previousId: string | null, hiddenTools?: ToolNames): Json {
  const rewritten: Json = { ...value, id, previous_response_id: value.previous_response_id === undefined ? undefined : previousId }
  // The echoed request tools are the client's own: tools the service offered (MCP) are not shown.
  if (hiddenTools && Array.isArray(value.tools)) rewritten.tools = value.tools.filter((tool: unknown) => !(isObject(tool) && typeof tool.name === 'string' && hiddenTools.has(tool.name)))
  return rewritten
}

/**
 * A native Responses stream relayed event by event with our ids. `attach`: fields enrichment stages
 * add (companion ads, keyterms), merged into the `response` of the terminal event, which waits for
 * them (CONTRACT §7); the text they see is the stream's output text.
 *
 * The stream ends with the answer, not when the upstream lets go of it: after `response.completed`
 * or `response.incomplete` the upstream has a short grace to end its body (stream-parts.ts); an
 * `error` event is the break itself (SPEC "Stream events"), followed at once by the terminal
 * `response.failed` (the response as far as it got), and the upstream is let go, as on its own
 * `response.failed`.
 */
function nativeStream(
  context: AuthenticatedContext,
  result: SuccessResult,
  issueId: IssueId,
  previousId: string | null,
  request: Json,
  attach: Attach | undefined,
  end: StreamEnded,
): ReadableStream<Uint8Array> {
  let terminal = false
  /** The output text so far (for the attaching stages). */
  let answerText = ''
  /** The terminal event, held while the attached fields are fetched. */
  let held: Promise<void> | undefined
  let sequence = 0
  /** The last response snapshot the client saw, and the items finished since: a failed stream's response. */
  let snapshot: Json | undefined
  const finishedItems: Json[] = []
  /** The item opened and not finished yet, with the text streamed into it: unfinished in a failed response. */
  let openItem: { item: Json; text: string } | undefined
  let reportedError: { code: string; message: string } | undefined
  let output!: TransformStreamDefaultController<Uint8Array>
  const ending = new UpstreamEnding(result.stream!)

  const emitFailure = (code: string, message: string, errorAlreadySent: boolean) => {
    if (!snapshot) {
      // Broke before the gateway described its response: the client still gets the one response.created.
      const createdAt = Math.floor(Date.now() / 1000)
      snapshot = responseEnvelope({ id: issueId('', createdAt), model: String(request.model ?? ''), createdAt, request }, 'in_progress')
      output.enqueue(sseEvent('response.created', { type: 'response.created', sequence_number: sequence++, response: snapshot }))
    }
    if (!errorAlreadySent) output.enqueue(streamErrorEvent(sequence++, code, message))
    // The item that was open when the stream broke is part of the failed response, marked incomplete.
    const unfinished = openItem ? [{ ...openItem.item, status: 'incomplete', ...(openItem.item.type === 'message' ? { content: [{ type: 'output_text', text: openItem.text, annotations: [] }] } : {}) }] : []
    output.enqueue(failedResponseEvent({ ...snapshot, output: [...finishedItems, ...unfinished] }, sequence++, code, message))
    terminal = true
  }

  const onEvent = (event: EventSourceMessage) => {
    if (terminal || event.data === '[DONE]' || event.data === '') return
    const data = parseJson(event.data) as Json | undefined
    if (!data || typeof data !== 'object' || Array.isArray(data)) {
      // An event that is not JSON after the stream began: a mid-stream failure (the ones before the
      // first byte failed over), and the upstream is let go.
      emitFailure('stream_aborted', 'The upstream sent an event that is not JSON.', false)
      result.controller.abort('unusable')
      end(200, 'stream_aborted')
      return
    }
    if (typeof data.sequence_number === 'number') sequence = data.sequence_number + 1
    if (isObject(data.response) && typeof data.response.id === 'string') {
      data.response = rewriteResponse(data.response, issueId(data.response.id, data.response.created_at), previousId)
      snapshot = data.response
    }
    const type = String(data.type ?? event.event ?? 'message')
    if (type === 'response.output_text.delta' && typeof data.delta === 'string') answerText += data.delta
    if (type === 'response.output_item.added' && isObject(data.item)) openItem = { item: data.item, text: '' }
    else if (type === 'response.output_text.delta' && openItem && typeof data.delta === 'string') openItem.text += data.delta
    else if (type === 'response.output_item.done' && isObject(data.item)) {
      finishedItems.push(data.item)
      openItem = undefined
    }
    if (type === 'error') {
      // The real API nests the error; a gateway that sends the older flat form is put in that shape.
      const flat = !isObject(data.error)
      if (flat) data.error = { type: String(data.code ?? 'server_error'), code: data.code ?? null, message: String(data.message ?? 'The upstream reported an error.'), param: data.param ?? null }
      const error = data.error as Json
      reportedError = { code: String(error.code ?? error.type ?? 'server_error'), message: String(error.message ?? '') }
      // The error is the break: the stream ends now with its terminal response.failed, whether or not
      // the upstream would send its own and close. An error before the response was described comes
      // after the one response.created the client must get first, in our form.
      if (snapshot) output.enqueue(sseEvent(type, flat ? { type, sequence_number: data.sequence_number, error: data.error } : data))
      else if (typeof data.sequence_number === 'number') sequence = data.sequence_number
      emitFailure(reportedError.code, reportedError.message, snapshot !== undefined)
      end(200, 'stream_aborted')
      ending.letGo()
      return
    }
    if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
      terminal = true
      if (type === 'response.failed') reportedError ??= { code: String(data.response?.error?.code ?? 'server_error'), message: String(data.response?.error?.message ?? '') }
      else ending.answer()
      const usage = data.response?.usage
      if (usage) readUsage(usage, context)
      noteResponseModel(context, data.response?.model)
      if (attach && type !== 'response.failed') {
        held = attach(answerText).then((fields) => {
          if (fields && isObject(data.response)) data.response = { ...data.response, ...fields }
          output.enqueue(sseEvent(type, data))
        })
        return
      }
    }
    output.enqueue(sseEvent(type, data))
    if (type === 'response.failed') {
      end(200, 'stream_aborted')
      ending.letGo()
    }
  }
  return breakSafe(
    result.stream!,
    () => {
      result.controller.abort('client-closed')
      end(499, 'client_closed')
    },
    ending,
  ).pipeThrough(
    decodeSse<Uint8Array>({
      start(controller) {
        output = controller
      },
      event: onEvent,
      pending: () => held,
      // An error event or response.failed has ended the stream already (terminal): only a break or
      // an end before the terminal event is left to fail here.
      broke(message) {
        if (terminal) return
        emitFailure('stream_aborted', message, false)
        end(200, 'stream_aborted')
      },
      end() {
        if (terminal) return end(200, reportedError ? 'stream_aborted' : undefined)
        emitFailure('stream_aborted', 'The upstream stream ended before it was complete.', false)
        end(200, 'stream_aborted')
      },
    }),
  )
}

interface ResponsesRequest extends ParsedRequest {
  /** The chained previous response, when the client named one: the provider that holds its state. */
  chain: { claims: ResponseIdClaims; provider: ProviderEntry } | undefined
  /** The previous response id as the client sent it (our form). */
  previousId: string | null
  /** The chat translation of the body, made once up front when a target may need it. */
  translated: Json | undefined
}

/** X-Router-Responses-Mode: how the serving gateway answered. */
function setMode(context: AuthenticatedContext, provider: ProviderEntry) {
  context.headers['x-router-responses-mode'] = isNative(provider) ? 'native' : 'translated'
}

/** The shell of a Response this service writes (translated mode, or an answer its stages made). */
function responseShell(deps: InferenceDeps, context: AuthenticatedContext, parsed: ResponsesRequest, served: Served, upstreamId?: string, upstreamCreatedAt?: number): ResponseShell {
  // A stage's answer kept for retrieval (the response cache's) is issued the id it is kept under.
  const kept = served.kept
  if (kept) {
    upstreamId = kept.upstreamId
    upstreamCreatedAt = kept.createdAt
  }
  const createdAt = upstreamCreatedAt ?? Math.floor(Date.now() / 1000)
  const id = idIssuer(deps, kept?.providerKeyId ?? served.step!.provider.id, context.key.id)(upstreamId ?? '', createdAt)
  return { id, model: parsed.model, createdAt, request: parsed.upstreamBody }
}

export const responsesDialect: ClientDialect<ResponsesRequest> = {
  name: 'responses',
  replyKind: 'response',
  // Parsed: every id in it is rewritten to ours.
  relaysBytes: false,
  enriched: true,
  async parse(context, request, _route, deps) {
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
    const key = context.key
    const chain = value.previous_response_id !== undefined && value.previous_response_id !== null ? resolveChain(context, deps, value.previous_response_id, 'chain') : undefined
    // The companion-ad and keyterm siblings never go upstream (SPEC "Body processing").
    const body = appendSteering(stripRouterFields(value), key.pipeline.steering)
    // Translated once, up front, when a target may need it: a body the translation refuses is a 400
    // before anything is sent (rather than a failed attempt).
    const providers = (context.snapshot ?? deps.snapshots.current()).providers
    const mayTranslate =
      !chain &&
      [...key.rule.targets.map((target) => target.providerKeyId), ...key.rule.remaps.map((remap) => remap.providerKeyId)].some(
        (id) => providers.get(id)?.gateway.capabilities.responses === 'translated',
      )
    return {
      model,
      stream: context.stream,
      operation: 'responses',
      upstreamBody: body,
      pinnedProviderKeyId: chain?.provider.id,
      chain,
      // A chained turn's previous response is the one the client named, in the client's own spelling.
      previousId: chain ? (value.previous_response_id as string) : null,
      translated: mayTranslate ? responsesToChat(body).chat : undefined,
      siblings: siblingsOf(value),
    }
  },
  toUpstream(step, parsed) {
    if (isNative(step.provider)) {
      return { path: '/responses', body: { ...parsed.upstreamBody, model: step.model, ...(parsed.chain ? { previous_response_id: parsed.chain.claims.upstreamId } : {}) } }
    }
    return { path: '/chat/completions', body: { ...(parsed.translated ?? responsesToChat(parsed.upstreamBody).chat), model: step.model } }
  },
  errorEnvelope(context, deps, result, parsed) {
    // Relayed upstream errors keep the chat envelope of chat keys.
    setMode(context, result.step.provider)
    // A chained turn whose state the gateway does not know: relayed as response_not_found.
    if (parsed.chain && (result.status === 404 || result.status === 400) && /not\s*found|no response/i.test(result.body)) {
      setRoutingHeaders(context, result.step.gateway, result.failures, result.headers, result.step.provider.secret)
      return failWith(context, deps, new RouterError('response_not_found', `The gateway ${result.step.gateway} does not know this response.`))
    }
    return relayUpstreamError(context, deps, result)
  },
  attachesToStream: true,
  passThrough(context, deps, result, parsed, stages) {
    const issueId = idIssuer(deps, result.step.provider.id, context.key.id)
    context.headers['x-router-responses-mode'] = 'native'
    recordServingAttempt(context, result)
    if (result.stream) return finishStream(context, deps, 200, (end) => nativeStream(context, result, issueId, parsed.previousId, parsed.upstreamBody, stages?.attach, end))
    // Parsed and checked to be a Response object (an object with `output`) by run-attempts.
    const value = result.value as Json
    try {
      readResponseObject(value)
    } catch (error) {
      return failWith(context, deps, new RouterError('upstream_unreadable', `The reply from ${result.step.gateway} is not a Response object: ${(error as Error).message}`))
    }
    if (isObject(value.usage)) readUsage(value.usage, context)
    noteResponseModel(context, value.model)
    return finishJson(context, deps, 200, { ...rewriteResponse(value, issueId(value.id, value.created_at), parsed.previousId, stages?.hiddenTools), ...stages?.extras })
  },
  served: (context, served) => served.step && setMode(context, served.step.provider),
  writeReply(context, deps, reply, parsed, served) {
    // A native gateway's last response holds the whole exchange: our id for it can anchor a chain.
    const native = served.replyKind === 'response'
    return writeResponseObject(reply, responseShell(deps, context, parsed, served, native ? reply.id : undefined, native ? reply.created : undefined))
  },
  encodeStream(context, deps, parsed, served) {
    // The id is named in the first event, before the answer's last round is known: not chainable.
    return encodeResponsesStream(responseShell(deps, context, parsed, served))
  },
}

interface RetrieveRequest extends ParsedRequest {
  claims: ResponseIdClaims & { upstreamId: string }
  /** The id as the client asked for it. */
  id: string
}

const noSiblings = Object.freeze({ adRequest: undefined, linkRequest: undefined })

/**
 * GET /responses/{id}: one call, pinned to the provider key that holds the response (no plan, no
 * failover; every gateway error is relayed as it came), and the stored Response with every id in our
 * form. No stage acts on it.
 */
export const responsesRetrieveDialect: ClientDialect<RetrieveRequest> = {
  name: 'responses retrieval',
  replyKind: 'response',
  relaysBytes: false,
  enriched: false,
  relaysErrors: true,
  attachesToStream: false,
  async parse(context, _request, route, deps) {
    const { claims, provider } = resolveChain(context, deps, route.parameter, 'retrieve')
    // Kept by the response cache: its stage answers the retrieval (stages/cache), no gateway is called.
    if (!provider) return { model: '', stream: false, operation: 'responses', upstreamBody: {}, siblings: noSiblings, claims: claims as RetrieveRequest['claims'], id: route.parameter!, keptAnswerId: claims.upstreamId }
    const upstreamTimeoutMs = context.key.upstreamTimeoutMs ?? defaultUpstreamTimeoutMs
    return {
      model: '',
      stream: false,
      operation: 'responses',
      upstreamBody: {},
      siblings: noSiblings,
      claims: claims as RetrieveRequest['claims'],
      id: route.parameter!,
      pinnedStep: { kind: 'attempt', provider, gateway: provider.gateway.id, model: '', remap: false, failoverTimeoutMs: upstreamTimeoutMs, upstreamTimeoutMs },
    }
  },
  toUpstream(_step, parsed) {
    // A kept answer is the response cache's to give: no gateway has it (reached only if the cache could not answer).
    if (parsed.keptAnswerId) throw new RouterError('response_not_found', 'This response was served from the response cache and is no longer kept.')
    return { method: 'GET', path: `/responses/${encodeURIComponent(parsed.claims.upstreamId)}`, body: undefined }
  },
  async passThrough(context, deps, result, parsed) {
    recordServingAttempt(context, result)
    const provider = result.step.provider
    // Parsed and checked to be a Response object (an object with `output`) by run-attempts.
    const stored = result.value as Json
    // The previous turn's id as the client was given it: that id is a function of the gateway's id and
    // creation time (see response-ids.ts), and the creation time is on the stored previous response.
    let previousId: string | null = null
    if (typeof stored.previous_response_id === 'string' && stored.previous_response_id) {
      const previousUpstreamId = stored.previous_response_id
      let previousCreatedAt: unknown
      const started = performance.now()
      context.attempts++
      try {
        const timeLeft = Math.min(result.step.upstreamTimeoutMs, context.startedAt + deps.config.deadlineMs - started)
        const previous = await deps.upstream.read(provider, { path: `/responses/${encodeURIComponent(previousUpstreamId)}` }, timeLeft)
        // Read as it came: only its creation time is used, for the id (nothing of it is relayed).
        if (previous.ok) previousCreatedAt = (parseJson(previous.raw) as Json | undefined)?.created_at
      } catch {
        // Unreachable now: the id below still names the right response, with an approximate lifetime.
      } finally {
        context.upstreamWaitMs += performance.now() - started
      }
      if (previousCreatedAt === undefined) deps.logger.warn('previous_response_lookup_failed', { request_id: context.requestId, gateway: provider.gateway.id })
      previousId = issueNativeResponseId({ ...parsed.claims, upstreamId: previousUpstreamId, createdAt: isUnixSeconds(previousCreatedAt) ? previousCreatedAt : parsed.claims.createdAt }, deps.sign)
    }
    // The id is the one the client asked for, exactly as it was issued.
    return finishJson(context, deps, 200, rewriteResponse(stored, parsed.id, previousId))
  },
}
