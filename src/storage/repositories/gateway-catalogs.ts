/** Crawled model catalogs and learned first-byte budgets per gateway. */
import { eq } from 'drizzle-orm'
import type { Db } from '../client'
import type { ConfigChange } from './config-change'
import { gatewayBudgets, gatewayCatalogs, gatewayModels } from '../schema'

export function createGatewayCatalogRepository(db: Db, onWrite: (change?: ConfigChange) => void) {
  return {
    /** Replaces one gateway's catalog in a single transaction. */
    replaceCatalog(gateway: string, fetchedAt: number, models: { modelId: string; canonicalId: string; object: string }[]) {
      db.transaction((tx) => {
        tx.delete(gatewayModels).where(eq(gatewayModels.gateway, gateway)).run()
        for (let start = 0; start < models.length; start += 200) {
          const slice = models.slice(start, start + 200)
          if (slice.length) tx.insert(gatewayModels).values(slice.map((model) => ({ gateway, ...model }))).run()
        }
        tx.insert(gatewayCatalogs)
          .values({ gateway, fetchedAt, modelCount: models.length })
          .onConflictDoUpdate({ target: gatewayCatalogs.gateway, set: { fetchedAt, modelCount: models.length } })
          .run()
      })
      onWrite()
    },
    listCatalogs() {
      return db.select().from(gatewayCatalogs).all()
    },
    listModels() {
      return db.select({ gateway: gatewayModels.gateway, modelId: gatewayModels.modelId, canonicalId: gatewayModels.canonicalId, object: gatewayModels.object }).from(gatewayModels).all()
    },
    listBudgets() {
      return db.select().from(gatewayBudgets).all()
    },
    setBudget(gateway: string, ttfbBudgetMs: number, computedAt: number) {
      db.insert(gatewayBudgets)
        .values({ gateway, ttfbBudgetMs, computedAt })
        .onConflictDoUpdate({ target: gatewayBudgets.gateway, set: { ttfbBudgetMs, computedAt } })
        .run()
      onWrite()
    },
  }
}
