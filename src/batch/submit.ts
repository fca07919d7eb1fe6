/**
 * POST /v1/batches (SPEC "Batch API"): the submit is read as it streams in (body-reader.ts) and
 * streamed on to the one provider key that takes it, item by item, with the client's pace as the
 * upload's pace (the upstream body pulls the next client chunk only when it wants more bytes).
 *
 * Order of refusals: the head is checked before anything else happens (field order, endpoint,
 * model), then the target (batch_not_supported, batch_model_not_available, batch_check_unavailable),
 * then a row is reserved for the id (batch_ids_unavailable), and the upload starts only once the
 * first item is whole (so an empty `requests` sends nothing). A fault found later in the body (a
 * malformed item, one over 16 MB, bytes after `requests`, a stall of two minutes) aborts the upload
 * before it completes, so the gateway never creates the batch, and the reserved row is dropped.
 */
import { appendSteering, applySteering, BatchSpend, finishClientClosed, finishJson, setRoutingHeaders, type AuthenticatedContext, type InferenceDeps, type Operation } from '../pipeline'
import { RouterError } from '../errors/router-error'
import { readAnswer } from '../gateways/client'
import { issueBatchId } from './batch-ids'
import { BatchBodyReader, type BatchHead, type BatchItem } from './body-reader'
import { presentBatch, progressFromUpstream } from './present'
import { chooseBatchTarget, liveModelLister, plainModelId, type BatchTarget } from './target'
import { relayUpstreamError } from './upstream-errors'

export const batchEndpoints = ['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1/embeddings'] as const
export type BatchEndpoint = (typeof batchEndpoints)[number]

/** SPEC "Limits": keep a submit under 100 MB (larger jobs are split). */
export const batchSubmitLimit = 100 * 1024 * 1024

const encoder = new TextEncoder()
const collectEveryBytes = 8 * 1024 * 1024

interface CheckedHead {
  endpoint: BatchEndpoint
  model: string
  provider: { only: string[] } | undefined
}

function checkHead(head: BatchHead): CheckedHead {
  if (typeof head.endpoint !== 'string' || !(batchEndpoints as readonly string[]).includes(head.endpoint)) {
    throw new RouterError('invalid_endpoint', `endpoint must be one of ${batchEndpoints.join(', ')}${typeof head.endpoint === 'string' ? `, not '${head.endpoint.slice(0, 100)}'` : ''}.`)
  }
  if (typeof head.model !== 'string' || head.model.trim() === '' || head.model.length > 200) {
    throw new RouterError('invalid_batch_body', 'The batch body is invalid: `model` must be a model id (its plain or :batch spelling).')
  }
  if (head.completion_window !== undefined && head.completion_window !== '24h') {
    throw new RouterError('invalid_request', 'completion_window can only be "24h".')
  }
  let provider: CheckedHead['provider']
  if (head.provider !== undefined) {
    const only = (head.provider as { only?: unknown } | null)?.only
    const valid =
      typeof head.provider === 'object' && head.provider !== null && !Array.isArray(head.provider) && Object.keys(head.provider).every((name) => name === 'only') &&
      Array.isArray(only) && only.length > 0 && only.every((slug) => typeof slug === 'string' && slug.length > 0 && slug.length <= 100)
    if (!valid) throw new RouterError('invalid_request', 'provider must be {"only": ["<provider-slug>", …]} with at least one slug.')
    provider = { only: only as string[] }
  }
  return { endpoint: head.endpoint as BatchEndpoint, model: head.model, provider }
}

/** Puts the steering message where SPEC says for each endpoint: none on embeddings. */
function steer(endpoint: BatchEndpoint, body: Record<string, unknown>, steering: string): Record<string, unknown> {
  switch (endpoint) {
    case '/v1/chat/completions':
      return Array.isArray(body.messages) ? applySteering(body, steering) : body
    case '/v1/responses':
      return appendSteering(body, steering)
    case '/v1/messages': {
      const system = body.system
      if (typeof system === 'string' && system) return { ...body, system: `${steering}\n\n${system}` }
      if (Array.isArray(system)) return { ...body, system: [{ type: 'text', text: steering }, ...system] }
      return { ...body, system: steering }
    }
    case '/v1/embeddings':
      return body
  }
}

/**
 * An item as sent upstream: its bytes as they came when nothing changes, else re-serialized with
 * the steering message and, where it names the batch's model, the gateway's spelling of it.
 */
function outboundItem(item: BatchItem, endpoint: BatchEndpoint, clientModel: string, upstreamModel: string, steering: string | undefined, spend: BatchSpend | undefined): Uint8Array {
  const body = item.value.body as Record<string, unknown>
  const named = typeof body.model === 'string' ? body.model : undefined
  const rename = named !== undefined && named !== upstreamModel && plainModelId(named).toLowerCase() === plainModelId(clientModel).toLowerCase()
  const steered = steering && endpoint !== '/v1/embeddings'
  const bounded = spend?.boundOf(body)
  if (!rename && !steered && !bounded) return item.raw
  let next = bounded ?? body
  if (rename) next = { ...next, model: upstreamModel }
  if (steered) next = steer(endpoint, next, steering)
  return encoder.encode(JSON.stringify({ ...item.value, body: next }))
}

