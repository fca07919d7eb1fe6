/** Workspaces, members and management keys. */
import { and, count, eq, sql } from 'drizzle-orm'
import type { Db } from '../client'
import type { ConfigChange } from './config-change'
import { managementKeys, members, workspaces } from '../schema'

export type WorkspaceRow = typeof workspaces.$inferSelect
export type ManagementKeyRow = typeof managementKeys.$inferSelect
export type MemberRow = typeof members.$inferSelect

export interface WorkspaceSettingsPatch {
  allowedIps?: string[]
  steeringMessage?: string | null
  captureBodies?: boolean
  suspended?: boolean
  /** The last purge of the workspace's shared response cache entries (Unix ms). */
  cachePurgedAt?: number
}

export function createWorkspaceRepository(db: Db, onWrite: (change?: ConfigChange) => void) {
  // Every management request's authentication: compiled once (drizzle builds its SQL on every call otherwise).
  const managementKeysByPrefix = db.select().from(managementKeys).where(eq(managementKeys.prefix, sql.placeholder('prefix'))).prepare()
  return {
    insert(row: { id: string; name: string; kind: string; createdAt: string }): WorkspaceRow {
      const inserted = db.insert(workspaces).values(row).returning().get()
      onWrite({ table: 'workspaces', id: row.id })
      return inserted
    },
    get(id: string): WorkspaceRow | undefined {
      return db.select().from(workspaces).where(eq(workspaces.id, id)).get()
    },
    listAll(): WorkspaceRow[] {
      return db.select().from(workspaces).all()
    },
    count(): number {
      return db.select({ value: count() }).from(workspaces).get()!.value
    },
    updateSettings(id: string, patch: WorkspaceSettingsPatch): WorkspaceRow | undefined {
      const values: Partial<WorkspaceRow> = {}
      if (patch.allowedIps !== undefined) values.allowedIps = JSON.stringify(patch.allowedIps)
      if (patch.steeringMessage !== undefined) values.steeringMessage = patch.steeringMessage
      if (patch.captureBodies !== undefined) values.captureBodies = patch.captureBodies
      if (patch.suspended !== undefined) values.suspended = patch.suspended
      if (patch.cachePurgedAt !== undefined) values.cachePurgedAt = patch.cachePurgedAt
      if (Object.keys(values).length === 0) return this.get(id)
      const updated = db.update(workspaces).set(values).where(eq(workspaces.id, id)).returning().get()
      onWrite({ table: 'workspaces', id })
      return updated
    },
    addMember(row: { id: string; workspaceId: string; email: string; createdAt: string }): MemberRow {
      const inserted = db.insert(members).values(row).returning().get()
      onWrite({ table: 'none' })
      return inserted
    },
    listMembers(workspaceId: string): MemberRow[] {
      return db.select().from(members).where(eq(members.workspaceId, workspaceId)).all()
    },
    countMembers(workspaceId: string): number {
      return db.select({ value: count() }).from(members).where(eq(members.workspaceId, workspaceId)).get()!.value
    },
    insertManagementKey(row: typeof managementKeys.$inferInsert): ManagementKeyRow {
      const inserted = db.insert(managementKeys).values(row).returning().get()
      onWrite({ table: 'none' })
      return inserted
    },
    listManagementKeys(workspaceId: string): ManagementKeyRow[] {
      return db.select().from(managementKeys).where(eq(managementKeys.workspaceId, workspaceId)).orderBy(managementKeys.createdAt).all()
    },
    findManagementKeysByPrefix(prefix: string): ManagementKeyRow[] {
      return managementKeysByPrefix.all({ prefix })
    },
    getManagementKey(id: string): ManagementKeyRow | undefined {
      return db.select().from(managementKeys).where(eq(managementKeys.id, id)).get()
    },
    setManagementKeyReadOnly(id: string, readOnly: boolean): ManagementKeyRow | undefined {
      const updated = db.update(managementKeys).set({ readOnly }).where(eq(managementKeys.id, id)).returning().get()
      onWrite({ table: 'none' })
      return updated
    },
    countManagementKeys(workspaceId: string): { total: number; readOnly: number } {
      const total = db.select({ value: count() }).from(managementKeys).where(eq(managementKeys.workspaceId, workspaceId)).get()!.value
      const readOnly = db
        .select({ value: count() })
        .from(managementKeys)
        .where(and(eq(managementKeys.workspaceId, workspaceId), eq(managementKeys.readOnly, true)))
        .get()!.value
      return { total, readOnly }
    },
  }
}
