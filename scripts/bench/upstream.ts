/**
 * Benchmark upstream: a fixed ~1 KB chat completion, a 20-chunk SSE stream, a fixed Response
 * object, and an immediate 500 under the `/fail` prefix. Optional fixed latency (BENCH_LATENCY_MS).
 * Stream chunks come BENCH_CHUNK_GAP_MS apart (default 2, a model's pace), except for a request
 * whose body says `"user":"burst"` (a chat field forwarded as sent by every system): its chunks come
 * at once, so streams per second measure the proxy's own cost per stream. Prints `port N` when ready.
 */
import { serveOnLoopback } from './serve'

const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 0)
const chunkGapMs = Number(process.env.BENCH_CHUNK_GAP_MS ?? 2)

const filler = 'The quick brown fox jumps over the lazy dog. '.repeat(17).trim()
const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: filler }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 180, total_tokens: 192 },
})
const responseObject = JSON.stringify({
  id: 'resp_bench',
  object: 'response',
  created_at: 1_700_000_000,
  status: 'completed',
  model: 'gpt-4o-mini',
  output: [{ id: 'msg_bench', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: filler, annotations: [] }] }],
  usage: { input_tokens: 12, output_tokens: 180, total_tokens: 192 },
})
const encoder = new TextEncoder()
const chunk = (index: number) =>
  encoder.encode(
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: `token${index} ` }, finish_reason: null }] })}\n\n`,
  )
const chunks = Array.from({ length: 20 }, (_, index) => chunk(index))
const finish = encoder.encode(
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-4o-mini', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 12, completion_tokens: 20, total_tokens: 32 } })}\n\ndata: [DONE]\n\n`,
)

const json = { 'content-type': 'application/json' }

serveOnLoopback(async (request) => {
  const path = new URL(request.url).pathname
  const body = await request.text()
  if (path.startsWith('/fail')) return new Response('{"error":{"message":"bench: failing target","type":"server_error"}}', { status: 500, headers: json })
  if (latencyMs) await Bun.sleep(latencyMs)
  if (path.endsWith('/responses')) return new Response(responseObject, { headers: json })
  if (path.endsWith('/models')) return new Response('{"object":"list","data":[]}', { headers: json })
  if (body.includes('"stream":true')) {
    const gapMs = body.includes('"user":"burst"') ? 0 : chunkGapMs
    let index = 0
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (index > 0 && gapMs) await Bun.sleep(gapMs)
        if (index < chunks.length) controller.enqueue(chunks[index++]!)
        else {
          controller.enqueue(finish)
          controller.close()
        }
      },
    })
    return new Response(stream, { headers: { 'content-type': 'text/event-stream' } })
  }
  return new Response(completion, { headers: json })
})