/** Reads the next client chunk, or fails with 408 after the upload idle limit. */
async function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, idleMs: number): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RouterError('batch_upload_timeout', `The batch upload sent nothing for ${Math.round(idleMs / 1000)} s and was dropped. Nothing was submitted.`)), idleMs)
  })
  try {
    return (await Promise.race([reader.read(), stalled])) as { done: true } | { done: false; value: Uint8Array }
  } finally {
    clearTimeout(timer)
  }
}

/** The operation a batch endpoint's items are (how they are priced and bounded). */
const operationOf = (endpoint: BatchEndpoint): Operation => (endpoint === '/v1/embeddings' ? 'embeddings' : endpoint === '/v1/responses' ? 'responses' : 'chat')

/** Items whose worst case the spend cap has reserved (each once, in the order they are read). */
const reservedItems = new WeakSet<BatchItem>()

/** Reserves the items not reserved yet (a key with a USD cap; pipeline/limits/batch-spend.ts), or throws the refusal. */
function reserveItems(spend: BatchSpend | undefined, items: readonly BatchItem[]) {
  if (!spend) return
  for (const item of items) {
    if (reservedItems.has(item)) continue
    spend.reserve(item.value.body as Record<string, unknown>)
    reservedItems.add(item)
  }
}

export async function submitBatch(context: AuthenticatedContext, request: Request, deps: InferenceDeps): Promise<Response> {
  const key = context.key
  const snapshot = context.snapshot
  const body = request.body
  if (!body) throw new RouterError('invalid_json', 'The batch body is not valid JSON: the body is empty.')
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > batchSubmitLimit) throw new RouterError('request_too_large', 'A batch submit is limited to 100 MB: split larger jobs.')
  const spend = await BatchSpend.admit(context, deps)
  const reader = body.getReader()
  const parser = new BatchBodyReader()
  const idleMs = deps.config.batchUploadIdleMs
  const pending: BatchItem[] = []
  let clientDone = false
  let sinceCollection = 0

  /** Reads one client chunk into the parser; false at the end of the body. */
  const readChunk = async (): Promise<boolean> => {
    const { done, value } = await readWithin(reader, idleMs)
    if (done) {
      clientDone = true
      parser.finish()
      return false
    }
    if (parser.bytesRead + value.byteLength > batchSubmitLimit) throw new RouterError('request_too_large', 'A batch submit is limited to 100 MB: split larger jobs.')
    const events = parser.feed(value)
    // Each item is copied, decoded and parsed once: garbage about five times the upload's size,
    // which the collector left to itself lets pile up over a fast 100 MB upload (RSS +80–95 MB
    // measured). A collection every few megabytes keeps the growth to what is in flight.
    sinceCollection += value.byteLength
    if (sinceCollection >= collectEveryBytes) {
      sinceCollection = 0
      Bun.gc(true)
    }
    if (events.head) headSeen = events.head
    pending.push(...events.items)
    return true
  }
  let headSeen: BatchHead | undefined
  let reservedId: string | undefined
  const release = () => {
    reader.cancel().catch(() => {})
    if (reservedId) deps.repositories.batches.discard(reservedId)
  }

  let head: CheckedHead
  let target: BatchTarget
  let steering: string | undefined
  try {
    while (!headSeen) if (!(await readChunk())) break
    head = checkHead(headSeen!)
    context.model = head.model
    target = await chooseBatchTarget({ key, snapshot, model: head.model, random: deps.random, now: Date.now(), listModels: liveModelLister(deps.upstream, request.signal) })
    context.gateway = target.provider.gateway.id
    context.providerKeyId = target.provider.id
    context.upstreamModel = target.upstreamModel
    steering = key.pipeline.steering
    spend?.price(snapshot, { gateway: target.provider.gateway.id, upstreamModel: target.upstreamModel, plainModel: plainModelId(target.upstreamModel) }, operationOf(head.endpoint), head.model, steering)
    // The first item before anything is reserved or sent: an empty or broken start sends nothing.
    while (pending.length === 0 && !clientDone) await readChunk()
    reserveItems(spend, pending)
    const createdAt = Math.floor(Date.now() / 1000)
    const id = issueBatchId({ providerKeyId: target.provider.id, keyId: key.id, createdAt }, deps.sign)
    try {
      deps.repositories.batches.reserve({ id, workspaceId: key.workspaceId, keyId: key.id, providerKeyId: target.provider.id, endpoint: head.endpoint, model: head.model, upstreamModel: target.upstreamModel, createdAt })
    } catch (error) {
      deps.logger.error('batch_reserve_failed', { request_id: context.requestId, error: error instanceof Error ? error.message : String(error) })
      throw new RouterError('batch_ids_unavailable')
    }
    reservedId = id
  } catch (error) {
    release()
    throw error
  }

  // The upload: the head as the gateway gets it, then the items as they arrive, pulled.
  const headBytes = encoder.encode(
    `{"endpoint":${JSON.stringify(head.endpoint)},"model":${JSON.stringify(target.upstreamModel)},${head.provider ? `"provider":${JSON.stringify(head.provider)},` : ''}"completion_window":"24h","requests":[`,
  )
  let sent = 0
  let failure: unknown
  let uploaded = false
  const abort = new AbortController()
  let confirmTimer: ReturnType<typeof setTimeout> | undefined
  const confirmMs = key.upstreamTimeoutMs ?? 60_000
  let confirmTimedOut = false
  const upload = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(headBytes)
    },
    async pull(controller) {
      try {
        while (pending.length === 0 && !clientDone) await readChunk()
        reserveItems(spend, pending)
        for (const item of pending.splice(0)) {
          if (sent > 0) controller.enqueue(encoder.encode(','))
          controller.enqueue(outboundItem(item, head.endpoint, head.model, target.upstreamModel, steering, spend))
          sent++
        }
        if (clientDone) {
          controller.enqueue(encoder.encode(']}'))
          uploaded = true
          controller.close()
          // The confirmation is awaited for the upstream timeout once the whole body is sent.
          confirmTimer = setTimeout(() => {
            confirmTimedOut = true
            abort.abort(new Error('confirmation timeout'))
          }, confirmMs)
        }
      } catch (error) {
        failure = error
        controller.error(error)
        abort.abort(error)
      }
    },
    cancel() {
      reader.cancel().catch(() => {})
    },
  })

  const batchId = reservedId
  context.attempts = 1
  const started = performance.now()
  try {
    const response = await deps.upstream.send(target.provider, { path: '/batches', bytes: upload, signal: AbortSignal.any([request.signal, abort.signal]) })
    // The gateway may answer (an error) before the body is all sent: the rest is not read.
    if (!uploaded) reader.cancel().catch(() => {})
    const upstream = await readAnswer(target.provider, response)
    clearTimeout(confirmTimer)
    context.upstreamWaitMs += performance.now() - started
    if (!upstream.ok) {
      deps.repositories.batches.discard(batchId)
      return relayUpstreamError(context, deps, target.provider, upstream)
    }
    let confirmed: Record<string, unknown> | undefined
    try {
      // Read as it came: the batch id in it is kept (scrubbed, an id holding 8 characters of the
      // secret would no longer name the gateway's batch); a refusal above is relayed scrubbed.
      const value = JSON.parse(upstream.raw) as unknown
      if (typeof value === 'object' && value !== null && typeof (value as { id?: unknown }).id === 'string') confirmed = value as Record<string, unknown>
    } catch {
      // handled below
    }
    if (!confirmed) {
      // The gateway took the upload but its answer names no batch: kept for the refresh job to find.
      deps.repositories.batches.markUnconfirmed(batchId, sent, spend?.hold(batchId) ?? null)
      throw new RouterError('upstream_timeout', `The gateway ${target.provider.gateway.id} took the batch but its answer named no batch id. It may still exist: check the batch list before resubmitting.`)
    }
    setRoutingHeaders(context, target.provider.gateway.id, [], upstream.headers, target.provider.secret)
    const progress = progressFromUpstream(confirmed, Date.now(), sent, target.provider.secret)
    deps.repositories.batches.confirm(batchId, confirmed.id as string, progress, spend?.hold(batchId) ?? null)
    const row = deps.repositories.batches.get(batchId)!
    // SPEC: the submit answers 202 with the batch in `validating` (queued, not finished).
    return finishJson(context, deps, 202, presentBatch(row, { status: 'validating' }))
  } catch (error) {
    clearTimeout(confirmTimer)
    reader.cancel().catch(() => {})
    if (failure !== undefined) {
      deps.repositories.batches.discard(batchId)
      throw failure
    }
    if (confirmTimedOut) {
      deps.repositories.batches.markUnconfirmed(batchId, sent, spend?.hold(batchId) ?? null)
      throw new RouterError('upstream_timeout', `The gateway ${target.provider.gateway.id} received the batch but did not confirm it within ${Math.round(confirmMs / 1000)} s. It may still exist: check the batch list before resubmitting.`)
    }
    if (error instanceof RouterError) throw error
    if (request.signal.aborted) {
      // The client hung up mid-upload: the upload was aborted with it, nothing was submitted.
      deps.repositories.batches.discard(batchId)
      return finishClientClosed(context, deps)
    }
    // The connection to the gateway failed. If the whole body went out, the gateway may have it.
    if (uploaded) {
      deps.repositories.batches.markUnconfirmed(batchId, sent, spend?.hold(batchId) ?? null)
      throw new RouterError('upstream_timeout', `The connection to ${target.provider.gateway.id} broke after the batch was sent. It may still exist: check the batch list before resubmitting.`)
    }
    deps.repositories.batches.discard(batchId)
    throw new RouterError('all_targets_failed', `The gateway ${target.provider.gateway.id} could not be reached; nothing was submitted.`)
  }
}
