/**
 * A mock of the gateway kind that keeps batch results (CONTRACT §6 batch paths), on 127.0.0.1:
 * `POST /batches` reads the submit as it streams, checks it as a strict gateway does (duplicate
 * custom_id 422, a body.model other than the batch's 400, both with a numeric code) and keeps the
 * batch; the test drives its state with `advance`. `GET /models` lists the ids given.
 */
export interface MockBatch {
  id: string
  object: 'batch'
  endpoint: string
  model: string
  status: string
  created_at: number
  request_counts: { total: number; completed: number; failed: number }
  usage: { cost: number } | null
  results: unknown[] | null
  error: unknown
  finalized_at: number | null
  /** The items as received (unless `discardItems`). */
  requests: { custom_id: string; body: Record<string, unknown> }[]
}

export interface BatchGatewayOptions {
  models?: string[]
  /** Answer GET /batches/{id} with 404 this many times after the submit (not visible yet). */
  invisibleReads?: number
  /** Wait this long after the body before answering the submit. */
  confirmDelayMs?: number
  /** Count the submit's bytes without keeping them (the 100 MB test). */
  discardItems?: boolean
  /** Answer the submit with this status and body instead. */
  refuseWith?: { status: number; body: unknown }
  /** The start of every batch id it issues (default `gwb_`). */
  idPrefix?: string
}

export interface BatchGateway {
  url: string
  batches: Map<string, MockBatch>
  /** Every request: method, path, authorization header. */
  requests: { method: string; path: string; authorization: string | null }[]
  options: BatchGatewayOptions
  /** Bytes of the last submit as received. */
  lastSubmitBytes: number
  /** The raw text of the last submit (unless discardItems). */
  lastSubmitText: string
  advance(id: string, status: string, extra?: Partial<MockBatch>): void
  close(): Promise<void>
}

export async function startBatchGateway(options: BatchGatewayOptions = {}): Promise<BatchGateway> {
  const batches = new Map<string, MockBatch>()
  const reads = new Map<string, number>()
  const requests: BatchGateway['requests'] = []
  let sequence = 0
  const state = { lastSubmitBytes: 0, lastSubmitText: '' }
  const json = (body: unknown, status = 200) => Response.json(body, { status })
  const refuse = (status: number, message: string) => json({ error: { code: status, message } }, status)
  const present = (batch: MockBatch) => {
    const { requests: _requests, ...rest } = batch
    return rest
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname
      requests.push({ method: request.method, path, authorization: request.headers.get('authorization') })
      if (path.endsWith('/models') && request.method === 'GET') {
        return json({ object: 'list', data: (gateway.options.models ?? []).map((id) => ({ id, object: 'model' })) })
      }
      if (path.endsWith('/batches') && request.method === 'POST') {
        let text = ''
        let size = 0
        const decoder = new TextDecoder()
        for await (const chunk of request.body!) {
          size += chunk.byteLength
          if (!gateway.options.discardItems) text += decoder.decode(chunk, { stream: true })
        }
        state.lastSubmitBytes = size
        state.lastSubmitText = text
        if (gateway.options.confirmDelayMs) await Bun.sleep(gateway.options.confirmDelayMs)
        if (gateway.options.refuseWith) return json(gateway.options.refuseWith.body, gateway.options.refuseWith.status)
        let items: MockBatch['requests'] = []
        let body: { endpoint: string; model: string; requests?: MockBatch['requests'] } = { endpoint: '', model: '' }
        let total = 0
        if (gateway.options.discardItems) {
          // Not parsed: the count is the number of custom_id fields (the test's items have one each).
          body = { endpoint: '/v1/chat/completions', model: 'discarded' }
          total = -1
        } else {
          body = JSON.parse(text)
          items = body.requests ?? []
          const seen = new Set<string>()
          for (const item of items) {
            if (seen.has(item.custom_id)) return refuse(422, `Duplicate custom_id '${item.custom_id}'.`)
            seen.add(item.custom_id)
            const named = item.body.model
            if (named !== undefined && named !== body.model) return refuse(400, `requests[${item.custom_id}].body.model '${String(named)}' is not the batch's model '${body.model}'.`)
          }
          total = items.length
        }
        const id = `${gateway.options.idPrefix ?? 'gwb_'}${++sequence}`
        const batch: MockBatch = {
          id,
          object: 'batch',
          endpoint: body.endpoint,
          model: body.model,
          status: 'validating',
          created_at: Math.floor(Date.now() / 1000),
          request_counts: { total, completed: 0, failed: 0 },
          usage: null,
          results: null,
          error: null,
          finalized_at: null,
          requests: items,
        }
        batches.set(id, batch)
        reads.set(id, gateway.options.invisibleReads ?? 0)
        return json(present(batch))
      }
      if (path.endsWith('/batches') && request.method === 'GET') {
        return json({ object: 'list', data: [...batches.values()].reverse().map(present), has_more: false })
      }
      const match = /\/batches\/([^/]+)$/.exec(path)
      if (match) {
        const batch = batches.get(match[1]!)
        const hidden = reads.get(match[1]!) ?? 0
        if (batch && hidden > 0 && request.method === 'GET') {
          reads.set(match[1]!, hidden - 1)
          return refuse(404, 'No such batch.')
        }
        if (!batch) return refuse(404, 'No such batch.')
        if (request.method === 'DELETE') {
          batches.delete(batch.id)
          return json({ id: batch.id, object: 'batch', deleted: true })
        }
        return json(present(batch))
      }
      return refuse(404, `not served: ${request.method} ${path}`)
    },
  })

  const gateway: BatchGateway = {
    url: `http://127.0.0.1:${server.port}`,
    batches,
    requests,
    options,
    get lastSubmitBytes() {
      return state.lastSubmitBytes
    },
    get lastSubmitText() {
      return state.lastSubmitText
    },
    advance(id, status, extra = {}) {
      const batch = batches.get(id)
      if (!batch) throw new Error(`no batch ${id}`)
      batch.status = status
      if (status === 'completed') {
        const results = batch.requests.map((item, index) =>
          index % 4 === 3
            ? { custom_id: item.custom_id, response: null, error: { code: 'invalid_request', message: 'refused by the model' } }
            : { custom_id: item.custom_id, response: { status_code: 200, request_id: `req_${index}`, body: { id: `chatcmpl-${index}`, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `answer ${index}` }, finish_reason: 'stop' }] } }, error: null },
        )
        batch.results = results.reverse()
        batch.request_counts = { total: batch.requests.length, completed: results.filter((item) => item.response).length, failed: results.filter((item) => item.error).length }
        batch.usage = { cost: 0.0123 }
        batch.finalized_at = Math.floor(Date.now() / 1000)
      } else if (status === 'failed' || status === 'expired' || status === 'cancelled') {
        batch.finalized_at = Math.floor(Date.now() / 1000)
        batch.error = status === 'failed' ? { code: 'batch_failed', message: 'The provider failed the batch.' } : null
      }
      Object.assign(batch, extra)
    },
    async close() {
      await server.stop(true)
    },
  }
  return gateway
}
