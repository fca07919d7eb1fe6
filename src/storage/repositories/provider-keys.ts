/** Provider keys and the platform-wide gateway switches. */
import { and, asc, eq, inArray, isNull, sql } from 'drizzle-orm'
import type { Db } from '../client'
import type { ConfigChange } from './config-change'
import { gatewaySettings, inferenceKeys, providerKeys } from '../schema'

export type ProviderKeyRow = typeof providerKeys.$inferSelect

export function createProviderKeyRepository(db: Db, onWrite: (change?: ConfigChange) => void) {
  // Read by every key the management API shows: compiled once (drizzle builds its SQL on every call otherwise).
  const workspaceProviders = db
    .select()
    .from(providerKeys)
    .where(eq(providerKeys.workspaceId, sql.placeholder('workspaceId')))
    .orderBy(asc(providerKeys.createdAt), asc(providerKeys.id))
    .prepare()
  return {
    insert(row: typeof providerKeys.$inferInsert): ProviderKeyRow {
      const inserted = db.insert(providerKeys).values(row).returning().get()
      onWrite({ table: 'providers', id: row.id })
      return inserted
    },
    list(workspaceId: string, gateway?: string): ProviderKeyRow[] {
      if (!gateway) return workspaceProviders.all({ workspaceId })
      return db
        .select()
        .from(providerKeys)
        .where(and(eq(providerKeys.workspaceId, workspaceId), eq(providerKeys.gateway, gateway)))
        .orderBy(asc(providerKeys.createdAt), asc(providerKeys.id))
        .all()
    },
    get(workspaceId: string, id: string): ProviderKeyRow | undefined {
      return db
        .select()
        .from(providerKeys)
        .where(and(eq(providerKeys.workspaceId, workspaceId), eq(providerKeys.id, id)))
        .get()
    },
    getMany(workspaceId: string, ids: string[]): ProviderKeyRow[] {
      if (ids.length === 0) return []
      return db
        .select()
        .from(providerKeys)
        .where(and(eq(providerKeys.workspaceId, workspaceId), inArray(providerKeys.id, ids)))
        .all()
    },
    /** The gateway kinds that have an enabled provider key, in any workspace. */
    enabledGateways(): string[] {
      return db
        .selectDistinct({ gateway: providerKeys.gateway })
        .from(providerKeys)
        .where(isNull(providerKeys.disabledAt))
        .all()
        .map((row) => row.gateway)
    },
    listAll(): ProviderKeyRow[] {
      return db.select().from(providerKeys).all()
    },
    update(workspaceId: string, id: string, values: { label?: string; disabledAt?: string | null; notes?: string | null }): ProviderKeyRow | undefined {
      const updated = db
        .update(providerKeys)
        .set(values)
        .where(and(eq(providerKeys.workspaceId, workspaceId), eq(providerKeys.id, id)))
        .returning()
        .get()
      onWrite({ table: 'providers', id })
      return updated
    },
    /**
     * Removes the key. Targets and remaps pointing at it go with it (foreign-key cascade), and a
     * decisioner hosted on it is switched off, in the same transaction (SPEC "States": Provider key).
     */
    delete(workspaceId: string, id: string): boolean {
      const removed = db.transaction((tx) => {
        tx.update(inferenceKeys)
          .set({ decisioner: null })
          .where(and(eq(inferenceKeys.workspaceId, workspaceId), sql`json_extract(${inferenceKeys.decisioner}, '$.provider_key_id') = ${id}`))
          .run()
        return tx
          .delete(providerKeys)
          .where(and(eq(providerKeys.workspaceId, workspaceId), eq(providerKeys.id, id)))
          .returning({ id: providerKeys.id })
          .all()
      })
      onWrite()
      return removed.length > 0
    },
    setGatewayEnabled(gateway: string, enabled: boolean, now: string) {
      const row = db
        .insert(gatewaySettings)
        .values({ gateway, enabled, updatedAt: now })
        .onConflictDoUpdate({ target: gatewaySettings.gateway, set: { enabled, updatedAt: now } })
        .returning()
        .get()
      onWrite()
      return row
    },
  }
}
