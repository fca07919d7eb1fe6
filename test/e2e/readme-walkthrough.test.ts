/**
 * The README's five-minute walkthrough, steps 1 to 5, run as written in one bash shell: its own
 * code blocks, with only the two ports moved to free ones and the data directory to a temporary
 * one. The first request is routed with the spelling the router learned from the gateway's
 * model list when the provider key was stored (scheduler/catalog-follow.ts): the mock answers with
 * the model it was asked for.
 */
import { afterEach, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { baseEnvironment, repoRoot, tempDir } from '../harness/service-process'

const children: ReturnType<typeof Bun.spawn>[] = []
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) child.kill('SIGKILL')
    await child.exited
  }
})

function freePort(): number {
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() })
  const port = server.port!
  server.stop(true)
  return port
}

test('the walkthrough runs as written, and its first request goes out as the gateway spells the model', async () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Five-minute walkthrough'), readme.indexOf('### Watching a failover'))
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.replace(/^ {3}/gm, ''))
  expect(blocks).toHaveLength(5)
  const [mockPort, routerPort] = [freePort(), freePort()]
  const moved = (text: string) => text.replaceAll('9101', String(mockPort)).replaceAll('8080', String(routerPort))
  const script = [
    'set -e',
    `export PORT=${routerPort}`,
    ...blocks.slice(0, 4).map(moved),
    'echo "walkthrough-answer: $(' + moved(blocks[4]!).trim().replace(/\\\n\s*/g, ' ') + ')"',
    'kill $ROUTER $MOCK',
    'wait $ROUTER || true',
  ].join('\n')
  const child = Bun.spawn(['bash', '-c', script], {
    cwd: repoRoot,
    env: { ...baseEnvironment(), RT_DATA_DIR: tempDir(), RT_SKIP_INSTALL: '1', RT_LOG_LEVEL: 'warn' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  children.push(child)
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  const line = stdout.split('\n').find((text) => text.startsWith('walkthrough-answer: '))
  expect({ code, found: line !== undefined, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, found: true, stderr: '' })
  const answer = JSON.parse(line!.slice('walkthrough-answer: '.length))
  expect(answer).toMatchObject({ object: 'chat.completion', model: 'gpt-4o-mini', choices: [{ message: { role: 'assistant' } }] })
}, 60_000)
