/**
 * A mock upstream gateway for trying the router locally (README walkthrough):
 *   ./scripts/mock-gateway --port 9101 [--fail 503] [--delay-ms 0] [--models a,b] [--prices a=0.15/0.6] [--cut-after N] [--echo]
 * Answers OpenAI-style /chat/completions (buffered and SSE), /embeddings and /models by path suffix.
 * With --fail N every chat and embeddings call answers HTTP N, so a failover can be watched.
 */
import { parseArgs } from 'node:util'

const help = `usage: ./scripts/mock-gateway [--port N] [--fail STATUS] [--delay-ms N] [--models a,b] [--prices a=P/C,b=P/C] [--cut-after N] [--echo]

A mock upstream gateway on 127.0.0.1 for local trials: answers OpenAI-style /chat/completions
(buffered and streamed), /embeddings and /models by path suffix. Point a gateway kind at it with
RT_GATEWAY_URL_<SLUG>=http://127.0.0.1:N (e.g. RT_GATEWAY_URL_OPENAI).
  --port N         listen port, default 9101 (0 picks a free one)
  --fail STATUS    every chat and embeddings call answers HTTP STATUS (to watch a failover)
  --delay-ms N     wait N ms before each failing answer, default 0
  --cut-after N    a streamed chat answer (a sentence, word by word) is cut after N words: the
                   connection drops mid-answer (to watch a key with continuation finish it); a
                   request that carries the partial answer gets the rest of the sentence
  --echo           a chat answer repeats the last user message ("You wrote: …"), buffered or
                   streamed word by word, and the message as received is printed (to watch what a
                   key's guardrails let go upstream, and what they put back)
  --models a,b     the model ids /models lists
  --prices a=P/C   list model a with prices, USD per million prompt (P) and completion (C) tokens,
                   as OpenRouter's catalog does (the router prices requests and spend caps by them);
                   comma-separated for several; models named here are listed too
`

function fail(message: string): never {
  process.stderr.write(`mock-gateway: ${message}\n${help}`)
  process.exit(1)
}

let values: { port?: string; fail?: string; 'delay-ms'?: string; models?: string; prices?: string; 'cut-after'?: string; echo?: boolean; help?: boolean }
try {
  values = parseArgs({
    args: process.argv.slice(2),
    options: { port: { type: 'string' }, fail: { type: 'string' }, 'delay-ms': { type: 'string' }, models: { type: 'string' }, prices: { type: 'string' }, 'cut-after': { type: 'string' }, echo: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
    allowPositionals: false,
  }).values
} catch (error) {
  fail(error instanceof Error ? error.message.split('\n')[0]! : String(error))
}
if (values.help) {
  process.stdout.write(help)
  process.exit(0)
}

function integer(name: string, text: string | undefined, fallback: number | undefined): number | undefined {
  if (text === undefined) return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < 0) fail(`--${name} must be a whole number, got '${text}'`)
  return value
}

const port = integer('port', values.port, 9101)!
const failStatus = integer('fail', values.fail, undefined)
const delayMs = integer('delay-ms', values['delay-ms'], 0)! // applies to failing answers
const cutAfter = integer('cut-after', values['cut-after'], undefined)
const sentence = 'The quick brown fox jumps over the lazy dog, and then it runs far away into the green forest.'

/** A streamed chat answer of the sentence's words from `from` (characters), cut after `cut` words when given. */
function sentenceStream(model: string, from: number, cut: number | undefined, text = sentence) {
  const words = text.slice(from).match(/\S+\s*|\s+/g) ?? []
  const base = { id: `chatcmpl-mock-${crypto.randomUUID().slice(0, 8)}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model }
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
  const events: unknown[] = [chunk({ role: 'assistant', content: '' }), ...words.map((word) => chunk({ content: word }))]
  events.push(chunk({}, 'stop'), { ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: words.length, total_tokens: 12 + words.length } }, '[DONE]')
  return { sse: events, chunkDelayMs: 40, ...(cut !== undefined && cut < words.length ? { breakAfter: 1 + cut } : {}) }
}
const models = values.models?.split(',')
const prices = new Map<string, { prompt: string; completion: string }>()
for (const entry of values.prices?.split(',') ?? []) {
  const match = /^([^=]+)=([0-9.]+)\/([0-9.]+)$/.exec(entry.trim())
  if (!match) fail(`--prices takes model=PROMPT/COMPLETION (USD per million tokens), got '${entry}'`)
  const perToken = (perMillion: string) => String(Number(perMillion) / 1_000_000)
  prices.set(match[1]!, { prompt: perToken(match[2]!), completion: perToken(match[3]!) })
}
const listed = [...new Set([...(models ?? []), ...prices.keys()])]

// Loaded after the argument check, so --help works before the dependencies are installed.
const { startMockGateway } = await import('../test/harness/mock-gateway')
const gateway = await startMockGateway({
  port,
  models,
  handler: (request) => {
    if (prices.size > 0 && request.path.endsWith('/models')) {
      return { json: { object: 'list', data: listed.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'mock', ...(prices.has(id) ? { pricing: prices.get(id) } : {}) })) } }
    }
    const call = request.path.endsWith('/chat/completions') || request.path.endsWith('/embeddings')
    if (call && failStatus) {
      return { status: failStatus, delayMs, json: { error: { message: `mock gateway on port ${port} answers ${failStatus}`, type: 'server_error' } } }
    }
    if (values.echo && request.path.endsWith('/chat/completions')) {
      const messages: any[] = Array.isArray(request.body?.messages) ? request.body.messages : []
      const last = messages.findLast((message) => message?.role === 'user')?.content
      const said = typeof last === 'string' ? last : JSON.stringify(last ?? '')
      process.stdout.write(`received: ${said}\n`)
      const answer = `You wrote: ${said}`
      const model = String(request.body?.model ?? 'mock')
      if (request.body?.stream === true) return sentenceStream(model, 0, undefined, answer)
      return { json: { id: `chatcmpl-mock-${crypto.randomUUID().slice(0, 8)}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }], usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 } } }
    }
    if (cutAfter !== undefined && request.path.endsWith('/chat/completions') && request.body?.stream === true) {
      // A continuation carries the partial answer as an assistant turn: the rest of the sentence follows.
      const messages: any[] = Array.isArray(request.body.messages) ? request.body.messages : []
      const partial = messages.findLast((message) => message?.role === 'assistant' && typeof message.content === 'string')?.content as string | undefined
      const from = partial && sentence.startsWith(partial) ? partial.length : 0
      return sentenceStream(String(request.body.model ?? 'mock'), from, from === 0 ? cutAfter : undefined)
    }
    return undefined
  },
})
process.stdout.write(`mock gateway listening on ${gateway.url}${failStatus ? ` (every call answers ${failStatus})` : ''}${cutAfter !== undefined ? ` (streams cut after ${cutAfter} words)` : ''}\n`)
