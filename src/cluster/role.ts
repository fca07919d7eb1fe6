/**
 * The node's role under LiteFS (CONTRACT §10): a replica while `$RT_LITEFS_DIR/.primary` exists
 * (the file holds the primary's hostname), the primary otherwise. Without RT_LITEFS_DIR the node
 * is alone, hence the primary. The file is polled, not watched: inotify does not see changes LiteFS
 * makes inside its own FUSE mount, and one stat a quarter second costs nothing.
 */
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

/** `primaryHost` is empty while a replica does not know its primary (LiteFS between two leases). */
export type NodeRole = { kind: 'primary' } | { kind: 'replica'; primaryHost: string }

const primaryRole: NodeRole = Object.freeze({ kind: 'primary' })

/**
 * Reads the role now: `.primary` present means replica, its first line naming the primary. Its
 * absence alone does not make a primary: LiteFS removes the file on a replica that has lost its
 * stream from the primary (a primary restarting, a partition). The mount's root tells them apart:
 * LiteFS shows it writable (0777) on the primary and read-only (0555) on a replica; such a replica
 * is one whose primary is unknown for now (`primaryHost` empty).
 */
export function readRole(litefsDir: string | undefined): NodeRole {
  if (!litefsDir) return primaryRole
  let text: string
  try {
    text = readFileSync(join(litefsDir, '.primary'), 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    return (statSync(litefsDir).mode & 0o222) !== 0 ? primaryRole : { kind: 'replica', primaryHost: '' }
  }
  // LiteFS writes the hostname alone; an empty file (caught mid-write) still means a replica.
  return { kind: 'replica', primaryHost: text.split('\n')[0]!.trim() }
}

export function sameRole(left: NodeRole, right: NodeRole): boolean {
  return left.kind === right.kind && (left.kind === 'primary' || left.primaryHost === (right as { primaryHost: string }).primaryHost)
}

/** The role as it changes: `current` is always the last one read; listeners hear every change. */
export class RoleWatcher {
  private role: NodeRole
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly listeners = new Set<(role: NodeRole, previous: NodeRole) => void | Promise<void>>()
  /** Role changes are applied one after the other: a promotion finishes before a demotion starts. */
  private applying: Promise<void> = Promise.resolve()

  constructor(
    readonly litefsDir: string | undefined,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    this.role = readRole(litefsDir)
  }

  current(): NodeRole {
    return this.role
  }

  onChange(listener: (role: NodeRole, previous: NodeRole) => void | Promise<void>): void {
    this.listeners.add(listener)
  }

  /** Starts polling (nothing to poll without RT_LITEFS_DIR). */
  start(intervalMs = 250): void {
    if (!this.litefsDir || this.timer) return
    this.timer = setInterval(() => this.check(), intervalMs)
    this.timer.unref?.()
  }

  /** Reads the file now; a change is applied to every listener in order. Resolves when applied. */
  check(): Promise<void> {
    let next: NodeRole
    try {
      next = readRole(this.litefsDir)
    } catch (error) {
      this.onError(error)
      return this.applying
    }
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

  /** Stops polling; resolves once a change being applied is done. */
  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    return this.applying
  }
}
