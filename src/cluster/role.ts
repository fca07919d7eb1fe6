/**
 * The node's role under LiteFS (CONTRACT §10): a replica while `$RT_LITEFS_DIR/.primary` exists
 * (the file holds the primary's hostname), the primary otherwise. Without RT_LITEFS_DIR the node
 * is alone, hence the primary.
 *
 * Where LiteFS's local HTTP API answers (`RT_LITEFS_API_URL`), its event stream (`GET /events`:
 * one JSON object a line, `init` first, then `primaryChange` on every change) confirms the role and
 * decides it while connected: a promotion is acted on as LiteFS announces it, however long the
 * kernel keeps an old view of the mount. It also tells apart what the file cannot: a replica that
 * has lost its primary (no `.primary` there either) is `isPrimary: false` with no hostname, a
 * replica whose primary is unknown for now. A stream that ends is opened again, `/info` standing in
 * meanwhile. Without the API (or while neither answers) the file decides,
 * polled a quarter second apart: inotify does not see changes LiteFS makes inside its own mount.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

/** `primaryHost` is empty while a replica does not know its primary (LiteFS between two leases). */
export type NodeRole = { kind: 'primary' } | { kind: 'replica'; primaryHost: string }

const primaryRole: NodeRole = Object.freeze({ kind: 'primary' })
/** The longest wait for the head of LiteFS's answer to `GET /events` (the stream itself has no limit). */
const apiHeadTimeoutMs = 2000

