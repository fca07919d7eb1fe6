/** Inference keys with their routing rules (targets, remaps, decisioner) and attached MCP servers. */
import { and, asc, desc, eq, inArray, or, sql } from 'drizzle-orm'
import type { Db } from '../client'
import type { ConfigChange } from './config-change'
import { inferenceKeys, keyMcpServers, modelRemaps, routingTargets } from '../schema'
import type { StoredRemap, StoredRule, StoredTarget } from '../../domain/routing-rule'

export type InferenceKeyRow = typeof inferenceKeys.$inferSelect
export type KeyMcpServerRow = typeof keyMcpServers.$inferSelect

// The rule's shape is plain data on the floor (domain/routing-rule.ts): management, the read model and the planner share it.
export type { StoredRemap, StoredRule, StoredTarget } from '../../domain/routing-rule'

export interface KeyWithRule {
  key: InferenceKeyRow
  rule: StoredRule
}

type Transaction = Parameters<Parameters<Db['transaction']>[0]>[0]

function writeRule(tx: Transaction, keyId: string, rule: StoredRule) {
  tx.delete(routingTargets).where(eq(routingTargets.keyId, keyId)).run()
  tx.delete(modelRemaps).where(eq(modelRemaps.keyId, keyId)).run()
  if (rule.targets.length > 0) {
    tx.insert(routingTargets)
      .values(rule.targets.map((target, position) => ({ keyId, position, ...target })))
      .run()
  }
  if (rule.remaps.length > 0) {
    tx.insert(modelRemaps)
      .values(rule.remaps.map((remap, position) => ({ keyId, position, ...remap })))
      .run()
  }
  tx.update(inferenceKeys)
    .set({ routingStrategy: rule.strategy, decisioner: rule.decisioner ? JSON.stringify(rule.decisioner) : null })
    .where(eq(inferenceKeys.id, keyId))
    .run()
}

