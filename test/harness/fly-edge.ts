/**
 * fly.io's proxy as the LiteFS tests need it, on 127.0.0.1, in front of service processes known by
 * their machine hostnames:
 * - as the **edge**, it sends a client's request to one machine (round robin, or the one named in
 *   `x-test-machine`), moves on to the next when a machine refuses the connection (nothing was
 *   sent: a dead machine), and replays a `409` carrying `fly-replay: instance=<host>` on that
 *   machine, as fly's edge does (request bodies are kept for the replay);
 * - as the **private network**, it sends every request to the machine the test says is the primary
 *   (what `http://<primary>.vm.<app>.internal` resolves to), for the replicas' log shipping.
 * Every machine's answer is counted by status; a request cut by a machine dying under it is
 * answered 502 by the proxy (counted apart, as `cut`).
 */
export interface FlyProxy extends AsyncDisposable {
  url: string
  /** How many answers each status had, from the machines themselves (a replayed request counts each hop). */
  statuses: Map<number, number>
  /** Requests a machine died under (sent, then the connection broke). */
  cut: number
  close(): Promise<void>
}

export interface FlyProxyOptions {
  /** The machines' URLs by hostname, as they are now (a restarted machine gets a new port). */
  machines: () => ReadonlyMap<string, string>
  /** The machines to try, in order, for a request; default: round robin over all, each once. */
  route?: (request: Request) => string[]
}

export function startFlyProxy(options: FlyProxyOptions): FlyProxy {
  let turn = 0
  const statuses = new Map<number, number>()
  const proxy: FlyProxy = { url: '', statuses, cut: 0, close: async () => {}, [Symbol.asyncDispose]: () => proxy.close() }
  const roundRobin = (request: Request) => {
    const names = [...options.machines().keys()]
    const named = request.headers.get('x-test-machine')
    if (named) return [named, ...names.filter((name) => name !== named)]
    const start = turn++ % names.length
    return [...names.slice(start), ...names.slice(0, start)]
  }
  const route = options.route ?? roundRobin

  /** One hop: the machine's answer (body read whole), `refused` when nothing was sent, `cut` when it broke after. */
  async function hop(machine: string, request: Request, body: ArrayBuffer | undefined): Promise<Response | 'refused' | 'cut'> {
    const base = options.machines().get(machine)
    if (!base) return 'refused'
    const url = new URL(request.url)
    const headers = new Headers(request.headers)
    headers.delete('host')
    headers.delete('x-test-machine')
    try {
      const answer = await fetch(`${base}${url.pathname}${url.search}`, { method: request.method, headers, body, redirect: 'manual' })
      const bytes = await answer.arrayBuffer()
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
      return new Response(bytes, { status: answer.status, headers: answer.headers })
    } catch (error) {
      const code = (error as { code?: string }).code
      return code === 'ECONNREFUSED' || code === 'ConnectionRefused' ? 'refused' : 'cut'
    }
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer()
      for (const machine of route(request)) {
        let answer = await hop(machine, request, body)
        if (answer === 'refused') continue
        // fly's edge replays the request on the machine a 409 names.
        const replay = answer instanceof Response && answer.status === 409 ? /^instance=(\S+)$/.exec(answer.headers.get('fly-replay') ?? '')?.[1] : undefined
        if (replay) answer = await hop(replay, request, body)
        if (answer instanceof Response) return answer
        if (answer === 'cut') proxy.cut++
        return Response.json({ error: answer === 'cut' ? 'fly proxy: the machine went away during the request' : `fly proxy: ${replay} is unreachable` }, { status: 502 })
      }
      return Response.json({ error: 'fly proxy: no machine answers' }, { status: 503 })
    },
  })
  proxy.url = `http://127.0.0.1:${server.port}`
  proxy.close = () => server.stop(true)
  return proxy
}
