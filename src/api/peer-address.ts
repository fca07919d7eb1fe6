/**
 * The socket's peer address of a request, for what runs behind Elysia (the audit log's caller
 * address): the fetch handler (app.ts) records how to read it before handing the request over.
 */
const peers = new WeakMap<Request, () => string | undefined>()

export function recordPeer(request: Request, read: () => string | undefined) {
  peers.set(request, read)
}

export function peerAddress(request: Request): string | undefined {
  return peers.get(request)?.()
}
