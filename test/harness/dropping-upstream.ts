/**
 * An upstream that cannot be reached: a loopback listener that closes every connection as it opens,
 * so a request to it fails before any answer. It holds its port while the test runs: a port freed
 * for the purpose could be taken meanwhile by another server of the suite, which then answers.
 */
export function droppingUpstream(): { url: string; [Symbol.dispose](): void } {
  const listener = Bun.listen({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.end()
      },
      data() {},
    },
  })
  return { url: `http://127.0.0.1:${listener.port}`, [Symbol.dispose]: () => listener.stop(true) }
}