/** Reads the role from the mount now: `.primary` present means replica, its first line naming the primary. */
export function readRole(litefsDir: string | undefined): NodeRole {
  if (!litefsDir) return primaryRole
  let text: string
  try {
    text = readFileSync(join(litefsDir, '.primary'), 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    return primaryRole
  }
  // LiteFS writes the hostname alone; an empty file (caught mid-write) still means a replica.
  return { kind: 'replica', primaryHost: text.split('\n')[0]!.trim() }
}

/** The role a LiteFS event or `/info` states (`isPrimary`, and the primary's hostname on a replica). */
export function roleFromLiteFs(state: { isPrimary?: unknown; hostname?: unknown }): NodeRole {
  if (state.isPrimary === true) return primaryRole
  return { kind: 'replica', primaryHost: typeof state.hostname === 'string' ? state.hostname : '' }
}

/**
 * The role LiteFS's `GET /info` states (`isPrimary`, `primary.hostname`), or undefined when the API
 * does not answer within `timeoutMs` (no LiteFS there, or one still starting).
 */
export async function fetchLiteFsRole(apiUrl: string, timeoutMs = 1000): Promise<NodeRole | undefined> {
  try {
    const response = await fetch(`${apiUrl.replace(/\/+$/, '')}/info`, { signal: AbortSignal.timeout(timeoutMs) })
    if (!response.ok) return undefined
    const info = (await response.json()) as { isPrimary?: unknown; primary?: { hostname?: unknown } }
    if (typeof info?.isPrimary !== 'boolean') return undefined
    return roleFromLiteFs({ isPrimary: info.isPrimary, hostname: info.primary?.hostname })
  } catch {
    return undefined
  }
}

/** The role a process starts with: LiteFS's `/info` where it answers, else the mount's `.primary`. */
export async function startingRole(config: { litefsDir: string | undefined; litefsApiUrl: string | undefined }): Promise<NodeRole> {
  if (!config.litefsDir) return primaryRole
  return (config.litefsApiUrl ? await fetchLiteFsRole(config.litefsApiUrl) : undefined) ?? readRole(config.litefsDir)
}

export function sameRole(left: NodeRole, right: NodeRole): boolean {
  return left.kind === right.kind && (left.kind === 'primary' || left.primaryHost === (right as { primaryHost: string }).primaryHost)
}

export interface RoleWatcherOptions {
  /** The role to start with (`startingRole`); default: the file's. */
  initial?: NodeRole
  /** LiteFS's local API (`RT_LITEFS_API_URL`); none: the file alone decides. */
  apiUrl?: string
  /** Heard when the API's stream first says the role, and when it is lost with `/info` not answering either. */
  onApi?: (event: 'connected' | 'lost', detail: string) => void
  /** How long `start()` waits for the API's first event before going on with the file's role; default 1000 ms. */
  apiWaitMs?: number
  /** Between two attempts to reach the API; default 1000 ms. */
  apiRetryMs?: number
}

/** The role as it changes: `current` is always the last one known; listeners hear every change. */
export class RoleWatcher {
  private role: NodeRole
  /** What LiteFS's API said last, while its event stream is open; undefined otherwise. */
  private apiRole: NodeRole | undefined
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly listeners = new Set<(role: NodeRole, previous: NodeRole) => void | Promise<void>>()
  /** Role changes are applied one after the other: a promotion finishes before a demotion starts. */
  private applying: Promise<void> = Promise.resolve()
  private events: AbortController | undefined
  private eventsLoop: Promise<void> | undefined

  constructor(
    readonly litefsDir: string | undefined,
    private readonly onError: (error: unknown) => void = () => {},
    private readonly options: RoleWatcherOptions = {},
  ) {
    this.role = options.initial ?? readRole(litefsDir)
  }

  current(): NodeRole {
    return this.role
  }

  /** The role now: LiteFS's word while its API is connected, else the file read this moment. */
  readNow(): NodeRole {
    return this.apiRole ?? readRole(this.litefsDir)
  }

  /** Whether LiteFS's event stream is open and has said the role. */
  apiConnected(): boolean {
    return this.apiRole !== undefined
  }

  onChange(listener: (role: NodeRole, previous: NodeRole) => void | Promise<void>): void {
    this.listeners.add(listener)
  }

  /**
   * Starts following the role (nothing to follow without RT_LITEFS_DIR): the file's poll, and LiteFS's
   * event stream where its API is configured. Resolves once the API's first event is applied, or
   * when the API did not answer (at most `apiWaitMs`): the role the node starts its duties with.
   */
  async start(intervalMs = 250): Promise<void> {
    if (!this.litefsDir || this.timer || this.events) return
    if (this.options.apiUrl) {
      const { promise: firstAnswer, resolve } = Promise.withResolvers<void>()
      this.events = new AbortController()
      this.eventsLoop = this.followEvents(this.options.apiUrl, this.events.signal, resolve)
      const wait = setTimeout(resolve, this.options.apiWaitMs ?? 1000)
      await firstAnswer
      clearTimeout(wait)
      // Stopped while waiting: nothing more to start.
      if (!this.events) return
    }
    // The poll after the API's first word: until then the file could contradict what `/info` said.
    this.timer = setInterval(() => void this.check(), intervalMs)
    this.timer.unref?.()
    await this.applying
  }

  /** Reads the role now (the API's while connected, else the file); a change is applied to every listener in order. */
  check(): Promise<void> {
    let next: NodeRole
    try {
      next = this.readNow()
    } catch (error) {
      this.onError(error)
      return this.applying
    }
    return this.apply(next)
  }

  private apply(next: NodeRole): Promise<void> {
    if (sameRole(next, this.role)) return this.applying
    const previous = this.role
    this.role = next
    this.applying = this.applying.then(async () => {
      for (const listener of this.listeners) {
        try {
          await listener(next, previous)
        } catch (error) {
          this.onError(error)
        }
      }
    })
    return this.applying
  }

  /**
   * LiteFS's `GET /events`, kept open and opened again a second after it ends. `init` and
   * `primaryChange` set the role; `tx` (one per transaction replicated) is skipped unparsed.
   */
  private async followEvents(apiUrl: string, signal: AbortSignal, answered: () => void): Promise<void> {
    const url = `${apiUrl.replace(/\/+$/, '')}/events`
    while (!signal.aborted) {
      let lostBecause = 'the stream ended'
      // This attempt's own signal: the watcher's stop, and a limit on the wait for the answer's head
      // (an API that takes the connection and never answers would keep the file deciding for good).
      const attempt = new AbortController()
      const abortAttempt = () => attempt.abort()
      signal.addEventListener('abort', abortAttempt, { once: true })
      const headLimit = setTimeout(abortAttempt, apiHeadTimeoutMs)
      try {
        const response = await fetch(url, { signal: attempt.signal })
        clearTimeout(headLimit)
        if (!response.ok || !response.body) {
          await response.body?.cancel().catch(() => undefined)
          throw new Error(`GET /events answered ${response.status}`)
        }
        const decoder = new TextDecoder()
        let pending = ''
        for await (const chunk of response.body) {
          pending += decoder.decode(chunk, { stream: true })
          for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n')) {
            const line = pending.slice(0, end)
            pending = pending.slice(end + 1)
            const role = eventRole(line)
            if (!role) continue
            if (this.apiRole === undefined) this.options.onApi?.('connected', url)
            this.apiRole = role
            void this.apply(role)
            answered()
          }
        }
      } catch (error) {
        if (!signal.aborted) lostBecause = attempt.signal.aborted ? `no answer from GET /events within ${apiHeadTimeoutMs} ms` : error instanceof Error ? error.message : String(error)
      } finally {
        clearTimeout(headLimit)
        signal.removeEventListener('abort', abortAttempt)
        answered()
      }
      if (signal.aborted) break
      if (this.apiRole !== undefined) {
        // LiteFS drops a subscriber that reads too slowly, and restarts: while `/info` still answers,
        // its word stands (the file may be the stale view the API is there to correct); only when
        // the API is gone does the file decide, read at once.
        const confirmed = await fetchLiteFsRole(apiUrl)
        if (signal.aborted) break
        if (confirmed) {
          this.apiRole = confirmed
          void this.apply(confirmed)
        } else {
          this.apiRole = undefined
          this.options.onApi?.('lost', lostBecause)
          void this.check()
        }
      }
      // The wait before trying again ends at once when the watcher stops.
      await new Promise<void>((done) => {
        const stop = () => {
          clearTimeout(timer)
          done()
        }
        const timer = setTimeout(() => {
          signal.removeEventListener('abort', stop)
          done()
        }, this.options.apiRetryMs ?? 1000)
        signal.addEventListener('abort', stop, { once: true })
      })
    }
  }

  /** Stops polling and the event stream; resolves once a change being applied is done. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    this.events?.abort()
    this.events = undefined
    await this.eventsLoop?.catch(() => undefined)
    this.eventsLoop = undefined
    this.apiRole = undefined
    return this.applying
  }
}

/** The role an `/events` line states, or undefined for a line that states none (`tx` and the like). */
function eventRole(line: string): NodeRole | undefined {
  // Go's encoder writes `type` first: a transaction's event is told by its start, not parsed.
  if (line.startsWith('{"type":"tx"') || line.trim() === '') return undefined
  let event: { type?: unknown; data?: { isPrimary?: unknown; hostname?: unknown } }
  try {
    event = JSON.parse(line)
  } catch {
    return undefined
  }
  if ((event.type !== 'init' && event.type !== 'primaryChange') || typeof event.data !== 'object' || event.data === null) return undefined
  return roleFromLiteFs(event.data)
}
