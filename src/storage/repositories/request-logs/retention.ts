/**
 * Retention (CONTRACT §14), for the daily prune: small batches, each its own statement (and so its
 * own transaction), found through an index. The workspaces that have rows come from a skip scan of
 * the workspace/time index, one seek each; a workspace's old rows are the front of its part of it.
 */
import type { Db } from '../../client'

/** The prune's statements prepared once, and the reads and deletes over them. */
export function prepareRetention(db: Db) {
  const nextWorkspace = db.$client.prepare<{ workspace_id: string }, [string]>('select workspace_id from request_logs where workspace_id > ? order by workspace_id limit 1')
  const firstWorkspace = db.$client.prepare<{ workspace_id: string }, []>('select workspace_id from request_logs order by workspace_id limit 1')
  const deleteOld = db.$client.prepare<unknown, [string, number, number]>(
    'delete from request_logs where seq in (select seq from request_logs where workspace_id = ? and created_at < ? limit ?)',
  )
  // Hour roll-ups by their primary key (workspace first, then hour); day roll-ups are never deleted.
  const nextRolledWorkspace = db.$client.prepare<{ workspace_id: string }, [string]>('select workspace_id from usage_rollups where workspace_id > ? order by workspace_id limit 1')
  const firstRolledWorkspace = db.$client.prepare<{ workspace_id: string }, []>('select workspace_id from usage_rollups order by workspace_id limit 1')
  const deleteOldHours = db.$client.prepare<unknown, [string, number, number]>(
    'delete from usage_rollups where rowid in (select rowid from usage_rollups where workspace_id = ? and hour < ? limit ?)',
  )
  // Through the partial index request_logs_body_time_idx: only rows that still hold a body.
  const clearOldBodies = db.$client.prepare<unknown, [number, number]>(
    'update request_logs set request_body = null where seq in (select seq from request_logs where request_body is not null and created_at < ? limit ?)',
  )

  return {
    /** The workspace ids that have rows ('' for requests no key was found for), in order. */
    workspaceIds(): string[] {
      const ids: string[] = []
      for (let row = firstWorkspace.get(); row; row = nextWorkspace.get(row.workspace_id)) ids.push(row.workspace_id)
      return ids
    },
    /** Deletes up to `limit` of a workspace's rows created before `beforeMs`; returns how many. */
    deleteBefore(workspaceId: string, beforeMs: number, limit: number): number {
      return deleteOld.run(workspaceId, beforeMs, limit).changes
    },
    /** The workspace ids that have hour roll-ups, in order. */
    rolledWorkspaceIds(): string[] {
      const ids: string[] = []
      for (let row = firstRolledWorkspace.get(); row; row = nextRolledWorkspace.get(row.workspace_id)) ids.push(row.workspace_id)
      return ids
    },
    /** Deletes up to `limit` of a workspace's hour roll-ups of hours before `beforeMs`; returns how many. */
    deleteHoursBefore(workspaceId: string, beforeMs: number, limit: number): number {
      return deleteOldHours.run(workspaceId, beforeMs, limit).changes
    },
    /** Clears the captured body of up to `limit` rows created before `beforeMs` (the rows stay); returns how many. */
    clearBodiesBefore(beforeMs: number, limit: number): number {
      return clearOldBodies.run(beforeMs, limit).changes
    },
  }
}
