/**
 * A mock upstream gateway for trying the router locally (README walkthrough):
 *   bun scripts/mock-gateway.ts --port 9101 [--fail 503] [--delay-ms 0] [--models a,b]
 * Answers OpenAI-style /chat/completions (buffered and SSE), /embeddings and /models by path suffix.
 * With --fail N every chat and embeddings call answers HTTP N, so a failover can be watched.
 */
import { startMockGateway } from '../test/harness/mock-gateway'

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? undefined : process.argv[index + 1]
}

const port = Number(flag('port') ?? 9101)
const failStatus = flag('fail') ? Number(flag('fail')) : undefined
const delayMs = Number(flag('delay-ms') ?? 0) // applies to failing answers
const models = flag('models')?.split(',')

const gateway = await startMockGateway({
  port,
  models,
  handler: (request) => {
    const call = request.path.endsWith('/chat/completions') || request.path.endsWith('/embeddings')
    if (call && failStatus) {
      return { status: failStatus, delayMs, json: { error: { message: `mock gateway on port ${port} answers ${failStatus}`, type: 'server_error' } } }
    }
    return undefined
  },
})
process.stdout.write(`mock gateway listening on ${gateway.url}${failStatus ? ` (every call answers ${failStatus})` : ''}\n`)
