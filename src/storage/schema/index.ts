/**
 * Every table of the service; drizzle-kit reads this through db/schema.ts. A column holding
 * ciphertext under the master key is named `…_ciphertext`: storage/client.ts finds them by name.
 */
export * from './workspaces'
export * from './provider-keys'
export * from './inference-keys'
export * from './request-logs'
export * from './gateway-catalogs'
export * from './master-key-check'
export * from './batches'
export * from './audit-events'