export function createInferenceKeyRepository(db: Db, onWrite: (change?: ConfigChange) => void) {
  // Never backwards: a journal replayed late (or, on a replica, rows shipped out of order) may carry
  // an older stamp than the one stored. ISO 8601 UTC strings order as their times do.
  const touchStatement = db.$client.prepare("update inference_keys set last_used_at = max(coalesce(last_used_at, ''), ?1) where id = ?2")
  const touchBatch = db.$client.transaction((entries: { keyId: string; at: string }[]) => {
    for (const entry of entries) touchStatement.run(entry.at, entry.keyId)
  })
  // The one-key reads of the management API, compiled once: drizzle builds a query's SQL on every
  // call otherwise, a third of a management request's time.
  const keyById = db
    .select()
    .from(inferenceKeys)
    .where(and(eq(inferenceKeys.workspaceId, sql.placeholder('workspaceId')), eq(inferenceKeys.id, sql.placeholder('id'))))
    .prepare()
  const targetsOfKey = db.select().from(routingTargets).where(eq(routingTargets.keyId, sql.placeholder('keyId'))).orderBy(asc(routingTargets.position)).prepare()
  const remapsOfKey = db.select().from(modelRemaps).where(eq(modelRemaps.keyId, sql.placeholder('keyId'))).orderBy(asc(modelRemaps.position)).prepare()
  /**
   * The keys with their rules. Targets and remaps are grouped by key in one pass (a filter per key
   * is quadratic: it made a rebuild of 10,000 keys take 2.3 s).
   */
  function rulesFor(keys: InferenceKeyRow[]): KeyWithRule[] {
    if (keys.length === 0) return []
    const ids = keys.map((key) => key.id)
    const one = ids.length === 1 ? { keyId: ids[0]! } : undefined
    const targets = one ? targetsOfKey.all(one) : db.select().from(routingTargets).where(inArray(routingTargets.keyId, ids)).orderBy(asc(routingTargets.position)).all()
    const remaps = one ? remapsOfKey.all(one) : db.select().from(modelRemaps).where(inArray(modelRemaps.keyId, ids)).orderBy(asc(modelRemaps.position)).all()
    const targetsByKey = new Map<string, StoredTarget[]>()
    for (const { keyId, providerKeyId, weight, ttfbMs } of targets) {
      const list = targetsByKey.get(keyId)
      if (list) list.push({ providerKeyId, weight, ttfbMs })
      else targetsByKey.set(keyId, [{ providerKeyId, weight, ttfbMs }])
    }
    const remapsByKey = new Map<string, StoredRemap[]>()
    for (const { keyId, match, percent, providerKeyId, upstreamModel, enabled } of remaps) {
      const list = remapsByKey.get(keyId)
      if (list) list.push({ match, percent, providerKeyId, upstreamModel, enabled })
      else remapsByKey.set(keyId, [{ match, percent, providerKeyId, upstreamModel, enabled }])
    }
    return keys.map((key) => ({
      key,
      rule: {
        strategy: key.routingStrategy === 'split' ? 'split' : 'priority',
        targets: targetsByKey.get(key.id) ?? [],
        remaps: remapsByKey.get(key.id) ?? [],
        decisioner: key.decisioner ? (JSON.parse(key.decisioner) as Record<string, unknown>) : null,
      },
    }))
  }

  return {
    /** Inserts the key and its rule in one transaction: an invalid rule never leaves a key behind. */
    insert(row: typeof inferenceKeys.$inferInsert, rule: StoredRule): KeyWithRule {
      db.transaction((tx) => {
        tx.insert(inferenceKeys).values(row).run()
        writeRule(tx, row.id, rule)
      })
      onWrite({ table: 'keys', id: row.id })
      return this.get(row.workspaceId, row.id)!
    },
    get(workspaceId: string, id: string): KeyWithRule | undefined {
      const key = keyById.get({ workspaceId, id })
      return key ? rulesFor([key])[0] : undefined
    },
    getById(id: string): InferenceKeyRow | undefined {
      return db.select().from(inferenceKeys).where(eq(inferenceKeys.id, id)).get()
    },
    list(workspaceId: string, offset: number, limit: number): KeyWithRule[] {
      const keys = db
        .select()
        .from(inferenceKeys)
        .where(eq(inferenceKeys.workspaceId, workspaceId))
        .orderBy(desc(inferenceKeys.createdAt), desc(sql`rowid`))
        .limit(limit)
        .offset(offset)
        .all()
      return rulesFor(keys)
    },
    listIds(workspaceId: string, ids: string[]): string[] {
      if (ids.length === 0) return []
      return db
        .select({ id: inferenceKeys.id })
        .from(inferenceKeys)
        .where(and(eq(inferenceKeys.workspaceId, workspaceId), inArray(inferenceKeys.id, ids)))
        .all()
        .map((row) => row.id)
    },
    listWorkspaceKeyStates(workspaceId: string): { revokedAt: string | null }[] {
      return db.select({ revokedAt: inferenceKeys.revokedAt }).from(inferenceKeys).where(eq(inferenceKeys.workspaceId, workspaceId)).all()
    },
    findBySecretPrefix(prefix: string): InferenceKeyRow[] {
      return db
        .select()
        .from(inferenceKeys)
        .where(or(eq(inferenceKeys.keyPrefix, prefix), eq(inferenceKeys.previousKeyPrefix, prefix)))
        .all()
    },
    /** Applies a validated set of column changes, and optionally a new rule, in one transaction. */
    update(workspaceId: string, id: string, steps: Partial<InferenceKeyRow>[], rule?: StoredRule): KeyWithRule | undefined {
      db.transaction((tx) => {
        for (const values of steps) {
          if (Object.keys(values).length === 0) continue
          tx.update(inferenceKeys)
            .set(values)
            .where(and(eq(inferenceKeys.workspaceId, workspaceId), eq(inferenceKeys.id, id)))
            .run()
        }
        if (rule) writeRule(tx, id, rule)
      })
      onWrite({ table: 'keys', id })
      return this.get(workspaceId, id)
    },
    /** Stamps last_used_at for many keys at once (called from the request-log flush). */
    touchLastUsed(entries: { keyId: string; at: string }[]) {
      if (entries.length === 0) return
      touchBatch(entries)
    },
    listMcpServers(keyId: string): KeyMcpServerRow[] {
      return db.select().from(keyMcpServers).where(eq(keyMcpServers.keyId, keyId)).orderBy(asc(keyMcpServers.createdAt)).all()
    },
    addMcpServer(row: typeof keyMcpServers.$inferInsert): KeyMcpServerRow {
      const inserted = db.insert(keyMcpServers).values(row).returning().get()
      onWrite({ table: 'keys', id: row.keyId })
      return inserted
    },
    removeMcpServer(keyId: string, serverId: string): boolean {
      const removed = db
        .delete(keyMcpServers)
        .where(and(eq(keyMcpServers.keyId, keyId), eq(keyMcpServers.id, serverId)))
        .returning({ id: keyMcpServers.id })
        .all()
      onWrite({ table: 'keys', id: keyId })
      return removed.length > 0
    },
  }
}
