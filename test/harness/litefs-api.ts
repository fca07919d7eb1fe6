/**
 * LiteFS's local HTTP API as a node's service sees it (CONTRACT §10), on 127.0.0.1: `GET /info`
 * (`isPrimary`, `primary.hostname`) and `GET /events` (one JSON object a line: `init` on connect,
 * then `primaryChange` and `tx`), in the shapes of superfly/litefs 0.5 (http/server.go, store.go).
 * With a mount folder it also keeps that mount's `.primary` as LiteFS does: absent on the primary,
 * the primary's hostname on a replica. Tests move the role with `announce`.
 */
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface LiteFsState {
  isPrimary: boolean
  /** The primary's hostname on a replica; empty while it knows none. */
  hostname: string
}

export interface FakeLiteFs extends AsyncDisposable {
  url: string
  state(): LiteFsState
  /** A new role: `.primary` in the mount first (when there is one), then `primaryChange` on every open stream. */
  announce(state: LiteFsState, options?: { file?: boolean }): void
  /** A transaction's event, as a busy primary sends them. */
  tx(txid: number): void
  /** Closes every open event stream (LiteFS dropping a slow subscriber, or restarting). */
  dropStreams(): void
  /** How many event streams are open now. */
  subscribers(): number
  close(): Promise<void>
}

export function startFakeLiteFs(initial: LiteFsState, mountDir?: string): FakeLiteFs {
  let current = { ...initial }
  const streams = new Set<ReadableStreamDefaultController<Uint8Array>>()
  const encoder = new TextEncoder()
  const send = (event: unknown) => {
    const line = encoder.encode(`${JSON.stringify(event)}\n`)
    for (const stream of streams) {
      try {
        stream.enqueue(line)
      } catch {
        streams.delete(stream)
      }
    }
  }
  const eventData = (state: LiteFsState) => (state.hostname ? { isPrimary: state.isPrimary, hostname: state.hostname } : { isPrimary: state.isPrimary })
  const writeFile = (state: LiteFsState) => {
    if (!mountDir) return
    if (state.isPrimary || state.hostname === '') rmSync(join(mountDir, '.primary'), { force: true })
    else writeFileSync(join(mountDir, '.primary'), `${state.hostname}\n`)
  }
  writeFile(current)
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    fetch(request) {
      const path = new URL(request.url).pathname
      if (request.method !== 'GET') return new Response('method not allowed\n', { status: 405 })
      if (path === '/info') {
        const info = { clusterID: 'LFSC0123456789ABCDEF', isPrimary: current.isPrimary, candidate: true, path: '/var/lib/litefs', primary: { hostname: current.isPrimary ? 'self' : current.hostname } }
        return new Response(`${JSON.stringify(info, null, 2)}\n`, { headers: { 'content-type': 'application/json' } })
      }
      if (path === '/events') {
        let controller!: ReadableStreamDefaultController<Uint8Array>
        const body = new ReadableStream<Uint8Array>({
          start(opened) {
            controller = opened
            streams.add(controller)
            controller.enqueue(encoder.encode(`${JSON.stringify({ type: 'init', data: eventData(current) })}\n`))
          },
          cancel() {
            streams.delete(controller)
          },
        })
        return new Response(body, { headers: { 'content-type': 'application/json' } })
      }
      return new Response('404 page not found\n', { status: 404 })
    },
  })
  const fake: FakeLiteFs = {
    url: `http://127.0.0.1:${server.port}`,
    state: () => ({ ...current }),
    announce(state, options = {}) {
      current = { ...state }
      if (options.file !== false) writeFile(current)
      send({ type: 'primaryChange', data: eventData(current) })
    },
    tx(txid) {
      send({ type: 'tx', db: 'router.db', data: { txID: txid.toString(16).padStart(16, '0'), postApplyChecksum: 'b0aa9fcd4cb2a0f0', pageSize: 4096, commit: 12, timestamp: new Date().toISOString() } })
    },
    dropStreams() {
      for (const stream of streams) {
        try {
          stream.close()
        } catch {}
      }
      streams.clear()
    },
    subscribers: () => streams.size,
    async close() {
      fake.dropStreams()
      await server.stop(true)
    },
    [Symbol.asyncDispose]: () => fake.close(),
  }
  return fake
}
