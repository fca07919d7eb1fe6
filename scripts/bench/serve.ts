/** The benchmark's loopback servers (upstream, bare, floor): Bun.serve on 127.0.0.1, any free port, printed as `port N`. */
export function serveOnLoopback(fetch: (request: Request) => Response | Promise<Response>) {
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, idleTimeout: 0, development: false, fetch })
  process.stdout.write(`port ${server.port}\n`)
  return server
}
